package session

import (
	"fmt"
	"strings"
	"time"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/interval"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// OperatorName is the stateOperators[].operatorName and the state schema's
// operator name: Spark's SessionWindowStateStoreSaveExec.shortName.
const OperatorName = "sessionWindowStateStoreSaveExec"

// Output column names of the session window: Spark's session_window struct
// (start, end) flattened as agg flattens window.
const (
	ColStart = "session_window_start"
	ColEnd   = "session_window_end"
)

// Names in the state schema: the key's session start after the group
// columns, the value's session end before the aggregates.
const (
	stateStart = "session_start"
	stateEnd   = "session_end"
)

// CodeRetractionUnsupported: the input retracts a row, which a session
// window cannot undo (it keeps one aggregate per session, not the rows).
const CodeRetractionUnsupported = agg.CodeRetractionUnsupported

// Spec declares a session window aggregation: groupBy(session_window(Column,
// Gap), GroupBy...).agg(Aggregates...).
type Spec struct {
	// Column is the event time, a timestamp column.
	Column string
	// Gap is the session gap: a row at t opens the session [t, t+Gap).
	// Exactly one of Gap and GapColumn is set.
	Gap time.Duration
	// GapColumn is a string column holding each row's gap as an interval
	// ('5 minutes'), Spark 3.2+'s dynamic gap; a row whose gap is null,
	// malformed, zero or negative has no session and is skipped, as Spark
	// filters it.
	GapColumn string
	// GapExpr is the text of the expression GapColumn was derived from
	// (SQL's session_window(ts, CASE ... END)), recorded in the state
	// schema and the query shape so that another expression is a changed
	// gap; "" when the caller computes the column itself.
	GapExpr string
	// GroupBy names the group columns besides the session window, at
	// least one (Spark refuses a global session aggregation).
	GroupBy []string
	// Aggregates are agg's functions, computed per session.
	Aggregates []agg.Aggregate
	// Mode is agg.Append (a session once, when the watermark closes it) or
	// agg.Complete (every session each batch); update is refused as Spark
	// refuses it.
	Mode agg.OutputMode
	// WatermarkDelay is the delay of the watermark on Column: a positive
	// one is a watermark, 0 only with HasWatermark.
	WatermarkDelay time.Duration
	// HasWatermark says the query has a watermark on Column whatever its
	// delay (agg.Spec.HasWatermark): a delay of 0 is a watermark at the max
	// event time seen. A positive WatermarkDelay implies it.
	HasWatermark bool
	// NonANSI is spark.sql.ansi.enabled=false (agg.Spec.NonANSI).
	NonANSI bool
	// ColumnTypes gives the type of every input column the spec reads.
	ColumnTypes map[string]stream.Type
	// StartAs and EndAs name the output columns of the session's start and
	// end; "" is ColStart and ColEnd. They shape the output only, not the
	// state.
	StartAs, EndAs string
}

// plan is a validated Spec.
type plan struct {
	spec      Spec
	gapUs     int64
	groupType []stream.Type
	buf       *agg.Buffers
	schema    state.Schema
}

func invalid(format string, args ...any) error {
	return errcode.New(errcode.InvalidArgument, "", "fix the session window aggregation", format, args...)
}

func newPlan(spec Spec) (*plan, error) {
	p := &plan{spec: spec}
	switch spec.Mode {
	case agg.Append, agg.Complete:
	case agg.Update, 0:
		// Spark's UnsupportedOperationChecker (Spark 4:
		// _LEGACY_ERROR_TEMP_3102): a session can merge with another
		// later, so an updated row would not replace the earlier one.
		return nil, errcode.New(agg.CodeUnsupportedOutputMode, "", "use append or complete output mode",
			"Update output mode not supported for session window on streaming DataFrames/DataSets")
	default:
		return nil, invalid("unknown output mode %d", uint8(spec.Mode))
	}
	if spec.Mode == agg.Append && !spec.hasWatermark() {
		return nil, errcode.New(agg.CodeUnsupportedOutputMode, "", "define a watermark on the event-time column, or use complete mode",
			"Append output mode not supported when there are streaming aggregations on streaming DataFrames/DataSets without watermark")
	}
	if spec.WatermarkDelay < 0 {
		return nil, invalid("negative watermark delay %s", spec.WatermarkDelay)
	}
	if t, ok := spec.ColumnTypes[spec.Column]; !ok || t != stream.Timestamp {
		return nil, errcode.New(agg.CodeDatatypeMismatch, "", "give session_window a timestamp column",
			"session_window's time column %q is %v, want timestamp", spec.Column, t)
	}
	switch {
	case (spec.Gap != 0) == (spec.GapColumn != ""):
		return nil, invalid("session_window needs one gap: a duration or a gap column")
	case spec.GapColumn != "":
		if t, ok := spec.ColumnTypes[spec.GapColumn]; !ok || t != stream.String {
			return nil, errcode.New(agg.CodeDatatypeMismatch, "", "give the gap as an interval string column ('5 minutes')",
				"session_window's gap column %q is %v, want string", spec.GapColumn, t)
		}
	case spec.Gap <= 0 || spec.Gap%time.Microsecond != 0:
		return nil, invalid("session gap %s must be a positive number of microseconds", spec.Gap)
	}
	p.gapUs = spec.Gap.Microseconds()
	if len(spec.GroupBy) == 0 {
		return nil, invalid("Global aggregation with session window in streaming query is not supported: group by at least one column besides session_window")
	}
	if p.spec.StartAs == "" {
		p.spec.StartAs = ColStart
	}
	if p.spec.EndAs == "" {
		p.spec.EndAs = ColEnd
	}
	if p.spec.StartAs == p.spec.EndAs {
		return nil, invalid("the session's start and end are both named %q", p.spec.StartAs)
	}
	reserved := []string{p.spec.StartAs, p.spec.EndAs}
	for _, g := range spec.GroupBy {
		t, ok := spec.ColumnTypes[g]
		if !ok {
			return nil, invalid("group column %q is not a column of the rows", g)
		}
		if err := agg.CheckGroupKey(t); err != nil {
			return nil, err
		}
		p.groupType = append(p.groupType, t)
		reserved = append(reserved, g)
	}
	buf, err := agg.NewBuffers(spec.Aggregates, spec.ColumnTypes, spec.NonANSI, reserved...)
	if err != nil {
		return nil, err
	}
	p.buf = buf
	p.schema = state.Schema{OperatorName: OperatorName, Spec: p.specText()}
	for i, g := range spec.GroupBy {
		p.schema.Key = append(p.schema.Key, agg.GroupKeyField(g, p.groupType[i]))
	}
	p.schema.Key = append(p.schema.Key, state.Field{Name: stateStart, Type: stream.Timestamp})
	p.schema.Value = append([]state.Field{{Name: stateEnd, Type: stream.Timestamp}}, buf.ValueFields()...)
	return p, nil
}

// specText names what shapes the state (doc.go, State layout): the time
// column, the gap, the group columns and the aggregates. The gap is in it
// so that a restart with another gap is STATE_SCHEMA_MISMATCH: stored
// sessions were merged under the old gap.
func (p *plan) specText() string {
	var b strings.Builder
	fmt.Fprintf(&b, "session/v1 time=%s ", p.spec.Column)
	if p.spec.GapColumn != "" {
		fmt.Fprintf(&b, "gapColumn=%s", p.spec.GapColumn)
		if p.spec.GapExpr != "" {
			fmt.Fprintf(&b, " gapExpr=%s", p.spec.GapExpr)
		}
	} else {
		fmt.Fprintf(&b, "gap=%s", p.spec.Gap)
	}
	fmt.Fprintf(&b, " groupBy=%s aggs=%s", strings.Join(p.spec.GroupBy, ","), p.buf.SpecText())
	return b.String()
}

// GapText renders the gap as the query shape records it: the interval
// ('10 minutes'), the gap's expression, or the gap column's name.
func (s Spec) GapText() string {
	if s.GapExpr != "" {
		return s.GapExpr
	}
	if s.GapColumn != "" {
		return "column " + s.GapColumn
	}
	return interval.Format(s.Gap)
}

// Watermark returns the event-time column and delay the engine computes
// the watermark from, and false without one.
func (s Spec) Watermark() (column string, delay time.Duration, ok bool) {
	if !s.hasWatermark() {
		return "", 0, false
	}
	return s.Column, s.WatermarkDelay, true
}

// hasWatermark says the spec has a watermark: HasWatermark, or a positive
// delay.
func (s Spec) hasWatermark() bool { return s.HasWatermark || s.WatermarkDelay > 0 }

// InputColumns returns the input columns the operator reads, each once.
func (s Spec) InputColumns() []string {
	var cols []string
	add := func(c string) {
		for _, x := range cols {
			if x == c {
				return
			}
		}
		if c != "" {
			cols = append(cols, c)
		}
	}
	add(s.Column)
	add(s.GapColumn)
	for _, g := range s.GroupBy {
		add(g)
	}
	for _, a := range s.Aggregates {
		add(a.Column)
	}
	return cols
}

func (p *plan) String() string {
	return fmt.Sprintf("session_window(%s, %s) groupBy %v", p.spec.Column, p.spec.GapText(), p.spec.GroupBy)
}
