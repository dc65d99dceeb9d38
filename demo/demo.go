package demo

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/durable"
	"github.com/ethstream/ethstream/internal/textwrap"
	"github.com/ethstream/ethstream/pipeline"
	"github.com/ethstream/ethstream/storage/s3serve"
)

// Bucket is the embedded endpoint's bucket, named after the public dataset's.
const Bucket = "aws-public-blockchain"

// Phase names, as they appear in batches.csv and the charts.
const (
	PhaseBackfill      = "backfill"
	PhaseAddLive       = "add_live"
	PhaseRetireArchive = "retire_archive"
	PhaseReuseRefused  = "reuse_refused"
	PhaseShrinkState   = "shrink_state"
)

// Source names of the reference run.
const (
	ArchiveSource = "s3_backfill"
	LiveSource    = "eth_live"
)

// Options configure a demo run.
type Options struct {
	WorkDir    string       // archive cache, checkpoint, table
	ResultsDir string       // CSVs, verification, charts
	Preset     chain.Preset // demo by default; tests use chain.LastDaysPreset(n)
	Seed       int64
	Runner     PhaseRunner // how a phase is started; InProcess by default
	Out        io.Writer   // the summary table; nil = discard
	Logger     *slog.Logger
	// Live batches per phase (docs/contracts.md, Demo checks: 16, 8, 8 of 20 blocks).
	AddLiveBatches, RetireBatches, ShrinkBatches int
	BlocksPerBatch                               int
	StatePartitions, ShrinkTo                    int
	TriggerInterval                              time.Duration
	// live_reorgs (reorgs.go): data batches per following start (default 24)
	// and the deepest reorganisation the node makes (default 8).
	ReorgBatches, ReorgMaxDepth int
	// Observer, if set, is told of each phase and verification line as the
	// demo reaches it (the live dashboard of `demo --ui-addr`).
	Observer Observer
	// Storage is where the checkpoint and the table live: "local" (the
	// default, under WorkDir) or "s3" (bucket LakeBucket of the embedded S3
	// endpoint, whose files are under WorkDir/s3/LakeBucket).
	Storage string
}

// Observer follows a demo as it runs. Calls come from the demo's goroutine,
// in order; a slow observer delays the demo.
type Observer interface {
	// PhaseStarted: Name, Sources, Conf and Trigger are set.
	PhaseStarted(p PhaseResult)
	// PhaseEnded: every field is set; Err is the start's error, if any.
	PhaseEnded(p PhaseResult)
	// Checked receives verification lines once decided; the final report
	// repeats the lines decided between phases.
	Checked(checks []Check)
}

type noObserver struct{}

func (noObserver) PhaseStarted(PhaseResult) {}
func (noObserver) PhaseEnded(PhaseResult)   {}
func (noObserver) Checked([]Check)          {}

