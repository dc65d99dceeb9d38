package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/internal/cputime"
	"github.com/ethstream/ethstream/pipeline"
	"github.com/ethstream/ethstream/stream"
)

// BenchOptions configure `ethstream bench`: the targets of docs/contracts.md measured
// end to end through the real components (embedded S3, node, Pebble, Delta).
type BenchOptions struct {
	WorkDir     string
	Preset      chain.Preset
	Seed        int64
	LiveBatches int // per partition count; default 20
	// DuckDB is the path of scripts/duckref's binary; if set, DuckDB doing
	// the backfill's job (read the same files, group, write the grouped
	// result to Parquet) is timed as the yardstick, and its plain GROUP BY
	// beside it for continuity.
	DuckDB string
	// KeysPerBlock also runs the state at one key per block (docs/contracts.md,
	// Targets; bench_keys.go).
	KeysPerBlock bool
	// KeysFilesPerTrigger is the one-key-per-block run's maxFilesPerTrigger
	// (0 = 40): every key of a batch is new, so a batch holds its keys in
	// memory twice (partial aggregates, pending state); the preset's 365
	// files (2M keys) a batch took the seed run past the soft memory limit.
	KeysFilesPerTrigger int
	// Rounds runs the backfill legs (S3, and with DuckDB the file://
	// backfill and DuckDB's two queries) this many times, alternating, and
	// judges the targets on each figure's median (0 = 1): on a shared
	// machine one run of each is further from the next than the targets'
	// margins.
	Rounds int
	// ServeS3 is the command that serves a directory over S3 from a process
	// of its own, given --root DIR --addr HOST:PORT (the CLI passes its own
	// executable and "serve-s3"); it runs with GOMAXPROCS=1
	// (bench_endpoint.go). The S3 backfill then reads the archive
	// from it, so that its CPU time, the targets' figure, is the engine's
	// alone, as against S3, whose CPU is not the engine's; the endpoint's
	// own is measured beside it. Empty: the embedded endpoint in this
	// process serves the backfill, and its CPU counts as the engine's.
	ServeS3 []string
	// Leg is the command that runs one backfill leg (the S3 backfill, the
	// file:// backfill) in a process of its own, its LegSpec on standard
	// input (the CLI passes its own executable and "bench-leg";
	// bench_leg.go), so that each leg's peak RSS and CPU time are its own.
	// Empty: the legs run in this process, one after another. It needs
	// ServeS3 (a leg's process does not count an endpoint in this one).
	Leg []string
	// Shapes names the query shapes to measure against DuckDB
	// (bench_shapes.go; "all" for every one).
	Shapes []string
	// StateAtScale names the operators whose state is run at a key per
	// block and repartitioned 200 -> 8 (bench_atscale.go; "all" for every
	// one).
	StateAtScale []string
	// StagesOnly skips the core legs (the backfills, the yardstick, the
	// live runs and their targets): only the stages the other options ask
	// for run (--shape, --keys-per-block, --state-at-scale), e.g. to measure
	// one shape without the minutes of the rest.
	StagesOnly bool
	Out        io.Writer
	Log        io.Writer // progress lines; nil = discard
}

