package agg

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ethstream/ethstream/agg/hllpp"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// Error codes of this package, in the style of docs/contracts.md, Errors (Spark's names
// where Spark has one).
const (
	// CodeUnsupportedOutputMode: an output mode that cannot work for the
	// query, e.g. complete or append over event-time windows without a watermark.
	CodeUnsupportedOutputMode = "UNSUPPORTED_OUTPUT_MODE"
	// CodeUnresolvedColumn: a column the spec names is missing from the input.
	CodeUnresolvedColumn = "UNRESOLVED_COLUMN"
	// CodeDatatypeMismatch: a column has a type the spec cannot use.
	CodeDatatypeMismatch = "DATATYPE_MISMATCH"
	// CodeNullGroupKey: a BIGINT or TIMESTAMP group column holds a null in
	// a checkpoint whose state is format 1, which has no null for such a
	// key (in format 2, and for strings, a null key is a group).
	CodeNullGroupKey = "NULL_GROUP_KEY"
	// CodeArithmeticOverflow: a long sum left BIGINT: a sum under
	// spark.sql.ansi.enabled (the default), a format-1 avg always. Spark's name.
	CodeArithmeticOverflow = "ARITHMETIC_OVERFLOW"
	// CodeRetractionUnsupported: the input carries (or, with
	// Spec.Retractions, may carry) retractions, and the query cannot undo a
	// row: min and max keep no per-row history, and a query without count(*)
	// that did not declare Retractions keeps no row count to know when a
	// group is empty.
	CodeRetractionUnsupported = "RETRACTION_UNSUPPORTED"
	// CodeRetractionUnmatched: a retraction takes back more rows of a group
	// than the group holds (its row count would go negative), i.e. the
	// source retracted a row it never emitted.
	CodeRetractionUnmatched = "RETRACTION_UNMATCHED"
)

// AggKind is an aggregate function. Values are never renumbered (they are
// recorded in the state schema's Spec text by name, not by number).
type AggKind uint8

// Aggregate functions.
const (
	Count AggKind = 1 // count(*) or, with a Column, count of its non-null values
	Sum   AggKind = 2 // sum of an Int64 (-> Int64) or Float64 (-> Float64) column
	Min   AggKind = 3 // minimum of an Int64, Timestamp or Float64 column, same type
	Max   AggKind = 4 // maximum of an Int64, Timestamp or Float64 column, same type
	// Avg is the mean of an Int64 or Float64 column, as Float64. State keeps
	// the sum (in the input type) and the non-null count, as Spark's buffer.
	Avg AggKind = 5
)

func (k AggKind) String() string {
	switch k {
	case Count:
		return "count"
	case Sum:
		return "sum"
	case Min:
		return "min"
	case Max:
		return "max"
	case Avg:
		return "avg"
	case ApproxCountDistinct:
		return "approx_count_distinct"
	}
	return fmt.Sprintf("AggKind(%d)", uint8(k))
}

// Aggregate is one aggregate of the query.
type Aggregate struct {
	Kind AggKind
	// Column is the input column; "" means count(*) (only for Count).
	Column string
	// As is the output column name; "" picks "count" for count(*) and
	// "<kind>_<column>" otherwise.
	As string
	// RelativeSD is approx_count_distinct's relativeSD; 0 means Spark's
	// default, 0.05 (approx.go).
	RelativeSD float64
}

// Window is an event-time window, as Spark's window(col, size, slide,
// startTime): windows start at the Unix epoch plus Start plus a multiple of
// the slide, and a row at time t belongs to every window [start,
// start+Size) with start <= t < start+Size.
type Window struct {
	// Column is the event time column; it must be an stream.Timestamp.
	Column string
	// Size is the window length; Slide is the distance between window starts.
	// Slide 0 or Slide == Size means tumbling windows. Both must be whole
	// microseconds, and 0 < Slide <= Size.
	Size, Slide time.Duration
	// Start is startTime, the offset of window starts from the epoch:
	// 0 <= Start < slide, whole microseconds.
	Start time.Duration
}