func (o *Options) defaults() {
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Runner == nil {
		o.Runner = InProcess{}
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Observer == nil {
		o.Observer = noObserver{}
	}
	o.AddLiveBatches = cmp.Or(o.AddLiveBatches, 16)
	o.RetireBatches = cmp.Or(o.RetireBatches, 8)
	o.ShrinkBatches = cmp.Or(o.ShrinkBatches, 8)
	o.BlocksPerBatch = cmp.Or(o.BlocksPerBatch, 20)
	o.StatePartitions = cmp.Or(o.StatePartitions, 200)
	o.ShrinkTo = cmp.Or(o.ShrinkTo, 8)
	o.ReorgBatches = cmp.Or(o.ReorgBatches, 24)
	o.ReorgMaxDepth = cmp.Or(o.ReorgMaxDepth, 8)
	o.TriggerInterval = cmp.Or(o.TriggerInterval, 50*time.Millisecond)
}

// PhaseRunner starts one phase of the query as a user would: a fresh start
// on the same checkpoint and table.
type PhaseRunner interface {
	RunPhase(ctx context.Context, phase string, cfg pipeline.Config) error
}

// InProcess runs a phase inside this process (a new engine run each time).
type InProcess struct{}

// RunPhase runs cfg to completion.
func (InProcess) RunPhase(ctx context.Context, _ string, cfg pipeline.Config) error {
	_, err := pipeline.Run(ctx, cfg)
	return err
}

// Env is the running embedded infrastructure of a demo.
type Env struct {
	ArchiveRoot string // <workdir>/s3/<bucket>
	Manifest    *archivegen.Manifest
	S3          *s3serve.Server
	Node        *ethnode.Node
	// Checkpoint and Table are local directories: the checkpoint and the
	// table themselves, or with Storage "s3" the files behind the embedded
	// endpoint's objects (read by the checks).
	Checkpoint string
	Table      string
	// CheckpointLoc and TableLoc are what the phases are given: the local
	// directories, or their s3:// locations.
	CheckpointLoc string
	TableLoc      string
}

// PhaseResult records how one phase went.
type PhaseResult struct {
	Name     string
	Sources  []string
	Conf     map[string]string
	Trigger  string
	Err      error // non-nil only for the refused phase, where it is expected
	Duration time.Duration
	Progress string // the phase's progress file
}

// Report is the outcome of a demo.
type Report struct {
	Phases      []PhaseResult
	Checks      []Check
	WallTime    time.Duration
	LiveBlocks  int64
	ArchiveRows int64
}

// Passed reports whether every check held.
func (r *Report) Passed() bool {
	for _, c := range r.Checks {
		if !c.Pass && !c.Figure {
			return false
		}
	}
	return len(r.Checks) > 0
}

// Run executes the whole lifecycle and writes results. It returns an error
// only if the demo could not run; failed checks are in the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.defaults()
	start := time.Now()
	env, err := Setup(ctx, o)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Out, "archive: %d files, blocks %d-%d (%d rows)\nservers: S3 %s, node %s\n\n", len(env.Manifest.Files),
		env.Manifest.FirstBlock, env.Manifest.LastBlock, env.Manifest.Rows, env.S3.URL(), env.Node.URL())
	defer env.Close()

	rep := &Report{ArchiveRows: env.Manifest.Rows}
	pr := &phaseRunner{o: o, env: env, progressDir: filepath.Join(o.WorkDir, "progress")}
	if err := os.MkdirAll(pr.progressDir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", pr.progressDir, err)
	}
	v := newVerifier(o, env)
	if err := runLifecycle(ctx, pr, v, rep); err != nil {
		return rep, err
	}
	return rep, report(ctx, o, env, v, rep, start)
}

// phaseRunner runs one phase of the lifecycle: a start of the query with
// its sources, conf and trigger, printed first as the command it is.
type phaseRunner struct {
	o           Options
	env         *Env
	progressDir string
}

func (pr *phaseRunner) run(ctx context.Context, name string, sources []pipeline.SourceSpec, conf map[string]string, trig engine.Trigger, maxBatches int) PhaseResult {
	o, env := pr.o, pr.env
	cfg := pipeline.Config{
		Checkpoint:   env.CheckpointLoc,
		Table:        env.TableLoc,
		LocalDir:     filepath.Join(o.WorkDir, "state-cache"),
		Sources:      sources,
		Conf:         conf,
		Trigger:      trig,
		MaxBatches:   maxBatches,
		Logger:       o.Logger.With("phase", name),
		ProgressFile: filepath.Join(pr.progressDir, name+".jsonl"),
	}
	res := PhaseResult{Name: name, Conf: conf, Trigger: trigString(trig, maxBatches), Progress: cfg.ProgressFile}
	for _, s := range sources {
		res.Sources = append(res.Sources, s.Name)
	}
	o.Observer.PhaseStarted(res)
	t0 := time.Now()
	fmt.Fprintf(o.Out, "==> %s\n%s", name, commandLines("    ethstream", cfg.Args(), summaryWidth))
	err := o.Runner.RunPhase(ctx, name, cfg)
	if err != nil {
		fmt.Fprint(o.Out, textwrap.Words("    "+name+": "+err.Error(), "      ", summaryWidth))
	} else {
		fmt.Fprintf(o.Out, "    %s done in %s\n", name, time.Since(t0).Round(time.Millisecond))
	}
	res.Err, res.Duration = err, time.Since(t0)
	o.Observer.PhaseEnded(res)
	return res
}