// BenchResult is what bench measured. Durations in milliseconds.
type BenchResult struct {
	Preset       string `json:"preset"`
	Files        int    `json:"files"`
	Blocks       int64  `json:"blocks"`
	ArchiveBytes int64  `json:"archiveBytes"`
	// BenchRound: the backfill legs (their JSON fields inline), the medians
	// of Rounds when there are several.
	BenchRound
	BackfillRowsPerSec     float64 `json:"backfillRowsPerSec"`
	KeysAfterBackfill      int64   `json:"keysAfterBackfill"`
	RestartToFirstCommitMs int64   `json:"restartToFirstCommitMs"`
	LiveMedianMs200        float64 `json:"liveMedianTriggerToCommitMs200"`
	RepartitionMs          int64   `json:"repartitionMs"`
	RepartitionKeys        int64   `json:"repartitionKeys"`
	LiveMedianMs8          float64 `json:"liveMedianTriggerToCommitMs8"`
	// LiveCPUMsPerBatch8 is the process's CPU time over the live run at 8
	// partitions per data batch (the repartition's included): on a loaded
	// machine the median measures the load as well, this the work.
	LiveCPUMsPerBatch8 float64 `json:"liveCpuMsPerBatch8"`
	LivePeakRSSBytes   int64   `json:"livePeakRssBytes"`
	// LiveFileRSSBytes and LiveFileHugeRSSBytes are the file-backed part of
	// the resident set at the live run's end and the part of it mapped in
	// huge pages (procmem.go): the binary's text, which the peak includes
	// and which moves between identical binaries.
	LiveFileRSSBytes     int64 `json:"liveFileRssBytes"`
	LiveFileHugeRSSBytes int64 `json:"liveFileHugeRssBytes"`
	GoMaxProcs           int   `json:"gomaxprocs"`
	// EndpointOwnProcess: the S3 backfill read the archive from an
	// endpoint in a process of its own (BenchOptions.ServeS3).
	EndpointOwnProcess bool `json:"endpointOwnProcess"`
	// DuckDB's answers: its plain GROUP BY's, and its COPY's (SELECT ...
	// GROUP BY ALL) TO a Parquet file, the yardstick of the backfill target.
	DuckDBOutput     string `json:"duckdbOutput,omitempty"`
	DuckDBCopyOutput string `json:"duckdbCopyOutput,omitempty"`
	// BackfillPhases is where the S3 backfill's time went (the last
	// round's), BackfillPhasesWallMs that round's wall time.
	BackfillPhases       BenchPhases `json:"backfillPhases"`
	BackfillPhasesWallMs int64       `json:"backfillPhasesWallMs"`
	// StagesOnly: the run skipped the core legs (BenchOptions.StagesOnly).
	StagesOnly bool `json:"stagesOnly,omitempty"`
	// Host is the machine and its load (bench_cpu.go).
	Host Host `json:"host"`
	// Targets is every target of docs/contracts.md (Targets) with its
	// measured value and pass/fail.
	Targets []Target `json:"targets"`
	// Keys is the one-key-per-block run (BenchOptions.KeysPerBlock).
	Keys *KeysResult `json:"keysPerBlock,omitempty"`
	// AtScale are the join's and the deduplication's state at scale and
	// their repartition (BenchOptions.StateAtScale; bench_atscale.go).
	AtScale []AtScaleResult `json:"stateAtScale,omitempty"`
	// Shapes are the query shapes' yardsticks (BenchOptions.Shapes).
	Shapes []ShapeResult `json:"shapes,omitempty"`
	// Rounds holds each round's backfill legs when BenchOptions.Rounds > 1;
	// BenchRound is then their medians (BackfillPhases and
	// KeysAfterBackfill are the last round's).
	Rounds []BenchRound `json:"rounds,omitempty"`
}

// BenchRound is one round of the backfill legs.
type BenchRound struct {
	// The S3 backfill: wall, the user+system CPU time and peak RSS of the
	// process it ran in (its own with BenchOptions.Leg; the S3 endpoint's
	// CPU included when the endpoint runs in this process: BenchOptions.
	// ServeS3).
	BackfillMs           int64 `json:"backfillMs"`
	BackfillCPUMs        int64 `json:"backfillCpuMs"`
	BackfillPeakRSSBytes int64 `json:"backfillPeakRssBytes"`
	// EndpointCPUMs is the user+system CPU time of the S3 endpoint's own
	// process during the S3 backfill (0 when it runs in this process).
	EndpointCPUMs int64 `json:"endpointCpuMs,omitempty"`
	// With DuckDB: the same backfill from file:// (what DuckDB reads), and
	// DuckDB's own process wall and user+system CPU time, for its plain
	// GROUP BY and for its COPY ... TO Parquet.
	FileBackfillMs    int64 `json:"fileBackfillMs,omitempty"`
	FileBackfillCPUMs int64 `json:"fileBackfillCpuMs,omitempty"`
	DuckDBMs          int64 `json:"duckdbGroupByMs,omitempty"`
	DuckDBCPUMs       int64 `json:"duckdbGroupByCpuMs,omitempty"`
	DuckDBCopyMs      int64 `json:"duckdbCopyMs,omitempty"`
	DuckDBCopyCPUMs   int64 `json:"duckdbCopyCpuMs,omitempty"`
	// BackfillSteps and FileBackfillSteps are the S3 and file:// backfills'
	// wall and CPU time per batch step (bench_cpu.go); in BenchResult, the
	// last round's.
	BackfillSteps     []StepCPU `json:"backfillSteps,omitempty"`
	FileBackfillSteps []StepCPU `json:"fileBackfillSteps,omitempty"`
}

