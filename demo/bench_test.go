package demo

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// TestBenchPhases: each phase is the sum of the figures it names, and
// "other" is what triggerExecution leaves of the phases the driver waits for.
func TestBenchPhases(t *testing.T) {
	ev := func(trigger, latest, get, wal, commitOff, process, upd, rem, commit, prep int64, write, merge, decode string) *stream.Progress {
		return &stream.Progress{
			DurationMs: map[string]int64{stream.DurTriggerExecution: trigger, stream.DurLatestOffset: latest, stream.DurQueryPlanning: 1,
				stream.DurGetBatch: get, stream.DurWalCommit: wal, stream.DurCommitOffsets: commitOff},
			StateOperators: []stream.OperatorProgress{{AllUpdatesTimeMs: upd, AllRemovalsTimeMs: rem, CommitTimeMs: commit,
				CustomMetrics: map[string]int64{"processTimeMs": process, "commitPrepareTimeMs": prep}}},
			Sources: []stream.SourceProgress{{Metrics: map[string]string{"decodeMs": decode}}},
			Sink:    stream.SinkProgress{Metrics: map[string]string{"writeTimeMs": write, "executionTimeMs": merge}},
		}
	}
	ph := benchPhases([]*stream.Progress{
		ev(1000, 100, 200, 10, 5, 150, 80, 20, 60, 50, "300", "250", "700"),
		// the state commit outlasts the sink write by 35 ms:
		ev(400, 0, 0, 0, 0, 0, 0, 0, 45, 40, "10", "5", ""),
		ev(500, 90, 100, 4, 6, 70, 30, 10, 10, 0, "120", "100", "900"),
	})
	want := BenchPhases{Batches: 3, TriggerMs: 1900, ListMs: 193, ReadMs: 300, DecodeWorkerMs: 900, ProcessMs: 220,
		FinishMs: 140, SinkMs: 430, MergeMs: 355, StateCommitMs: 115, StatePreparedMs: 90, CheckpointMs: 25,
		StateWaitMs: 35, StateHiddenMs: 60 + 10 + 10}
	want.OtherMs = 1900 - (193 + 300 + 220 + 140 + 430 + 35 + 25)
	if ph != want {
		t.Fatalf("phases\n got %+v\nwant %+v", ph, want)
	}
	var out strings.Builder
	printPhases(&out, "backfill", ph, 2000)
	if !strings.Contains(out.String(), "| state commit, beyond the sink write | 35 | 2% | commitTimeMs 115 ms alongside the sink (90 ms of it preparing), 80 ms of it hidden by the sink write |") ||
		!strings.Contains(out.String(), "| outside batches (open, close) | 100 | 5% |") {
		t.Fatalf("table:\n%s", out.String())
	}
}

