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
