package demo

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/ethstream/ethstream/errcode"
)

// Target is one target of docs/contracts.md (Targets) beside what the bench
// measured: met when Value <= Limit (every target is an upper bound).
type Target struct {
	Name     string  `json:"name"`
	Target   string  `json:"target"`
	Measured string  `json:"measured"`
	Value    float64 `json:"value"`
	Limit    float64 `json:"limit"`
	// Status is TargetPass, TargetFail or TargetNotMeasured (the bench did
	// not run what measures it, e.g. no --duckdb).
	Status string `json:"status"`
}

// The statuses of a Target.
const (
	TargetPass        = "pass"
	TargetFail        = "fail"
	TargetNotMeasured = "not measured"
)

// atMost is the target name <= limit, measured as value (shown as shown).
func atMost(name, target string, value, limit float64, shown string) Target {
	t := Target{Name: name, Target: target, Measured: shown, Value: value, Limit: limit, Status: TargetPass}
	if value > limit {
		t.Status = TargetFail
	}
	return t
}

// notMeasured is a target the run did not measure, and why.
func notMeasured(name, target, why string) Target {
	return Target{Name: name, Target: target, Measured: why, Status: TargetNotMeasured}
}

// benchStage is a measurement run after the built-in ones (backfill,
// yardstick, live); it records its figures as target rows of its own in
// res.Targets. Files measuring targets of their own (bench_live.go,
// bench_freshness.go) append a stage to benchStages in an init function, so
// that adding a target touches no other file.
type benchStage struct {
	name string
	run  func(ctx context.Context, b *benchRun, res *BenchResult) error
}

var benchStages []benchStage

// runStages runs every registered stage in order.
func (b *benchRun) runStages(ctx context.Context, res *BenchResult) error {
	for _, s := range benchStages {
		fmt.Fprintf(b.o.Log, "%s ...\n", s.name)
		if err := s.run(ctx, b, res); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return nil
}

// coreTargets are the targets the built-in measurements decide (issue 29's
// backfill, RSS and live targets and the restart and repartition ones kept
// from before), in the order docs/contracts.md lists them.
func coreTargets(r *BenchResult) []Target {
	x := func(v float64) string { return fmt.Sprintf("%.2fx", v) }
	mb := func(b int64) float64 { return float64(b) / 1e6 }
	var ts []Target
	if r.Preset == "seed" {
		ts = append(ts, atMost("backfill, seed preset, S3 -> state -> Delta, wall", "<= 60 s",
			float64(r.BackfillMs)/1000, 60, fmt.Sprintf("%.1f s", float64(r.BackfillMs)/1000)))
	}
	const duck = "backfill file:// / DuckDB writing the grouped result to Parquet"
	// The ratios divide by at least 1 ms.
	if r.ranDuckDB() {
		w, c := ratio(r.FileBackfillMs, r.DuckDBCopyMs), ratio(r.FileBackfillCPUMs, r.DuckDBCopyCPUMs)
		ts = append(ts, atMost(duck+", wall", "<= 1.0x", w, 1.0, x(w)), atMost(duck+", CPU", "<= 1.0x", c, 1.0, x(c)))
	} else {
		ts = append(ts, notMeasured(duck+", wall and CPU", "<= 1.0x", "needs --duckdb"))
	}
	if r.ranDuckDB() {
		w, c := ratio(r.BackfillMs, r.FileBackfillMs), ratio(r.BackfillCPUMs, r.FileBackfillCPUMs)
		ts = append(ts, atMost("backfill S3 / file://, wall", "<= 1.1x", w, 1.1, x(w)),
			atMost("backfill S3 / file://, CPU", "<= 1.1x", c, 1.1, x(c)))
	} else {
		ts = append(ts, notMeasured("backfill S3 / file://, wall and CPU", "<= 1.1x", "needs --duckdb"))
	}
	ts = append(ts,
		atMost("peak RSS, backfill", "<= 600 MB", mb(r.BackfillPeakRSSBytes), 600, fmt.Sprintf("%.0f MB", mb(r.BackfillPeakRSSBytes))),
		atMost("restart to first committed batch", "<= 1 s", float64(r.RestartToFirstCommitMs), 1000,
			fmt.Sprintf("%d ms", r.RestartToFirstCommitMs)),
		atMost(fmt.Sprintf("repartition 200 -> 8 (%d keys)", r.RepartitionKeys), "<= 100 ms", float64(r.RepartitionMs), 100,
			fmt.Sprintf("%d ms", r.RepartitionMs)),
		atMost("live 20-block batch, trigger to commit, median, 8 partitions", "<= 10 ms", r.LiveMedianMs8, 10,
			fmt.Sprintf("%.0f ms", r.LiveMedianMs8)),
		atMost("peak RSS, live (shrink + live at 8)", "<= 200 MB", mb(r.LivePeakRSSBytes), 200,
			fmt.Sprintf("%.0f MB", mb(r.LivePeakRSSBytes))))
	return ts
}

// printTargets prints the target table and a one-line tally.
func printTargets(w io.Writer, ts []Target) {
	fmt.Fprintf(w, "\n| target | measured | limit | result |\n|---|---|---|---|\n")
	n := map[string]int{}
	for _, t := range ts {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", t.Name, t.Measured, t.Target, t.Status)
		n[t.Status]++
	}
	fmt.Fprintf(w, "\ntargets: %d pass, %d fail, %d not measured\n", n[TargetPass], n[TargetFail], n[TargetNotMeasured])
}

// MissedTargets is nil when no target failed, and otherwise the coded error
// the bench command exits with (after printing its tables and writing its
// JSON): a script or CI job running the bench then sees a missed target in
// the exit status instead of having to parse the table. A target the run did
// not measure is not a failure.
func MissedTargets(ts []Target) error {
	var missed []string
	for _, t := range ts {
		if t.Status == TargetFail {
			missed = append(missed, fmt.Sprintf("%s: %s, limit %s", t.Name, t.Measured, t.Target))
		}
	}
	if len(missed) == 0 {
		return nil
	}
	return errcode.New(errcode.TargetMissed, "",
		"the limits are for the 2-core reference machine (docs/contracts.md, Targets): run the bench on an idle machine, and read its phase tables for where the time goes",
		"%d of %d targets missed (%s)", len(missed), len(ts), strings.Join(missed, "; "))
}