// TestBenchSmallArchive runs the bench end to end on two days and checks that
// every figure comes from the run it names.
func TestBenchSmallArchive(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end bench")
	}
	duck := fakeDuck(t)
	var out strings.Builder
	res, err := Bench(context.Background(), BenchOptions{WorkDir: t.TempDir(), Preset: chain.LastDaysPreset(2),
		LiveBatches: 3, Out: &out, DuckDB: duck, KeysPerBlock: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != 2 || res.Blocks <= 0 {
		t.Fatalf("archive: %d files, %d blocks", res.Files, res.Blocks)
	}
	if res.BackfillMs <= 0 || res.BackfillRowsPerSec <= 0 || res.KeysAfterBackfill <= 0 {
		t.Fatalf("backfill figures missing: %+v", res)
	}
	if res.RepartitionKeys <= 0 {
		t.Fatalf("no repartition measured: %+v", res)
	}
	if res.LiveMedianMs8 <= 0 || res.LiveMedianMs200 <= 0 || res.RestartToFirstCommitMs <= 0 || res.LiveCPUMsPerBatch8 <= 0 {
		t.Fatalf("live figures missing: %+v", res)
	}
	if res.BackfillPeakRSSBytes <= 0 || res.LivePeakRSSBytes <= 0 {
		t.Fatalf("RSS not measured: %+v", res)
	}
	if runtime.GOOS == "linux" && (res.LiveFileRSSBytes <= 0 || res.LiveFileRSSBytes > res.LivePeakRSSBytes) {
		t.Fatalf("file-backed RSS at the live run's end %d, peak %d", res.LiveFileRSSBytes, res.LivePeakRSSBytes)
	}
	if ph := res.BackfillPhases; ph.Batches < 1 || ph.TriggerMs <= 0 || ph.TriggerMs > res.BackfillMs {
		t.Fatalf("backfill phases: %+v (backfill %d ms)", ph, res.BackfillMs)
	}
	if !strings.Contains(out.String(), "repartition 200 -> 8") || !strings.Contains(out.String(), "backfill file:// / DuckDB COPY") ||
		!strings.Contains(out.String(), "sink write (Delta MERGE + commit)") {
		t.Fatalf("table:\n%s", out.String())
	}
	if res.BackfillCPUMs <= 0 || res.FileBackfillMs <= 0 || res.FileBackfillCPUMs <= 0 || res.DuckDBMs < 0 ||
		!strings.HasPrefix(res.DuckDBOutput, "duckdb: globbed ") || !strings.HasSuffix(res.DuckDBOutput, "*.parquet") {
		t.Fatalf("file:// backfill or DuckDB figures missing: %+v", res)
	}
	if !strings.HasPrefix(res.DuckDBCopyOutput, "duckdb copy: ") || !strings.HasSuffix(res.DuckDBCopyOutput, "duckdb-copy.parquet (threads 2)") {
		t.Fatalf("DuckDB COPY not run with the glob and an output file: %q", res.DuckDBCopyOutput)
	}
	checkTargets(t, res, out.String())
	// One key per block: every block's hash is a key (none closes, none is
	// shared), and the repartition moves every one of them.
	if k := res.Keys; k == nil || k.Keys != res.Blocks || k.KeysBefore != k.Keys || k.KeysAfter != k.Keys ||
		len(k.Commits) != k.Batches || k.PeakRSSBytes <= 0 {
		t.Fatalf("one key per block (%d blocks): %+v", res.Blocks, res.Keys)
	}
	checkKeysTargets(t, res)
}

// checkKeysTargets: the one-key-per-block run's three targets are rows of
// the run's targets, each decided from the figures of res.Keys (recomputed
// here from the commits and RSS figures, not through keysTargets), and the
// verdicts a two-day archive must get: no key lost and the RSS far under
// its limit pass; the commits' spread passes or fails by its own figure.
func checkKeysTargets(t *testing.T, res *BenchResult) {
	t.Helper()
	k := res.Keys
	byPrefix := func(prefix string) Target {
		var found []Target
		for _, tg := range res.Targets {
			if strings.HasPrefix(tg.Name, prefix) {
				found = append(found, tg)
			}
		}
		if len(found) != 1 {
			t.Fatalf("%d targets named %q..., want 1: %+v", len(found), prefix, res.Targets)
		}
		return found[0]
	}
	rss := byPrefix(fmt.Sprintf("one key per block (%d keys): peak RSS", k.Keys))
	if peak := float64(max(k.PeakRSSBytes, k.RepartitionRSSByte)) / 1e9; rss.Value != peak || rss.Limit != 1.5 || rss.Status != TargetPass {
		t.Errorf("RSS target %+v, want %.3f GB of 1.5 passing (backfill %d B, repartition %d B)", rss, peak, k.PeakRSSBytes, k.RepartitionRSSByte)
	}
	lost := byPrefix("one key per block: keys lost by the repartition")
	if lost.Value != 0 || lost.Limit != 0 || lost.Status != TargetPass ||
		lost.Measured != fmt.Sprintf("%d before, %d after, %d ms", k.Keys, k.Keys, k.RepartitionMs) {
		t.Errorf("keys lost target %+v, want 0 of %d keys passing", lost, k.Keys)
	}
	var lo, hi float64
	changed := 0
	for _, c := range k.Commits {
		if c.KeysChanged > 0 {
			r := float64(c.Bytes) / float64(c.KeysChanged)
			if changed == 0 || r < lo {
				lo = r
			}
			hi = max(hi, r)
			changed++
		}
	}
	if changed == 0 {
		t.Fatalf("no commit changed a key: %+v", k.Commits)
	}
	spread := byPrefix("one key per block: state bytes written per changed key")
	wantStatus := TargetPass
	if hi/lo > 2 {
		wantStatus = TargetFail
	}
	if spread.Value != hi/lo || spread.Limit != 2 || spread.Status != wantStatus {
		t.Errorf("spread target %+v, want %.2fx (%.0f-%.0f B/key over %d commits) %s", spread, hi/lo, lo, hi, changed, wantStatus)
	}
}

// checkTargets: every target of docs/contracts.md is a row, decided from
// the figure it names, and the table prints each with its result.
func checkTargets(t *testing.T, res *BenchResult, out string) {
	t.Helper()
	byName := map[string]Target{}
	for _, tg := range res.Targets {
		byName[tg.Name] = tg
		if !strings.Contains(out, "| "+tg.Name+" | "+tg.Measured+" | "+tg.Target+" | "+tg.Status+" |") {
			t.Errorf("target %q not printed:\n%s", tg.Name, out)
		}
		want := TargetPass
		if tg.Value > tg.Limit {
			want = TargetFail
		}
		if tg.Status != want {
			t.Errorf("target %+v: status %s, want %s", tg, tg.Status, want)
		}
	}
	rss := byName["peak RSS, backfill"]
	if rss.Value != float64(res.BackfillPeakRSSBytes)/1e6 || rss.Limit != 600 {
		t.Errorf("backfill RSS target %+v from %d bytes", rss, res.BackfillPeakRSSBytes)
	}
	live := byName["live 20-block batch, trigger to commit, median, 8 partitions"]
	if live.Value != res.LiveMedianMs8 || live.Limit != 10 {
		t.Errorf("live target %+v from %v ms", live, res.LiveMedianMs8)
	}
	w := byName["backfill file:// / DuckDB writing the grouped result to Parquet, wall"]
	if w.Value != float64(res.FileBackfillMs)/float64(max(res.DuckDBCopyMs, 1)) || w.Limit != 1.0 {
		t.Errorf("yardstick target %+v from %d / %d ms", w, res.FileBackfillMs, res.DuckDBCopyMs)
	}
	for _, name := range []string{"backfill S3 / file://, wall", "backfill S3 / file://, CPU", "restart to first committed batch",
		"peak RSS, live (shrink + live at 8)", "backfill file:// / DuckDB writing the grouped result to Parquet, CPU"} {
		if _, ok := byName[name]; !ok {
			t.Errorf("no target %q in %+v", name, res.Targets)
		}
	}
}

// TestTargetStatus: a target is met at its limit and missed above it; one
// the run did not measure says so rather than passing.
func TestTargetStatus(t *testing.T) {
	if s := atMost("a", "<= 1", 1, 1, "1").Status; s != TargetPass {
		t.Errorf("at the limit: %s", s)
	}
	if s := atMost("a", "<= 1", 1.01, 1, "1.01").Status; s != TargetFail {
		t.Errorf("above the limit: %s", s)
	}
	ts := coreTargets(&BenchResult{Preset: "demo", BenchRound: BenchRound{BackfillMs: 1000, BackfillPeakRSSBytes: 900e6}})
	var out strings.Builder
	printTargets(&out, ts)
	for _, want := range []string{"| backfill file:// / DuckDB writing the grouped result to Parquet, wall and CPU | needs --duckdb | <= 1.0x | not measured |",
		"| peak RSS, backfill | 900 MB | <= 600 MB | fail |", "not measured\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in\n%s", want, out.String())
		}
	}
}

