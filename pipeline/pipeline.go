// Package pipeline assembles the reference query of docs/contracts.md, Reference query from
// command-line level settings: named sources given as NAME=FORMAT:URI, the
// windowed count under a watermark, and the Delta MERGE sink. `ethstream run`,
// the demo and the bench build their queries here (a demo phase started as its
// own process goes through Config.Args and `ethstream run`), so they agree on
// what the query is. `ethstream plan` does not: it hands the engine only the
// source names and the confs, so it neither parses source formats and options
// nor builds the operator and the sink.
package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/flow"
	"github.com/ethstream/ethstream/internal/interval"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/sources/deltasource"
	"github.com/ethstream/ethstream/sources/ethrpc"
	"github.com/ethstream/ethstream/sources/files"
	"github.com/ethstream/ethstream/sources/s3archive"
	"github.com/ethstream/ethstream/storage"
	"github.com/ethstream/ethstream/stream"
)

// The reference query's shape (docs/contracts.md, Reference query).
const (
	WindowSize     = 5 * time.Minute
	WatermarkDelay = 48 * time.Hour
)

// SourceSpec is one --source flag: NAME=FORMAT:URI.
type SourceSpec struct {
	Name   string // "" for an unnamed source
	Format string // s3archive | ethrpc
	URI    string
}

func (s SourceSpec) String() string { return s.Name + "=" + s.Format + ":" + s.URI }

// ParseSourceSpec parses NAME=FORMAT:URI. The name is validated by the engine
// (it owns the naming rules), not here.
func ParseSourceSpec(flag string) (SourceSpec, error) {
	eq := strings.IndexByte(flag, '=')
	if eq < 0 {
		return SourceSpec{}, errcode.New(errcode.InvalidArgument, "", "use NAME=FORMAT:URI, e.g. eth_live=ethrpc:http://127.0.0.1:8545",
			"--source %q has no '='", flag)
	}
	name, rest := flag[:eq], flag[eq+1:]
	if strings.ContainsAny(name, ":/?") {
		// The first '=' is inside the URI (a query option): NAME= is missing.
		return SourceSpec{}, errcode.New(errcode.InvalidArgument, "",
			"start the flag with the source name: --source 'NAME="+flag+"' (e.g. s3_backfill=...), or '="+flag+"' for an unnamed source",
			"--source %q has no NAME=", flag)
	}
	colon := strings.IndexByte(rest, ':')
	if colon < 0 {
		return SourceSpec{}, errcode.New(errcode.InvalidArgument, "", "use NAME=FORMAT:URI with FORMAT "+sourceFormats,
			"--source %q has no FORMAT:", flag)
	}
	spec := SourceSpec{Name: name, Format: rest[:colon], URI: rest[colon+1:]}
	switch spec.Format {
	case "s3archive", "ethrpc", files.Parquet, files.JSON, files.CSV, "delta":
	default:
		return SourceSpec{}, errcode.New(errcode.InvalidArgument, "", "FORMAT is "+sourceFormats,
			"--source %q: unknown format %q", flag, spec.Format)
	}
	return spec, nil
}

