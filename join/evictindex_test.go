package join

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestEvictIndex: popDue returns, once each and sorted, the keys of the
// entries at or below its limit, and keeps the others, as a brute-force
// list of entries filtered by the limit does; unsorted, the same keys, one
// per entry; a null value is never indexed.
func TestEvictIndex(t *testing.T) {
	// Values in random order go mostly to the heap; rising values (rows
	// in event-time order, now and then one earlier) mostly to the run.
	for _, rising := range []bool{false, true} {
		rng := rand.New(rand.NewPCG(43, 2))
		var x, u evictIndex // u pops unsorted
		type entry struct {
			ts  int64
			key string
		}
		var model []entry
		lim, last := int64(0), int64(0)
		for round := range 200 {
			for range rng.IntN(40) {
				v := intValue(lim + rng.Int64N(100) - 10)
				if rising && rng.IntN(10) > 0 {
					last = max(last, lim) + rng.Int64N(5)
					v = intValue(last)
				}
				if rng.IntN(20) == 0 {
					v = nullValue
				}
				key := fmt.Sprintf("k%02d", rng.IntN(30))
				x.add(key, v)
				u.add(key, v)
				if !v.null() {
					model = append(model, entry{v.i(), key})
				}
			}
			lim += rng.Int64N(30)
			var want []string
			model = slices.DeleteFunc(model, func(e entry) bool {
				if e.ts <= lim {
					want = append(want, e.key)
					return true
				}
				return false
			})
			slices.Sort(want)
			if got := slices.Sorted(slices.Values(u.popDue(lim, false))); !slices.Equal(got, want) {
				t.Fatalf("rising=%v round %d, limit %d: popDue unsorted %v, want %v", rising, round, lim, got, want)
			}
			want = slices.Compact(want)
			if got := x.popDue(lim, true); !slices.Equal(got, want) {
				t.Fatalf("rising=%v round %d, limit %d: popDue %v, want %v", rising, round, lim, got, want)
			}
			if x.len() != len(model) {
				t.Fatalf("rising=%v round %d: the index keeps %d entries, want %d", rising, round, x.len(), len(model))
			}
		}
		if rising && len(x.run)-x.head == 0 && len(model) > 0 {
			t.Fatalf("rising values left nothing in the run")
		}
	}
}

// TestCmpDueKey: popDue's prefix comparison orders keys as strings.Compare
// does, for keys sharing prefixes, shorter than 8 bytes, and holding zero
// bytes (a missing byte and a zero byte make the same prefix).
func TestCmpDueKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(44, 1))
	key := func() string {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = []byte{0, 1, 'a', 'b', 0xff}[rng.IntN(5)]
		}
		return string(b)
	}
	sign := func(c int) int { return min(max(c, -1), 1) }
	for range 100_000 {
		a, b := key(), key()
		if got, want := sign(cmpDueKey(newDueKey(a), newDueKey(b))), strings.Compare(a, b); got != want {
			t.Fatalf("cmpDueKey(%q, %q) = %d, want %d", a, b, got, want)
		}
	}
}

// TestEvictIndexRunGrowth: entries in order past the run's room (its
// growth copies the entries not yet popped and drops the others) pop in
// order, none lost or repeated, through rounds that pop part of them.
func TestEvictIndexRunGrowth(t *testing.T) {
	var x evictIndex
	next, popped, heads := 0, 0, 0
	for round := range 6 {
		for range 3000 + 1000*round {
			x.add(fmt.Sprint(next), intValue(int64(next)))
			next++
		}
		// Odd rounds pop a third of what is indexed, so that the next
		// growth meets popped entries still before the run's head.
		lim := int64(next - 1 - 500*round)
		if round%2 == 1 {
			lim = int64(popped + (next-popped)/3)
		}
		for _, k := range x.popDue(lim, false) {
			if k != fmt.Sprint(popped) {
				t.Fatalf("round %d: popped %s, want %d", round, k, popped)
			}
			popped++
		}
		if popped != int(lim)+1 || x.len() != next-popped {
			t.Fatalf("round %d: %d popped, %d indexed, want %d, %d", round, popped, x.len(), lim+1, next-int(lim)-1)
		}
		heads = max(heads, x.head)
		if len(x.h) > 0 {
			t.Fatalf("round %d: %d entries in order went to the heap", round, len(x.h))
		}
	}
	if heads == 0 {
		t.Fatal("no round left popped entries before the run's head: the test tests no growth past them")
	}
}