// TestBenchRoundsMedians: with rounds, each backfill figure is the median of
// its own runs (odd and even counts), rows/s follows the median wall time.
func TestBenchRoundsMedians(t *testing.T) {
	rs := []BenchRound{
		{BackfillMs: 300, BackfillCPUMs: 10, BackfillPeakRSSBytes: 7, FileBackfillMs: 5, FileBackfillCPUMs: 1, DuckDBCopyMs: 9, DuckDBCopyCPUMs: 4, DuckDBMs: 2, DuckDBCPUMs: 8},
		{BackfillMs: 100, BackfillCPUMs: 30, BackfillPeakRSSBytes: 9, FileBackfillMs: 1, FileBackfillCPUMs: 3, DuckDBCopyMs: 5, DuckDBCopyCPUMs: 6, DuckDBMs: 8, DuckDBCPUMs: 2},
		{BackfillMs: 200, BackfillCPUMs: 20, BackfillPeakRSSBytes: 8, FileBackfillMs: 3, FileBackfillCPUMs: 2, DuckDBCopyMs: 7, DuckDBCopyCPUMs: 5, DuckDBMs: 5, DuckDBCPUMs: 5},
	}
	r := &BenchResult{Blocks: 1000}
	r.setMedians(rs)
	if got := r.BenchRound; !reflect.DeepEqual(got, BenchRound{BackfillMs: 200, BackfillCPUMs: 20, BackfillPeakRSSBytes: 8, FileBackfillMs: 3, FileBackfillCPUMs: 2,
		DuckDBCopyMs: 7, DuckDBCopyCPUMs: 5, DuckDBMs: 5, DuckDBCPUMs: 5}) || r.BackfillRowsPerSec != 5000 {
		t.Fatalf("medians of three: %+v, %v rows/s", got, r.BackfillRowsPerSec)
	}
	r.setMedians(rs[:2])
	if r.BackfillMs != 200 || r.DuckDBCopyMs != 7 || r.FileBackfillCPUMs != 2 {
		t.Fatalf("medians of two: %+v", r.BenchRound)
	}
}

