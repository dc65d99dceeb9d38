package flow

import (
	"fmt"
	"slices"
	"time"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/filter"
	"github.com/ethstream/ethstream/join"
	"github.com/ethstream/ethstream/shape"
	"github.com/ethstream/ethstream/stream"
)

// Side is one input of a stream-stream join (Query.Join): the sources it
// unions by name (each keeping its own offsets, so sources are added,
// removed or tombstoned on either side as on a one-input query), its
// watermark and its filter. Build one with From.
type Side struct {
	alias   string
	sources []engine.NamedSource
	schema  stream.Schema
	wm      *engine.Watermark
	where   stream.Predicate
	// whereExpr and whereOpts are where as given (Where).
	whereExpr filter.Expr
	whereOpts filter.Options
	// stages are the side's steps before the join (a deduplication, a
	// filter after it: join_side.go), ops their stateful operators'
	// shapes, input the steps since the last one.
	stages []engine.Stage
	ops    []shape.Operator
	input  []string
	// after is the filter after the side's deduplication (Where once one
	// is there): Spark pushes no filter through a Deduplicate.
	after     *filter.Predicate
	afterExpr filter.Expr
	err       error
}

// From starts a join side named alias (the relation's alias: output
// columns both sides have are prefixed with it, alias_column).
func From(alias string) *Side { return &Side{alias: alias} }

func (s *Side) fail(err error) *Side {
	if s.err == nil {
		s.err = err
	}
	return s
}

// Read adds a source to the side under name (its name in the checkpoint,
// unique across both sides). The side's rows are its sources' unioned, with
// the literal column "source", as Query.Read.
func (s *Side) Read(name string, src stream.Source) *Side {
	if src == nil {
		return s.fail(invalid("source %q of side %s is nil", name, s.alias))
	}
	if name == "" {
		return s.fail(invalid("a join's source needs a name (side %s)", s.alias))
	}
	if len(s.ops) > 0 {
		return s.fail(invalid("source %q read after side %s's deduplication: read every source first", name, s.alias))
	}
	s.sources = append(s.sources, engine.NamedSource{Name: name, Source: src})
	sc := src.Schema()
	sc.Fields = append(append([]stream.Field(nil), sc.Fields...), stream.Field{Name: stream.ColSource, Type: stream.String})
	sc.Key = nil
	if len(s.sources) == 1 {
		s.schema = sc
		return s
	}
	u, err := union(s.schema, sc)
	if err != nil {
		return s.fail(invalid("source %q does not union with the sources before it on side %s: %v", name, s.alias, err))
	}
	s.schema = u
	return s
}

// Schema is the side's rows' schema: its sources' unioned, with the
// column "source"; or the first error of the side.
func (s *Side) Schema() (stream.Schema, error) { return s.schema, s.err }

// WithWatermark defines the side's event time, as Query.WithWatermark; a
// query's sides' watermarks combine by spark.sql.streaming.multipleWatermarkPolicy
// (min, the default, or max).
func (s *Side) WithWatermark(column string, delay time.Duration) *Side {
	if len(s.ops) > 0 {
		return s.fail(invalid("side %s's watermark set after its deduplication: set it first", s.alias))
	}
	f := s.schema.Field(column)
	if f == nil || f.Type != stream.Timestamp {
		return s.fail(invalid("watermark column %q is not a timestamp of side %s: %s", column, s.alias, s.schema))
	}
	s.wm = &engine.Watermark{Column: column, Delay: delay}
	return s
}

// Where keeps the side's rows for which e is TRUE, before the join, as
// Spark runs side.withWatermark(...).where(e): its conjuncts that do not
// read the watermark's column run below the watermark too
// (PushPredicateThroughNonJoin), so only the rows they keep advance the
// side's watermark; the others filter after it. Spark's ANSI defaults.
func (s *Side) Where(e filter.Expr) *Side { return s.WhereWith(e, filter.Options{}) }

// WhereWith is Where compiled under o.
func (s *Side) WhereWith(e filter.Expr, o filter.Options) *Side {
	types := func(name string) (stream.Type, bool) {
		if f := s.schema.Field(name); f != nil {
			return f.Type, true
		}
		return 0, false
	}
	p, err := filter.CompileWith(e, types, o)
	if err != nil {
		return s.fail(err)
	}
	if len(s.ops) > 0 {
		return s.whereAfter(e, o)
	}
	if s.where != nil {
		return s.fail(invalid("side %s has a filter already: combine the two with And", s.alias))
	}
	s.where, s.whereExpr, s.whereOpts = p, e, o
	return s
}

// below is the part of the side's filter that runs below its watermark:
// the conjuncts that do not read the event-time column (nil: none, or no
// watermark).
func (s *Side) below() (stream.Predicate, error) {
	if s.where == nil || s.wm == nil {
		return nil, nil
	}
	var below filter.Expr
	for _, c := range filter.Conjuncts(s.whereExpr) {
		if slices.Contains(filter.Columns(c), s.wm.Column) {
			continue
		}
		if below == nil {
			below = c
		} else {
			below = filter.And{L: below, R: c}
		}
	}
	if below == nil {
		return nil, nil
	}
	return filter.CompileWith(below, func(name string) (stream.Type, bool) {
		if f := s.schema.Field(name); f != nil {
			return f.Type, true
		}
		return 0, false
	}, s.whereOpts)
}