// OutputMode says which rows Finish hands the sink.
type OutputMode uint8

// Output modes, as Spark's.
const (
	// Update emits, each batch, the keys that batch changed, with their new
	// full values (not deltas): the sink MERGEs them.
	Update OutputMode = 1
	// Append emits each window once, when the watermark closes it (at eviction).
	Append OutputMode = 2
	// Complete emits every key in state each batch.
	Complete OutputMode = 3
)

func (m OutputMode) String() string {
	switch m {
	case Update:
		return "update"
	case Append:
		return "append"
	case Complete:
		return "complete"
	}
	return fmt.Sprintf("OutputMode(%d)", uint8(m))
}

// Spec describes a grouped aggregation, optionally over event-time windows.
type Spec struct {
	// Window is the event-time window; nil groups by GroupBy alone.
	Window *Window
	// GroupBy names the group columns, in output order.
	GroupBy []string
	// Aggregates are computed per group, in output order. At least one.
	Aggregates []Aggregate
	// Mode is the output mode; 0 means Update.
	Mode OutputMode
	// WatermarkDelay is the delay of the watermark on Window.Column (the
	// engine computes the watermark as max event time seen minus this delay).
	// A positive delay is a watermark; 0 is one only with HasWatermark.
	// Without a watermark nothing is dropped as late, nothing is evicted,
	// and the watermark passed to Process and Finish is ignored.
	WatermarkDelay time.Duration
	// HasWatermark says the query has a watermark whatever its delay:
	// withWatermark(col, "0 seconds") is one, whose watermark is the max
	// event time seen, as in Spark. A positive WatermarkDelay implies it
	// (so a spec that predates the flag keeps its meaning); a checkpoint
	// whose state was written when a delay of 0 meant no watermark keeps
	// that reading in update mode (doc.go, Watermark delay 0).
	HasWatermark bool
	// WatermarkColumn is withWatermark's column when the spec has no
	// window (Spark allows a watermark on an aggregation without one: it
	// closes nothing, and the engine still reports it); with a window it
	// must be empty or Window.Column.
	WatermarkColumn string
	// NonANSI is spark.sql.ansi.enabled=false: a long sum that overflows
	// wraps (Spark 3's default) instead of failing the batch with
	// ARITHMETIC_OVERFLOW.
	NonANSI bool
	// ColumnTypes gives the type of every input column the spec reads (the
	// literal stream.ColSource is always a string). Types are needed before
	// the first input arrives, to build the state schema.
	ColumnTypes map[string]stream.Type
	// StateFormat is the layout of the state's keys and values (doc.go,
	// State layout); 0 means the newest, StateFormat2. A checkpoint whose
	// state was written in format 1 keeps it (ForRecordedState).
	StateFormat StateFormat
	// Retractions declares that the input may carry retractions (rows with
	// Sign -1, stream.Batch.Signs): New then refuses min and max
	// (RETRACTION_UNSUPPORTED) and, when no count(*) is among the
	// aggregates, keeps a hidden row count per group (state value field
	// "__rows") so a group whose rows were all retracted is deleted. A query
	// with count(*) and without min/max applies retractions whether or not
	// it declared them.
	Retractions bool
}

// StateFormat is a layout of the aggregation's state (doc.go, State
// layout). Formats are never renumbered.
type StateFormat uint8

// State formats.
const (
	// StateFormat1: avg of a BIGINT column keeps a long sum (an overflow of
	// it is ARITHMETIC_OVERFLOW in both ANSI modes), and a null BIGINT or
	// TIMESTAMP group value is NULL_GROUP_KEY. Every state written before
	// format 2 is in it.
	StateFormat1 StateFormat = 1
	// StateFormat2: avg sums in a double, as Spark's Average does, and
	// BIGINT and TIMESTAMP group keys are nullable (state.Field.Nullable): a
	// null is a group of its own, as in Spark.
	StateFormat2 StateFormat = 2
)

// Output column names of the window (the Delta sink relies on them).
const (
	ColWindowStart = "window_start"
	ColWindowEnd   = "window_end"
)