// TestBenchPrintsDuckDBUnderAMillisecond: a DuckDB run the clock saw as
// 0 ms (a small preset, a fast host) still prints its legs and ratios; it
// ran because it printed (CI once lost the spread's COPY rows this way).
func TestBenchPrintsDuckDBUnderAMillisecond(t *testing.T) {
	rs := []BenchRound{
		{BackfillMs: 300, BackfillCPUMs: 310, FileBackfillMs: 370, FileBackfillCPUMs: 361},
		{BackfillMs: 280, BackfillCPUMs: 300, FileBackfillMs: 340, FileBackfillCPUMs: 330, DuckDBCopyMs: 1, DuckDBCopyCPUMs: 1},
	}
	r := &BenchResult{Blocks: 7146, DuckDBOutput: "1624 rows", DuckDBCopyOutput: "1624 rows, threads 2", Rounds: rs}
	r.setMedians(rs)
	r.Targets = coreTargets(r)
	var out strings.Builder
	PrintBench(&out, r)
	for _, want := range []string{"| backfill file:// -> state -> Delta | ", "| DuckDB COPY (GROUP BY ALL) TO Parquet, same files (its process) | 0.0 s",
		"| backfill file://, CPU | ", "| DuckDB COPY, wall | 0.00 s | ", "| file:// / COPY, CPU | 330.00x | ", "DuckDB writing the grouped result to Parquet, CPU"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in\n%s", want, out.String())
		}
	}
}

