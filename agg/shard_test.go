package agg

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
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
