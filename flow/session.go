package flow

import (
	"fmt"
	"time"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/session"
	"github.com/ethstream/ethstream/shape"
	"github.com/ethstream/ethstream/stream"
)

// SessionAggregation is a session window aggregation,
// groupBy(session_window(Column, Gap), GroupBy...).agg(Aggregates...)
// (session.Spec without what the query supplies: the column types come
// from the rows' schema, the watermark from WithWatermark, which must be
// on Column for append mode).
type SessionAggregation struct {
	// Column is the event time; Gap the session gap, or GapColumn a string
	// column holding each row's gap as an interval ('5 minutes').
	Column    string
	Gap       time.Duration
	GapColumn string
	// GroupBy are the group columns besides the session window (at least
	// one, as Spark requires).
	GroupBy    []string
	Aggregates []agg.Aggregate
	// Mode is agg.Append or agg.Complete; update is refused as Spark
	// refuses it.
	Mode agg.OutputMode
}

// AggregateSessions appends a session window aggregation (package
// session): the next operator id, state in <checkpoint>/state/<id>. Its
// output rows are session_window_start, session_window_end, the group
// columns, then the aggregates: in append mode each session once, when the
// watermark passes its end; in complete mode every session each batch. It
// must be the plan's last stateful operator.
func (q *Query) AggregateSessions(a SessionAggregation) *Query {
	if !q.known {
		return q.fail(invalid("aggregate sessions: the rows' schema is unknown here (an operator declares none)"))
	}
	if prev := lastAgg(q.q.Stages); prev != nil {
		return q.fail(errcode.New(errcode.InvalidArgument, "", "aggregate the sessions before the other aggregation, or on the sources' rows",
			"a session window after an aggregation is not supported"))
	}
	if lastSession(q.q.Stages) != nil {
		return q.fail(invalid("a second session window aggregation is not supported"))
	}
	spec := session.Spec{Column: a.Column, Gap: a.Gap, GapColumn: a.GapColumn, GroupBy: a.GroupBy,
		Aggregates: a.Aggregates, Mode: a.Mode, ColumnTypes: map[string]stream.Type{}}
	for _, f := range q.schema.Fields {
		spec.ColumnTypes[f.Name] = f.Type
	}
	if wm := q.q.Watermark; wm != nil && wm.Column == a.Column {
		spec.WatermarkDelay, spec.HasWatermark = wm.Delay, true
	}
	if d, ok := q.markOf(a.Column); ok {
		spec.WatermarkDelay, spec.HasWatermark = d, true
	}
	op, err := session.New(spec)
	if err != nil {
		return q.fail(err)
	}
	q.ops = append(q.ops, sessionShape(op, q.input))
	q.input = nil
	q.schema = op.OutputSchema()
	q.q.Stages = append(q.q.Stages, engine.Stage{Operator: op})
	return q
}

// sessionShape is a session window aggregation's entry in the query shape.
func sessionShape(op *session.Operator, input []string) shape.Operator {
	spec := op.Spec()
	o := shape.Operator{Kind: shape.KindSessionWindow, Window: &shape.Window{Column: spec.Column, Gap: spec.GapText()},
		Keys: append([]string{}, spec.GroupBy...), StateSchema: op.Schema().String(), Input: append([]string{}, input...), Aggregates: []string{}}
	for _, a := range op.Aggregates() {
		col := a.Column
		if col == "" {
			col = "*"
		}
		o.Aggregates = append(o.Aggregates, fmt.Sprintf("%s(%s) as %s", a.Kind, col, a.As))
	}
	return o
}

func lastSession(stages []engine.Stage) *session.Operator {
	for i := len(stages) - 1; i >= 0; i-- {
		if s, ok := stages[i].Operator.(*session.Operator); ok {
			return s
		}
	}
	return nil
}
