package engine

import (
	"slices"
	"testing"

	"github.com/ethstream/ethstream/stream"
)

// TestTreeIDs: Spark's pre-order ids of a plan with operators below a
// join, listed in execution order (left chain, right chain, main chain
// with the join first): the main chain from the sink back, then the left
// chain from the join down, then the right one. Flow order is the
// execution order.
func TestTreeIDs(t *testing.T) {
	L, R, M := stream.LeftSide, stream.RightSide, mainChain
	for _, tc := range []struct {
		side       []int
		spark, flo []int
	}{
		{[]int{M}, []int{0}, []int{0}},
		{[]int{M, M}, []int{1, 0}, []int{0, 1}},
		// dedup(left) -> join: the join 0, the deduplication 1.
		{[]int{L, M}, []int{1, 0}, []int{0, 1}},
		{[]int{R, M}, []int{1, 0}, []int{0, 1}},
		// a dedup on each side: join 0, left 1, right 2.
		{[]int{L, R, M}, []int{1, 2, 0}, []int{0, 1, 2}},
		// two on the left, one on the right, an aggregation after the join.
		{[]int{L, L, R, M, M}, []int{3, 2, 4, 1, 0}, []int{0, 1, 2, 3, 4}},
	} {
		if got := numberedBySpark.treeIDs(slices.Clone(tc.side)); !slices.Equal(got, tc.spark) {
			t.Errorf("%v: Spark's ids %v, want %v", tc.side, got, tc.spark)
		}
		if got := numberedByFlow.treeIDs(slices.Clone(tc.side)); !slices.Equal(got, tc.flo) {
			t.Errorf("%v: flow ids %v, want %v", tc.side, got, tc.flo)
		}
	}
}

// wmOp is an operator whose output watermark is its input's minus lag
// (a join's is below its input's).
type wmOp struct {
	stream.Operator
	lag int64
}

func (o wmOp) OutputWatermark(in int64) int64 { return in - o.lag }

// TestTreeWatermarks: a side operator's input watermark is the origin, the
// join's the least of its chains' outputs, the operator after it the
// join's output; a plan without side chains is unchanged.
func TestTreeWatermarks(t *testing.T) {
	plain := &planOp{op: wmOp{}, side: stream.LeftSide}
	lagging := &planOp{op: wmOp{lag: 7}, side: stream.RightSide}
	j := &planOp{op: wmOp{lag: 100}, side: mainChain}
	after := &planOp{op: wmOp{}, side: mainChain}
	if got := inputWatermarks([]*planOp{plain, lagging, j, after}, 1000); !slices.Equal(got, []int64{1000, 1000, 993, 893}) {
		t.Fatalf("tree: %v", got)
	}
	if got := inputWatermarks([]*planOp{plain, j, after}, 1000); !slices.Equal(got, []int64{1000, 1000, 900}) {
		t.Fatalf("a left chain: %v", got)
	}
	if got := inputWatermarks([]*planOp{j, after}, 1000); !slices.Equal(got, []int64{1000, 900}) {
		t.Fatalf("linear: %v", got)
	}
	if got := inputWatermarks([]*planOp{plain, j}, 0); !slices.Equal(got, []int64{0, 0}) {
		t.Fatalf("no watermark yet: %v", got)
	}
}
