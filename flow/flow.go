package flow

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/dedup"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/filter"
	"github.com/ethstream/ethstream/internal/interval"
	"github.com/ethstream/ethstream/shape"
	"github.com/ethstream/ethstream/stream"
)

// Query builds a streaming query: sources, then a plan of steps in order
// (filters, projections, stateful aggregations), then a sink. Each method
// appends to the plan and returns the query, so calls chain; the first
// error is kept and returned by Build or Run. A Query is not safe for
// concurrent use.
type Query struct {
	q engine.Query
	// schema is that of the rows at the end of the plan so far; known is
	// false after an operator that declares none.
	schema stream.Schema
	known  bool
	// ops are the shapes of the stateful operators so far, input the
	// stateless steps since the last one, filters the filters before the
	// first one; custom is set when an operator of unknown shape
	// (Operator) is in the plan.
	ops     []shape.Operator
	input   []string
	filters []string
	custom  bool
	shape   *shape.Shape
	noShape bool
	err     error
	// marks are the event-time columns of the rows after a join, with
	// their side's delay (join_chain.go); nil in a one-input query.
	// chainDelay is the delay of the first aggregation after a join, that
	// a later one closes its windows by; chainMark says it has one.
	marks      map[string]time.Duration
	chainDelay time.Duration
	chainMark  bool
}

// New starts a query named name (the progress events' name).
func New(name string) *Query {
	return &Query{q: engine.Query{Name: name}, known: true}
}

func (q *Query) fail(err error) *Query {
	if q.err == nil {
		q.err = err
	}
	return q
}

func invalid(format string, args ...any) error {
	return errcode.New(errcode.InvalidArgument, "", "fix the query's plan", format, args...)
}

// Read adds a source under name (its name in the checkpoint, as a named
// source of Spark's source evolution). Every source of a query must be
// read before the plan's first step; their rows are unioned, each with the
// literal column "source" (stream.ColSource) holding its name, so the
// sources of one query must declare the same schema (Source.Schema).
func (q *Query) Read(name string, src stream.Source) *Query {
	if len(q.q.Stages) > 0 {
		return q.fail(invalid("source %q is read after the plan's first step: read every source first", name))
	}
	if src == nil {
		return q.fail(invalid("source %q is nil", name))
	}
	q.q.Sources = append(q.q.Sources, engine.NamedSource{Name: name, Source: src})
	s := src.Schema()
	s.Fields = append(append([]stream.Field(nil), s.Fields...), stream.Field{Name: stream.ColSource, Type: stream.String})
	s.Key = nil
	if len(q.q.Sources) == 1 {
		q.schema = s
		return q
	}
	u, err := union(q.schema, s)
	if err != nil {
		return q.fail(invalid("source %q does not union with the sources before it: %v", name, err))
	}
	q.schema = u
	return q
}

// union is the schema of the rows of two sources read as one: the same
// columns by name with the same types; a column is nullable if it is in
// either.
func union(a, b stream.Schema) (stream.Schema, error) {
	if len(a.Fields) != len(b.Fields) {
		return a, fmt.Errorf("%d columns against %d", len(b.Fields), len(a.Fields))
	}
	u := stream.Schema{Fields: append([]stream.Field(nil), a.Fields...)}
	for i := range u.Fields {
		f := b.Field(u.Fields[i].Name)
		if f == nil || f.Type != u.Fields[i].Type {
			return a, fmt.Errorf("column %s %v is not in both with that type", u.Fields[i].Name, u.Fields[i].Type)
		}
		u.Fields[i].Nullable = u.Fields[i].Nullable || f.Nullable
	}
	return u, nil
}

// WithWatermark defines event time on column (a timestamp of the sources'
// rows) with the given delay, as Spark's withWatermark: the watermark is
// the maximum event time read minus delay. It applies to every stateful
// operator of the plan: the first drops late rows and closes windows by it,
// and each later one closes its windows by it too (operators.go in engine).
func (q *Query) WithWatermark(column string, delay time.Duration) *Query {
	if len(q.ops) > 0 || q.custom {
		return q.fail(invalid("withWatermark after a stateful operator: define it on the sources' rows"))
	}
	if delay < 0 {
		// Spark's Dataset.withWatermark; a delay of 0 is a watermark, the
		// max event time seen.
		return q.fail(invalid("withWatermark(%s): delay threshold (%s) should not be negative", column, delay))
	}
	if q.known {
		f := q.schema.Field(column)
		if f == nil || f.Type != stream.Timestamp {
			return q.fail(invalid("watermark column %q is not a timestamp of %s", column, q.schema))
		}
	}
	q.q.Watermark = &engine.Watermark{Column: column, Delay: delay}
	return q
}