// OperatorName is the stateOperators[].operatorName and the state schema's
// operator name, as Spark's streaming aggregation reports it.
const OperatorName = "stateStoreSave"

// resolvedAgg is an Aggregate with its types settled.
type resolvedAgg struct {
	Aggregate
	in  stream.Type // input column type; 0 for count(*)
	out stream.Type // output column type
	// longSum: an avg of an Int64 column summing in an int64 (StateFormat1).
	longSum bool
	// hidden: kept in state, never output (the row count of Spec.Retractions).
	hidden bool
	// sumT: an avg of a decimal's sum buffer type.
	sumT stream.Type
	// sketch: approx_count_distinct's precision (approx.go); nil for the others.
	sketch *hllpp.Params
}

// plan is a validated Spec.
type plan struct {
	spec      Spec
	format    StateFormat
	window    bool
	sizeUs    int64
	slideUs   int64
	startUs   int64 // window startTime offset
	nInst     int   // window instances per row: ceil(size/slide)
	evicts    bool
	groupType []stream.Type
	aggs      []resolvedAgg
	schema    state.Schema
	// rowsAgg is the index in aggs of the group's row count (the first
	// count(*), or the hidden one), -1 if none; retractable is true when
	// retractions can be applied (a row count and no min/max).
	rowsAgg     int
	retractable bool
}

func invalid(format string, args ...any) *errcode.Error {
	return errcode.New(errcode.InvalidArgument, "", "fix the aggregation spec", format, args...)
}

func (s *Spec) columnType(name string) (stream.Type, bool) {
	if t, ok := s.ColumnTypes[name]; ok {
		return t, true
	}
	if name == stream.ColSource {
		return stream.String, true
	}
	return 0, false
}

// newPlan validates spec and derives everything New needs.
func newPlan(spec Spec) (*plan, error) {
	if spec.Mode == 0 {
		spec.Mode = Update
	}
	p := &plan{spec: spec, format: spec.StateFormat}
	switch p.format {
	case 0:
		p.format = StateFormat2
	case StateFormat1, StateFormat2:
	default:
		return nil, invalid("unknown state format %d", uint8(spec.StateFormat))
	}
	switch spec.Mode {
	case Update, Append, Complete:
	default:
		return nil, invalid("unknown output mode %d", uint8(spec.Mode))
	}
	if spec.WatermarkDelay < 0 {
		return nil, invalid("negative watermark delay %s", spec.WatermarkDelay)
	}
	if len(spec.Aggregates) == 0 {
		return nil, invalid("no aggregates")
	}
	used := claims{}
	for _, step := range []func(claims) error{p.planWindow, p.planGroups, p.planAggregates} {
		if err := step(used); err != nil {
			return nil, err
		}
	}
	p.rowsAgg = -1
	minMax := ""
	for i, a := range p.aggs {
		if a.Kind == Count && a.Column == "" && p.rowsAgg < 0 {
			p.rowsAgg = i
		}
		if (a.Kind == Min || a.Kind == Max || a.Kind == ApproxCountDistinct) && minMax == "" {
			minMax = a.Kind.String() + "(" + a.Column + ")"
		}
	}
	if spec.Retractions {
		if minMax != "" {
			return nil, errcode.New(CodeRetractionUnsupported, "",
				"drop "+minMax+" from the query, or read the source without retractions (e.g. with confirmations instead of reorg=retract)",
				"%s cannot be undone when a row is retracted: the aggregation keeps one value per group, not the rows behind it", minMax)
		}
		if p.rowsAgg < 0 {
			if err := used.claim(rowsField, "hidden row count"); err != nil {
				return nil, err
			}
			p.aggs = append(p.aggs, resolvedAgg{Aggregate: Aggregate{Kind: Count, As: rowsField}, out: stream.Int64, hidden: true})
			p.rowsAgg = len(p.aggs) - 1
		}
	}
	p.retractable = p.rowsAgg >= 0 && minMax == ""
	// Spark refuses these at analysis time (UnsupportedOperationChecker): an
	// append-mode aggregation emits a window only when the watermark closes
	// it, and complete mode keeps every key forever unless windows close.
	switch spec.Mode {
	case Append:
		if !p.evicts {
			return nil, errcode.New(CodeUnsupportedOutputMode, "",
				"use update mode, or add an event-time window and a watermark delay",
				"append output mode needs an event-time window and a watermark: without them no group is ever final")
		}
	case Complete:
		if p.window && !p.evicts {
			return nil, errcode.New(CodeUnsupportedOutputMode, "",
				"set a watermark delay so closed windows are evicted, or use update mode",
				"complete output mode over event-time windows without a watermark keeps every window forever (unbounded state)")
		}
	}
	p.schema = p.buildSchema()
	return p, nil
}

