package agg

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/stream"
)

// setShardMinRows sets shardMinRows and returns the function restoring it.
func setShardMinRows(n int) func() {
	old := shardMinRows
	shardMinRows = n
	return func() { shardMinRows = old }
}

// TestShardedMatchesOne runs the same random stream through an operator
// folding every chunk into one partial and one folding it into two and three
// shards on goroutines of their own: every batch's output (row for row, in
// order), its figures and the committed state must be the same. The oracle
// test (TestOracle, shards=3) checks the sharded operator against the
// brute-force recount; this one checks that sharding changes nothing a
// reader can see, the output order included.
func TestShardedMatchesOne(t *testing.T) {
	defer setShardMinRows(0)()
	names := make([]string, 0, len(propertySpecs))
	for name, spec := range propertySpecs {
		if spec.Window != nil && spec.Mode != Append {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		spec := propertySpecs[name]
		for seed := range uint64(3) {
			for _, shards := range []int{2, 3} {
				t.Run(fmt.Sprintf("%s/seed=%d/shards=%d", name, seed, shards), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(seed, 43))
					delay := spec.WatermarkDelay
					if delay == 0 {
						delay = 20 * time.Minute
					}
					rows := genStream(rng, 1500, delay, 1_000_000, 30)
					// Chunks of up to 200 rows: each spans many windows.
					var batches [][][]testRow
					for len(rows) > 0 {
						b := rows[:min(len(rows), rng.IntN(600))]
						rows = rows[len(b):]
						var chunks [][]testRow
						for len(b) > 0 {
							c := min(len(b), 1+rng.IntN(200))
							chunks, b = append(chunks, b[:c]), b[c:]
						}
						batches = append(batches, chunks)
					}
					one := newHarness(t, spec, vfs.NewMem(), 3)
					one.lookahead = seed == 1
					many := newHarness(t, spec, vfs.NewMem(), 3)
					many.lookahead, many.shards = one.lookahead, shards
					many.restart(false)
					if got := len(many.op.pts); got != shards {
						t.Fatalf("operator has %d partials, want %d", got, shards)
					}
					for i, chunks := range batches {
						id := int64(i)
						one.process(id, chunks)
						many.process(id, chunks)
						o1, p1 := one.finishCommit(id, chunks)
						o2, p2 := many.finishCommit(id, chunks)
						r1, r2 := decodeOutput(t, one.op.p, o1), decodeOutput(t, many.op.p, o2)
						if fmt.Sprint(r1) != fmt.Sprint(r2) {
							t.Fatalf("batch %d: output with %d shards\n%v\nwith one\n%v", id, shards, r2, r1)
						}
						if f1, f2 := progressCounts(p1), progressCounts(p2); f1 != f2 {
							t.Fatalf("batch %d: figures with %d shards %s, with one %s", id, shards, f2, f1)
						}
						if s1, s2 := one.stateRows(), many.stateRows(); fmt.Sprint(s1) != fmt.Sprint(s2) {
							t.Fatalf("batch %d: state with %d shards\n%v\nwith one\n%v", id, shards, s2, s1)
						}
					}
				})
			}
		}
	}
}

// progressCounts renders p's row counts (not its timings).
func progressCounts(p stream.OperatorProgress) string {
	return fmt.Sprintf("total=%d updated=%d removed=%d dropped=%d in=%d nullTS=%d out=%d closed=%d",
		p.NumRowsTotal, p.NumRowsUpdated, p.NumRowsRemoved, p.NumRowsDroppedByWatermark,
		p.CustomMetrics["numInputRows"], p.CustomMetrics["numNullEventTimeRows"], p.CustomMetrics["numOutputRows"],
		p.CustomMetrics[MetricClosedUnstored])
}