// reads is the projection of a pruned side whose rows go to the join as
// read: the columns the join reads (join.Operator.InputColumns) and its
// filter's, so that its sources decode no other (the engine adds its
// watermark's, and the columns the open join reads beyond them).
func (s *Side) reads(join []string) []string {
	cols := slices.Clone(join)
	if s.where != nil {
		for _, c := range s.where.Columns() {
			if !slices.Contains(cols, c) {
				cols = append(cols, c)
			}
		}
	}
	return cols
}

// JoinOn is a join's type and condition.
type JoinOn struct {
	Type join.Type
	// LeftKeys and RightKeys are the equi-join columns, paired by position.
	LeftKeys, RightKeys []string
	// Range is the time-range condition: e.g. Between("ts", "ts", 0,
	// 10*time.Minute) for left.ts BETWEEN right.ts AND right.ts + 10m.
	Range []join.Bound
	// Columns, when a side's is not nil, prune that side to the columns
	// the query reads from the join's rows (join.Side.Columns): the state
	// and the rows keep only them and the join's own columns, and the
	// columns Where reads.
	Columns [2][]string
	// Where, when set, filters the join's rows (its columns named as the
	// join names them: alias_col for a name both sides have), as Spark's
	// left.join(right, ...).where(Where): placed as Spark's optimizer
	// places it (join.Pushdown), its conjuncts on one side below the join
	// where the join type allows, an outer join narrowed when they reject
	// its null-supplying side's nulls, the rest after the join. Spark's
	// rules on watermarks and conditions apply to Type as written.
	Where filter.Expr
}

// Between is left.leftCol BETWEEN right.rightCol + lo AND right.rightCol +
// hi, as the two bounds Spark splits it into.
func Between(leftCol, rightCol string, lo, hi time.Duration) []join.Bound {
	return []join.Bound{
		{LeftColumn: leftCol, Op: join.GE, RightColumn: rightCol, RightOffset: lo},
		{LeftColumn: leftCol, Op: join.LE, RightColumn: rightCol, RightOffset: hi},
	}
}

// Join makes the query a stream-stream join of left and right: operator 0
// (state in <checkpoint>/state/0), before any other step; the query reads
// no source of its own. Its rows are the left columns then the right ones
// (a left semi join: the left ones), in append mode; Spark's rules decide
// which join types need which watermarks and conditions (package join).
// Stateful operators may follow it (Aggregate windowing by a side's
// event-time column, AggregateSessions, DropDuplicates): each side's
// event-time column keeps its side's watermark, and the engine hands the
// next operator the join's output watermark (join_chain.go).
func (q *Query) Join(left, right *Side, on JoinOn) *Query {
	if len(q.q.Sources) > 0 || len(q.q.Stages) > 0 || q.q.Watermark != nil {
		return q.fail(invalid("join after the query read sources or planned a step: a join's sources are its sides'"))
	}
	for _, s := range []*Side{left, right} {
		if s == nil {
			return q.fail(invalid("join with a nil side"))
		}
		if s.err != nil {
			return q.fail(s.err)
		}
		if len(s.sources) == 0 {
			return q.fail(invalid("side %s reads no source", s.alias))
		}
	}
	if left.alias == right.alias {
		return q.fail(invalid("both sides of the join are named %q", left.alias))
	}
	var rest filter.Expr
	if on.Where != nil {
		// The WHERE reads the join's rows by their names (its pushed
		// conjuncts run over them again, join.Pushed.Above): a pruned
		// side keeps its columns too.
		on.Columns = whereColumns(on, left, right)
		var err error
		if left, right, rest, on.Type, err = pushWhere(left, right, on); err != nil {
			return q.fail(err)
		}
	}
	spec := join.Spec{Type: on.Type, Range: on.Range,
		Left:  join.Side{Alias: left.alias, Schema: left.schema, Keys: on.LeftKeys, Columns: on.Columns[0]},
		Right: join.Side{Alias: right.alias, Schema: right.schema, Keys: on.RightKeys, Columns: on.Columns[1]}}
	for i, s := range []*Side{left, right} {
		if s.wm == nil {
			continue
		}
		js := &spec.Left
		if i == 1 {
			js = &spec.Right
		}
		js.Watermark, js.Delay = s.wm.Column, s.wm.Delay
	}
	op, err := join.New(spec)
	if err != nil {
		return q.fail(err)
	}
	for i, s := range []*Side{left, right} {
		pre, err := s.below()
		if err != nil {
			return q.fail(err)
		}
		es := engine.Side{Name: s.alias, Where: s.where, PreWatermark: pre, Watermark: s.wm, Stages: s.engineStages()}
		if on.Columns[i] != nil && es.Stages == nil {
			es.Columns = s.reads(op.InputColumns(i))
		}
		for _, ns := range s.sources {
			es.Sources = append(es.Sources, ns.Name)
			q.q.Sources = append(q.q.Sources, ns)
		}
		q.q.Sides = append(q.q.Sides, es)
		if s.where != nil {
			q.filters = append(q.filters, fmt.Sprintf("%s: %s", s.alias, s.where))
		}
		if s.after != nil {
			q.filters = append(q.filters, fmt.Sprintf("%s after its deduplication: %s", s.alias, s.after))
		}
		// The side's operators before the join's shape: the plan lists them
		// in execution order (left, right, join), the engine gives the ids.
		q.ops = append(q.ops, s.sideShapes(i)...)
	}
	marks := make([]*shape.Watermark, 2)
	for i, s := range []*Side{left, right} {
		if s.wm != nil {
			marks[i] = &shape.Watermark{Column: s.wm.Column, DelayUs: s.wm.Delay.Microseconds()}
		}
	}
	q.ops = append(q.ops, shape.Operator{Kind: shape.KindJoin, Keys: op.KeyColumns(), JoinType: on.Type.String(),
		StateSchema: op.Schema().String(), Input: []string{}, Aggregates: []string{}, Watermarks: marks})
	q.schema = op.OutputSchema()
	q.joinMarks(op, left, right)
	q.q.Stages = append(q.q.Stages, engine.Stage{Operator: op})
	if rest != nil {
		q.Where(rest)
	}
	return q
}