// claims are the output and state field names taken so far.
type claims map[string]bool

// claim takes name for what, refusing an empty or a taken one.
func (c claims) claim(name, what string) error {
	if name == "" {
		return invalid("empty %s name", what)
	}
	if c[name] {
		return invalid("output column %q appears twice (as %s)", name, what)
	}
	c[name] = true
	return nil
}

// planWindow validates the window and claims its output columns.
func (p *plan) planWindow(used claims) error {
	spec := p.spec
	if w := spec.Window; w != nil {
		p.window = true
		if w.Size <= 0 || w.Size%time.Microsecond != 0 {
			return invalid("window size %s must be a positive number of microseconds", w.Size)
		}
		slide := w.Slide
		if slide == 0 {
			slide = w.Size
		}
		if slide <= 0 || slide > w.Size || slide%time.Microsecond != 0 {
			return invalid("window slide %s must be a positive number of microseconds, at most the size %s", w.Slide, w.Size)
		}
		if w.Start < 0 || w.Start >= slide || w.Start%time.Microsecond != 0 {
			return invalid("window start time %s must be whole microseconds in [0, slide %s)", w.Start, slide)
		}
		p.sizeUs = int64(w.Size / time.Microsecond)
		p.slideUs = int64(slide / time.Microsecond)
		p.startUs = int64(w.Start / time.Microsecond)
		p.nInst = int((p.sizeUs + p.slideUs - 1) / p.slideUs)
		t, ok := spec.columnType(w.Column)
		if !ok {
			return invalid("event time column %q has no known type; set Spec.ColumnTypes", w.Column)
		}
		if t != stream.Timestamp {
			return errcode.New(CodeDatatypeMismatch, "", "window over a timestamp column",
				"event time column %q is %s, want timestamp", w.Column, t)
		}
		if err := used.claim(ColWindowStart, "window"); err != nil {
			return err
		}
		if err := used.claim(ColWindowEnd, "window"); err != nil {
			return err
		}
		p.evicts = spec.hasWatermark()
	}
	return nil
}

// planGroups validates and types the group columns.
func (p *plan) planGroups(used claims) error {
	spec := p.spec
	for _, g := range spec.GroupBy {
		if err := used.claim(g, "group column"); err != nil {
			return err
		}
		t, ok := spec.columnType(g)
		if !ok {
			return invalid("group column %q has no known type; set Spec.ColumnTypes", g)
		}
		if err := groupable(t); err != nil {
			return err
		}
		p.groupType = append(p.groupType, t)
	}
	return nil
}