// TestBenchRounds runs the bench with three rounds on one day, the S3
// backfill reading from ethstream serve-s3 in a process of its own and
// each backfill leg an ethstream bench-leg process (as the CLI runs them):
// three S3 backfills, each figure their median, a table
// row per round, and the scratch checkpoints of the first two gone (the
// live runs restart the last round's, through the in-process endpoint).
func TestBenchRounds(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end bench")
	}
	dir := t.TempDir()
	_, bin := buildBinary(t, filepath.Join(dir, "bin"))
	var out strings.Builder
	res, err := Bench(context.Background(), BenchOptions{WorkDir: dir, Preset: chain.LastDaysPreset(1), LiveBatches: 2, Rounds: 3, DuckDB: fakeDuck(t),
		ServeS3: []string{bin, "serve-s3"}, Leg: []string{bin, "bench-leg"}, Shapes: []string{"all"}, Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	if !res.EndpointOwnProcess || !strings.Contains(out.String(), "; the S3 endpoint, its own process: ") ||
		!strings.Contains(out.String(), "| backfill S3 / file://, CPU with the S3 endpoint's | ") {
		t.Fatalf("the S3 endpoint's own process is not reported:\n%s", out.String())
	}
	if len(res.Rounds) != 3 {
		t.Fatalf("%d rounds recorded, want 3", len(res.Rounds))
	}
	var ms []float64
	for i, x := range res.Rounds {
		if x.BackfillMs <= 0 || x.BackfillCPUMs <= 0 || x.BackfillPeakRSSBytes <= 0 || x.FileBackfillMs <= 0 || x.FileBackfillCPUMs <= 0 {
			t.Fatalf("round %d not measured: %+v", i+1, x)
		}
		ms = append(ms, float64(x.BackfillMs))
		if !strings.Contains(out.String(), fmt.Sprintf("\n| %d | %.1f s, ", i+1, float64(x.BackfillMs)/1000)) {
			t.Errorf("round %d not printed:\n%s", i+1, out.String())
		}
	}
	if res.BackfillMs != int64(median(ms)) || !strings.Contains(out.String(), "backfill legs: median of 3 rounds") {
		t.Fatalf("backfill %d ms, rounds %v; table:\n%s", res.BackfillMs, ms, out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "s3-backfill-round")); !os.IsNotExist(err) {
		t.Fatalf("a round's scratch checkpoint is left: %v", err)
	}
	if res.KeysAfterBackfill <= 0 || res.RepartitionKeys <= 0 || res.LiveMedianMs8 <= 0 {
		t.Fatalf("the live runs did not restart the last round's checkpoint: %+v", res)
	}
	// What a reader needs to trust a ratio: the rounds' spread, each
	// step's CPU and cores busy, the host's CPUs and load, DuckDB's threads.
	for _, want := range []string{"| figure over 3 rounds | min | median | max |", "| file:// / COPY, CPU | ",
		"| backfill file:// -> state -> Delta (last round): step | wall ms | of wall | CPU-s | cores busy (CPU/wall) |",
		"\n| read | ", "\n| finish | ", "\n| sinkWrite | ", "\n| outside steps | ",
		fmt.Sprintf("host: %d CPUs, GOMAXPROCS %d, DuckDB 2 threads; load average (1, 5, 15 min) at start ", runtime.NumCPU(), runtime.GOMAXPROCS(0))} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in\n%s", want, out.String())
		}
	}
	// The steps shown are the last round's, and add up to its figures.
	last := res.Rounds[len(res.Rounds)-1]
	var stepCPU, stepWall int64
	for _, st := range res.FileBackfillSteps {
		stepCPU, stepWall = stepCPU+st.CPUMs, stepWall+st.WallMs
	}
	if res.Host.DuckDBThreads != 2 || stepCPU != last.FileBackfillCPUMs || stepWall != last.FileBackfillMs || len(res.Host.LoadAfter) != 3 {
		t.Fatalf("host %+v; file:// backfill steps %+v sum to %d ms, %d CPU-ms; the last round %d ms, %d CPU-ms",
			res.Host, res.FileBackfillSteps, stepWall, stepCPU, last.FileBackfillMs, last.FileBackfillCPUMs)
	}
	// Every query shape ran, read the archive (two sources for dedup; the
	// stateless shape's table for delta-to-delta) and was timed beside
	// DuckDB's job.
	if len(res.Shapes) != len(benchShapes) {
		t.Fatalf("shapes %+v, want one per shape of %v", res.Shapes, ShapeNames())
	}
	for _, r := range res.Shapes {
		least := res.Blocks
		switch r.Name {
		case "dedup":
			least = 2 * res.Blocks
		case "delta-to-delta":
			least = 1
		}
		if r.Ms <= 0 || r.InputRows < least || r.DuckDBOut == "" {
			t.Errorf("shape %s: %+v, want at least %d input rows and DuckDB's run", r.Name, r, least)
		}
		if !strings.Contains(out.String(), "| shape "+r.Name+": ethstream / DuckDB, wall | ") || !strings.Contains(out.String(), "\n| "+r.Name+" | ") {
			t.Errorf("shape %s not printed:\n%s", r.Name, out.String())
		}
	}
	checkTargets(t, res, out.String())
}

