package demo

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/internal/cputime"
	"github.com/ethstream/ethstream/pipeline"
	"github.com/ethstream/ethstream/stream"
)

// KeysQuery holds one state key per block (its hash) for the whole archive:
// a 3650-day window never closes under KeysWatermark (the archive spans
// about 11 years and windows are aligned to the epoch, so every block falls
// in a window ending after the watermark), and in append mode nothing is
// emitted until a window closes, so the run measures the state alone: every
// block's key written once into Pebble and the checkpoint, none evicted.
const (
	KeysQuery = "SELECT window(block_ts, '3650 days') AS window, hash, count(*) AS count " +
		"FROM blocks GROUP BY window(block_ts, '3650 days'), hash"
	KeysWatermark  = "block_ts, 3650 days"
	KeysOutputMode = "append"
)

// KeysResult is the one-key-per-block run: its backfill (S3, 200
// partitions) and a restart that repartitions its state to 8.
type KeysResult struct {
	Keys         int64   `json:"keys"`
	Batches      int     `json:"batches"`
	BackfillMs   int64   `json:"backfillMs"`
	CPUMs        int64   `json:"cpuMs"`
	PeakRSSBytes int64   `json:"peakRssBytes"`
	RowsPerSec   float64 `json:"rowsPerSec"`
	// StateFileBytes sums the state's checkpoint files after the backfill;
	// CacheBytes is the Pebble cache's size on disk (LocalDir).
	StateFileBytes int64 `json:"stateFileBytes"`
	CacheBytes     int64 `json:"cacheBytes"`
	// Commits is each backfill batch's state commit.
	Commits []KeysCommit `json:"commits"`
	// BackgroundSnapshots counts the snapshots of committed versions the
	// state store wrote off the commit path (a .snap beside a .snapmeta,
	// state/doc.go) still in the state directory after the backfill, and
	// BackgroundSnapshotMaxBytes is the largest: no commit wrote them.
	BackgroundSnapshots        int   `json:"backgroundSnapshots"`
	BackgroundSnapshotMaxBytes int64 `json:"backgroundSnapshotMaxBytes"`
	// The repartition 200 -> 8 at the restart: its duration, the keys the
	// old partitions held and the new ones hold, and the restart's peak RSS.
	RepartitionMs      int64 `json:"repartitionMs"`
	KeysBefore         int64 `json:"keysBefore"`
	KeysAfter          int64 `json:"keysAfter"`
	RepartitionRSSByte int64 `json:"repartitionPeakRssBytes"`
}

// KeysCommit is one batch's state commit: the keys it changed, the data file
// it wrote (a delta, or a snapshot of the whole state), and its time.
type KeysCommit struct {
	Batch       int64  `json:"batch"`
	KeysChanged int64  `json:"keysChanged"`
	Kind        string `json:"kind"`
	Bytes       int64  `json:"bytes"`
	CommitMs    int64  `json:"commitMs"`
}

func init() {
	benchStages = append(benchStages, benchStage{name: "one state key per block (--keys-per-block)", run: benchKeys})
}

