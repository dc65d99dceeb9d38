package demo

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/cputime"
	"github.com/ethstream/ethstream/pipeline"
	"github.com/ethstream/ethstream/stream"
)

// State at scale for every operator (issue 43, target 5): the join's and
// the deduplication's state holding a key per block of the archive (26
// million on the seed preset), then repartitioned 200 -> 8 at a restart, as
// the aggregation's one-key-per-block run does (bench_keys.go). Neither
// query evicts anything before the restart, so the repartition moves every
// key the backfill wrote.
const (
	// AtScaleJoinQuery keeps every block on both sides: an inner join
	// without watermarks or a time range keeps its state for ever (Spark's
	// rule), each side a row per block keyed by its join key.
	AtScaleJoinQuery = "SELECT c.number, p.number AS parent_number FROM child AS c JOIN parent AS p ON c.parent_hash = p.hash"
	// AtScaleDedupQuery counts the blocks left by dropDuplicates(hash)
	// without a watermark: a key per distinct hash, kept for ever.
	AtScaleDedupQuery   = "SELECT count(*) AS blocks FROM blocks"
	atScaleDedupColumns = "hash"
)

// AtScaleOperators are the operators --state-at-scale names.
var AtScaleOperators = []string{"join", "dedup"}

// AtScaleLimitGB is the target's peak RSS, backfill and repartition.
const AtScaleLimitGB = 1.5

// AtScaleResult is one operator's run: its backfill (200 state partitions)
// and the restart that repartitions its state to 8.
type AtScaleResult struct {
	Operator   string `json:"operator"`
	Query      string `json:"query"`
	Batches    int    `json:"batches"`
	InputRows  int64  `json:"inputRows"`
	BackfillMs int64  `json:"backfillMs"`
	CPUMs      int64  `json:"cpuMs"`
	// Keys is every operator's state rows after the backfill (the last
	// data batch's numRowsTotal, summed over operators).
	Keys         int64 `json:"keys"`
	PeakRSSBytes int64 `json:"peakRssBytes"`
	// The repartition: its duration, the keys before and after (summed
	// over the operators it moved) and the restart's peak RSS.
	RepartitionMs       int64 `json:"repartitionMs"`
	KeysBefore          int64 `json:"keysBefore"`
	KeysAfter           int64 `json:"keysAfter"`
	RepartitionRSSBytes int64 `json:"repartitionPeakRssBytes"`
	StateCacheBytes     int64 `json:"stateCacheBytes"`
	// The offline repartition 200 -> 8 of a copy of the backfill's
	// checkpoint (`ethstream checkpoint repartition`): its duration, keys
	// before and after, and its peak RSS.
	OfflineMs       int64 `json:"offlineRepartitionMs"`
	OfflineBefore   int64 `json:"offlineKeysBefore"`
	OfflineAfter    int64 `json:"offlineKeysAfter"`
	OfflineRSSBytes int64 `json:"offlineRepartitionPeakRssBytes"`
	// The state's rows and their digest (stateDigest) after the backfill
	// and after each repartition: every row kept is the same digest.
	Backfilled stateDigest `json:"backfilledState"`
	Online     stateDigest `json:"onlineRepartitionedState"`
	Offline    stateDigest `json:"offlineRepartitionedState"`
}

// CheckAtScale refuses an unknown --state-at-scale operator before anything
// runs.
func CheckAtScale(names []string) error {
	for _, n := range names {
		if n != "all" && !slices.Contains(AtScaleOperators, n) {
			return errcode.New(errcode.InvalidArgument, "", "pass one of: all, "+strings.Join(AtScaleOperators, ", "),
				"--state-at-scale %q is not an operator the bench scales", n)
		}
	}
	return nil
}

func init() {
	benchStages = append(benchStages, benchStage{name: "join and deduplication state at scale (--state-at-scale)", run: benchAtScale})
}

// atScaleConfig is operator op's query over src (the archive's blocks) on
// a checkpoint under dir, at 200 state partitions.
func atScaleConfig(op, dir string, src pipeline.SourceSpec) pipeline.Config {
	cfg := pipeline.Config{Checkpoint: filepath.Join(dir, "checkpoint"), Table: filepath.Join(dir, "table"),
		LocalDir: filepath.Join(dir, "state-cache"), Conf: EvolutionConf(200), Trigger: engine.Trigger{Kind: engine.AvailableNow}}
	switch op {
	case "join":
		child, parent := src, src
		child.Name, parent.Name = "child", "parent"
		cfg.Sources, cfg.Query, cfg.OutputMode = []pipeline.SourceSpec{child, parent}, AtScaleJoinQuery, "append"
	case "dedup":
		cfg.Sources, cfg.Query, cfg.OutputMode, cfg.DropDuplicates = []pipeline.SourceSpec{src}, AtScaleDedupQuery, "complete", atScaleDedupColumns
	default:
		panic(fmt.Sprintf("demo: no at-scale query for operator %q", op))
	}
	return cfg
}