// Where keeps the rows for which e is TRUE (SQL's three-valued logic:
// FALSE and NULL drop the row). Build it with Col and the comparison
// helpers, e.g. Col("v").Gt(0), or from filter's expression types.
func (q *Query) Where(e filter.Expr) *Query {
	if !q.known {
		return q.fail(invalid("where %s: the rows' schema is unknown here (an operator declares none)", e))
	}
	p, err := filter.Compile(e, func(name string) (stream.Type, bool) {
		if f := q.schema.Field(name); f != nil {
			return f.Type, true
		}
		return 0, false
	})
	if err != nil {
		return q.fail(err)
	}
	if len(q.ops) == 0 && !q.custom {
		q.filters = append(q.filters, p.String())
	} else {
		q.input = append(q.input, "where "+p.String())
	}
	q.q.Stages = append(q.q.Stages, engine.Stage{Transform: &whereStep{pred: p}})
	return q
}

// Select keeps the listed columns, in order, and the derived ones
// (WindowTime); the rows' key keeps the key columns still selected.
func (q *Query) Select(cols ...Column) *Query {
	if len(cols) == 0 {
		return q.fail(invalid("select of no column"))
	}
	t := &selectStep{cols: cols}
	if q.known {
		s, err := t.OutputSchema(q.schema)
		if err != nil {
			return q.fail(err)
		}
		q.schema = s
	}
	q.renameMarks(cols)
	q.input = append(q.input, t.String())
	q.q.Stages = append(q.q.Stages, engine.Stage{Transform: t})
	return q
}

// Transform appends a custom stateless step.
func (q *Query) Transform(t stream.Transform) *Query {
	if q.known {
		s, err := t.OutputSchema(q.schema)
		if err != nil {
			return q.fail(err)
		}
		q.schema = s
	}
	q.input = append(q.input, t.String())
	q.q.Stages = append(q.q.Stages, engine.Stage{Transform: t})
	return q
}

// Aggregation is a grouped aggregation, optionally over event-time windows
// (agg.Spec without what the query supplies: the column types come from
// the rows' schema, the watermark from WithWatermark).
type Aggregation struct {
	// Window groups by event-time windows; nil groups by GroupBy alone.
	Window     *agg.Window
	GroupBy    []string
	Aggregates []agg.Aggregate
	// Mode is the output mode; 0 is update. A later operator reads the
	// rows this one emits: in append mode, each window once, when the
	// watermark closes it (what Spark allows for chained aggregations).
	Mode agg.OutputMode
}

// Aggregate appends a stateful grouped aggregation: the next operator id
// (0 for the first), state in <checkpoint>/state/<id>. Its output rows are
// window_start, window_end (windowed), the group columns, then the
// aggregates; a later aggregation windows them by WindowTime.
func (q *Query) Aggregate(a Aggregation) *Query {
	if !q.known {
		return q.fail(invalid("aggregate: the rows' schema is unknown here (an operator declares none)"))
	}
	if lastSession(q.q.Stages) != nil {
		return q.fail(invalid("an aggregation after a session window aggregation is not supported"))
	}
	if prev := lastAgg(q.q.Stages); prev != nil && prev.Spec().Mode != agg.Append {
		// Spark allows several stateful operators in append mode only: an
		// update would reach the next operator as a second row for the
		// same window.
		return q.fail(errcode.New(agg.CodeUnsupportedOutputMode, "", "give the aggregation before it Mode: agg.Append",
			"an aggregation after one in %s mode: chained stateful operators run in append mode only", prev.Spec().Mode))
	}
	spec := agg.Spec{Window: a.Window, GroupBy: a.GroupBy, Aggregates: a.Aggregates, Mode: a.Mode,
		ColumnTypes: map[string]stream.Type{}}
	for _, f := range q.schema.Fields {
		spec.ColumnTypes[f.Name] = f.Type
	}
	if wm := q.q.Watermark; wm != nil {
		// The watermark reaches every operator; the first reads the
		// watermark's own column, a later one the window it derives.
		spec.WatermarkDelay, spec.HasWatermark = wm.Delay, true
		// A deduplication before it passes the rows through unchanged.
		if lastAgg(q.q.Stages) == nil && (a.Window == nil || a.Window.Column != wm.Column) {
			spec.WatermarkColumn = wm.Column
		}
	}
	if q.marks != nil {
		// After a join: the first aggregation windows by a side's
		// event-time column, a later one by the window before it.
		if lastAgg(q.q.Stages) != nil {
			spec.WatermarkDelay, spec.HasWatermark = q.chainDelay, q.chainMark
		} else if a.Window != nil {
			spec.WatermarkDelay, spec.HasWatermark = q.markOf(a.Window.Column)
			q.chainDelay, q.chainMark = spec.WatermarkDelay, spec.HasWatermark
		}
	}
	op, err := agg.New(spec)
	if err != nil {
		return q.fail(err)
	}
	q.ops = append(q.ops, aggShape(spec, op.Schema().String(), q.input))
	q.input = nil
	q.schema = op.OutputSchema()
	q.q.Stages = append(q.q.Stages, engine.Stage{Operator: op})
	return q
}