// ranDuckDB reports whether the file:// and DuckDB legs ran: DuckDB
// printed. Not its time: a run under a millisecond records 0 ms.
func (r *BenchResult) ranDuckDB() bool { return r.DuckDBCopyOutput != "" }

// figures returns pointers to x's figures, each a median of its own.
func (x *BenchRound) figures() []*int64 {
	return []*int64{&x.BackfillMs, &x.BackfillCPUMs, &x.BackfillPeakRSSBytes, &x.EndpointCPUMs, &x.FileBackfillMs, &x.FileBackfillCPUMs,
		&x.DuckDBMs, &x.DuckDBCPUMs, &x.DuckDBCopyMs, &x.DuckDBCopyCPUMs}
}

// setMedians sets r's backfill legs to the medians of rs (each figure on
// its own, so the ratios compare the median runs of each leg).
func (r *BenchResult) setMedians(rs []BenchRound) {
	for i, dst := range r.BenchRound.figures() {
		xs := make([]float64, len(rs))
		for j := range rs {
			xs[j] = float64(*rs[j].figures()[i])
		}
		*dst = int64(median(xs))
	}
	r.BackfillRowsPerSec = float64(r.Blocks) / (float64(max(r.BackfillMs, 1)) / 1000)
}

// warmPageCache reads every archive file once, untimed, so the timed runs
// that follow all find them in the page cache.
func warmPageCache(ctx context.Context, root string, files []archivegen.ManifestFile) error {
	buf := make([]byte, 1<<20)
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		fh, err := os.Open(filepath.Join(root, f.Key))
		if err != nil {
			return fmt.Errorf("warm the page cache: %w", err)
		}
		_, err = io.CopyBuffer(io.Discard, fh, buf)
		fh.Close()
		if err != nil {
			return fmt.Errorf("warm the page cache: read %s: %w", f.Key, err)
		}
	}
	return nil
}

// recorder keeps every progress event of a run and when the first arrived.
type recorder struct {
	mu     sync.Mutex
	start  time.Time
	first  time.Duration
	events []*stream.Progress
	clock  stepClock
}

func (r *recorder) OnProgress(p *stream.Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.events) == 0 {
		r.first = time.Since(r.start)
	}
	r.events = append(r.events, p)
}

func (r *recorder) medianTrigger(kind string) float64 {
	var xs []float64
	for _, p := range r.events {
		if p.Kind() == kind {
			xs = append(xs, float64(p.DurationMs[stream.DurTriggerExecution]))
		}
	}
	sort.Float64s(xs)
	return median(xs)
}

// count is the number of events of kind.
func (r *recorder) count(kind string) int {
	n := 0
	for _, p := range r.events {
		if p.Kind() == kind {
			n++
		}
	}
	return n
}

