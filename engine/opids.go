package engine

import (
	"slices"

	"github.com/ethstream/ethstream/shape"
	"github.com/ethstream/ethstream/stream"
)

// Operator ids: which state directory, stateOperators[] entry and restart
// rule each stateful operator of a plan has.
//
// Spark numbers a plan's stateful operators as IncrementalExecution's
// state rule meets them: `plan transform` walks the physical plan
// top-down (pre-order) and each stateful operator takes
// statefulOperatorId.getAndIncrement(), so the operator nearest the sink
// is 0 (a join followed by an aggregation: the aggregation is 0, the
// join 1); progress's stateOperators[] is executedPlan.collect, pre-order
// too, so entry i is operator i. Checkpoints written before shape record
// version 5 numbered in flow order instead (the source side's operator
// 0). A checkpoint keeps the numbering it started with for its life (its
// state directories are named by it): the shape record in force says
// which, and a new one takes Spark's. The plan the driver runs stays in
// flow order (each operator feeds the next); only the ids move.

// opNumbering is how a plan's stateful operators are given their ids.
type opNumbering uint8

const (
	// numberedByFlow: ids in flow order, the source side's operator 0
	// (shape records v3 and v4, and queries that record no shape).
	numberedByFlow opNumbering = iota
	// numberedBySpark: Spark's pre-order ids, the sink side's operator 0
	// (shape.NumberingPreOrder, v5).
	numberedBySpark
)

// numberingOf is the numbering of a start, given the shape record in force
// (nil: none), the starting query's shape (nil: it records none) and
// whether the checkpoint has batches (an offsets entry). A record of
// several operators pins its numbering; otherwise a query that records its
// shape takes Spark's, recorded with it (a plan of one operator has id 0
// either way, and its record stays as it was). A query that records no
// shape has nothing to pin the numbering to between starts, so it keeps
// flow order on every start; and so does a query that records its shape
// on a checkpoint with batches but no record: its earlier runs recorded
// none, so its state directories are in flow order.
func numberingOf(rec *shape.Record, cur *shape.Shape, started bool) opNumbering {
	if rec != nil && len(rec.Shape.OperatorList()) > 1 {
		if rec.Shape.Numbering == shape.NumberingPreOrder {
			return numberedBySpark
		}
		return numberedByFlow
	}
	if cur == nil || rec == nil && started {
		return numberedByFlow
	}
	return numberedBySpark
}

// ids returns the id of each of n stateful operators of a linear plan,
// listed in flow order (each operator feeds the next, the last the sink,
// so Spark's pre-order walk from the sink meets them last to first).
func (nb opNumbering) ids(n int) []int {
	side := make([]int, n)
	for i := range side {
		side[i] = mainChain
	}
	return nb.treeIDs(side)
}

// treeIDs returns the id of each stateful operator of a plan listed in
// execution order (planOps): the join's left side's operators, its right
// side's, then the main chain (the join first in a two-input query), side
// giving each one's (stream.LeftSide, stream.RightSide, or mainChain).
// Spark's pre-order walk from the sink meets the main chain last to first
// (the join last of it), then the join's left child's chain from the join
// down, then its right child's: the main chain's operators come first,
// each chain's last first. Flow order is the execution order.
func (nb opNumbering) treeIDs(side []int) []int {
	ids := make([]int, len(side))
	if nb != numberedBySpark {
		for i := range ids {
			ids[i] = i
		}
		return ids
	}
	// Each chain's operators in execution order: the main chain, left,
	// right, as the walk visits the chains.
	var chains [3][]int
	for i, s := range side {
		switch s {
		case mainChain:
			chains[0] = append(chains[0], i)
		case stream.LeftSide:
			chains[1] = append(chains[1], i)
		default:
			chains[2] = append(chains[2], i)
		}
	}
	next := 0
	for _, c := range chains {
		for j := len(c) - 1; j >= 0; j-- {
			ids[c[j]] = next
			next++
		}
	}
	return ids
}

// mainChain is planOp.side of an operator on the main chain (a one-input
// plan's, or a join and what follows it).
const mainChain = -1

// numberShape returns the query shape s, whose operators the plan lists in
// flow order, with its operators listed by id under nb: Spark's numbering
// of two or more reverses the list and records the numbering (shape v5);
// anything else is s as it was. A shape that already records a numbering
// is left as it is.
func numberShape(s shape.Shape, nb opNumbering) shape.Shape {
	ops := s.OperatorList()
	if nb != numberedBySpark || len(ops) < 2 || s.Numbering != "" {
		return s
	}
	side := make([]int, len(ops))
	for i, o := range ops {
		side[i] = shapeSide(o.Side)
	}
	byID := make([]shape.Operator, len(ops))
	for i, id := range nb.treeIDs(side) {
		byID[id] = ops[i]
	}
	s = s.WithOperators(slices.Clip(byID))
	s.Numbering = shape.NumberingPreOrder
	return s
}

// shapeSide is the chain of an operator recorded with side s
// (shape.Operator.Side).
func shapeSide(s string) int {
	switch s {
	case shape.SideLeft:
		return stream.LeftSide
	case shape.SideRight:
		return stream.RightSide
	}
	return mainChain
}