// benchAtScale runs each operator BenchOptions.StateAtScale names.
func benchAtScale(ctx context.Context, b *benchRun, res *BenchResult) error {
	for _, op := range AtScaleOperators {
		if !slices.Contains(b.o.StateAtScale, op) && !slices.Contains(b.o.StateAtScale, "all") {
			continue
		}
		dir := filepath.Join(b.o.WorkDir, "atscale-"+op)
		src := b.env.ArchiveSource(cmp.Or(b.o.KeysFilesPerTrigger, 40))
		fmt.Fprintf(b.o.Log, "%s state at scale: backfill at 200 partitions ...\n", op)
		r, err := runAtScale(ctx, b.o.Log, op, dir, src, b.runConfig)
		if err != nil {
			return err
		}
		res.AtScale = append(res.AtScale, *r)
		res.Targets = append(res.Targets, atScaleTargets(r)...)
	}
	return nil
}

// runAtScale runs op's backfill on a checkpoint of its own under dir, then
// its restart at 8 partitions, and removes dir after.
func runAtScale(ctx context.Context, log io.Writer, op, dir string, src pipeline.SourceSpec,
	run func(context.Context, pipeline.Config) (*recorder, error)) (*AtScaleResult, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("clear %s: %w", dir, err)
	}
	defer os.RemoveAll(dir)
	cfg := atScaleConfig(op, dir, src)
	r := &AtScaleResult{Operator: op, Query: cfg.Query}
	resetPeakRSS()
	t0, c0 := time.Now(), cputime.Self()
	rec, err := run(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s at scale, backfill: %w", op, err)
	}
	r.BackfillMs, r.CPUMs, r.PeakRSSBytes = time.Since(t0).Milliseconds(), (cputime.Self() - c0).Milliseconds(), peakRSS()
	r.Batches = len(rec.events)
	for i := len(rec.events) - 1; i >= 0; i-- {
		if p := rec.events[i]; p.Kind() == stream.KindData {
			for _, so := range p.StateOperators {
				r.Keys += so.NumRowsTotal
			}
			break
		}
	}
	last := int64(-1)
	for _, p := range rec.events {
		r.InputRows += p.NumInputRows
		last = max(last, p.BatchID)
	}
	r.StateCacheBytes = dirBytes(cfg.LocalDir)
	if r.Backfilled, err = digestState(ctx, cfg.Checkpoint, last); err != nil {
		return nil, err
	}

	fmt.Fprintf(log, "%s state at scale: offline repartition of a copy to 8 partitions ...\n", op)
	offDir := filepath.Join(dir, "offline")
	off, cp, err := repartitionOffline(ctx, cfg.Checkpoint, offDir, 8)
	if err != nil {
		return nil, fmt.Errorf("%s at scale: %w", op, err)
	}
	r.OfflineMs, r.OfflineBefore, r.OfflineAfter, r.OfflineRSSBytes = off.ms, off.before, off.after, off.rss
	if r.Offline, err = digestState(ctx, cp, off.batch); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(offDir); err != nil {
		return nil, fmt.Errorf("clear %s: %w", offDir, err)
	}

	fmt.Fprintf(log, "%s state at scale: restart at 8 partitions (repartition %d keys) ...\n", op, r.Keys)
	cfg.Conf["spark.sql.streaming.stateStore.partitions"] = "8"
	debug.FreeOSMemory() // as the offline leg: this run's peak alone
	resetPeakRSS()
	if rec, err = run(ctx, cfg); err != nil {
		return nil, fmt.Errorf("%s at scale, restart at 8 partitions: %w", op, err)
	}
	r.RepartitionRSSBytes = peakRSS()
	r.RepartitionMs, r.KeysBefore, r.KeysAfter = repartitionOf(rec.events)
	for _, p := range rec.events {
		if p.Kind() == stream.KindRepartition {
			if r.Online, err = digestState(ctx, cfg.Checkpoint, p.BatchID); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

// repartitionOf returns the repartition's duration and the keys it read
// and wrote, summed over the operators it moved, from a restart's events;
// -1 keys when no repartition ran.
func repartitionOf(events []*stream.Progress) (ms, before, after int64) {
	before, after = -1, -1
	for _, p := range events {
		if p.Kind() != stream.KindRepartition {
			continue
		}
		ms, before, after = p.DurationMs["controlBatch.REPARTITION"], 0, 0
		for _, so := range p.StateOperators {
			before += so.CustomMetrics["keysBefore"]
			after += so.CustomMetrics["keysAfter"]
		}
	}
	return ms, before, after
}

// keysLost is the keys a repartition lost: every key (at least one) when
// none was seen or it read another count than the backfill left (keys).
func keysLost(keys, before, after int64) float64 {
	if before < 0 || before != keys {
		return float64(max(keys, 1))
	}
	return math.Abs(float64(before - after))
}

// atScaleTargets: the peak RSS of the backfill and the repartition, and the
// keys the repartition lost (a repartition not seen, or one that read
// another count than the backfill left, loses every key).
func atScaleTargets(r *AtScaleResult) []Target {
	lost := max(keysLost(r.Keys, r.KeysBefore, r.KeysAfter), rowsLost(r.Backfilled, r.Online))
	offLost := max(keysLost(r.Keys, r.OfflineBefore, r.OfflineAfter), rowsLost(r.Backfilled, r.Offline))
	peak := float64(max(r.PeakRSSBytes, r.RepartitionRSSBytes, r.OfflineRSSBytes)) / 1e9
	return []Target{
		atMost(fmt.Sprintf("%s state at scale (%d keys): peak RSS, backfill and repartition 200 -> 8 (online, offline)", r.Operator, r.Keys),
			fmt.Sprintf("<= %.1f GB", AtScaleLimitGB), peak, AtScaleLimitGB,
			fmt.Sprintf("%.2f GB (backfill %.2f GB, online %.2f GB, offline %.2f GB)", peak, float64(r.PeakRSSBytes)/1e9,
				float64(r.RepartitionRSSBytes)/1e9, float64(r.OfflineRSSBytes)/1e9)),
		atMost(fmt.Sprintf("%s state at scale: rows lost by the repartition 200 -> 8 at a restart", r.Operator), "0", lost, 0,
			fmt.Sprintf("%d before, %d after (digest %s), %d ms", r.KeysBefore, r.KeysAfter, sameDigest(r.Backfilled, r.Online), r.RepartitionMs)),
		atMost(fmt.Sprintf("%s state at scale: rows lost by the offline repartition 200 -> 8", r.Operator), "0", offLost, 0,
			fmt.Sprintf("%d before, %d after (digest %s), %d ms", r.OfflineBefore, r.OfflineAfter, sameDigest(r.Backfilled, r.Offline), r.OfflineMs)),
	}
}

// sameDigest says whether a repartition's state digest is the backfill's.
func sameDigest(before, after stateDigest) string {
	if before == after {
		return "equal"
	}
	return fmt.Sprintf("differs: %d rows %016x, were %d rows %016x", after.Rows, after.Sum, before.Rows, before.Sum)
}

// printStateAtScale prints each operator's run at scale.
func printStateAtScale(w io.Writer, rs []AtScaleResult) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n| state at scale | query | input rows | backfill at 200 partitions | keys in state | Pebble cache on disk | peak RSS, backfill; restart; offline | repartition 200 -> 8 at a restart | offline (`checkpoint repartition`) |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(w, "| %s | %s | %d | %.1f s, %.1f CPU-s, %d batches | %d | %.0f MB | %.0f MB; %.0f MB; %.0f MB | %d ms, %d keys before, %d after, digest %s | %d ms, %d keys before, %d after, digest %s |\n",
			r.Operator, r.Query, r.InputRows, float64(r.BackfillMs)/1000, float64(r.CPUMs)/1000, r.Batches, r.Keys,
			float64(r.StateCacheBytes)/1e6, float64(r.PeakRSSBytes)/1e6, float64(r.RepartitionRSSBytes)/1e6, float64(r.OfflineRSSBytes)/1e6,
			r.RepartitionMs, r.KeysBefore, r.KeysAfter, sameDigest(r.Backfilled, r.Online),
			r.OfflineMs, r.OfflineBefore, r.OfflineAfter, sameDigest(r.Backfilled, r.Offline))
	}
}