// Bench runs backfill, live at the wide partition count, the shrink and live
// at the narrow count, each as its own engine run on one checkpoint: each
// backfill leg in a process of its own with BenchOptions.Leg, the rest in
// this process (so each peak RSS is the engine's own).
func Bench(ctx context.Context, o BenchOptions) (*BenchResult, error) {
	if o.LiveBatches == 0 {
		o.LiveBatches = 20
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	do := Options{WorkDir: o.WorkDir, Preset: o.Preset, Seed: o.Seed,
		AddLiveBatches: o.LiveBatches, RetireBatches: o.LiveBatches, ShrinkBatches: 1}
	do.defaults()
	fmt.Fprintf(o.Log, "archive %s (cached in %s) ...\n", o.Preset.Name, o.WorkDir)
	env, err := Setup(ctx, do)
	if err != nil {
		return nil, err
	}
	defer env.Close()
	b := &benchRun{o: o, env: env, conf: EvolutionConf(200), quiet: slog.New(slog.NewTextHandler(io.Discard, nil)),
		s3src: env.ArchiveSource(o.Preset.MaxFilesPerTrigger), liveSrc: env.LiveSource(20)}
	b.s3backfill = b.s3src
	res := &BenchResult{Preset: o.Preset.Name, Files: len(env.Manifest.Files), Blocks: env.Manifest.Rows,
		ArchiveBytes: env.Manifest.Bytes, GoMaxProcs: runtimeProcs(), Host: newHost()}
	// Every timed run reads the archive from a warm page cache, as DuckDB's
	// yardstick does: otherwise the first run (the S3 one) alone pays the
	// disk reads and the S3 / file:// ratio measures the disk, not the path.
	fmt.Fprintf(o.Log, "warm the page cache (%d files) ...\n", res.Files)
	if err := warmPageCache(ctx, env.ArchiveRoot, env.Manifest.Files); err != nil {
		return nil, err
	}
	if o.StagesOnly {
		res.StagesOnly = true
		if err := b.runStages(ctx, res); err != nil {
			return nil, err
		}
		res.Host.LoadAfter = loadAvg()
		if o.Out != nil {
			PrintBench(o.Out, res)
		}
		return res, nil
	}
	if len(o.Leg) > 0 && len(o.ServeS3) == 0 {
		// A leg's process reading from the endpoint in this one would
		// count the endpoint's CPU time nowhere.
		return nil, fmt.Errorf("bench: BenchOptions.Leg needs BenchOptions.ServeS3")
	}
	if len(o.ServeS3) > 0 {
		fmt.Fprintf(o.Log, "start the S3 endpoint (%s) ...\n", strings.Join(o.ServeS3, " "))
		ep, err := startEndpoint(ctx, o.ServeS3, filepath.Dir(env.ArchiveRoot))
		if err != nil {
			return nil, err
		}
		defer ep.stop()
		b.endpoint, b.s3backfill = ep, archiveSourceAt(ep.url, o.Preset.MaxFilesPerTrigger)
		res.EndpointOwnProcess = true
	}
	rounds := max(o.Rounds, 1)
	var rs []BenchRound
	for r := range rounds {
		if rounds > 1 {
			fmt.Fprintf(o.Log, "round %d of %d\n", r+1, rounds)
		}
		// Only the last round's backfill leaves the checkpoint the live
		// runs restart.
		if err := b.backfill(ctx, res, r < rounds-1); err != nil {
			return nil, err
		}
		if o.DuckDB != "" {
			if err := b.yardstick(ctx, res); err != nil {
				return nil, err
			}
		}
		rs = append(rs, res.BenchRound)
	}
	if rounds > 1 {
		res.Rounds = rs
		res.setMedians(rs)
	}
	if err := b.live(ctx, res); err != nil {
		return nil, err
	}
	if err := b.runStages(ctx, res); err != nil {
		return nil, err
	}
	res.Targets = append(coreTargets(res), res.Targets...)
	res.Host.LoadAfter = loadAvg()
	if o.Out != nil {
		PrintBench(o.Out, res)
	}
	return res, nil
}

// benchRun is one bench: its archive, sources and conf, and the runs it
// times, each a start of the query recorded by a listener.
type benchRun struct {
	o              BenchOptions
	env            *Env
	conf           map[string]string
	quiet          *slog.Logger
	s3src, liveSrc pipeline.SourceSpec
	// s3backfill is the archive source of the timed S3 backfill: s3src, or
	// the same archive from endpoint, a process of its own.
	s3backfill pipeline.SourceSpec
	endpoint   *endpointProcess
}

// runIn runs the query on a checkpoint and table of its own.
func (b *benchRun) runIn(ctx context.Context, ckpt, table, local string, srcs []pipeline.SourceSpec, conf map[string]string, trig engine.Trigger, max int) (*recorder, error) {
	return b.runConfig(ctx, pipeline.Config{Checkpoint: ckpt, Table: table, LocalDir: local, Sources: srcs,
		Conf: conf, Trigger: trig, MaxBatches: max})
}

// runConfig runs cfg quietly, its progress recorded.
func (b *benchRun) runConfig(ctx context.Context, cfg pipeline.Config) (*recorder, error) {
	rec := &recorder{start: time.Now()}
	cfg.Logger, cfg.Listeners = b.quiet, []engine.Listener{rec}
	_, err := pipeline.Run(ctx, cfg)
	return rec, err
}

// run runs the query on the bench's checkpoint and table.
func (b *benchRun) run(ctx context.Context, srcs []pipeline.SourceSpec, conf map[string]string, trig engine.Trigger, max int) (*recorder, error) {
	return b.runIn(ctx, b.env.Checkpoint, b.env.Table, filepath.Join(b.o.WorkDir, "state-cache"), srcs, conf, trig, max)
}

// backfill times the S3 backfill of the whole archive: on the bench's
// checkpoint, or with scratch on one of its own, removed after.
func (b *benchRun) backfill(ctx context.Context, res *BenchResult, scratch bool) error {
	o, conf, s3src := b.o, b.conf, b.s3backfill
	fmt.Fprintf(o.Log, "backfill %d files, %d blocks ...\n", res.Files, res.Blocks)
	dir := filepath.Join(o.WorkDir, "s3-backfill-round")
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clear %s: %w", dir, err)
	}
	var e0 time.Duration
	if b.endpoint != nil {
		var err error
		if e0, err = b.endpoint.cpu(); err != nil {
			return err
		}
	}
	spec := LegSpec{Checkpoint: b.env.Checkpoint, Table: b.env.Table, LocalDir: filepath.Join(o.WorkDir, "state-cache"),
		Sources: []pipeline.SourceSpec{s3src}, Conf: conf}
	if scratch {
		spec.Checkpoint, spec.Table, spec.LocalDir = filepath.Join(dir, "checkpoint"), filepath.Join(dir, "table"), filepath.Join(dir, "state-cache")
	}
	leg, rec, err := b.runLeg(ctx, spec)
	if err != nil {
		return fmt.Errorf("backfill: %w", err)
	}
	res.BackfillMs, res.BackfillCPUMs = leg.WallMs, leg.CPUMs
	if b.endpoint != nil {
		e1, err := b.endpoint.cpu()
		if err != nil {
			return err
		}
		res.EndpointCPUMs = (e1 - e0).Milliseconds()
	}
	res.BackfillPeakRSSBytes = leg.PeakRSSBytes
	res.BackfillRowsPerSec = float64(res.Blocks) / (float64(max(res.BackfillMs, 1)) / 1000)
	if n := len(rec.events); n > 0 && len(rec.events[n-1].StateOperators) > 0 {
		res.KeysAfterBackfill = rec.events[n-1].StateOperators[0].NumRowsTotal
	}
	res.BackfillPhases = benchPhases(rec.events)
	res.BackfillPhasesWallMs = res.BackfillMs
	res.BackfillSteps = rec.runSteps(res.BackfillMs, res.BackfillCPUMs)
	if scratch {
		return os.RemoveAll(dir)
	}
	return nil
}

