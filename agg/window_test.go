package agg

import (
	"fmt"
	"math/rand/v2"
	"testing"
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

// TestWindowsOf checks window assignment against the oracle's brute-force
// search, for tumbling and sliding windows, slides that do not divide the
// size, and times before the epoch and on boundaries.
func TestWindowsOf(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		size := 1 + rng.Int64N(50)
		slide := 1 + rng.Int64N(size)
		if rng.IntN(3) == 0 {
			slide = size
		}
		ts := rng.Int64N(2000) - 1000
		if rng.IntN(4) == 0 {
			ts = (ts / slide) * slide // on a boundary
		}
		var got [][2]int64
		windowsOf(ts, size, slide, func(s, e int64) { got = append(got, [2]int64{s, e}) })
		want := naiveWindows(ts, size, slide)
		// windowsOf goes from the latest start down; the oracle goes up.
		for i, j := 0, len(want)-1; i < j; i, j = i+1, j-1 {
			want[i], want[j] = want[j], want[i]
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("windowsOf(%d, size %d, slide %d) = %v, want %v", ts, size, slide, got, want)
		}
		if len(got) > int((size+slide-1)/slide) {
			t.Fatalf("windowsOf(%d, size %d, slide %d): %d windows, more than ceil(size/slide)", ts, size, slide, len(got))
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