// ParseTrigger parses a trigger in Spark's spellings or the CLI's:
// availableNow | available-now, once, processingTime=DUR | processing-time=DUR,
// realTime[=DUR] | real-time[=DUR] (DUR: the fallback poll), where DUR is a Go duration (5s, 1m30s) or a Spark interval ('5 seconds',
// "500 milliseconds", "interval 1 minute"), optionally quoted.
func ParseTrigger(s string) (engine.Trigger, error) {
	const remedy = "use --trigger availableNow, once, processingTime=DUR (e.g. processingTime=5s or processingTime='5 seconds') or realTime"
	kind, arg, hasArg := strings.Cut(strings.TrimSpace(s), "=")
	switch strings.ToLower(strings.ReplaceAll(kind, "-", "")) {
	case "availablenow":
		if !hasArg {
			return engine.Trigger{Kind: engine.AvailableNow}, nil
		}
	case "once":
		if !hasArg {
			return engine.Trigger{Kind: engine.Once}, nil
		}
	case "processingtime":
		d, ok := parseInterval(arg)
		if !ok {
			return engine.Trigger{}, errcode.New(errcode.InvalidArgument, "", remedy, "bad trigger interval %q in %q: want a duration such as 5s or '5 seconds'", arg, s)
		}
		return engine.Trigger{Kind: engine.ProcessingTime, Interval: d}, nil
	case "realtime":
		if !hasArg {
			return engine.Trigger{Kind: engine.RealTime}, nil
		}
		d, ok := parseInterval(arg)
		if !ok || d <= 0 {
			return engine.Trigger{}, errcode.New(errcode.InvalidArgument, "", remedy, "bad realTime poll interval %q in %q: want a positive duration such as 100ms", arg, s)
		}
		return engine.Trigger{Kind: engine.RealTime, Interval: d}, nil
	}
	return engine.Trigger{}, errcode.New(errcode.InvalidArgument, "", remedy, "unknown trigger %q", s)
}

// parseInterval reads a non-negative trigger interval: a Go duration or a
// Spark interval string ("5 seconds", "interval 1 minute 30 seconds"),
// optionally quoted.
func parseInterval(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if len(v) >= 2 && (v[0] == '\'' || v[0] == '"') && v[len(v)-1] == v[0] {
		v = strings.TrimSpace(v[1 : len(v)-1])
	}
	if d, err := time.ParseDuration(v); err == nil {
		return d, d >= 0
	}
	d, err := interval.Parse(v)
	return d, err == nil
}

// ParseConf parses K=V pairs.
func ParseConf(pairs []string) (map[string]string, error) {
	conf := map[string]string{}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, errcode.New(errcode.InvalidArgument, "", "use --conf key=value", "bad --conf %q", p)
		}
		conf[k] = v
	}
	return conf, nil
}

// Config is everything `ethstream run` takes.
type Config struct {
	Checkpoint string
	Table      string
	// Sink is --sink FORMAT:LOCATION, the output instead of the Delta table
	// of Table (ParseSinkSpec); "" writes Table.
	Sink       string
	LocalDir   string // state cache; default DefaultLocalDir(Checkpoint)
	Sources    []SourceSpec
	Conf       map[string]string
	Trigger    engine.Trigger
	MaxBatches int
	Logger     *slog.Logger
	Listeners  []engine.Listener
	Clock      stream.Clock
	// ProgressFile, if set, also receives this run's progress events as JSON lines.
	ProgressFile string
	// FS holds the checkpoint and the table; nil = vfs.Default (the local
	// disk). Tests inject faults and crashes through it.
	FS vfs.FS
	// ArchiveFS reads file:// archive sources; nil = vfs.Default. The
	// fault loop injects its faults into archive reads through it.
	ArchiveFS vfs.FS
	// Query is the SQL text of the query; "" runs ReferenceQuery (with
	// ReferenceWatermark unless WithWatermark is set).
	Query string
	// WithWatermark is withWatermark's "column, delay" ("" = none, or the
	// reference's for the reference query); OutputMode is outputMode
	// ("" = update).
	WithWatermark, OutputMode string
	// DropDuplicates and DropDuplicatesWithinWatermark are the columns,
	// comma-separated, of Spark's dropDuplicates and
	// dropDuplicatesWithinWatermark applied to the unioned rows before the
	// query's operator ("" = none; both: dropDuplicates first).
	DropDuplicates, DropDuplicatesWithinWatermark string
	// TableShared lets a new checkpoint write a table another query writes
	// (run --table-shared; SINK_TABLE_IN_USE otherwise).
	TableShared bool
	// TableProperties are the Delta table properties of a table the run
	// creates (e.g. delta.logRetentionDuration); not a CLI flag.
	TableProperties map[string]string
}

