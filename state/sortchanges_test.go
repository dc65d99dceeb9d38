package state

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortChangesMatchesNaive checks the grouped, parallel sort against a
// plain sort on inputs above and below its size threshold, with keys that
// share 8-byte prefixes (so the string comparison is exercised).
func TestSortChangesMatchesNaive(t *testing.T) {
	for _, n := range []int{0, 1, 100, 1 << 14, 50000} {
		for _, parts := range []int{1, 7, 200} {
			r := rand.New(rand.NewPCG(uint64(n), uint64(parts)))
			cs := make([]change, n)
			for i := range cs {
				k := fmt.Sprintf("%08d|%d", r.IntN(50), r.IntN(1000000))
				cs[i] = newChange(&pendingEntry{key: k, part: int32(r.IntN(parts))})
			}
			want := slices.Clone(cs)
			slices.SortStableFunc(want, cmpChange)
			sortChanges(cs)
			for i := range cs {
				if cs[i].part != want[i].part || cs[i].key != want[i].key {
					t.Fatalf("n=%d parts=%d: at %d got (%d,%q), want (%d,%q)", n, parts, i, cs[i].part, cs[i].key, want[i].part, want[i].key)
				}
			}
		}
	}
}