// yardstick times the same backfill from file:// and DuckDB's GROUP BY
// over the same files.
func (b *benchRun) yardstick(ctx context.Context, res *BenchResult) error {
	o, env, conf := b.o, b.env, b.conf
	// The same backfill from file://, on a checkpoint and table of its
	// own: DuckDB reads the files, not the S3 endpoint.
	blocks := filepath.Join(env.ArchiveRoot, "v1.0", "eth", "blocks")
	fileDir := filepath.Join(o.WorkDir, "file-backfill")
	if err := os.RemoveAll(fileDir); err != nil {
		return fmt.Errorf("clear %s: %w", fileDir, err)
	}
	fileSrc := pipeline.SourceSpec{Name: ArchiveSource, Format: "s3archive",
		URI: fmt.Sprintf("file://%s?maxFilesPerTrigger=%d", filepath.ToSlash(blocks), o.Preset.MaxFilesPerTrigger)}
	fmt.Fprintf(o.Log, "backfill from file:// ...\n")
	// From the same start as the S3 backfill: its own process
	// (BenchOptions.Leg) or this one's heap returned to the OS (runLegHere).
	// On the heap the S3 leg had grown, and the garbage collector's pacing
	// for it, this leg cost ~1 CPU-s less than from a fresh start, as a
	// user's run is.
	leg, rec, err := b.runLeg(ctx, LegSpec{Checkpoint: filepath.Join(fileDir, "checkpoint"), Table: filepath.Join(fileDir, "table"),
		LocalDir: filepath.Join(fileDir, "state-cache"), Sources: []pipeline.SourceSpec{fileSrc}, Conf: conf})
	if err != nil {
		return fmt.Errorf("backfill from file://: %w", err)
	}
	res.FileBackfillMs, res.FileBackfillCPUMs = leg.WallMs, leg.CPUMs
	res.FileBackfillSteps = rec.runSteps(res.FileBackfillMs, res.FileBackfillCPUMs)
	if err := os.RemoveAll(fileDir); err != nil {
		return fmt.Errorf("clear %s: %w", fileDir, err)
	}

	glob := filepath.Join(blocks, "*", "*.parquet")
	fmt.Fprintf(o.Log, "duckdb GROUP BY over %s ...\n", glob)
	if res.DuckDBMs, res.DuckDBCPUMs, res.DuckDBOutput, err = timeProcess(ctx, o.DuckDB, glob); err != nil {
		return err
	}
	fmt.Fprintf(o.Log, "%s\n", res.DuckDBOutput)
	copyOut := filepath.Join(o.WorkDir, "duckdb-copy.parquet")
	fmt.Fprintf(o.Log, "duckdb COPY (... GROUP BY ALL) TO %s ...\n", copyOut)
	if err := os.RemoveAll(copyOut); err != nil {
		return fmt.Errorf("clear %s: %w", copyOut, err)
	}
	if res.DuckDBCopyMs, res.DuckDBCopyCPUMs, res.DuckDBCopyOutput, err = timeProcess(ctx, o.DuckDB, "copy", glob, copyOut); err != nil {
		return err
	}
	fmt.Fprintf(o.Log, "%s\n", res.DuckDBCopyOutput)
	res.Host.DuckDBThreads = duckThreads(res.DuckDBCopyOutput)
	return os.RemoveAll(copyOut)
}