// Args renders cfg as `ethstream run` flags, so a phase can be started as its
// own process exactly as a user would type it.
func (c Config) Args() []string {
	args := []string{"run", "--checkpoint", c.Checkpoint}
	if c.Sink != "" {
		args = append(args, "--sink", c.Sink)
	} else {
		args = append(args, "--table", c.Table)
	}
	if c.LocalDir != "" {
		args = append(args, "--local-dir", c.LocalDir)
	}
	for _, s := range c.Sources {
		args = append(args, "--source", s.String())
	}
	keys := make([]string, 0, len(c.Conf))
	for k := range c.Conf {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "--conf", k+"="+c.Conf[k])
	}
	args = append(args, "--trigger", TriggerString(c.Trigger))
	if c.MaxBatches > 0 {
		args = append(args, "--max-batches", strconv.Itoa(c.MaxBatches))
	}
	if c.ProgressFile != "" {
		args = append(args, "--progress", c.ProgressFile)
	}
	if c.Query != "" {
		args = append(args, "--query", c.Query)
	}
	if c.WithWatermark != "" {
		args = append(args, "--with-watermark", c.WithWatermark)
	}
	if c.DropDuplicates != "" {
		args = append(args, "--drop-duplicates", c.DropDuplicates)
	}
	if c.DropDuplicatesWithinWatermark != "" {
		args = append(args, "--drop-duplicates-within-watermark", c.DropDuplicatesWithinWatermark)
	}
	if c.TableShared {
		args = append(args, "--table-shared")
	}
	if c.OutputMode != "" {
		args = append(args, "--output-mode", c.OutputMode)
	}
	return args
}

// TriggerString is the inverse of ParseTrigger.
func TriggerString(t engine.Trigger) string {
	switch t.Kind {
	case engine.AvailableNow:
		return "available-now"
	case engine.Once:
		return "once"
	case engine.RealTime:
		if t.Interval > 0 {
			return "real-time=" + t.Interval.String()
		}
		return "real-time"
	}
	return "processing-time=" + t.Interval.String()
}

