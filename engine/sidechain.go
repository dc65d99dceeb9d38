package engine

import (
	"context"
	"fmt"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// Operators below a join: a tree-shaped plan.
//
// A side of a two-input query may have stages of its own (Side.Stages)
// between its read path and the join, as Spark's
// a.withWatermark(...).dropDuplicates("id").join(b, ...) puts a
// StreamingDeduplicateExec under the StreamingSymmetricHashJoinExec. The
// plan is then a tree: the main chain (the join, what follows it, the
// sink) and under the join each side's chain. The driver lists the
// operators in execution order (planOps): the left side's chain, the
// right side's, then the main chain, the join first; everything that
// loops over them (open, commit, abort, repartition, progress, close,
// no-data batch needs) stays a loop, and the ids are Spark's pre-order
// walk from the sink (opids.go: the main chain from the sink back, the
// join, the left chain from the join down, the right chain).
//
// Rows. A side's chunks go through its read path to its first operator
// (Process, with its late watermark); at the finish step each side
// operator's output goes to the next one of its chain, and the last one's,
// through the side's trailing transforms, to the join (ProcessSide), the
// left chain before the right one; then the join finishes as in a linear
// plan. Spark's join reads its left input to the end, then its right
// (StreamingSymmetricHashJoinExec.processPartitions): the join meets the
// left side's rows first here too. A right side without a chain beside a
// left one with a chain has its rows held until the left chain's output
// reached the join; a left side without a chain feeds the join as it
// reads, before any right row (a right chain emits at its Finish). A plan
// without a side chain keeps the order the reads give, as before.
//
// Watermarks (propagate.go): a side operator's input watermark is the
// origin (Spark's EventTimeWatermarkExec outputs it; a deduplication
// produces none of its own), the join's the least of its two chains'
// outputs, each operator after it its predecessor's output.

// validateSideStages checks side i's stages: each an operator or a
// transform, and an operator a one-input one (a join on a join's side is
// not supported).
func validateSideStages(i int, s Side) error {
	for j, st := range s.Stages {
		if (st.Operator == nil) == (st.Transform == nil) {
			return errcode.New(errcode.InvalidArgument, "", "", "stage %d of the %s must have an operator or a transform, not both or neither", j, sideLabel(i, s))
		}
		if _, ok := st.Operator.(stream.SideOperator); ok {
			return errcode.New(errcode.InvalidArgument, "", "join the relations in one join",
				"stage %d of the %s takes two inputs: a join below a join is not supported", j, sideLabel(i, s))
		}
	}
	return nil
}

// sideFirst is the index in d.ops of side's first operator, -1 when the
// side has none.
func (d *driver) sideFirst(side int) int {
	for i, po := range d.ops {
		if po.side == side {
			return i
		}
	}
	return -1
}

// joinIndex is the index in d.ops of the join: the main chain's first
// operator.
func (d *driver) joinIndex() int {
	for i, po := range d.ops {
		if po.side == mainChain {
			return i
		}
	}
	panic("engine: a two-input plan without a join")
}

// intoSide takes one chunk of side's rows, after its read path: to the
// side's first operator, held (a right side without a chain while the
// left has one), or to the join.
func (d *driver) intoSide(ctx context.Context, b *batchRun, batchID int64, side int, in *stream.Batch) error {
	if first := d.sideFirst(side); first >= 0 {
		return d.feed(ctx, b, batchID, first, in)
	}
	if side == stream.RightSide && d.sideFirst(stream.LeftSide) >= 0 {
		return holdRows(b, in)
	}
	return d.toJoin(ctx, b, batchID, side, in)
}

// holdRows copies in's rows into the batch's held right-side rows (a
// source's chunk may not be retained).
func holdRows(b *batchRun, in *stream.Batch) error {
	if in == nil || in.Len == 0 {
		return nil
	}
	if b.held == nil {
		b.held = &stream.Batch{}
	}
	names := make([]string, len(in.Columns))
	for i, c := range in.Columns {
		names[i] = c.Name
	}
	return appendProjected(b.held, in, names, 0)
}

// toJoin hands side's rows, through the side's trailing transforms, to the
// join with the join's late watermark.
func (d *driver) toJoin(ctx context.Context, b *batchRun, batchID int64, side int, in *stream.Batch) error {
	if side < len(d.sidePost) && len(d.sidePost[side]) > 0 {
		var err error
		if in, err = applyTransforms(d.sidePost[side], in); err != nil || in == nil {
			return err
		}
	}
	j := d.joinIndex()
	po := d.ops[j]
	late := d.batchWatermarks(batchID, b, j)
	if err := po.op.(stream.SideOperator).ProcessSide(ctx, batchID, late, side, in); err != nil {
		if len(d.ops) > 1 {
			return fmt.Errorf("operator %d, %s: %w", po.id, sideLabel(side, d.q.Sides[side]), err)
		}
		return fmt.Errorf("%s: %w", sideLabel(side, d.q.Sides[side]), err)
	}
	return nil
}

// sideOutput routes side operator i's Finish output: to the next operator
// of its chain, or from the chain's last to the join; after the left
// chain's, the held right rows follow.
func (d *driver) sideOutput(ctx context.Context, b *batchRun, batchID int64, i int, out *stream.Batch) error {
	po := d.ops[i]
	if i+1 < len(d.ops) && d.ops[i+1].side == po.side {
		if out == nil || out.Len == 0 {
			return nil
		}
		return d.feed(ctx, b, batchID, i+1, out)
	}
	if out != nil && out.Len > 0 {
		if err := d.toJoin(ctx, b, batchID, po.side, out); err != nil {
			return err
		}
	}
	if po.side == stream.LeftSide && b.held != nil {
		held := b.held
		b.held = nil
		return d.toJoin(ctx, b, batchID, stream.RightSide, held)
	}
	return nil
}