// DropDuplicates appends a deduplication, Spark's dropDuplicates(cols): the
// next operator id, state in <checkpoint>/state/<id>. It emits each row
// whose cols (every column if none) were not seen before, and drops the
// others (package dedup). With a watermark, late rows are dropped, and the
// state of a key whose cols include the event-time column is evicted once
// the watermark passes it; without, the state grows with every new key.
func (q *Query) DropDuplicates(cols ...string) *Query { return q.dedup(cols, false) }

// DropDuplicatesWithinWatermark appends Spark's
// dropDuplicatesWithinWatermark(cols): as DropDuplicates, but a key is
// kept until the watermark passes its first row's event time plus the
// watermark's delay, whether or not cols include the event time. It needs
// WithWatermark before it.
func (q *Query) DropDuplicatesWithinWatermark(cols ...string) *Query { return q.dedup(cols, true) }

func (q *Query) dedup(cols []string, within bool) *Query {
	if !q.known {
		return q.fail(invalid("dropDuplicates: the rows' schema is unknown here (an operator declares none)"))
	}
	if lastSession(q.q.Stages) != nil {
		return q.fail(invalid("dropDuplicates after a session window aggregation is not supported"))
	}
	in := q.schema
	if len(q.q.Columns) > 0 && len(q.ops) == 0 && !q.custom {
		// The rows read carry the read projection's columns only (Columns
		// must come before the deduplication to narrow them).
		in = stream.Schema{}
		for _, f := range q.schema.Fields {
			if slices.Contains(q.q.Columns, f.Name) {
				in.Fields = append(in.Fields, f)
			}
		}
	}
	spec := dedup.Spec{Columns: cols, Input: in, WithinWatermark: within}
	if wm := q.q.Watermark; wm != nil && in.Field(wm.Column) != nil {
		spec.WatermarkColumn, spec.WatermarkDelay = wm.Column, wm.Delay
	}
	if q.marks != nil && lastAgg(q.q.Stages) == nil {
		col, d, err := q.markIn(in)
		if err != nil {
			return q.fail(err)
		}
		spec.WatermarkColumn, spec.WatermarkDelay = col, d
	}
	op, err := dedup.New(spec)
	if err != nil {
		return q.fail(err)
	}
	if err := q.refuseRetractions(op); err != nil {
		return q.fail(err)
	}
	q.ops = append(q.ops, shape.Operator{Kind: shape.KindDeduplicate, Keys: op.Columns(), StateSchema: op.Schema().String(),
		Input: append([]string{}, q.input...), Aggregates: []string{}})
	q.input = nil
	q.q.Stages = append(q.q.Stages, engine.Stage{Operator: op})
	return q
}

// OperatorShapes are the query-shape entries of the stateful operators
// appended so far, in flow order (for a plan recorded with Shape; the
// engine gives the ids when the query starts).
func (q *Query) OperatorShapes() []shape.Operator { return slices.Clone(q.ops) }

// Operator appends a stateful operator built elsewhere (the SQL
// compiler's), after the ones before it. Its rows' schema is the one it
// declares (stream.SchemaOperator), else unknown; its shape is unknown to
// the query, so a query with one records the shape given to Shape, or none.
func (q *Query) Operator(op stream.Operator) *Query {
	if op == nil {
		return q.fail(invalid("nil operator"))
	}
	q.custom = true
	q.known = false
	if so, ok := op.(stream.SchemaOperator); ok {
		q.schema, q.known = so.OutputSchema(), true
	}
	q.q.Stages = append(q.q.Stages, engine.Stage{Operator: op})
	return q
}

// Columns sets the read projection: the source columns the plan reads (and
// stream.ColSource if it reads the source's name). By default every column.
func (q *Query) Columns(cols ...string) *Query {
	q.q.Columns = cols
	return q
}

// WriteTo sets the sink.
func (q *Query) WriteTo(sink stream.Sink) *Query {
	q.q.Sink = sink
	return q
}

// Trigger sets when batches run (default: processingTime 0, as fast as
// possible, until the context ends).
func (q *Query) Trigger(t engine.Trigger) *Query {
	q.q.Trigger = t
	return q
}