// planAggregates resolves each aggregate's input and output types.
func (p *plan) planAggregates(used claims) error {
	spec := p.spec
	for _, a := range spec.Aggregates {
		ra := resolvedAgg{Aggregate: a}
		switch a.Kind {
		case Count, Sum, Min, Max, Avg, ApproxCountDistinct:
		default:
			return invalid("unknown aggregate kind %d", uint8(a.Kind))
		}
		if a.Column == "" {
			if a.Kind != Count {
				return invalid("%s needs a column", a.Kind)
			}
		} else {
			t, ok := spec.columnType(a.Column)
			if !ok {
				return invalid("aggregate column %q has no known type; set Spec.ColumnTypes", a.Column)
			}
			ra.in = t
		}
		switch a.Kind {
		case Count:
			ra.out = stream.Int64
		case Sum:
			switch {
			case integral(ra.in):
				ra.out = stream.Int64
			case ra.in.Storage() == stream.Float64:
				ra.out = stream.Float64
			case ra.in.Kind() == stream.Decimal && ra.in != stream.Decimal:
				ra.out = sumDecimal(ra.in)
			default:
				return errcode.New(CodeDatatypeMismatch, "", "sum a numeric column",
					"sum(%s): column is %s", a.Column, ra.in)
			}
		case Min, Max:
			if !orderable(ra.in) {
				return errcode.New(CodeDatatypeMismatch, "", "use a numeric, boolean, date or timestamp column",
					"%s(%s): column is %s", a.Kind, a.Column, ra.in)
			}
			ra.out = ra.in
		case Avg:
			switch {
			case integral(ra.in) || ra.in.Storage() == stream.Float64:
				ra.out = stream.Float64
			case ra.in.Kind() == stream.Decimal && ra.in != stream.Decimal:
				ra.out, ra.sumT = avgDecimal(ra.in), sumDecimal(ra.in)
			default:
				return errcode.New(CodeDatatypeMismatch, "", "average a numeric column",
					"avg(%s): column is %s", a.Column, ra.in)
			}
			ra.longSum = integral(ra.in) && p.format == StateFormat1
		case ApproxCountDistinct:
			if err := planSketch(&ra); err != nil {
				return err
			}
		}
		if ra.As == "" {
			if a.Column == "" {
				ra.As = "count"
			} else {
				ra.As = a.Kind.String() + "_" + a.Column
			}
		}
		if err := used.claim(ra.As, "aggregate"); err != nil {
			return err
		}
		if ra.hasNonNull() {
			if err := used.claim(ra.As+nonNullSuffix, "hidden state field of "+ra.As); err != nil {
				return err
			}
		}
		p.aggs = append(p.aggs, ra)
	}
	return nil
}

// nonNullSuffix names the hidden value field that counts the non-null inputs
// of a sum/min/max, so an all-null group reads back as null (Spark's
// aggregation buffers are nullable; the state value encoding is not).
const nonNullSuffix = "__nonnull"

// globalKeyField is the one state key field of a global aggregation; its
// value is always 0.
const globalKeyField = "__global"

// rowsField is the hidden row count of a query that declared Retractions
// without a count(*).
const rowsField = "__rows"

func (a *resolvedAgg) hasNonNull() bool { return a.Kind != Count && a.sketch == nil }

// acc is the type of the running value kept in state: the output type (for
// avg its double sum), but Int64 for an avg's long sum (StateFormat1).
func (a *resolvedAgg) acc() stream.Type {
	if a.longSum {
		return stream.Int64
	}
	if a.sketch != nil {
		return stream.Binary // the registers (approx.go)
	}
	if a.sumT != 0 {
		return a.sumT
	}
	return a.out
}

// nullKey reports whether group column k may be null in state: a String
// always (state's null String key), an Int64 or Timestamp in StateFormat2.
func (p *plan) nullKey(k int) bool {
	return p.strKey(k) || p.format >= StateFormat2
}

func (p *plan) buildSchema() state.Schema {
	s := state.Schema{OperatorName: OperatorName}
	if p.window {
		s.Key = append(s.Key,
			state.Field{Name: ColWindowEnd, Type: stream.Timestamp},
			state.Field{Name: ColWindowStart, Type: stream.Timestamp})
	}
	for i, g := range p.spec.GroupBy {
		s.Key = append(s.Key, state.Field{Name: g, Type: state.RecordedType(p.groupType[i]), Nullable: !p.strKey(i) && p.nullKey(i)})
	}
	if len(s.Key) == 0 {
		// A global aggregation (no window, no GROUP BY) is one group; the
		// state store needs a key, so it has a constant one.
		s.Key = append(s.Key, state.Field{Name: globalKeyField, Type: stream.Int64})
	}
	for _, a := range p.aggs {
		s.Value = append(s.Value, state.Field{Name: a.As, Type: state.RecordedType(a.acc())})
		if a.hasNonNull() {
			s.Value = append(s.Value, state.Field{Name: a.As + nonNullSuffix, Type: stream.Int64})
		}
	}
	s.Spec = p.specText()
	return s
}

