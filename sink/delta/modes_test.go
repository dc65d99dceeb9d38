package delta

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	randv2 "math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/ethstream/ethstream/stream"
)

// modeBatches are random batches of the reference schema: keys drawn from a
// small space so that batches repeat keys, and in complete mode a few rows
// with sign -1 (a group a retraction emptied).
func modeBatches(r *rand.Rand, n int, complete bool) [][]refRow {
	var out [][]refRow
	for range n {
		var rows []refRow
		for range r.Intn(9) {
			x := row(r.Intn(4), "s", minerName(r.Intn(5)), int64(r.Intn(100)))
			if complete && r.Intn(6) == 0 {
				x.del = true
			}
			rows = append(rows, x)
		}
		out = append(out, rows)
	}
	return out
}

func modeBatch(rows []refRow) *stream.Batch {
	b := mkBatch(rows)
	for i, x := range rows {
		if x.del {
			if b.Signs == nil {
				b.Signs = make([]int8, len(rows))
				for j := range b.Signs {
					b.Signs[j] = 1
				}
			}
			b.Signs[i] = -1
		}
	}
	return b
}

// modeOracle is what the table must hold after batches, computed
// independently of the sink: in append mode every row of every batch (a
// multiset); in complete mode the last batch only, the last row of each key,
// keys whose last row is a deletion left out.
func modeOracle(batches [][]refRow, complete bool) []string {
	var out []string
	if !complete {
		for _, b := range batches {
			for _, x := range b {
				out = append(out, fmt.Sprint(x.WS, x.Miner, x.Count))
			}
		}
	} else if len(batches) > 0 {
		last := map[oracleKey]refRow{}
		for _, x := range batches[len(batches)-1] {
			last[oracleKey{x.WS, x.Source, x.Miner}] = x
		}
		for _, x := range last {
			if !x.del {
				out = append(out, fmt.Sprint(x.WS, x.Miner, x.Count))
			}
		}
	}
	sort.Strings(out)
	return out
}

