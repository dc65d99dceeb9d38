package join

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// TestMemoryPathsAgree: the join's answers, its state and its no-data
// decisions do not depend on what it holds in memory. A random two-sided
// input of five batches runs with each side's rows held in memory (the
// default), with none held (every key read from the state, as when a side
// outgrows memRowsCap), with a cap crossed mid-run, and with batches
// aborted after and before their Finish and re-run (memory dropped and
// reloaded from the committed state), and with the engine's overlapped
// commit (PrepareCommit, then Commit; an abort after PrepareCommit), and
// with the sides evicting on two goroutines (evictParallelMin); every
// run's output, progress's row counts, final state and NeedsNoDataBatch
// answers are the same, for each join type.
func TestMemoryPathsAgree(t *testing.T) {
	for _, typ := range []Type{Inner, LeftOuter, RightOuter, FullOuter, LeftSemi} {
		t.Run(typ.String(), func(t *testing.T) {
			batches := memTestInput(rand.New(rand.NewPCG(uint64(typ), 7)), 6)
			defer func(c, e int) { memRowsCap, evictParallelMin = c, e }(memRowsCap, evictParallelMin)
			var want string
			for _, v := range []struct {
				name                     string
				cap                      int
				abort, prepare, parallel bool
			}{{"in memory", 1 << 20, false, false, false}, {"from the state", 0, false, false, false}, {"cap crossed", 40, false, false, false},
				{"aborts", 1 << 20, true, false, false}, {"aborts from the state", 0, true, false, false},
				{"prepared", 1 << 20, false, true, false}, {"prepared, aborts", 1 << 20, true, true, false},
				{"sides evicting in parallel", 1 << 20, false, false, true}, {"sides evicting in parallel, aborts", 1 << 20, true, true, true}} {
				memRowsCap, evictParallelMin = v.cap, 1<<30
				if v.parallel {
					evictParallelMin = 0
				}
				got, complete := runMemTest(t, typ, batches, v.abort, v.prepare)
				if v.cap != 40 && complete != (v.cap > 0) {
					t.Fatalf("%s: a side held complete in memory after batch 0: %v, want %v", v.name, complete, v.cap > 0)
				}
				if want == "" {
					want = got
					if !strings.Contains(want, "out ") {
						t.Fatalf("%s: no joined rows: the input tests nothing\n%s", v.name, want)
					}
					continue
				}
				if got != want {
					t.Fatalf("%s differs from in memory:\n%s\nwant:\n%s", v.name, got, want)
				}
			}
		})
	}
}

var memTestSchema = stream.Schema{Fields: []stream.Field{
	{Name: "k", Type: stream.String}, {Name: "ts", Type: stream.Timestamp}, {Name: "v", Type: stream.Int64}, {Name: "d", Type: stream.Float64}}}

type memTestRow struct {
	k    string
	null bool
	ts   int64
	v    int64
}

// memTestInput draws five batches of both sides: 6 keys (and a null),
// event times moving forward a minute a batch with jitter, so that rows
// match, arrive late and are evicted.
// memTestInput is five batches of 10-29 rows a side, their join keys
// drawn from keys distinct values, one in 15 null.
func memTestInput(rng *rand.Rand, keys int) [][2][]memTestRow {
	base := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC).UnixMicro()
	var out [][2][]memTestRow
	for b := range 5 {
		var sides [2][]memTestRow
		for s := range 2 {
			for range 10 + rng.IntN(20) {
				r := memTestRow{k: fmt.Sprint("k", rng.IntN(keys)), ts: base + int64(b)*60e6 + rng.Int64N(150e6) - 60e6, v: rng.Int64N(1000)}
				r.null = rng.IntN(15) == 0
				sides[s] = append(sides[s], r)
			}
		}
		out = append(out, sides)
	}
	return out
}

// memTestSpec is the tests' join of two sides a and b of memTestSchema on
// k, each ts within a minute of the other's, a minute's watermark delay a
// side.
func memTestSpec(typ Type) Spec {
	side := func(alias string) Side {
		return Side{Alias: alias, Schema: memTestSchema, Keys: []string{"k"}, Watermark: "ts", Delay: time.Minute}
	}
	return Spec{Type: typ, Left: side("a"), Right: side("b"), Range: []Bound{
		{LeftColumn: "ts", Op: GE, RightColumn: "ts", RightOffset: -time.Minute},
		{LeftColumn: "ts", Op: LE, RightColumn: "ts", RightOffset: time.Minute}}}
}