// timeProcess runs bin with args as its own process and returns its wall
// time, its user+system CPU time (milliseconds) and its output.
func timeProcess(ctx context.Context, bin string, args ...string) (wallMs, cpuMs int64, out string, err error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	t := time.Now()
	b, err := cmd.CombinedOutput()
	if err != nil {
		return 0, 0, "", fmt.Errorf("duckdb reference %s %s: %w\n%s", bin, strings.Join(args, " "), err, b)
	}
	wallMs = time.Since(t).Milliseconds()
	cpuMs = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Milliseconds()
	return wallMs, cpuMs, strings.TrimSpace(string(b)), nil
}

// live times the live batches at 200 partitions, then the shrink to 8 and
// the live batches after it.
func (b *benchRun) live(ctx context.Context, res *BenchResult) error {
	o, conf, s3src, liveSrc := b.o, b.conf, b.s3src, b.liveSrc
	fmt.Fprintf(o.Log, "live, 200 partitions, %d batches ...\n", o.LiveBatches)
	live := engine.Trigger{Kind: engine.ProcessingTime}
	resetPeakRSS()
	rec, err := b.run(ctx, []pipeline.SourceSpec{s3src, liveSrc}, conf, live, o.LiveBatches)
	if err != nil {
		return fmt.Errorf("live at 200: %w", err)
	}
	res.RestartToFirstCommitMs = rec.first.Milliseconds()
	res.LiveMedianMs200 = rec.medianTrigger(stream.KindData)

	fmt.Fprintf(o.Log, "shrink to 8 partitions, then %d live batches ...\n", o.LiveBatches)
	shrink := clone(conf)
	shrink["spark.sql.streaming.stateStore.partitions"] = "8"
	resetPeakRSS()
	cpu0 := cputime.Self()
	rec, err = b.run(ctx, []pipeline.SourceSpec{liveSrc}, shrink, live, o.LiveBatches)
	if err != nil {
		return fmt.Errorf("live at 8: %w", err)
	}
	cpu := cputime.Self() - cpu0
	res.LivePeakRSSBytes = peakRSS()
	res.LiveFileRSSBytes, res.LiveFileHugeRSSBytes = fileRSS(), fileHugeRSS()
	for _, p := range rec.events {
		if p.Kind() == stream.KindRepartition {
			res.RepartitionMs = p.DurationMs["controlBatch.REPARTITION"]
			if len(p.StateOperators) > 0 {
				res.RepartitionKeys = p.StateOperators[0].NumRowsTotal
			}
		}
	}
	res.LiveMedianMs8 = rec.medianTrigger(stream.KindData)
	if n := rec.count(stream.KindData); n > 0 {
		res.LiveCPUMsPerBatch8 = float64(cpu.Microseconds()) / 1e3 / float64(n)
	}
	fmt.Fprint(o.Log, liveBreakdown("live at 8 partitions", rec.events))
	return nil
}