// benchKeys runs KeysQuery's backfill on a checkpoint of its own, then a
// restart at 8 partitions (the repartition), and records its targets.
func benchKeys(ctx context.Context, b *benchRun, res *BenchResult) error {
	if !b.o.KeysPerBlock {
		return nil
	}
	dir := filepath.Join(b.o.WorkDir, "keys")
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clear %s: %w", dir, err)
	}
	cfg := pipeline.Config{Checkpoint: filepath.Join(dir, "checkpoint"), Table: filepath.Join(dir, "table"),
		LocalDir: filepath.Join(dir, "state-cache"), Sources: []pipeline.SourceSpec{b.env.ArchiveSource(cmp.Or(b.o.KeysFilesPerTrigger, 40))}, Conf: b.conf,
		Trigger: engine.Trigger{Kind: engine.AvailableNow}, Query: KeysQuery, WithWatermark: KeysWatermark,
		OutputMode: KeysOutputMode}
	k := &KeysResult{}
	resetPeakRSS()
	t0, c0 := time.Now(), cputime.Self()
	rec, err := b.runConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("backfill: %w", err)
	}
	k.BackfillMs, k.CPUMs, k.PeakRSSBytes = time.Since(t0).Milliseconds(), (cputime.Self() - c0).Milliseconds(), peakRSS()
	k.RowsPerSec = float64(res.Blocks) / time.Since(t0).Seconds()
	k.Batches = len(rec.events)
	if n := len(rec.events); n > 0 && len(rec.events[n-1].StateOperators) > 0 {
		k.Keys = rec.events[n-1].StateOperators[0].NumRowsTotal
	}
	stateDir := filepath.Join(cfg.Checkpoint, "state", engine.OperatorID)
	if k.Commits, k.StateFileBytes, err = keysCommits(stateDir, rec.events, k); err != nil {
		return err
	}
	k.CacheBytes = dirBytes(cfg.LocalDir)

	fmt.Fprintf(b.o.Log, "restart at 8 partitions (repartition %d keys) ...\n", k.Keys)
	cfg.Conf = clone(b.conf)
	cfg.Conf["spark.sql.streaming.stateStore.partitions"] = "8"
	resetPeakRSS()
	if rec, err = b.runConfig(ctx, cfg); err != nil {
		return fmt.Errorf("restart at 8 partitions: %w", err)
	}
	k.RepartitionRSSByte = peakRSS()
	k.RepartitionMs, k.KeysBefore, k.KeysAfter = repartitionOf(rec.events)
	res.Keys = k
	res.Targets = append(res.Targets, keysTargets(k)...)
	return os.RemoveAll(dir)
}

// keysCommits pairs each batch's keys changed and commit time (its progress
// event) with the data file its state version wrote (<version>.<attempt>
// .delta or .snap in stateDir), and sums the state directory's bytes. A
// .snap with a .snapmeta beside it is a background snapshot, not a
// commit's file: it is counted into k's BackgroundSnapshots instead.
func keysCommits(stateDir string, events []*stream.Progress, k *KeysResult) ([]KeysCommit, int64, error) {
	ents, err := os.ReadDir(stateDir)
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", stateDir, err)
	}
	names := map[string]bool{}
	for _, e := range ents {
		names[e.Name()] = true
	}
	files := map[int64]KeysCommit{}
	var total int64
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			return nil, 0, fmt.Errorf("stat %s: %w", filepath.Join(stateDir, e.Name()), err)
		}
		total += info.Size()
		name := e.Name()
		kind := strings.TrimPrefix(filepath.Ext(name), ".")
		if kind != "delta" && kind != "snap" {
			continue
		}
		if kind == "snap" && names[strings.TrimSuffix(name, ".snap")+".snapmeta"] {
			k.BackgroundSnapshots++
			k.BackgroundSnapshotMaxBytes = max(k.BackgroundSnapshotMaxBytes, info.Size())
			continue
		}
		v, err := strconv.ParseInt(name[:strings.IndexByte(name, '.')], 10, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("state file %s: %w", filepath.Join(stateDir, name), err)
		}
		files[v] = KeysCommit{Batch: v, Kind: kind, Bytes: info.Size()}
	}
	var cs []KeysCommit
	for _, p := range events {
		c, ok := files[p.BatchID]
		if !ok || len(p.StateOperators) == 0 {
			continue
		}
		c.KeysChanged, c.CommitMs = p.StateOperators[0].NumRowsUpdated, p.StateOperators[0].CommitTimeMs
		cs = append(cs, c)
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].Batch < cs[j].Batch })
	return cs, total, nil
}

