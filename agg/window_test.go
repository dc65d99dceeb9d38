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

func TestFloorDiv(t *testing.T) {
	for _, c := range []struct{ a, b, want int64 }{
		{0, 5, 0}, {4, 5, 0}, {5, 5, 1}, {-1, 5, -1}, {-5, 5, -1}, {-6, 5, -2}, {11, 5, 2},
	} {
		if got := floorDiv(c.a, c.b); got != c.want {
			t.Errorf("floorDiv(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// TestWindowAssignment checks the vectorised window assignment of Process
// (instance by instance, with its cached division) against the oracle's
// brute-force search: tumbling and sliding windows, slides that do not divide
// the size, times before the epoch and on boundaries, sorted and shuffled.
func TestWindowAssignment(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		size := 1 + rng.Int64N(50)
		slide := 1 + rng.Int64N(size)
		if rng.IntN(3) == 0 {
			slide = size
		}
		p, err := newPlan(Spec{
			Window:      &Window{Column: ethblock.ColBlockTS, Size: time.Duration(size) * time.Microsecond, Slide: time.Duration(slide) * time.Microsecond},
			Aggregates:  []Aggregate{{Kind: Count}},
			ColumnTypes: testColumnTypes,
		})
		if err != nil {
			t.Fatal(err)
		}
		n := 1 + rng.IntN(200)
		ts := make([]int64, n)
		for i := range ts {
			ts[i] = rng.Int64N(2000) - 1000
			if rng.IntN(4) == 0 {
				ts[i] = (ts[i] / slide) * slide // on a boundary
			}
		}
		if rng.IntN(2) == 0 {
			slices.Sort(ts)
		}
		want := map[int64]int64{} // window start -> rows
		for _, x := range ts {
			for _, w := range naiveWindows(x, size, slide) {
				want[w[0]]++
			}
		}
		pt := newPartial(p)
		b := &stream.Batch{Len: n, Columns: []stream.Column{{Name: ethblock.ColBlockTS, Type: stream.Timestamp, Int64s: ts}}}
		if _, err := pt.add(b, math.MinInt64); err != nil {
			t.Fatal(err)
		}
		got := map[int64]int64{}
		for e := range pt.len() {
			got[pt.start[e]] += pt.acc[0].ints[e]
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("size %d slide %d times %v:\nwindows %v\nwant    %v", size, slide, ts, got, want)
		}
	}
}

// naiveWindows lists the windows containing ts by testing every candidate
// start from far below: deliberately unlike the operator's arithmetic.
func naiveWindows(ts, size, slide int64) [][2]int64 {
	var out [][2]int64
	first := (ts/slide - size/slide - 2) * slide
	for s := first; s <= ts; s += slide {
		if s <= ts && ts < s+size {
			out = append(out, [2]int64{s, s + size})
		}
	}
	return out
}