// PrintBench prints the figures, then every target with pass/fail
// (docs/contracts.md, Targets), then the backfill's phases.
func PrintBench(w io.Writer, r *BenchResult) {
	if r.StagesOnly {
		fmt.Fprintf(w, "preset %s: %d files, %d blocks, GOMAXPROCS %d; the stages only (--stages-only)\n", r.Preset, r.Files, r.Blocks, r.GoMaxProcs)
		printShapes(w, r.Shapes)
		printKeys(w, r)
		printStateAtScale(w, r.AtScale)
		printTargets(w, r.Targets)
		printHost(w, r.Host)
		return
	}
	mb := func(b int64) string { return fmt.Sprintf("%.0f MB", float64(b)/1e6) }
	rounds := ""
	if len(r.Rounds) > 1 {
		rounds = fmt.Sprintf("; backfill legs: median of %d rounds", len(r.Rounds))
	}
	fmt.Fprintf(w, "| what (preset %s: %d files, %d blocks, GOMAXPROCS %d%s) | measured |\n|---|---|\n",
		r.Preset, r.Files, r.Blocks, r.GoMaxProcs, rounds)
	sec := func(ms int64) float64 { return float64(ms) / 1000 }
	fmt.Fprintf(w, "| backfill S3 -> state -> Delta | %.1f s (%.0f blocks/s), %.1f CPU-s%s |\n",
		sec(r.BackfillMs), r.BackfillRowsPerSec, sec(r.BackfillCPUMs), endpointNote(r))
	if r.ranDuckDB() {
		fmt.Fprintf(w, "| backfill file:// -> state -> Delta | %.1f s, %.1f CPU-s |\n", sec(r.FileBackfillMs), sec(r.FileBackfillCPUMs))
		fmt.Fprintf(w, "| DuckDB COPY (GROUP BY ALL) TO Parquet, same files (its process) | %.1f s, %.1f CPU-s |\n",
			sec(r.DuckDBCopyMs), sec(r.DuckDBCopyCPUMs))
		fmt.Fprintf(w, "| DuckDB plain GROUP BY, same files (its process) | %.1f s, %.1f CPU-s |\n", sec(r.DuckDBMs), sec(r.DuckDBCPUMs))
		fmt.Fprintf(w, "| backfill file:// / DuckDB COPY | %.2fx wall, %.2fx CPU |\n",
			ratio(r.FileBackfillMs, r.DuckDBCopyMs), ratio(r.FileBackfillCPUMs, r.DuckDBCopyCPUMs))
		fmt.Fprintf(w, "| backfill file:// / DuckDB plain GROUP BY | %.2fx wall, %.2fx CPU |\n",
			ratio(r.FileBackfillMs, r.DuckDBMs), ratio(r.FileBackfillCPUMs, r.DuckDBCPUMs))
		fmt.Fprintf(w, "| backfill S3 / file:// | %.2fx wall, %.2fx CPU |\n",
			ratio(r.BackfillMs, r.FileBackfillMs), ratio(r.BackfillCPUMs, r.FileBackfillCPUMs))
		if r.EndpointOwnProcess {
			fmt.Fprintf(w, "| backfill S3 / file://, CPU with the S3 endpoint's | %.2fx |\n",
				ratio(r.BackfillCPUMs+r.EndpointCPUMs, r.FileBackfillCPUMs))
		}
	}
	fmt.Fprintf(w, "| keys in state after the backfill | %d |\n", r.KeysAfterBackfill)
	fmt.Fprintf(w, "| peak RSS, backfill | %s |\n", mb(r.BackfillPeakRSSBytes))
	fmt.Fprintf(w, "| restart to first committed batch | %d ms |\n", r.RestartToFirstCommitMs)
	fmt.Fprintf(w, "| live 20-block batch, trigger to commit, median, 200 partitions | %.0f ms |\n", r.LiveMedianMs200)
	fmt.Fprintf(w, "| repartition 200 -> 8 (%d keys) | %d ms |\n", r.RepartitionKeys, r.RepartitionMs)
	fmt.Fprintf(w, "| live 20-block batch, trigger to commit, median, 8 partitions | %.0f ms |\n", r.LiveMedianMs8)
	fmt.Fprintf(w, "| live 20-block batch, CPU time per batch, 8 partitions | %.1f ms |\n", r.LiveCPUMsPerBatch8)
	fmt.Fprintf(w, "| peak RSS, live (shrink + live at 8) | %s%s |\n", mb(r.LivePeakRSSBytes), fileRSSNote(r.LiveFileRSSBytes, r.LiveFileHugeRSSBytes))
	printRounds(w, r.Rounds)
	printSpread(w, r.Rounds, r.ranDuckDB())
	printShapes(w, r.Shapes)
	printKeys(w, r)
	printStateAtScale(w, r.AtScale)
	printTargets(w, r.Targets)
	if r.BackfillPhases.Batches > 0 {
		printPhases(w, "backfill S3 -> state -> Delta", r.BackfillPhases, r.BackfillPhasesWallMs)
	}
	last := "last round"
	if len(r.Rounds) < 2 {
		last = "its run"
	}
	printSteps(w, "backfill S3 -> state -> Delta ("+last+")", r.BackfillSteps)
	printSteps(w, "backfill file:// -> state -> Delta ("+last+")", r.FileBackfillSteps)
	printHost(w, r.Host)
}