// Conf sets a Spark-named setting (docs/contracts.md, Configuration), e.g.
// spark.sql.shuffle.partitions, or spark.sql.streaming.stateStore.partitions
// to repartition every operator's state at the next start.
func (q *Query) Conf(key, value string) *Query {
	if q.q.Conf == nil {
		q.q.Conf = map[string]string{}
	}
	q.q.Conf[key] = value
	return q
}

// Confs sets every setting of m (Conf).
func (q *Query) Confs(m map[string]string) *Query {
	for k, v := range m {
		q.Conf(k, v)
	}
	return q
}

// MaxBatches stops a run after n data batches (0: no limit).
func (q *Query) MaxBatches(n int) *Query {
	q.q.MaxDataBatches = n
	return q
}

// SinkShared lets a new checkpoint write a table another query writes.
func (q *Query) SinkShared(shared bool) *Query {
	q.q.SinkShared = shared
	return q
}

// Shape records s as the query's shape (the restart rules compare it at
// every start) instead of the one the plan derives; nil records none.
func (q *Query) Shape(s *shape.Shape) *Query {
	q.shape, q.noShape = s, s == nil
	return q
}

// Build returns the engine's query, or the first error of the plan.
func (q *Query) Build() (engine.Query, error) {
	if q.err != nil {
		return engine.Query{}, q.err
	}
	eq := q.q
	eq.Stages = append([]engine.Stage(nil), q.q.Stages...)
	if len(eq.Stages) == 1 && eq.Stages[0].Operator != nil {
		// A plan of one operator is the engine's shorthand for it.
		eq.Operator, eq.Stages = eq.Stages[0].Operator, nil
	}
	switch {
	case q.shape != nil:
		s := *q.shape
		eq.Shape = &s
	case q.noShape || q.custom || eq.Sink == nil:
	default:
		eq.Shape = q.derivedShape()
	}
	return eq, nil
}

// Run builds the query and runs it on the checkpoint in o under its
// trigger (engine.Run). It may be called again once it returned, as a
// restart of the query: the same operators are opened again.
func (q *Query) Run(ctx context.Context, o engine.Options) (*engine.RunSummary, error) {
	eq, err := q.Build()
	if err != nil {
		return nil, err
	}
	return engine.Run(ctx, eq, o)
}

// derivedShape is the shape of a plan of aggregations.
func (q *Query) derivedShape() *shape.Shape {
	s := shape.Shape{From: "", Columns: q.q.Columns, Filter: strings.Join(q.filters, " AND "),
		OutputSchema: q.schema.String(), Sink: shape.Sink{Format: q.q.Sink.Description()}, Trigger: q.q.Trigger.Kind.String()}
	for _, ns := range q.q.Sources {
		desc := ns.Source.Description()
		prov := desc
		if i := strings.IndexAny(desc, "[( "); i > 0 {
			prov = desc[:i]
		}
		s.Sources = append(s.Sources, shape.Source{Name: ns.Name, Provider: prov, Location: desc})
	}
	if wm := q.q.Watermark; wm != nil {
		s.Watermark = &shape.Watermark{Column: wm.Column, DelayUs: wm.Delay.Microseconds()}
	}
	s.OutputMode = "append" // a deduplication's
	if a := lastAgg(q.q.Stages); a != nil {
		s.OutputMode = a.Spec().Mode.String()
	}
	if a := lastSession(q.q.Stages); a != nil {
		s.OutputMode = a.Spec().Mode.String()
	}
	s = s.WithOperators(q.ops)
	return &s
}

func lastAgg(stages []engine.Stage) *agg.Operator {
	for i := len(stages) - 1; i >= 0; i-- {
		if a, ok := stages[i].Operator.(*agg.Operator); ok {
			return a
		}
	}
	return nil
}

// aggShape is an aggregation's entry in the query shape.
func aggShape(spec agg.Spec, stateSchema string, input []string) shape.Operator {
	o := shape.Operator{Kind: shape.KindAggregate, Keys: append([]string{}, spec.GroupBy...), StateSchema: stateSchema,
		Input: append([]string{}, input...), Aggregates: []string{}}
	if w := spec.Window; w != nil {
		o.Window = &shape.Window{Column: w.Column, Size: interval.Format(w.Size)}
		if w.Slide != 0 && w.Slide != w.Size {
			o.Window.Slide = interval.Format(w.Slide)
		}
	}
	for _, a := range spec.Aggregates {
		col := a.Column
		if col == "" {
			col = "*"
		}
		name := a.As
		if name == "" {
			if a.Column == "" {
				name = "count"
			} else {
				name = a.Kind.String() + "_" + a.Column
			}
		}
		o.Aggregates = append(o.Aggregates, fmt.Sprintf("%s(%s) as %s", a.Kind, col, name))
	}
	return o
}