// DefaultLocalDir is the state cache for a checkpoint: under the user's cache
// directory, keyed by the checkpoint's absolute path. Deleting it is always safe.
func DefaultLocalDir(checkpoint string) string {
	abs, err := filepath.Abs(checkpoint)
	if err != nil || storage.IsS3(checkpoint) {
		abs = checkpoint
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(base, "ethstream", path.Base(abs)+"-"+hex.EncodeToString(sum[:6]))
}

// Locations checks every path flag of cfg before anything is opened (an
// unsupported scheme is UNSUPPORTED_LOCATION; the state cache and the
// progress file are always local) and returns the checkpoint and table
// paths with the FS that holds both: cfg.FS (or the local disk) when both
// are local, else a storage.Mux routing s3:// paths to S3.
func Locations(cfg Config) (checkpoint, table string, fs vfs.FS, err error) {
	ckpt, err := storage.Parse("--checkpoint", cfg.Checkpoint)
	if err != nil {
		return "", "", nil, err
	}
	tbl, err := storage.Parse("--table", cfg.Table)
	if err != nil {
		return "", "", nil, err
	}
	if err := storage.CheckLocal("--local-dir", cfg.LocalDir); err != nil {
		return "", "", nil, err
	}
	if err := storage.CheckLocal("--progress", cfg.ProgressFile); err != nil {
		return "", "", nil, err
	}
	locs := []storage.Location{ckpt, tbl}
	if cfg.Sink != "" {
		// The file sink's output: an S3 prefix needs its bucket's store.
		spec, err := ParseSinkSpec(cfg.Sink)
		if err != nil {
			return "", "", nil, err
		}
		locs = append(locs, spec.Location)
	}
	fs, err = storage.NewFS(context.Background(), cfg.FS, locs...)
	if err != nil {
		return "", "", nil, err
	}
	// A file:// URI is kept as given: the sink resolves it itself.
	table = cfg.Table
	if tbl.Kind == storage.S3 {
		table = tbl.Path
	}
	return ckpt.Path, table, fs, nil
}

// ReferenceSpec is the aggregation of docs/contracts.md, Reference query:
// groupBy(window(block_ts, 5 minutes), source, miner).count(), update mode,
// under a 2-day watermark.
func ReferenceSpec() agg.Spec {
	return agg.Spec{
		Window:         &agg.Window{Column: ethblock.ColBlockTS, Size: WindowSize},
		GroupBy:        []string{stream.ColSource, ethblock.ColMiner},
		Aggregates:     []agg.Aggregate{{Kind: agg.Count, As: "count"}},
		Mode:           agg.Update,
		WatermarkDelay: WatermarkDelay,
		ColumnTypes:    BlockColumnTypes(),
	}
}

// BlockColumnTypes maps every block column to its type, for agg.Spec.ColumnTypes.
func BlockColumnTypes() map[string]stream.Type {
	m := make(map[string]stream.Type, len(ethblock.Columns))
	for _, c := range ethblock.Columns {
		m[c], _ = ethblock.ColumnType(c)
	}
	return m
}

// Build turns a Config into the engine's query and options (without a sink
// if cfg.Table is empty). Nothing is opened or written: the engine validates the source list against the checkpoint
// before it touches any source or file.
func Build(cfg Config) (engine.Query, engine.Options, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if isJoinQuery(cfg) {
		return buildJoinQuery(cfg, logger)
	}
	c, err := CompileQuery(cfg)
	if err != nil {
		return engine.Query{}, engine.Options{}, err
	}
	sources, err := c.buildSources(cfg, logger)
	if err != nil {
		return engine.Query{}, engine.Options{}, err
	}
	if err := checkOverlap(cfg, sources); err != nil {
		return engine.Query{}, engine.Options{}, err
	}
	ckpt, table, fs, err := Locations(cfg)
	if err != nil {
		return engine.Query{}, engine.Options{}, err
	}
	// The query is built through the Go API (flow), as a Go program would:
	// the compiled operator is its plan.
	name := "eth_blocks_per_window"
	if cfg.Query != "" {
		name = "query"
	}
	fq := flow.New(name)
	for _, ns := range sources {
		fq.Read(ns.Name, ns.Source)
	}
	cols, pre := c.dedupPlan(fq, dedupColumns(cfg.DropDuplicates), dedupColumns(cfg.DropDuplicatesWithinWatermark))
	c.addSteps(fq)
	c.selectAfterDedup(fq, pre)
	// No table, no sink: a plan reads none (engine.Run refuses a query
	// without one), and there is no whole shape to check.
	fq.Shape(nil)
	if cfg.Sink != "" {
		spec, err := ParseSinkSpec(cfg.Sink)
		if err != nil {
			return engine.Query{}, engine.Options{}, err
		}
		sink, err := newFileSink(spec, c.q.Spec.Mode.String(), fs, cfg.Conf)
		if err != nil {
			return engine.Query{}, engine.Options{}, err
		}
		fq.WriteTo(sink).Shape(&c.shape)
	} else if cfg.Table != "" {
		if c.limits() {
			// Spark's Delta sink overwrites the table in complete mode;
			// this one MERGEs, so a row past the limit would stay.
			return engine.Query{}, engine.Options{}, errcode.New(errcode.InvalidArgument, "",
				"leave LIMIT out (the table keeps every group), or run the query through the Go API (flow) with a sink that replaces its content",
				"LIMIT in complete mode needs a sink that replaces its content each batch; the Delta table MERGEs each batch's rows, so a row the limit drops would stay in it")
		}
		sink, err := delta.NewMergeSink(delta.SinkOptions{Path: table, Logger: logger, FS: fs, Schema: c.outputSchema(),
			TableProperties: cfg.TableProperties, OutputMode: c.q.Spec.Mode.String()})
		if err != nil {
			return engine.Query{}, engine.Options{}, err
		}
		sh := c.shape
		if len(pre) > 0 {
			// The deduplications come before the query's operator.
			sh = sh.WithOperators(append(pre, sh.OperatorList()...))
		}
		fq.WriteTo(sink).Shape(&sh)
	}
	fq.SinkShared(cfg.TableShared).Trigger(cfg.Trigger).MaxBatches(cfg.MaxBatches).Confs(cfg.Conf)
	q, err := fq.Build()
	if err != nil {
		return q, engine.Options{}, err
	}
	// The read path (the WHERE, its pushed-down part, the columns a query
	// without an aggregation selects) is the engine's, not a stage.
	c.apply(&q)
	if len(pre) > 0 {
		// The deduplications, before the query's operators or its
		// selection, read their columns too.
		q.Columns = cols
	}
	return q, runOptions(cfg, ckpt, fs, logger), nil
}

// runOptions are the engine's options of a run of cfg.
func runOptions(cfg Config, ckpt string, fs vfs.FS, logger *slog.Logger) engine.Options {
	localDir := cfg.LocalDir
	if localDir == "" {
		localDir = DefaultLocalDir(ckpt)
	}
	clock := cfg.Clock
	if clock == nil {
		clock = stream.SystemClock{}
	}
	if m, ok := fs.(*storage.Mux); ok {
		// Large objects bound for S3 are staged beside the state cache,
		// and S3 retries wait on the query's clock.
		m.SetSpoolDir(filepath.Join(localDir, "spool"))
		m.SetRetryClock(clock)
	}
	opts := engine.Options{
		CheckpointDir: ckpt,
		FS:            fs,
		LocalDir:      localDir,
		Clock:         clock,
		Logger:        logger,
		Listeners:     cfg.Listeners,
	}
	return opts
}

// buildSources builds the compiled query's sources; a source that
// retracts (a reorg-following live source) switches the aggregation to
// retractions.
func (c *compiled) buildSources(cfg Config, logger *slog.Logger) ([]engine.NamedSource, error) {
	var out []engine.NamedSource
	for _, spec := range c.sources {
		src, err := newSource(spec, logger, cfg.ArchiveFS, cfg.Conf)
		if err != nil {
			return nil, err
		}
		out = append(out, engine.NamedSource{Name: spec.Name, Source: src})
	}
	for _, ns := range out {
		if rs, ok := ns.Source.(stream.RetractingSource); ok && rs.Retracts() {
			// A count(*) keeps the state layout unchanged.
			if err := c.withRetractions(cfg); err != nil {
				return nil, err
			}
			break
		}
	}
	return out, nil
}

// BlockArchiveColumns is the blocks table's schema as an s3archive source
// reads it (package ethblock): the archive's column names, the columns
// every file holds, the miners interned.
func BlockArchiveColumns() []s3archive.Column {
	cols := make([]s3archive.Column, len(ethblock.Schema))
	for i, c := range ethblock.Schema {
		cols[i] = s3archive.Column{Name: c.Name, Type: c.Type, Nullable: c.Nullable, File: c.Archive, Required: c.Required, Repeats: c.Repeats}
	}
	return cols
}

// sourceFormats names the --source formats for messages.
const sourceFormats = "s3archive, ethrpc, parquet, json, csv or delta"

// NewSource builds the source a spec names.
func NewSource(spec SourceSpec, logger *slog.Logger) (stream.Source, error) {
	return newSource(spec, logger, nil, nil)
}

// newSource is NewSource reading file:// archives through archiveFS, with
// the query's conf (spark.sql.streaming.schemaInference for the file
// formats). A file or Delta source resolves its schema here (listing its
// location, reading the table's log), so that a refusal comes before the
// query's first write.
func newSource(spec SourceSpec, logger *slog.Logger, archiveFS vfs.FS, conf map[string]string) (stream.Source, error) {
	switch spec.Format {
	case "s3archive":
		o, err := s3archive.ParseURI(spec.URI)
		if err != nil {
			return nil, err
		}
		o.Logger, o.FS, o.Columns = logger, archiveFS, BlockArchiveColumns()
		if t := archiveTable(spec.URI); t != "" {
			o.Columns = TableArchiveColumns(t)
		}
		return s3archive.New(o)
	case "ethrpc":
		o, err := ethrpc.ParseURI(spec.URI)
		if err != nil {
			return nil, err
		}
		o.Logger = logger
		return ethrpc.New(o)
	case files.Parquet, files.JSON, files.CSV:
		o, err := files.ParseURI(spec.Format, spec.URI)
		if err != nil {
			return nil, err
		}
		o.Logger, o.FS = logger, archiveFS
		o.SchemaInference = strings.EqualFold(conf[engine.ConfSchemaInference], "true")
		src, err := files.New(o)
		if err != nil {
			return nil, err
		}
		if err := src.Resolve(context.Background()); err != nil {
			return nil, err
		}
		return src, nil
	case "delta":
		o, err := deltasource.ParseURI(spec.URI)
		if err != nil {
			return nil, err
		}
		o.Logger, o.FS = logger, archiveFS
		src, err := deltasource.New(o)
		if err != nil {
			return nil, err
		}
		if err := src.Resolve(context.Background()); err != nil {
			return nil, err
		}
		return src, nil
	}
	return nil, errcode.New(errcode.InvalidArgument, "", "FORMAT is "+sourceFormats, "--source %s: unknown format %q", spec, spec.Format)
}

// CheckProgressFile refuses a --progress file the run could not append to:
// it must not be a directory, and its nearest existing ancestor must be a
// writable directory. It reads only, so a refusal comes before the query's
// first write.
func CheckProgressFile(path string) error {
	if path == "" {
		return nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return errcode.New(errcode.InvalidArgument, path, "pass --progress a file path, not a directory", "--progress %s is a directory", path)
	}
	// The first event creates missing directories (engine.JSONLListener), so
	// a fresh work directory needs no mkdir; the nearest one that exists must
	// be a directory the run can create them in.
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		st, err := os.Stat(dir)
		if errors.Is(err, os.ErrNotExist) && filepath.Dir(dir) != dir {
			continue
		}
		if err != nil || !st.IsDir() {
			return errcode.New(errcode.InvalidArgument, path, "pass --progress a file under a directory (missing directories are created)",
				"--progress %s: %s is not a directory", path, dir)
		}
		if syscall.Access(dir, 2 /* W_OK */) != nil {
			return errcode.New(errcode.InvalidArgument, path, "pass --progress a file in a directory you can write to",
				"--progress %s: cannot write in %s (permission denied)", path, dir)
		}
		return nil
	}
}