// ratio is a / b, durations or CPU times in milliseconds: a figure under a
// millisecond still counts as one, so that no ratio divides by zero.
func ratio(a, b int64) float64 { return float64(a) / float64(max(b, 1)) }

// printRounds prints each round's backfill legs (BenchOptions.Rounds > 1).
func printRounds(w io.Writer, rs []BenchRound) {
	if len(rs) < 2 {
		return
	}
	sec := func(ms, cpu int64) string {
		return fmt.Sprintf("%.1f s, %.1f CPU-s", float64(ms)/1000, float64(cpu)/1000)
	}
	fmt.Fprintf(w, "\n| round | backfill S3 | S3 endpoint, own process | backfill file:// | DuckDB COPY | DuckDB GROUP BY | file:// / COPY, wall; CPU | S3 / file://, wall; CPU | peak RSS, S3 backfill |\n|---|---|---|---|---|---|---|---|---|\n")
	for i, x := range rs {
		ep := "-"
		if x.EndpointCPUMs > 0 {
			ep = fmt.Sprintf("%.1f CPU-s", float64(x.EndpointCPUMs)/1000)
		}
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %.2fx; %.2fx | %.2fx; %.2fx | %.0f MB |\n", i+1,
			sec(x.BackfillMs, x.BackfillCPUMs), ep, sec(x.FileBackfillMs, x.FileBackfillCPUMs), sec(x.DuckDBCopyMs, x.DuckDBCopyCPUMs),
			sec(x.DuckDBMs, x.DuckDBCPUMs), ratio(x.FileBackfillMs, x.DuckDBCopyMs), ratio(x.FileBackfillCPUMs, x.DuckDBCopyCPUMs),
			ratio(x.BackfillMs, x.FileBackfillMs), ratio(x.BackfillCPUMs, x.FileBackfillCPUMs), float64(x.BackfillPeakRSSBytes)/1e6)
	}
}

// WriteBenchJSON writes r as indented JSON.
func WriteBenchJSON(path string, r *BenchResult) error { return writeJSON(path, r) }

// writeJSON writes v as indented JSON to path (--out of bench and of
// bench --freshness).
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(path, func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	})
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

// endpointNote says where the S3 backfill's endpoint ran and what its own
// process spent.
func endpointNote(r *BenchResult) string {
	if !r.EndpointOwnProcess {
		return " (the S3 endpoint's included: it ran in this process)"
	}
	return fmt.Sprintf("; the S3 endpoint, its own process: %.1f CPU-s", float64(r.EndpointCPUMs)/1000)
}