// memTestEnv is a fresh state directory of 3 partitions in t's temp dir.
func memTestEnv(t *testing.T) stream.OperatorEnv {
	dir := t.TempDir()
	return stream.OperatorEnv{StateDir: filepath.Join(dir, "state"), FS: vfs.Default, LocalDir: filepath.Join(dir, "local"), Partitions: 3, Version: -1}
}

// memTestRows renders a batch's rows as "out cell cell ...", sorted.
func memTestRows(res *stream.Batch) []string {
	var rows []string
	for i := range res.Len {
		var cells []string
		for _, c := range res.Columns {
			switch {
			case c.IsNull(i):
				cells = append(cells, "null")
			case c.Type.Storage() == stream.String:
				cells = append(cells, c.Strings[i])
			case c.Type.Storage() == stream.Float64:
				cells = append(cells, fmt.Sprint(c.Float64s[i]))
			default:
				cells = append(cells, fmt.Sprint(c.Int64s[i]))
			}
		}
		rows = append(rows, "out "+strings.Join(cells, " "))
	}
	slices.Sort(rows)
	return rows
}

func memTestBatch(rows []memTestRow) *stream.Batch {
	b := &stream.Batch{Len: len(rows), Columns: []stream.Column{
		{Name: "k", Type: stream.String, Valid: make([]bool, 0, len(rows))}, {Name: "ts", Type: stream.Timestamp},
		{Name: "v", Type: stream.Int64}, {Name: "d", Type: stream.Float64}}}
	for _, r := range rows {
		b.Columns[0].Strings = append(b.Columns[0].Strings, r.k)
		b.Columns[0].Valid = append(b.Columns[0].Valid, !r.null)
		b.Columns[1].Int64s = append(b.Columns[1].Int64s, r.ts)
		b.Columns[2].Int64s = append(b.Columns[2].Int64s, r.v)
		b.Columns[3].Float64s = append(b.Columns[3].Float64s, float64(r.v)/7)
	}
	return b
}

// runMemTest runs the batches through a fresh operator (aborting each
// odd batch twice first when abort: after its Finish, then before it, when
// only Abort drops what memory holds; with prepare, each commit is
// PrepareCommit then Commit, and the abort after Finish follows a
// PrepareCommit) and renders its outputs per batch,
// its no-data answers and its final state; complete reports whether a
// side was held complete in memory in a batch after the first (the
// first starts from an empty state, complete at any cap).
func runMemTest(t *testing.T, typ Type, batches [][2][]memTestRow, abort, prepare bool) (string, bool) {
	t.Helper()
	ctx := context.Background()
	spec, env := memTestSpec(typ), memTestEnv(t)
	o, err := New(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Open(ctx, env); err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	var out strings.Builder
	complete := false
	maxTs, wmMs := int64(0), int64(0)
	for id, b := range batches {
		runs := 1
		if abort && id%2 == 1 {
			runs = 3
		}
		for run := range runs {
			for s := range 2 {
				if err := o.ProcessSide(ctx, int64(id), wmMs, s, memTestBatch(b[s])); err != nil {
					t.Fatal(err)
				}
			}
			if run == 1 {
				// Aborted before its Finish: memory holds rows the state
				// does not while the store is still at the committed
				// version, so the version check would keep them.
				o.Abort()
				continue
			}
			for _, m := range o.mem {
				complete = complete || id > 0 && m.complete
			}
			res, prog, err := o.Finish(ctx, int64(id), wmMs)
			if err != nil {
				t.Fatal(err)
			}
			if prepare {
				if err := o.PrepareCommit(ctx, int64(id)); err != nil {
					t.Fatal(err)
				}
			}
			if run == 0 && runs > 1 {
				o.Abort()
				continue
			}
			if err := o.Commit(ctx, int64(id)); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&out, "batch %d wm %d: %d removed, %d updated, %d total\n", id, wmMs, prog.NumRowsRemoved, prog.NumRowsUpdated, prog.NumRowsTotal)
			out.WriteString(strings.Join(memTestRows(res), "\n") + "\n")
		}
		for s := range 2 {
			for _, r := range b[s] {
				maxTs = max(maxTs, r.ts)
			}
		}
		wmMs = maxTs/1000 - 60_000
		need, err := o.NeedsNoDataBatch(wmMs)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "no-data batch at %d: %v\n", wmMs, need)
	}
	_, err = state.ReadAll(ctx, vfs.Default, env.StateDir, -1, func(p int, key, val []any) error {
		v, err := renderValue(o.store.Schema(), key, slices.Clone(val))
		fmt.Fprintf(&out, "state %d %v %v %v\n", p, key, v, err)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), complete
}