// Run builds and runs the query until its trigger says stop. While it runs,
// the Go runtime soft memory limit follows the live heap (memlimit.go)
// unless one was set already.
func Run(ctx context.Context, cfg Config) (sum *engine.RunSummary, err error) {
	if err := CheckProgressFile(cfg.ProgressFile); err != nil {
		return nil, err
	}
	var pf *engine.JSONLListener
	if cfg.ProgressFile != "" {
		pf = &engine.JSONLListener{FS: vfs.Default, Path: cfg.ProgressFile}
		cfg.Listeners = append(cfg.Listeners, pf)
		defer func() {
			if pf.Err != nil {
				err = errors.Join(err, fmt.Errorf("write progress file %s: %w", cfg.ProgressFile, pf.Err))
			}
		}()
	}
	q, opts, err := Build(cfg)
	if err != nil {
		return nil, err
	}
	if err := probeEndpoints(ctx, q, opts); err != nil {
		return nil, err
	}
	if err := AdoptStateFormat(cfg, &q, opts); err != nil {
		return nil, err
	}
	defer applyMemoryLimit()()
	return engine.Run(ctx, q, opts)
}

// dedupColumns reads a --drop-duplicates value: column names,
// comma-separated, as the query's columns are named (lower case).
func dedupColumns(s string) []string {
	var cols []string
	for _, c := range strings.Split(s, ",") {
		if c = strings.ToLower(strings.TrimSpace(c)); c != "" {
			cols = append(cols, c)
		}
	}
	return cols
}
