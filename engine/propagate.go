package engine

import "github.com/ethstream/ethstream/stream"

// Watermark propagation among the operators of a plan, Spark's
// PropagateWatermarkSimulator (spark.sql.streaming.statefulOperator.
// allowMultiple, the default since 3.4): operator 0's input watermark is
// the batch's (the origin watermark); operator i+1's is operator i's
// output watermark, its OutputWatermark of its own input watermark
// (stream.WatermarkProducer: a join's is the least of its sides' state
// watermarks and its input watermark), the input watermark unchanged for
// an operator without one (an aggregation, a deduplication, a session
// window). An operator evicts by its input watermark of the batch
// (getInputWatermarkForEviction) and, after operator 0, drops input late
// by its input watermark of the previous batch
// (getInputWatermarkForLateEvents: the same simulation run on the previous
// batch's watermark). As Spark, a batch whose origin watermark is 0 (none
// yet) gives every operator 0, and no input watermark is below 0.

// inputWatermarks are each operator's input watermark, in plan order, for
// a batch whose origin watermark is originMs. In a plan with operators
// below a join (sidechain.go), a side's first operator takes the origin
// (an EventTimeWatermarkExec's output), each next one of the chain its
// predecessor's output, and the join the least of its two chains' outputs
// (Spark's simulation gives a node with several children the least of
// theirs); a side without operators outputs the origin.
func inputWatermarks(ops []*planOp, originMs int64) []int64 {
	out := make([]int64, len(ops))
	if originMs == 0 {
		return out
	}
	chain := [2]int64{originMs, originMs}
	wm, joined := originMs, false
	for i, po := range ops {
		in := wm
		switch {
		case po.side != mainChain:
			in = chain[po.side]
		case !joined:
			// The main chain's first operator: the join of a two-input
			// plan (the origin when neither side has operators), operator
			// 0 of a one-input one.
			joined = true
			in = min(chain[0], chain[1])
		}
		out[i] = max(in, 0)
		next := in
		if p, ok := po.op.(stream.WatermarkProducer); ok {
			next = p.OutputWatermark(in)
		}
		if po.side != mainChain {
			chain[po.side] = next
		} else {
			wm = next
		}
	}
	return out
}