// TestFloorMod: the window index's shard is in [0, n) for negative indexes
// too (windows before the epoch, or before a window's start offset).
func TestFloorMod(t *testing.T) {
	for _, c := range []struct{ a, b, want int64 }{{7, 3, 1}, {-7, 3, 2}, {-3, 3, 0}, {0, 2, 0}, {-1, 2, 1}} {
		if got := floorMod(c.a, c.b); got != c.want {
			t.Errorf("floorMod(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// TestShardWorkerBehind: Process hands a chunk to the workers and returns
// without waiting for their folds, and the caller may then rewrite every
// slice of the chunk (a source re-uses them, stream.Batch): each worker
// folds a copy. A worker held before each fold (shardWorkerHook) until the
// chunk was rewritten must give the output, figures and state of one
// partial fed the chunks as they were. With the old code, which waited
// for the worker in Process, Process never returned here.
func TestShardWorkerBehind(t *testing.T) {
	defer setShardMinRows(0)()
	release := make(chan struct{})
	shardWorkerHook = func() { <-release }
	defer func() { shardWorkerHook = nil }()
	for _, name := range []string{"reference", "sliding-all-aggs", "complete-tumbling"} {
		spec, ok := propertySpecs[name]
		if !ok {
			t.Fatalf("no property spec %q", name)
		}
		for _, shards := range []int{2, 3} {
			if !t.Run(fmt.Sprintf("%s/shards=%d", name, shards), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(5, 43))
				rows := genStream(rng, 1200, 20*time.Minute, 1_000_000, 30)
				one := newHarness(t, spec, vfs.NewMem(), 3)
				one.shards = 1
				one.restart(false)
				many := newHarness(t, spec, vfs.NewMem(), 3)
				many.shards = shards
				many.restart(false)
				for id := int64(0); len(rows) > 0; id++ {
					b := rows[:min(len(rows), 1+rng.IntN(400))]
					rows = rows[len(b):]
					var chunks [][]testRow
					for len(b) > 0 {
						c := min(len(b), 1+rng.IntN(60))
						chunks, b = append(chunks, b[:c]), b[c:]
					}
					one.process(id, chunks)
					for _, c := range chunks {
						in := withViews(makeBatch(c))
						returned := make(chan error, 1)
						go func() { returned <- many.op.Process(context.Background(), id, many.prevWmMs, in) }()
						select {
						case err := <-returned:
							if err != nil {
								t.Fatal(err)
							}
						case <-time.After(time.Minute): // a hang, not a speed
							t.Fatal("Process waits for the workers' folds of its chunk")
						}
						scribble(in)
						for range shards - 1 {
							release <- struct{}{}
						}
					}
					o1, p1 := one.finishCommit(id, chunks)
					o2, p2 := many.finishCommit(id, chunks)
					if r1, r2 := fmt.Sprint(decodeOutput(t, one.op.p, o1)), fmt.Sprint(decodeOutput(t, many.op.p, o2)); r1 != r2 {
						t.Fatalf("batch %d: output of workers behind\n%v\nof one partial\n%v", id, r2, r1)
					}
					if f1, f2 := progressCounts(p1), progressCounts(p2); f1 != f2 {
						t.Fatalf("batch %d: figures of workers behind %s, of one partial %s", id, f2, f1)
					}
					if s1, s2 := one.stateRows(), many.stateRows(); fmt.Sprint(s1) != fmt.Sprint(s2) {
						t.Fatalf("batch %d: state of workers behind\n%v\nof one partial\n%v", id, s2, s1)
					}
				}
			}) {
				return // a worker may still wait for its release
			}
		}
	}
}

// scribble rewrites every value of b in place, as a source re-using its
// slices for the next chunk would (string bytes included: see
// TestIdentityBufferReused).
func scribble(b *stream.Batch) {
	for i := range b.Columns {
		c := &b.Columns[i]
		for j := range c.Int64s {
			c.Int64s[j] = int64(j) * 7_777_777
		}
		for j := range c.Float64s {
			c.Float64s[j] = -1
		}
		for j := range c.Strings {
			c.Strings[j] = "scribbled"
		}
		for j := range c.Valid {
			c.Valid[j] = !c.Valid[j]
		}
		if d := c.Dict; d != nil {
			clear(d.Index)
			for j := range d.Values {
				d.Values[j] = "scribbled"
			}
		}
	}
	for j := range b.Signs {
		b.Signs[j] = -b.Signs[j]
	}
}

// TestShardWorkerErrors: a worker's error reaches the caller although
// Process no longer waits for the worker's fold (by a later Process or by
// Finish), and which error wins is as when it waited: the earliest
// chunk's, partial 0's within a chunk. A long sum overflows in an even
// window (partial 0's) or an odd one (the worker's).
func TestShardWorkerErrors(t *testing.T) {
	defer setShardMinRows(0)()
	spec := refSpec()
	spec.GroupBy = []string{ethblock.ColMiner}
	spec.Aggregates = []Aggregate{{Kind: Sum, Column: ethblock.ColGasUsed, As: "s1"}, {Kind: Sum, Column: "shard", As: "s2"}}
	const t0 = int64(1_793_491_200_000_000) // a multiple of 10 minutes: window index even
	even, odd := t0, t0+int64(5*time.Minute/time.Microsecond)
	big := func(ts int64, gas, shard bool) []testRow {
		r := []testRow{{miner: "0xaa", ts: ts, gas: 1, shard: 1}, {miner: "0xaa", ts: ts + 1, gas: 1, shard: 1}}
		if gas {
			r[0].gas = math.MaxInt64
		}
		if shard {
			r[0].shard = math.MaxInt64
		}
		return r
	}
	clean := append(big(even, false, false), big(odd, false, false)...)
	for _, c := range []struct {
		name   string
		chunks [][]testRow
		want   string // the aggregate the error names
	}{
		{"worker's only, then a clean chunk", [][]testRow{big(odd, true, false), clean}, "sum(gas_used) as s1"},
		{"worker's only, last chunk", [][]testRow{clean, big(odd, true, false)}, "sum(gas_used) as s1"},
		{"both in one chunk: partial 0's", [][]testRow{append(big(odd, true, false), big(even, false, true)...)}, "sum(shard) as s2"},
		{"worker's of an earlier chunk", [][]testRow{big(odd, true, false), big(even, false, true)}, "sum(gas_used) as s1"},
		{"partial 0's of an earlier chunk", [][]testRow{big(even, false, true), big(odd, true, false)}, "sum(shard) as s2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, spec, vfs.NewMem(), 2)
			h.shards = 2
			h.restart(false)
			var err error
			for _, rows := range c.chunks {
				if err = h.op.Process(context.Background(), 0, h.prevWmMs, makeBatch(rows)); err != nil {
					break
				}
			}
			if err == nil {
				_, err = h.finish(0, c.chunks)
			}
			if errcode.Code(err) != CodeArithmeticOverflow || !strings.Contains(err.Error(), "batch 0: "+c.want) {
				t.Fatalf("error %v, want ARITHMETIC_OVERFLOW of %s", err, c.want)
			}
			h.op.Abort()
			// The batch runs again without the overflow, from a clean slate.
			h.process(0, [][]testRow{clean})
			h.finishCommit(0, [][]testRow{clean})
		})
	}
}