// whereColumns is on.Columns with, on each pruned side, the columns of
// that side on.Where reads (by the join's names for them, join.OutputName).
func whereColumns(on JoinOn, left, right *Side) [2][]string {
	schemas, aliases := [2]stream.Schema{left.schema, right.schema}, [2]string{left.alias, right.alias}
	out := on.Columns
	for _, name := range filter.Columns(on.Where) {
		for side := range schemas {
			if out[side] == nil {
				continue
			}
			for _, f := range schemas[side].Fields {
				if n, ok := join.OutputName(on.Type, schemas, aliases, side, f.Name); ok && n == name && !slices.Contains(out[side], f.Name) {
					out[side] = append(slices.Clip(out[side]), f.Name)
				}
			}
		}
	}
	return out
}

// pushWhere places on.Where (join.Pushdown): copies of the sides with the
// conjuncts pushed into each added to its filter, the conjuncts left for
// after the join, and the type the join runs as. The join as written is
// checked first (Spark's rules for its type), and the WHERE against its
// rows.
func pushWhere(left, right *Side, on JoinOn) (*Side, *Side, filter.Expr, join.Type, error) {
	declared := join.Spec{Type: on.Type, Range: on.Range,
		Left:  join.Side{Alias: left.alias, Schema: left.schema, Keys: on.LeftKeys},
		Right: join.Side{Alias: right.alias, Schema: right.schema, Keys: on.RightKeys}}
	for i, s := range []*Side{left, right} {
		js := &declared.Left
		if i == 1 {
			js = &declared.Right
		}
		if s.wm != nil {
			js.Watermark, js.Delay = s.wm.Column, s.wm.Delay
		}
	}
	op, err := join.New(declared)
	if err != nil {
		return nil, nil, nil, 0, err
	}
	out := op.OutputSchema()
	if _, err := filter.Compile(on.Where, func(name string) (stream.Type, bool) {
		if f := out.Field(name); f != nil {
			return f.Type, true
		}
		return 0, false
	}); err != nil {
		return nil, nil, nil, 0, err
	}
	pd := join.Pushdown(on.Type, on.Where, [2]stream.Schema{left.schema, right.schema}, [2]string{left.alias, right.alias}, filter.Options{})
	sides := [2]*Side{left, right}
	for i, e := range pd.Sides {
		if e == nil {
			continue
		}
		c := *sides[i]
		o := c.whereOpts
		if len(c.ops) > 0 {
			// Above the side's deduplication (Spark pushes no filter
			// through a Deduplicate).
			if c.whereAfter(e, o); c.err != nil {
				return nil, nil, nil, 0, c.err
			}
			sides[i] = &c
			continue
		}
		if c.whereExpr != nil {
			e = filter.And{L: c.whereExpr, R: e}
		}
		c.where, c.whereExpr = nil, nil
		if c.WhereWith(e, o); c.err != nil {
			return nil, nil, nil, 0, c.err
		}
		sides[i] = &c
	}
	return sides[0], sides[1], pd.Above(), pd.Type, nil
}

// Schema returns the schema of the rows at the end of the plan so far (a
// sink's table is created with it), or the plan's first error; an error
// too when an operator of unknown output is in the plan.
func (q *Query) Schema() (stream.Schema, error) {
	if q.err != nil {
		return stream.Schema{}, q.err
	}
	if !q.known {
		return stream.Schema{}, invalid("the rows' schema is unknown here (an operator declares none)")
	}
	return q.schema, nil
}
