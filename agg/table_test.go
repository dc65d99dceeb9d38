package agg

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestGroupTable compares the open-addressing table with a Go map through
// growth and resets, with keys that share prefixes and an empty key.
func TestGroupTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	tb := newGroupTable()
	for round := range 4 {
		ref := map[string]int32{}
		var order []string
		for range 20000 {
			k := fmt.Sprintf("k%d", rng.IntN(5000))
			if rng.IntN(100) == 0 {
				k = ""
			}
			e, inserted := tb.find([]byte(k))
			want, ok := ref[k]
			if inserted == ok {
				t.Fatalf("round %d: find(%q) inserted=%v, present before=%v", round, k, inserted, ok)
			}
			if !ok {
				want = int32(len(order))
				ref[k] = want
				order = append(order, k)
			}
			if e != want {
				t.Fatalf("round %d: find(%q) = %d, want %d", round, k, e, want)
			}
		}
		if tb.len() != len(order) {
			t.Fatalf("round %d: len %d, want %d", round, tb.len(), len(order))
		}
		for i, k := range order {
			if got := string(tb.key(int32(i))); got != k {
				t.Fatalf("round %d: key(%d) = %q, want %q", round, i, got, k)
			}
		}
		tb.reset()
		if tb.len() != 0 {
			t.Fatalf("len after reset = %d", tb.len())
		}
	}
}

func TestGroupTableFindDoesNotAllocate(t *testing.T) {
	tb := newGroupTable()
	key := []byte("0xabcdef0123456789")
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
	fill := func(n int) {
		for i := 0; i < n; i++ {
			tb.find([]byte(fmt.Sprintf("key-%d", i)))
		}
	}
	fill(1 << 20)
	big := len(tb.slots)
	tb.reset()
	tb.reset()
	if len(tb.slots) != big || cap(tb.arena) == 0 || tb.len() != 0 {
		t.Fatalf("after a big batch: slots %d (want %d), arena cap %d, len %d", len(tb.slots), big, cap(tb.arena), tb.len())
	}
	fill(10)
	if e, ins := tb.find([]byte("key-3")); ins || e != 3 {
		t.Fatalf("reused table: find(key-3) = %d, %v", e, ins)
	}
	tb.reset()
	if len(tb.slots) >= big {
		t.Fatalf("after a small batch the table kept %d slots", len(tb.slots))
	}
}