// dirBytes sums the sizes of the regular files under dir (0 if unreadable:
// a figure, not a check).
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// keysTargets: the run's peak RSS, the keys the repartition lost, and how
// far the commits are from proportional to the keys each changed (the
// largest bytes written per changed key over the smallest; a snapshot
// writes every key, not only the changed ones).
func keysTargets(k *KeysResult) []Target {
	lost := keysLost(k.Keys, k.KeysBefore, k.KeysAfter)
	lo, hi := perKeySpread(k.Commits)
	// The run completes within the limit only if its restart does too: the
	// repartition of every key is part of it.
	peak := float64(max(k.PeakRSSBytes, k.RepartitionRSSByte)) / 1e9
	return []Target{
		atMost(fmt.Sprintf("one key per block (%d keys): peak RSS, backfill and repartition", k.Keys), "<= 1.5 GB",
			peak, 1.5, fmt.Sprintf("%.2f GB (backfill %.2f GB)", peak, float64(k.PeakRSSBytes)/1e9)),
		atMost("one key per block: state bytes written per changed key, largest commit / smallest", "<= 2x",
			hi/max(lo, 1e-9), 2, fmt.Sprintf("%.1fx (%.0f-%.0f B/key)", hi/max(lo, 1e-9), lo, hi)),
		atMost("one key per block: keys lost by the repartition 200 -> 8", "0", lost, 0,
			fmt.Sprintf("%d before, %d after, %d ms", k.KeysBefore, k.KeysAfter, k.RepartitionMs)),
	}
}

// perKeySpread returns the smallest and largest bytes per changed key over
// the commits that changed keys.
func perKeySpread(cs []KeysCommit) (lo, hi float64) {
	for _, c := range cs {
		if c.KeysChanged == 0 {
			continue
		}
		r := float64(c.Bytes) / float64(c.KeysChanged)
		if lo == 0 || r < lo {
			lo = r
		}
		hi = max(hi, r)
	}
	return lo, hi
}

// printKeys prints the one-key-per-block run beside the reference backfill.
func printKeys(w io.Writer, r *BenchResult) {
	k := r.Keys
	if k == nil {
		return
	}
	fmt.Fprintf(w, "\none key per block: --query %q --with-watermark %q --output-mode %s\n\n", KeysQuery, KeysWatermark, KeysOutputMode)
	fmt.Fprintf(w, "| one key per block | measured |\n|---|---|\n")
	fmt.Fprintf(w, "| backfill S3 -> state, 200 partitions | %.1f s, %.1f CPU-s, %.0f rows/s (reference query: %.0f rows/s) |\n",
		float64(k.BackfillMs)/1000, float64(k.CPUMs)/1000, k.RowsPerSec, r.BackfillRowsPerSec)
	fmt.Fprintf(w, "| keys in state | %d (%d batches) |\n", k.Keys, k.Batches)
	fmt.Fprintf(w, "| state checkpoint files; Pebble cache on disk | %.0f MB; %.0f MB (%.0f B/key) |\n",
		float64(k.StateFileBytes)/1e6, float64(k.CacheBytes)/1e6, float64(k.CacheBytes)/float64(max(k.Keys, 1)))
	fmt.Fprintf(w, "| peak RSS, backfill; restart with the repartition | %.0f MB; %.0f MB |\n",
		float64(k.PeakRSSBytes)/1e6, float64(k.RepartitionRSSByte)/1e6)
	fmt.Fprintf(w, "| repartition 200 -> 8 | %d ms, %d keys before, %d after |\n", k.RepartitionMs, k.KeysBefore, k.KeysAfter)
	fmt.Fprintf(w, "| snapshots written off the commit path, after the backfill | %d, largest %.1f MB |\n",
		k.BackgroundSnapshots, float64(k.BackgroundSnapshotMaxBytes)/1e6)
	for _, c := range k.Commits {
		fmt.Fprintf(w, "| state commit of batch %d | %d keys changed, %s of %.1f MB, %d ms |\n",
			c.Batch, c.KeysChanged, c.Kind, float64(c.Bytes)/1e6, c.CommitMs)
	}
}
