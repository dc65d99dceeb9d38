package agg

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
)

// keyedTable is a groupIndex whose entries' keys are strings kept beside it,
// as the partial keeps its entries' columns; a key's part is its length
// modulo 3. With collide, hashes keep their top 12 bits alone (4,096
// values for the tests' 5,000 keys), so that keys share home slots and
// tags, and eq decides.
type keyedTable struct {
	seed    maphash.Seed
	collide bool
	t       groupIndex
	keys    []string
}

func newKeyedTable(collide bool) *keyedTable {
	return &keyedTable{seed: maphash.MakeSeed(), collide: collide, t: newGroupIndex()}
}

func (k *keyedTable) find(key string) (int32, bool) {
	h := maphash.String(k.seed, key)
	if k.collide {
		h &= 0xfff << 52
	}
	e, inserted := k.t.find(int64(len(key)%3), h, func(e int32) bool { return k.keys[e] == key })
	if inserted {
		k.keys = append(k.keys, key)
	}
	return e, inserted
}

func (k *keyedTable) reset() {
	k.t.reset()
	k.keys = k.keys[:0]
}

// TestGroupTable compares the index with a Go map through growth and
// resets, with keys that share prefixes, an empty key, keys spread over
// parts, and a hash function that collides often (the tags then match for
// other keys, so eq decides).
func TestGroupTable(t *testing.T) {
	for _, collide := range []bool{false, true} {
		rng := rand.New(rand.NewPCG(3, 4))
		tb := newKeyedTable(collide)
		for round := range 4 {
			ref := map[string]int32{}
			var order []string
			for range 20000 {
				k := fmt.Sprintf("k%d", rng.IntN(5000))
				if rng.IntN(100) == 0 {
					k = ""
				}
				e, inserted := tb.find(k)
				want, ok := ref[k]
				if inserted == ok {
					t.Fatalf("collide=%v round %d: find(%q) inserted=%v, present before=%v", collide, round, k, inserted, ok)
				}
				if !ok {
					want = int32(len(order))
					ref[k] = want
					order = append(order, k)
				}
				if e != want {
					t.Fatalf("collide=%v round %d: find(%q) = %d, want %d", collide, round, k, e, want)
				}
			}
			if tb.t.len() != len(order) {
				t.Fatalf("collide=%v round %d: len %d, want %d", collide, round, tb.t.len(), len(order))
			}
			tb.reset()
			if tb.t.len() != 0 {
				t.Fatalf("len after reset = %d", tb.t.len())
			}
		}
	}
}

func TestGroupTableFindDoesNotAllocate(t *testing.T) {
	tb := newKeyedTable(false)
	key := "0xabcdef0123456789"
	tb.find(key)
	if n := testing.AllocsPerRun(1000, func() { tb.find(key) }); n != 0 {
		t.Fatalf("lookup of a present key allocates %v times", n)
	}
}

// TestGroupTableResetKeepsBigTables: a table grown by a big batch keeps its
// memory across resets (also repeated ones with nothing inserted) while
// batches stay big, and lets it go after the first small batch.
func TestGroupTableResetKeepsBigTables(t *testing.T) {
	tb := newGroupTable()
	hash := func(i int) uint64 { return uint64(i) * 0x9e3779b97f4a7c15 }
	fill := func(n int) {
		for i := range n {
			tb.find(hash(i), int32(i), func(e int32) bool { return e == int32(i) })
		}
	}
	fill(1 << 20)
	big := len(tb.slots)
	tb.reset()
	tb.reset()
	if len(tb.slots) != big || tb.n != 0 {
		t.Fatalf("after a big batch: slots %d (want %d), %d entries", len(tb.slots), big, tb.n)
	}
	fill(10)
	if e, ins := tb.find(hash(3), 10, func(e int32) bool { return e == 3 }); ins || e != 3 {
		t.Fatalf("reused table: find(key 3) = %d, %v", e, ins)
	}
	tb.reset()
	if len(tb.slots) >= big {
		t.Fatalf("after a small batch the table kept %d slots", len(tb.slots))
	}
}

// TestGroupIndexKeepsTheLastBatchsParts: after a batch over many parts the
// index keeps that many emptied tables for the next batch (also across an
// empty reset), and after a batch over one part it keeps one.
func TestGroupIndexKeepsTheLastBatchsParts(t *testing.T) {
	g := newGroupIndex()
	batch := func(parts int) {
		for i := range 4 * parts {
			g.find(int64(i%parts), uint64(i)<<40|uint64(i), func(e int32) bool { return false })
		}
	}
	batch(100)
	g.reset()
	g.reset()
	if len(g.free) != 100 || len(g.parts) != 0 || g.len() != 0 {
		t.Fatalf("after a 100-part batch: %d free tables, %d parts, len %d", len(g.free), len(g.parts), g.len())
	}
	batch(1)
	if len(g.free) != 99 {
		t.Fatalf("a one-part batch took %d tables", 100-len(g.free))
	}
	g.reset()
	if len(g.free) != 1 {
		t.Fatalf("after a one-part batch: %d free tables, want 1", len(g.free))
	}
}

// TestGroupIndexPartBoundary: a batch of one row a second across a part
// boundary (window index partWindows*m) under a sliding window of 3 s every 1 s,
// the rows out of order. A window starting just below the boundary holds
// rows from both sides of it (window instances k = 0, 1, 2), and each window
// must be one output row with every row it holds: a part derived from the
// row's own window instead of the window start would split it.
func TestGroupIndexPartBoundary(t *testing.T) {
	spec := Spec{Window: &Window{Column: ethblock.ColBlockTS, Size: 3 * time.Second, Slide: time.Second},
		GroupBy: []string{ethblock.ColMiner}, Aggregates: []Aggregate{{Kind: Count, As: "count"}},
		Mode: Update, ColumnTypes: testColumnTypes}
	const boundary = int64(1_793_491_200/partWindows+1) * partWindows // seconds, a multiple of partWindows
	var rows []testRow
	for s := boundary - 6; s < boundary+6; s++ {
		rows = append(rows, testRow{ts: s * 1_000_000, miner: "0xaa", source: "s"})
	}
	rand.New(rand.NewPCG(5, 6)).Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	h := newHarness(t, spec, vfs.NewMem(), 2)
	chunks := [][]testRow{rows[:5], rows[5:]}
	h.process(0, chunks)
	out, _ := h.finishCommit(0, chunks)
	got := map[string]string{}
	for _, r := range decodeOutput(t, h.op.p, out) {
		if _, dup := got[r.key]; dup {
			t.Fatalf("window %s is two output rows", r.key)
		}
		got[r.key] = strings.Join(r.vals, ",")
	}
	// Windows [s, s+3) for s from boundary-8 to boundary+5: each holds the
	// rows of its seconds in [boundary-6, boundary+6).
	if len(got) != 14 {
		t.Fatalf("%d windows, want 14: %v", len(got), got)
	}
	for key, n := range got {
		var start int64
		for s := boundary - 8; s <= boundary+5; s++ {
			if strings.HasPrefix(key, streamtest.Value(&stream.Column{Type: stream.Timestamp, Int64s: []int64{s * 1_000_000}}, 0)+"|") {
				start = s
			}
		}
		want := min(start+3, boundary+6) - max(start, boundary-6) // its seconds that hold a row
		if start == 0 || n != fmt.Sprint(want) {
			t.Fatalf("window %s: count %s, want %d", key, n, want)
		}
	}
}