// specText is recorded with the state and compared on open, so that a query
// whose window or aggregates changed is refused with STATE_SCHEMA_MISMATCH
// rather than misreading the old state. It names only what shapes the state
// (v2): the output mode and the watermark delay do not change what a key or
// a value means, and whether a change of them is safe across a restart is
// the engine's restart rule to decide (a mode change is allowed, a larger
// watermark delay is not).
func (p *plan) specText() string {
	var b strings.Builder
	b.WriteString("agg/v2")
	if w := p.spec.Window; w != nil {
		fmt.Fprintf(&b, " window=%s size=%s slide=%s", w.Column,
			time.Duration(p.sizeUs)*time.Microsecond, time.Duration(p.slideUs)*time.Microsecond)
		if p.startUs != 0 {
			// Only when set, so that the text of every older spec is unchanged.
			fmt.Fprintf(&b, " start=%s", time.Duration(p.startUs)*time.Microsecond)
		}
	} else {
		b.WriteString(" window=none")
	}
	fmt.Fprintf(&b, " groupBy=%s aggs=", strings.Join(p.spec.GroupBy, ","))
	for i, a := range p.aggs {
		if i > 0 {
			b.WriteByte(',')
		}
		col := a.Column
		if col == "" {
			col = "*"
		}
		fmt.Fprintf(&b, "%s(%s%s):%s", a.Kind, col, a.sketchArg(), a.As)
	}
	return b.String()
}

// compatibleSpec accepts the v1 text of the same window and aggregates
// ("agg/v1 ... mode=<m> watermark=<w>").
func (p *plan) compatibleSpec(recorded string) bool {
	rest, ok := strings.CutPrefix(recorded, "agg/v1")
	if !ok {
		return false
	}
	if i := strings.Index(rest, " mode="); i >= 0 {
		rest = rest[:i]
	}
	return "agg/v2"+rest == p.schema.Spec
}

// ForRecordedState returns spec in the state format whose state schema is
// recorded (state.Schema.String() of the checkpoint's state, as the query
// shape records it), newest format first, and false when none matches: a
// checkpoint written in format 1 keeps format 1's layout (a long avg sum, no
// null BIGINT or TIMESTAMP key) rather than being refused.
func ForRecordedState(spec Spec, recorded string) (Spec, bool) {
	for _, f := range []StateFormat{StateFormat2, StateFormat1} {
		spec.StateFormat = f
		if p, err := newPlan(spec); err == nil && p.schema.String() == recorded {
			return spec, true
		}
	}
	return spec, false
}

// Watermark returns the event-time column and delay the engine must compute
// the watermark from (the operator drops and evicts by it), and false when
// the spec has no watermark.
func (s Spec) Watermark() (column string, delay time.Duration, ok bool) {
	column = s.WatermarkColumn
	if s.Window != nil {
		column = s.Window.Column
	}
	if column == "" || !s.hasWatermark() {
		return "", 0, false
	}
	return column, s.WatermarkDelay, true
}

// hasWatermark says the spec has a watermark: HasWatermark, or a positive
// delay.
func (s Spec) hasWatermark() bool { return s.HasWatermark || s.WatermarkDelay > 0 }

// InputColumns returns the input columns the operator reads, each once: the
// event time column, the group columns, the aggregate columns (for
// the engine's query projection).
func (s Spec) InputColumns() []string {
	var cols []string
	add := func(c string) {
		if c != "" && !slices.Contains(cols, c) {
			cols = append(cols, c)
		}
	}
	if s.Window != nil {
		add(s.Window.Column)
	}
	if _, _, ok := s.Watermark(); ok {
		add(s.WatermarkColumn)
	}
	for _, g := range s.GroupBy {
		add(g)
	}
	for _, a := range s.Aggregates {
		add(a.Column)
	}
	return cols
}