// runLifecycle runs phases 1-5 on one checkpoint and table, taking the
// verifier's measurements between them; a phase that fails ends it.
func runLifecycle(ctx context.Context, pr *phaseRunner, v *verifier, rep *Report) error {
	o, env := pr.o, pr.env
	s3src := env.ArchiveSource(o.Preset.MaxFilesPerTrigger)
	liveSrc := env.LiveSource(o.BlocksPerBatch)
	baseConf := EvolutionConf(o.StatePartitions)
	live := engine.Trigger{Kind: engine.ProcessingTime, Interval: o.TriggerInterval}
	step := func(name string, sources []pipeline.SourceSpec, conf map[string]string, trig engine.Trigger, maxBatches int) error {
		r := pr.run(ctx, name, sources, conf, trig, maxBatches)
		rep.Phases = append(rep.Phases, r)
		if r.Err != nil {
			return fmt.Errorf("phase %s: %w", r.Name, r.Err)
		}
		return nil
	}
	// 1. Backfill.
	if err := step(PhaseBackfill, []pipeline.SourceSpec{s3src}, baseConf, engine.Trigger{Kind: engine.AvailableNow}, 0); err != nil {
		return err
	}
	// 2. Add the live source on the same checkpoint.
	if err := step(PhaseAddLive, []pipeline.SourceSpec{s3src, liveSrc}, baseConf, live, o.AddLiveBatches); err != nil {
		return err
	}
	// 3. Retire the archive.
	if err := step(PhaseRetireArchive, []pipeline.SourceSpec{liveSrc}, baseConf, live, o.RetireBatches); err != nil {
		return err
	}
	if err := v.afterRetire(ctx); err != nil {
		return err
	}
	o.Observer.Checked(v.retireChecks)
	// 4. Re-adding the retired name must be refused, leaving the checkpoint untouched.
	before, err := TreeHash(env.Checkpoint)
	if err != nil {
		return err
	}
	r := pr.run(ctx, PhaseReuseRefused, []pipeline.SourceSpec{liveSrc, s3src}, baseConf, live, 1)
	rep.Phases = append(rep.Phases, r)
	after, err := TreeHash(env.Checkpoint)
	if err != nil {
		return err
	}
	v.refused(r.Err, before, after)
	o.Observer.Checked(v.refusal)
	// 5. Shrink the state.
	shrinkConf := clone(baseConf)
	shrinkConf["spark.sql.streaming.stateStore.partitions"] = strconv.Itoa(o.ShrinkTo)
	if err := v.beforeShrink(ctx); err != nil {
		return err
	}
	return step(PhaseShrinkState, []pipeline.SourceSpec{liveSrc}, shrinkConf, live, o.ShrinkBatches)
}

// report writes the results: the CSVs from the query's own progress
// records, the checks (with phase 6, which runs its own query), the charts
// and the summary.
func report(ctx context.Context, o Options, env *Env, v *verifier, rep *Report, start time.Time) error {
	if err := prepareResults(o.ResultsDir); err != nil {
		return err
	}
	var files []engine.PhaseFile
	for _, p := range rep.Phases {
		if p.Err == nil {
			files = append(files, engine.PhaseFile{Phase: p.Name, Path: p.Progress})
		}
	}
	if err := engine.FlattenProgress(vfs.Default, o.ResultsDir, files); err != nil {
		return err
	}
	batches, err := ReadBatches(filepath.Join(o.ResultsDir, "batches.csv"))
	if err != nil {
		return err
	}
	sources, err := ReadSources(filepath.Join(o.ResultsDir, "sources.csv"))
	if err != nil {
		return err
	}
	rep.Checks, rep.LiveBlocks, err = v.final(ctx, rep.Phases, batches, sources)
	if err != nil {
		return err
	}
	o.Observer.Checked(rep.Checks)
	// 6. Follow the head through reorgs (own checkpoint and table).
	rp, rc, reorgBatches, err := runLiveReorgs(ctx, o, env)
	rep.Phases, rep.Checks = append(rep.Phases, rp...), append(rep.Checks, rc...)
	o.Observer.Checked(rc)
	if err != nil {
		return err
	}
	// 7. An archive and a live source that overlap on purpose (seam.go).
	sp, sc, seamBatches, err := runOverlapSeam(ctx, o, env)
	rep.Phases, rep.Checks, reorgBatches = append(rep.Phases, sp...), append(rep.Checks, sc...), append(reorgBatches, seamBatches...)
	o.Observer.Checked(sc)
	if err != nil {
		return err
	}
	if err := WriteChecks(filepath.Join(o.ResultsDir, "verification.csv"), rep.Checks); err != nil {
		return err
	}
	if err := WriteCharts(o.ResultsDir, batches, sources); err != nil {
		return err
	}
	rep.WallTime = time.Since(start)
	var summary strings.Builder
	PrintSummary(&summary, rep, append(batches, reorgBatches...))
	fmt.Fprint(o.Out, summary.String())
	return writeFile(filepath.Join(o.ResultsDir, "summary.txt"), func(w io.Writer) error {
		_, err := io.WriteString(w, summary.String())
		return err
	})
}