// modeTableRows reads the table's rows (duplicates kept).
func modeTableRows(t testing.TB, fs vfs.FS, dir string) []string {
	t.Helper()
	ctx := context.Background()
	tbl, err := OpenFS(ctx, fs, dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := tbl.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	if err := s.Rows(ctx, func(r map[string]any) error {
		w := r["window"].(map[string]any)
		out = append(out, fmt.Sprint(w["start"].(interface{ UnixMicro() int64 }).UnixMicro(), r["miner"], r["count"]))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func openModeSink(t testing.TB, fs vfs.FS, dir, mode string) (*MergeSink, error) {
	s, err := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: dir, FS: fs, TargetFileRows: 3, Logger: quietLog, OutputMode: mode})
	if err != nil {
		t.Fatal(err)
	}
	return s, s.Open(context.Background(), stream.SinkEnv{QueryID: "q", Locked: true})
}

// TestStreamingModesMatchOracle: Spark's DeltaSink in output modes append
// and complete, over random batches of a keyed output, against an
// independent oracle after every batch; every batch is one commit with its
// txn, a re-run of any batch writes nothing, and the history reads as
// Spark's (STREAMING UPDATE, outputMode Append/Complete, isBlindAppend
// true for an append only; a complete commit removes every earlier file).
func TestStreamingModesMatchOracle(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []string{"append", "complete"} {
		t.Run(mode, func(t *testing.T) {
			complete := mode == "complete"
			for seed := range int64(20) {
				r := rand.New(rand.NewSource(seed))
				dir := t.TempDir()
				s, err := openModeSink(t, nil, dir, mode)
				if err != nil {
					t.Fatal(err)
				}
				batches := modeBatches(r, 6, complete)
				for id, rows := range batches {
					if _, err := s.AddBatch(ctx, int64(id), modeBatch(rows)); err != nil {
						t.Fatalf("seed %d batch %d: %v", seed, id, err)
					}
					// A re-run of this or an earlier batch, with other rows: skipped.
					again := r.Intn(id + 1)
					if p, err := s.AddBatch(ctx, int64(again), modeBatch(batches[r.Intn(len(batches))])); err != nil || p.Metrics["skipped"] != "true" {
						t.Fatalf("seed %d: re-run of batch %d: %+v %v", seed, again, p, err)
					}
					if got, want := modeTableRows(t, nil, dir), modeOracle(batches[:id+1], complete); !slices.Equal(got, want) {
						t.Fatalf("seed %d after batch %d:\ntable  %v\noracle %v", seed, id, got, want)
					}
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				tbl, err := Open(ctx, dir)
				if err != nil {
					t.Fatal(err)
				}
				hist, err := tbl.History(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(hist) != len(batches)+1 {
					t.Fatalf("seed %d: %d commits for %d batches", seed, len(hist)-1, len(batches))
				}
				want := map[bool]string{false: "Append true", true: "Complete false"}[complete]
				for _, c := range hist[:len(batches)] {
					if got := fmt.Sprint(c.OperationParameters["outputMode"], " ", *c.IsBlindAppend); c.Operation != "STREAMING UPDATE" || got != want {
						t.Fatalf("seed %d: commit %s %s, want STREAMING UPDATE %s", seed, c.Operation, got, want)
					}
				}
				snap, err := tbl.Snapshot(ctx, -1)
				if err != nil {
					t.Fatal(err)
				}
				if v, ok := snap.Txn("q"); !ok || v != int64(len(batches)-1) {
					t.Fatalf("seed %d: txn %d %v", seed, v, ok)
				}
				if complete {
					// Only the last batch's files are live.
					prev, err := tbl.Snapshot(ctx, snap.Version-1)
					if err != nil {
						t.Fatal(err)
					}
					for _, f := range prev.Files() {
						if slices.ContainsFunc(snap.Files(), func(g AddFile) bool { return g.Path == f.Path }) {
							t.Fatalf("seed %d: file %s of version %d still live after a complete batch", seed, f.Path, prev.Version)
						}
					}
				}
			}
		})
	}
}

// TestCompleteRefusesAppendOnlyTable: complete mode removes files, which
// delta.appendOnly forbids (Spark's DeltaLog.assertRemovable); nothing is
// committed.
func TestCompleteRefusesAppendOnlyTable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: dir, Logger: quietLog, OutputMode: "complete",
		TableProperties: map[string]string{"delta.appendOnly": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(ctx, stream.SinkEnv{QueryID: "q"}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.AddBatch(ctx, 0, mkBatch([]refRow{row(0, "s", "m", 1)})); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("complete batch on an append-only table: %v", err)
	}
	if v := s.Version(); v != 0 {
		t.Fatalf("table at version %d after a refused batch", v)
	}
	if _, err := NewMergeSink(SinkOptions{Path: dir, OutputMode: "upsert"}); err == nil {
		t.Fatal("an unknown output mode was accepted")
	}
}

// crashInjector fails the i-th write and every operation after it: the
// process died there.
type crashInjector struct {
	mu   sync.Mutex
	i, n int
	hit  bool
}

func (c *crashInjector) String() string { return fmt.Sprintf("crash at write %d", c.i) }

func (c *crashInjector) MaybeError(op errorfs.Op) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hit {
		return errorfs.ErrInjected
	}
	if op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
		return nil
	}
	c.n++
	if c.n-1 == c.i {
		c.hit = true
		return errorfs.ErrInjected
	}
	return nil
}

// TestStreamingModesCrashLoop crashes the append and complete write paths
// at every write i (keeping none, or a random half, of the unsynced data),
// then restarts as the engine does: a new sink re-runs every batch from the
// first (the committed ones are skipped by their txn). The table then equals
// the oracle: no batch lost, none appended twice, no file of an earlier
// complete batch still live.
func TestStreamingModesCrashLoop(t *testing.T) {
	ctx := context.Background()
	const dir = "/table"
	for _, mode := range []string{"append", "complete"} {
		complete := mode == "complete"
		batches := modeBatches(rand.New(rand.NewSource(7)), 4, complete)
		want := modeOracle(batches, complete)
		crashes := 0
		for i := 0; ; i++ {
			mem := vfs.NewCrashableMem()
			inj := &crashInjector{i: i}
			s, err := openModeSink(t, errorfs.Wrap(mem, inj), dir, mode)
			for id := 0; err == nil && id < len(batches); id++ {
				_, err = s.AddBatch(ctx, int64(id), modeBatch(batches[id]))
			}
			if s != nil {
				_ = s.Close()
			}
			if !inj.hit {
				if err != nil {
					t.Fatalf("%s write %d: no crash injected, run failed: %v", mode, i, err)
				}
				break
			}
			if !errors.Is(err, errorfs.ErrInjected) && err != nil && !strings.Contains(err.Error(), "injected") {
				t.Fatalf("%s write %d: unexpected error %v", mode, i, err)
			}
			crashes++
			for _, keep := range []int{0, 50} {
				fs := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: keep, RNG: randv2.New(randv2.NewPCG(uint64(i), 1))})
				s, err := openModeSink(t, fs, dir, mode)
				if err != nil {
					t.Fatalf("%s write %d: reopen: %v", mode, i, err)
				}
				for id, rows := range batches {
					if _, err := s.AddBatch(ctx, int64(id), modeBatch(rows)); err != nil {
						t.Fatalf("%s write %d: re-run batch %d: %v", mode, i, id, err)
					}
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				if got := modeTableRows(t, fs, dir); !slices.Equal(got, want) {
					t.Fatalf("%s crash at write %d (keep %d%%):\ntable  %v\noracle %v", mode, i, keep, got, want)
				}
			}
		}
		if crashes < 10 {
			t.Fatalf("%s: only %d writes to crash at", mode, crashes)
		}
	}
}
