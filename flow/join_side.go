package flow

import (
	"github.com/ethstream/ethstream/dedup"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/filter"
	"github.com/ethstream/ethstream/shape"
	"github.com/ethstream/ethstream/stream"
)

// A deduplication on a join's side (a tree-shaped plan, engine/sidechain.go):
// Spark's a.withWatermark(...).dropDuplicates(cols).join(b, ...), a
// StreamingDeduplicateExec under the StreamingSymmetricHashJoinExec. The
// side's rows go through its read path (its sources, filter, watermark),
// then its deduplication, then the join. The deduplication is a stateful
// operator with Spark's id (the join's after the operators following it,
// then the left side's, then the right side's), its own state directory,
// repartitioned online and offline as every operator, and recorded in the
// query shape with its side (shape v6).

// DropDuplicates deduplicates the side's rows before the join, Spark's
// side.dropDuplicates(cols): a row whose cols (every column of the side,
// "source" included, if none) were seen before, in this batch or an
// earlier one, does not reach the join. With the side's watermark, late
// rows are dropped and a key whose cols include the event-time column is
// evicted once the query's watermark passes it (package dedup). Call it
// after WithWatermark; a Where after it filters the deduplicated rows.
func (s *Side) DropDuplicates(cols ...string) *Side { return s.dedup(cols, false) }

// DropDuplicatesWithinWatermark is Spark's
// side.dropDuplicatesWithinWatermark(cols): as DropDuplicates, a key kept
// until the query's watermark passes its first row's event time plus the
// side's delay. It needs the side's watermark (WithWatermark) first.
func (s *Side) DropDuplicatesWithinWatermark(cols ...string) *Side { return s.dedup(cols, true) }

func (s *Side) dedup(cols []string, within bool) *Side {
	if s.err != nil {
		return s
	}
	if len(s.sources) == 0 {
		return s.fail(invalid("dropDuplicates on side %s before it reads a source", s.alias))
	}
	if len(s.ops) > 0 {
		return s.fail(invalid("side %s has a deduplication already: one stateful operator per side is supported", s.alias))
	}
	spec := dedup.Spec{Columns: cols, Input: s.schema, WithinWatermark: within}
	if s.wm != nil {
		spec.WatermarkColumn, spec.WatermarkDelay = s.wm.Column, s.wm.Delay
	}
	op, err := dedup.New(spec)
	if err != nil {
		return s.fail(err)
	}
	if err := refuseRetracting(s.sources, op); err != nil {
		return s.fail(err)
	}
	// Its Side is set by Query.Join, which knows which input the side is.
	s.ops = append(s.ops, shape.Operator{Kind: shape.KindDeduplicate, Keys: op.Columns(), StateSchema: op.Schema().String(),
		Input: append([]string{}, s.input...), Aggregates: []string{}})
	s.input = nil
	s.stages = append(s.stages, engine.Stage{Operator: op})
	return s
}

// whereAfter adds e, compiled under o, as a filter after the side's
// deduplication, combined with one there already.
func (s *Side) whereAfter(e filter.Expr, o filter.Options) *Side {
	if s.afterExpr != nil {
		e = filter.And{L: s.afterExpr, R: e}
	}
	p, err := filter.CompileWith(e, func(name string) (stream.Type, bool) {
		if f := s.schema.Field(name); f != nil {
			return f.Type, true
		}
		return 0, false
	}, o)
	if err != nil {
		return s.fail(err)
	}
	s.after, s.afterExpr = p, e
	return s
}

// sideShapes are the side's operators' shapes, on join input i.
func (s *Side) sideShapes(i int) []shape.Operator {
	ops := make([]shape.Operator, len(s.ops))
	for j, o := range s.ops {
		o.Side = shape.SideLeft
		if i == stream.RightSide {
			o.Side = shape.SideRight
		}
		ops[j] = o
	}
	return ops
}

// engineStages are the side's stages as the engine runs them: its
// operators, then the filter after them.
func (s *Side) engineStages() []engine.Stage {
	if len(s.stages) == 0 && s.after == nil {
		return nil
	}
	st := append([]engine.Stage(nil), s.stages...)
	if s.after != nil {
		st = append(st, engine.Stage{Transform: &whereStep{pred: s.after}})
	}
	return st
}