func trigString(t engine.Trigger, maxBatches int) string {
	switch t.Kind {
	case engine.AvailableNow:
		return "availableNow"
	case engine.Once:
		return "once"
	}
	return fmt.Sprintf("processingTime %s, %d data batches", t.Interval, maxBatches)
}

func clone(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// Setup generates (or reuses) the archive and starts the embedded S3 endpoint
// and node. The checkpoint and table start empty on every demo run.
func Setup(ctx context.Context, o Options) (*Env, error) {
	o.defaults()
	env := &Env{
		ArchiveRoot: filepath.Join(o.WorkDir, "s3", Bucket),
		Checkpoint:  CheckpointDir(o.WorkDir),
		Table:       filepath.Join(o.WorkDir, "table"),
	}
	switch o.Storage {
	case "", "local":
	case "s3":
		lake := filepath.Join(o.WorkDir, "s3", LakeBucket)
		if err := os.RemoveAll(lake); err != nil {
			return nil, fmt.Errorf("clear %s: %w", lake, err)
		}
		if err := durable.EnsureDir(vfs.Default, lake); err != nil {
			return nil, err
		}
		env.Checkpoint, env.Table = filepath.Join(lake, "q1", "checkpoint"), filepath.Join(lake, "q1", "table")
	default:
		return nil, errcode.New(errcode.InvalidArgument, "", "use --storage local or --storage s3", "unknown storage %q", o.Storage)
	}
	m, err := archivegen.ReadManifest(env.ArchiveRoot)
	if err != nil || m.Preset != o.Preset.Name || m.Seed != o.Seed || m.LastBlock != o.Preset.LastBlock || m.FirstBlock != o.Preset.FirstBlock {
		o.Logger.Info("generating archive", "preset", o.Preset.Name, "dir", env.ArchiveRoot)
		if err := os.RemoveAll(env.ArchiveRoot); err != nil {
			return nil, fmt.Errorf("clear %s: %w", env.ArchiveRoot, err)
		}
		m, err = archivegen.Generate(ctx, archivegen.Options{Out: env.ArchiveRoot, Preset: o.Preset, Seed: o.Seed})
		if err != nil {
			return nil, err
		}
	}
	env.Manifest = m
	for _, d := range []string{env.Checkpoint, env.Table, filepath.Join(o.WorkDir, "state-cache"), filepath.Join(o.WorkDir, "progress")} {
		if err := os.RemoveAll(d); err != nil {
			return nil, fmt.Errorf("clear %s: %w", d, err)
		}
	}
	env.S3, err = s3serve.Start(ctx, s3serve.Options{Root: filepath.Join(o.WorkDir, "s3"), Addr: "127.0.0.1:0"})
	if err != nil {
		return nil, err
	}
	env.CheckpointLoc, env.TableLoc = env.Checkpoint, env.Table
	if o.Storage == "s3" {
		q := "?endpoint=" + url.QueryEscape(env.S3.URL()) + "&anonymous=true"
		env.CheckpointLoc = "s3://" + LakeBucket + "/q1/checkpoint" + q
		env.TableLoc = "s3://" + LakeBucket + "/q1/table" + q
	}
	// The head moves only when the demo moves it (Manual): a wall-clock
	// block would land at a different point of each run, and every figure
	// the demo reports must be a function of the seed.
	live := o.BlocksPerBatch * (o.AddLiveBatches + o.RetireBatches + o.ShrinkBatches + 2)
	env.Node, err = ethnode.Start(ctx, ethnode.Options{Manifest: m, Seed: o.Seed, Addr: "127.0.0.1:0",
		Manual: true, InitialBlocks: live})
	if err != nil {
		env.S3.Close()
		return nil, err
	}
	return env, nil
}

// CheckpointDir is the checkpoint of the demo run in workDir.
func CheckpointDir(workDir string) string { return filepath.Join(workDir, "checkpoint") }

// LakeBucket is the embedded endpoint's bucket of the checkpoint and the
// table with Options.Storage "s3".
const LakeBucket = "lake"

// ArchiveSource is the s3_backfill source reading the archive through the
// embedded S3 endpoint, as it would read the public bucket.
func (e *Env) ArchiveSource(maxFilesPerTrigger int) pipeline.SourceSpec {
	return archiveSourceAt(e.S3.URL(), maxFilesPerTrigger)
}

// archiveSourceAt is the s3_backfill source reading the archive's bucket
// from the S3 endpoint at endpoint (a URL).
func archiveSourceAt(endpoint string, maxFilesPerTrigger int) pipeline.SourceSpec {
	return pipeline.SourceSpec{Name: ArchiveSource, Format: "s3archive", URI: fmt.Sprintf(
		"s3://%s/v1.0/eth/blocks?endpoint=%s&region=us-east-2&anonymous=true&maxFilesPerTrigger=%d",
		Bucket, endpoint, maxFilesPerTrigger)}
}

// LiveSource is the eth_live source: one block past the archive's last,
// chained to its hash.
func (e *Env) LiveSource(blocksPerBatch int) pipeline.SourceSpec {
	return pipeline.SourceSpec{Name: LiveSource, Format: "ethrpc", URI: fmt.Sprintf(
		"%s?maxBlocksPerTrigger=%d&start_block=%d&confirmations=0&start_parent_hash=%s",
		e.Node.URL(), blocksPerBatch, e.Manifest.LastBlock+1, e.Manifest.LastHash)}
}

// EvolutionConf is the reference run's conf: named sources, offset log V2,
// and the state partition count of a new checkpoint.
func EvolutionConf(statePartitions int) map[string]string {
	return map[string]string{
		"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true",
		"spark.sql.streaming.offsetLog.formatVersion":              "2",
		"spark.sql.shuffle.partitions":                             strconv.Itoa(statePartitions),
	}
}

// Close stops the embedded endpoints.
func (e *Env) Close() {
	if e.Node != nil {
		e.Node.Close()
	}
	if e.S3 != nil {
		e.S3.Close()
	}
}

// TreeHash hashes every file's relative path and content under dir, so a
// refused start can be shown to have left the checkpoint byte-identical.
func TreeHash(dir string) (string, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("walk %s: %w", dir, err)
	}
	sort.Strings(paths)
	h := sha256.New()
	for _, p := range paths {
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return "", fmt.Errorf("read %s: %w", p, err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", rel, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Exec runs each phase as its own process of the ethstream binary, exactly as
// a user restarting the job would. Each phase's log goes to LogDir/<phase>.log.
type Exec struct {
	Binary string
	LogDir string
}

// RunPhase runs `ethstream run` with cfg's flags; a coded error printed by the
// child ("error: CODE: message") is returned with its code.
func (e Exec) RunPhase(ctx context.Context, phase string, cfg pipeline.Config) error {
	if err := os.MkdirAll(e.LogDir, 0o755); err != nil {
		return fmt.Errorf("create log dir %s: %w", e.LogDir, err)
	}
	logPath := filepath.Join(e.LogDir, phase+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("create %s: %w", logPath, err)
	}
	defer logFile.Close()
	args := cfg.Args()
	fmt.Fprintf(logFile, "$ %s %s\n", e.Binary, strings.Join(args, " "))
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, e.Binary, args...)
	cmd.Stdout = logFile
	cmd.Stderr = io.MultiWriter(&stderr, logFile)
	err = cmd.Run()
	if err == nil {
		return nil
	}
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if rest, ok := strings.CutPrefix(line, "error: "); ok {
			code, msg, _ := strings.Cut(rest, ": ")
			return &errcode.Error{Code: code, Msg: msg}
		}
	}
	return fmt.Errorf("phase %s (log %s): %w", phase, logPath, err)
}
