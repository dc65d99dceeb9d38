package agg

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/stream"
)

// TestSortRunRankedMatchesCmp checks sortRun's integer keys (a ranked
// partial whose groups are all strings: sortRunRanked) against a sort of
// the same runs by cmpEntries, with null and empty strings in both group
// columns (a null orders before "", which orders before any other string),
// runs longer and shorter than the insertion sort's 12, and more names than
// one byte of rank holds.
func TestSortRunRankedMatchesCmp(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			p, err := newPlan(propertySpecs["reference"])
			if err != nil {
				t.Fatal(err)
			}
			pt := newPartial(p)
			rng := rand.New(rand.NewPCG(seed, 11))
			const n = 4000
			const t0 = int64(1_793_491_200_000_000)
			names := 3 + int(seed)*60 // up to 303 distinct: ranks of 9 bits
			src := stream.Column{Name: stream.ColSource, Type: stream.String, Strings: make([]string, n), Valid: make([]bool, n)}
			miner := stream.Column{Name: ethblock.ColMiner, Type: stream.String, Strings: make([]string, n), Valid: make([]bool, n)}
			ts := stream.Column{Name: ethblock.ColBlockTS, Type: stream.Timestamp, Int64s: make([]int64, n)}
			str := func(c *stream.Column, i int) {
				switch x := rng.IntN(20); x {
				case 0: // null
				case 1:
					c.Valid[i] = true // ""
				default:
					c.Strings[i], c.Valid[i] = fmt.Sprintf("0x%03x", rng.IntN(names)), true
				}
			}
			for i := range n {
				str(&src, i)
				str(&miner, i)
				// A few windows with many groups (runs past 12), most with few.
				w := int64(rng.IntN(40))
				if rng.IntN(4) == 0 {
					w = 100
				}
				ts.Int64s[i] = t0 + w*int64(5*time.Minute/time.Microsecond)
			}
			in := &stream.Batch{Len: n, Columns: []stream.Column{ts, src, miner}}
			if _, err := pt.add(in, math.MinInt64); err != nil {
				t.Fatal(err)
			}
			order, _, ends := pt.keyRuns(nil, nil)
			if !pt.ranked || pt.rankBits == 0 || ends == nil {
				t.Fatalf("ranked %v, rankBits %d, runs %v: the partial does not take sortRunRanked", pt.ranked, pt.rankBits, ends != nil)
			}
			long := false
			lo := 0
			for _, hi := range ends {
				run := order[lo:int(hi)]
				want := slices.Clone(run)
				slices.SortFunc(want, func(a, b int32) int { return p.cmpEntries(pt, a, pt, b) })
				pt.sortRun(run)
				if !slices.Equal(run, want) {
					t.Fatalf("run of %d entries: sortRun %v, cmpEntries %v", len(run), run, want)
				}
				long = long || len(run) > 12
				lo = int(hi)
			}
			if !long {
				t.Fatal("no run longer than 12 entries")
			}
		})
	}
}