// TestCheckShapes: an unknown --shape is refused before anything runs.
func TestCheckShapes(t *testing.T) {
	if err := CheckShapes([]string{"all", "stateless", "dedup"}); err != nil {
		t.Fatal(err)
	}
	if err := CheckShapes([]string{"all", "join", "session", "transactions"}); err != nil {
		t.Fatal(err)
	}
	if err := CheckShapes([]string{"joins"}); errcode.Code(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), "burned-fees") {
		t.Fatalf("unknown shape: %v", err)
	}
	if err := CheckAtScale([]string{"all", "join", "dedup"}); err != nil {
		t.Fatal(err)
	}
	if err := CheckAtScale([]string{"aggregation"}); errcode.Code(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), "join, dedup") {
		t.Fatalf("unknown operator: %v", err)
	}
}

// fakeDuck writes a script that stands in for scripts/duckref's binary:
// DuckDB is a separate module (cgo), and the script still exercises the
// file:// backfill, the timing of the child process and the ratios.
func fakeDuck(t *testing.T) string {
	t.Helper()
	duck := filepath.Join(t.TempDir(), "duckref")
	if err := os.WriteFile(duck, []byte("#!/bin/sh\nif [ \"$1\" = copy ]; then echo \"duckdb copy: $2 to $3 (threads 2)\"; : > \"$3\"; elif [ \"$1\" = copysql ]; then echo \"duckdb copysql: 1 rows written to $2 (threads 2)\"; : > \"$2\"; else echo \"duckdb: globbed $1\"; fi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return duck
}

// TestStartEndpointThatDoesNotServe: a command that exits without printing
// an address fails the bench's start with its output, and leaves no process.
func TestStartEndpointThatDoesNotServe(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	_, err = startEndpoint(context.Background(), []string{sh, "-c", "echo no such bucket >&2; exit 3", "serve"}, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "exited without serving") || !strings.Contains(err.Error(), "no such bucket") {
		t.Fatalf("startEndpoint of a failing command: %v", err)
	}
}

// TestStartEndpointInADirectoryWithSpaces: the endpoint's address is read
// from its "serving ROOT at URL" line whatever the root's path holds, and
// stop ends the process.
func TestStartEndpointInADirectoryWithSpaces(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	script := `echo "serving $2 at http://127.0.0.1:4321 (unauthenticated; Ctrl-C to stop)"; exec sleep 30`
	ep, err := startEndpoint(context.Background(), []string{sh, "-c", script, "serve"}, filepath.Join(t.TempDir(), "my bench", "s3"))
	if err != nil {
		t.Fatal(err)
	}
	ep.stop()
	if ep.url != "http://127.0.0.1:4321" {
		t.Fatalf("endpoint at %q, want http://127.0.0.1:4321", ep.url)
	}
	select {
	case <-ep.done:
	default:
		t.Fatal("the endpoint's process outlived stop")
	}
}
