package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/shape"
	"github.com/ethstream/ethstream/stream"
)

// The restart rules: what a query may change between two starts on the same
// checkpoint. decideShape compares the shape recorded in the checkpoint with
// the shape of the query now starting and gives, for every difference, the
// rule that applies (Spark's and ours) and whether the start may go on. It
// is pure: the caller read the record, and nothing is written until every
// difference is allowed.

// Spark's rules, as Databricks' restart-compatibility table states them.
const (
	sparkFilter     = "allowed"
	sparkRate       = "allowed, from the next newly planned batch"
	sparkProjection = "allowed; another schema only if the sink allows it"
	sparkSources    = "not allowed by default; source evolution relaxes it"
	sparkLocation   = "generally needs a new checkpoint; results unpredictable"
	sparkSink       = "not allowed"
	sparkSinkType   = "changes between a few specific combinations of sinks are allowed, case by case"
	sparkState      = "not allowed: the state schema must stay the same"
	sparkWatermark  = "requires a full refresh"
	sparkMode       = "not in the table: allowed if the sink supports the mode"
	sparkDedup      = "not allowed: the deduplication columns' number or types must not change (state schema check)"
	sparkOperators  = "not allowed: stateful operations may not change between restarts (state schema check)"
	// sparkSessionGap: Spark's session window state schema has no gap.
	sparkSessionGap = "not checked: the state schema has no gap; sessions stored under the old gap merge with rows under the new one"
)

// ShapeChange is one difference between the recorded and the new shape and
// the rule that decides it.
type ShapeChange struct {
	Change    string `json:"change"`
	Old       string `json:"old"`
	New       string `json:"new"`
	SparkRule string `json:"sparkRule"`
	Rule      string `json:"rule"`
	Allowed   bool   `json:"allowed"`
	// Code is the refusal's error code ("" when allowed).
	Code string `json:"code,omitempty"`
	// FirstBatchID is the first batch an allowed change applies to.
	FirstBatchID int64 `json:"firstBatchId"`
}

// shapeDecision is what decideShape decided.
type shapeDecision struct {
	Changes []ShapeChange
	// Write: record Shape as shape/<Seq>, applying from FirstBatchID.
	Write        bool
	Seq          int64
	FirstBatchID int64
	Shape        shape.Shape
	Warnings     []string
	// checked: the query has a shape (the start records it); recorded is
	// the shape in force before this start (nil: none). The driver fills
	// in the sink's identity after opening a sink whose output did not
	// exist yet, and records the shape then if it differs.
	checked  bool
	recorded *shape.Shape
}

// decideShape applies the restart rules. rec is the newest record (nil:
// none yet), cur the starting query's shape (nil: the query records none,
// nothing is checked), seen what the start read of the sink's output (its
// identity is recorded with the shape), moved the sources whose move to a
// new location the source itself admitted before the start (checkMoves:
// key -> old location). The first refused change is returned as the error,
// with the full list of changes in the decision.
func decideShape(path string, rec *shape.Record, cur *shape.Shape, sp *startPlan, evolution bool, seen sinkSeen, moved map[string]string) (*shapeDecision, error) {
	d := &shapeDecision{}
	if cur == nil {
		return d, nil
	}
	d.checked = true
	if rec != nil {
		d.recorded = &rec.Shape
	}
	// The batch a start runs first: a pending batch re-runs (with its
	// recorded offsets and watermark, but the new query), else a new one.
	first := sp.NextID
	if sp.Pending != nil {
		first = sp.PendingID
	}
	// The query's operators take the numbering in force (opids.go), so
	// that each is compared with the recorded one of its id.
	d.Shape, d.FirstBatchID = numberShape(*cur, numberingOf(rec, cur, !sp.New)), first
	d.Shape.Sink.ID = seen.ID
	if rec == nil {
		d.Write = true
		if !sp.New {
			d.Warnings = append(d.Warnings, fmt.Sprintf(
				"the checkpoint has no recorded query shape: recording this query's from batch %d; changes made before this start cannot be checked", first))
		}
		return d, nil
	}
	d.Seq = rec.Seq + 1
	c := &shapeCheck{d: d, path: path, old: rec.Shape, cur: d.Shape, first: first, next: sp.NextID, evolution: evolution, seen: seen, queryID: sp.QueryID, moved: moved}
	// The changes in a fixed order: sources, sink, state, filter and
	// columns, watermark, mode and trigger.
	c.sources()
	c.sink()
	c.state()
	c.filterAndColumns()
	c.watermark()
	c.modeAndTrigger()
	if sp.Pending != nil && len(d.Changes) > 0 {
		d.Warnings = append(d.Warnings, fmt.Sprintf("batch %d was planned before the change: it re-runs first with the same data (its recorded offsets and watermark)", sp.PendingID))
	}
	if c.refusal != nil {
		return d, c.refusal
	}
	d.Write = !rec.Shape.Equal(d.Shape)
	return d, nil
}

// shapeCheck is one comparison of a recorded shape (old) with the starting
// query's (cur): it collects the changes into d and keeps the first
// refusal.
type shapeCheck struct {
	d        *shapeDecision
	path     string
	old, cur shape.Shape
	// first is the first batch a change applies to (a pending batch re-runs
	// with the new query), next the next newly planned one.
	first, next int64
	evolution   bool
	refusal     error
	// seen is what the start read of the sink's output, queryID the
	// checkpoint's query id (the sink's txn appId).
	seen    sinkSeen
	queryID string
	// moved: source key -> the old location of an admitted move.
	moved map[string]string
}

// newCkpt is the remedy of most refusals.
const newCkpt = "start the changed query on a new checkpoint (and a new table)"

func (c *shapeCheck) allow(change, o, n, spark, rule string, from int64) {
	c.d.Changes = append(c.d.Changes, ShapeChange{Change: change, Old: o, New: n, SparkRule: spark, Rule: rule, Allowed: true, FirstBatchID: from})
}

func (c *shapeCheck) refuse(change, o, n, spark, rule, code, remedy, format string, args ...any) {
	c.d.Changes = append(c.d.Changes, ShapeChange{Change: change, Old: o, New: n, SparkRule: spark, Rule: rule, Code: code, FirstBatchID: -1})
	if c.refusal == nil {
		c.refusal = errcode.New(code, c.path, remedy, format, args...)
	}
}

func (c *shapeCheck) warn(format string, args ...any) {
	c.d.Warnings = append(c.d.Warnings, fmt.Sprintf(format, args...))
}

// sourceKey matches sources: by name with source evolution, by position
// without.
func (c *shapeCheck) sourceKey(i int, s shape.Source) string {
	if c.evolution {
		return s.Name
	}
	return fmt.Sprint(i)
}

// sources compares the sources one by one, then FROM.
func (c *shapeCheck) sources() {
	oldBy := map[string]shape.Source{}
	for i, s := range c.old.Sources {
		oldBy[c.sourceKey(i, s)] = s
	}
	newKeys := map[string]bool{}
	for i, s := range c.cur.Sources {
		k := c.sourceKey(i, s)
		newKeys[k] = true
		o, ok := oldBy[k]
		if !ok {
			c.allow("source added", "", s.Name+" ("+s.Provider+":"+s.Location+")", sparkSources,
				"allowed with source evolution: the new source starts from its configured start", c.first)
			continue
		}
		label := "source " + k
		if s.Name != "" {
			label = "source " + s.Name
		}
		c.source(label, k, o, s)
	}
	for i, s := range c.old.Sources {
		if !newKeys[c.sourceKey(i, s)] {
			c.allow("source removed", s.Name+" ("+s.Provider+":"+s.Location+")", "", sparkSources,
				"allowed with source evolution: the name is tombstoned and its state ages out under the watermark", c.first)
		}
	}
	if c.old.From != c.cur.From {
		c.allow("FROM", c.old.From, c.cur.From, sparkSources, "allowed when each source change above is", c.first)
	}
}

// source compares one source kept under the same key: its provider, then
// its location (allowed only when the source admitted the move: every file
// its log records is at the new location), then its options.
func (c *shapeCheck) source(label, key string, o, s shape.Source) {
	if o.Provider != s.Provider {
		remedy := newCkpt
		if c.evolution {
			remedy = "give the new source a new name (the old name is tombstoned), or start a new checkpoint"
		}
		c.refuse(label+" provider", o.Provider, s.Provider, sparkSources,
			"refused: the committed offsets belong to the old provider; resuming would rewind or skip data silently",
			errcode.SourceProviderChanged, remedy,
			"%s was %s and is now %s: its committed offsets mean nothing to the new provider and resuming would silently rewind or skip data",
			label, o.Provider, s.Provider)
		return
	}
	if old := c.moved[key]; o.Location != s.Location && old != "" && old == o.Location {
		c.allow(label+" location", o.Location, s.Location, sparkLocation,
			"allowed: the source was told of the move and found every file its log records at the new location (checked before the start)", c.first)
	} else if o.Location != s.Location {
		// A source that can check a move (stream.MoveChecker) takes the
		// old location as an option; the archive source's is movedFrom.
		moved := "if the same files are now at the new location, tell the source where they were (movedFrom=" + o.Location + " on a file archive source); otherwise "
		if old, told := c.moved[key]; told && old == "" {
			moved = "" // the source cannot resume a moved log: no option would admit it
		}
		remedy := moved + newCkpt
		if c.evolution {
			remedy = moved + "give the source at the new location a new name (the old one is tombstoned), or start a new checkpoint"
		}
		c.refuse(label+" location", o.Location, s.Location, sparkLocation,
			"refused: offsets are positions in the old location; resuming would silently rewind or skip data",
			errcode.SourceLocationChanged, remedy,
			"%s read %s and now reads %s: its committed offsets are positions in the old location, so resuming would silently rewind or skip data",
			label, o.Location, s.Location)
		return
	}
	if o.Options != s.Options {
		c.allow(label+" options", o.Options, s.Options, sparkRate,
			"allowed: read limits and options apply from the next newly planned batch", c.next)
	}
}

// sink recognises the table by its identity, not its path: the Delta
// metadata id the checkpoint recorded or, for a checkpoint that recorded
// none (written before v2 shape records), the table's txn for the query id.
// The same table at another location or scheme is an allowed change (a
// moved or copied pair); another table is refused, and so is a new location
// with no table at all.
func (c *shapeCheck) sink() {
	old, cur, seen := c.old.Sink, c.cur.Sink, c.seen
	if seen.Err != nil {
		return // the sink's output could not be read: the start reports why
	}
	oldText, curText := old.Format+":"+old.Location, cur.Format+":"+cur.Location
	const refusedRule = "refused: another table lacks every committed batch's rows"
	remedy := seen.remedy(stream.SinkRefusal{Problem: stream.SinkOutputMoved, ID: old.ID, Location: old.Location},
		newCkpt+", or point the query back at "+old.Location+" (or at a copy of that output)")
	switch {
	case old.Format != cur.Format:
		c.refuse("sink format", oldText, curText, sparkSinkType,
			"refused: the new sink holds none of the committed batches' output",
			errcode.SinkLocationChanged, newCkpt+", or write to the "+old.Format+" sink at "+old.Location+" again",
			"the sink changed from %s to %s: the new sink would lack the rows of every committed batch, which are never written again",
			oldText, curText)
		return
	case old.Location != cur.Location && !seen.Recording && seen.ID == "":
		c.refuse("sink location", oldText, curText, sparkSink,
			"refused: the sink cannot recognise its output elsewhere (Spark: a file sink's output directory may not change)",
			errcode.SinkLocationChanged, remedy,
			"the output directory changed from %s to %s: the committed batches' files and their log stay at the old one, and a new one would lack the rows of every committed batch, which are never written again",
			old.Location, cur.Location)
		return
	case old.Location != cur.Location && !seen.Exists:
		c.refuse("sink location", oldText, curText, sparkSink, refusedRule,
			errcode.SinkLocationChanged, remedy,
			"the output moved from %s to %s, where there is no table: a new one would lack the rows of every committed batch, which are never written again",
			old.Location, cur.Location)
		return
	}
	if old.ID != "" && seen.ID != "" && old.ID != seen.ID {
		c.d.Changes = append(c.d.Changes, ShapeChange{Change: "sink table", Old: oldText + " (id " + old.ID + ")", New: curText + " (id " + seen.ID + ")",
			SparkRule: sparkSink, Rule: refusedRule, Code: errcode.SinkTableMismatch, FirstBatchID: -1})
		if c.refusal == nil {
			c.refusal = tableMismatch(c.path, old, "the table at "+cur.Location, seen)
		}
		return
	}
	if old.Location == cur.Location {
		return
	}
	if old.ID != "" && old.ID == seen.ID {
		c.allow("sink location", oldText, curText, sparkLocation,
			"allowed: the same table (Delta metadata id "+old.ID+") moved; its txn is checked against the commit log", c.first)
		return
	}
	if _, ours := seen.Batches[c.queryID]; ours && c.queryID != "" {
		c.allow("sink location", oldText, curText, sparkLocation,
			"allowed: the table records batches of this query id (the checkpoint recorded no table id; it is recorded now)", c.first)
		return
	}
	c.refuse("sink table", oldText, curText, sparkSink, refusedRule,
		errcode.SinkTableMismatch, seen.remedy(stream.SinkRefusal{Problem: stream.SinkOutputOther, Location: old.Location},
			"point the query at the output this checkpoint wrote (last at "+old.Location+"), or start a new checkpoint for this output"),
		"the table at %s (id %s) records no batch of query %s: it is not the table this checkpoint wrote at %s",
		cur.Location, orNone(seen.ID), orNone(c.queryID), old.Location)
}

// state compares each stateful operator with the one of the same id: its
// window, group keys and aggregates (each operator's own restart decision;
// adding or removing one is refused, as Spark refuses it). Renaming an
// aggregate changes the output columns only (the state check ignores the
// alias here).
func (c *shapeCheck) state() {
	old, cur := c.old, c.cur
	oldOps, curOps := old.OperatorList(), cur.OperatorList()
	if len(oldOps) != len(curOps) {
		c.refuse("stateful operators", opsText(oldOps), opsText(curOps), sparkOperators,
			"refused: each operator's state belongs to its id; a new or removed operator has none or leaves it behind",
			errcode.StateSchemaMismatch, newCkpt+", or restore the previous query",
			"the query has %d stateful operators, the checkpoint's state was written by %d", len(curOps), len(oldOps))
		return
	}
	renamed := old.OutputSchema != cur.OutputSchema
	for i := range oldOps {
		if c.operatorSide(oldOps[i], curOps[i]) {
			return
		}
		if c.operatorState(oldOps[i], curOps[i], len(oldOps) > 1, old.OutputSchema != cur.OutputSchema) {
			return
		}
		renamed = renamed || !slices.Equal(oldOps[i].Aggregates, curOps[i].Aggregates)
	}
	switch {
	case renamed:
		c.refuse("output schema", old.OutputSchema, cur.OutputSchema, sparkProjection,
			"refused: the Delta table keeps the schema it was created with",
			errcode.OutputSchemaMismatch, "keep the output column names, or "+newCkpt,
			"the output schema changed from %s to %s; the Delta sink does not evolve its table's schema", old.OutputSchema, cur.OutputSchema)
	case !slices.Equal(old.Projection, cur.Projection):
		c.allow("projection", strings.Join(old.Projection, ", "), strings.Join(cur.Projection, ", "), sparkProjection,
			"allowed: the output schema is the same", c.first)
	}
}

// operatorState applies the state rule to one operator, reporting whether
// it refused; outRenamed says the query's output schema changed (a state
// schema that changed with it, the keys and aggregates alike, is a
// renaming). Several operators name theirs in the change ("window of
// operator 1").
func (c *shapeCheck) operatorState(old, cur shape.Operator, several, outRenamed bool) bool {
	if old.Kind == shape.KindJoin || cur.Kind == shape.KindJoin {
		return c.joinState(old, cur, several)
	}
	structural := !slices.Equal(old.Keys, cur.Keys) || windowText(old.Window) != windowText(cur.Window) ||
		!sameAggFuncs(old.Aggregates, cur.Aggregates)
	renamed := outRenamed || !slices.Equal(old.Aggregates, cur.Aggregates)
	if !structural && (renamed || old.StateSchema == cur.StateSchema) {
		if several && !slices.Equal(old.Input, cur.Input) {
			c.allow(fmt.Sprintf("operator %d input", cur.ID), strings.Join(old.Input, "; "), strings.Join(cur.Input, "; "), sparkFilter,
				"allowed; results change from the first batch it applies to (logged)", c.first)
			c.warn("the input of operator %d changed: it applies from batch %d on", cur.ID, c.first)
		}
		return false
	}
	if old.Kind == shape.KindDeduplicate || cur.Kind == shape.KindDeduplicate {
		return c.dedupState(old, cur, several)
	}
	what, spark, rule := []string{}, sparkState, "refused: the state was built for the old keys and aggregates"
	switch {
	case old.Window != nil && cur.Window != nil && old.Window.Gap != "" && cur.Window.Gap != "" && old.Window.Column == cur.Window.Column && old.Window.Gap != cur.Window.Gap:
		what = append(what, "session gap")
		spark, rule = sparkSessionGap, "refused (stricter): the stored sessions were merged under the old gap"
	case windowText(old.Window) != windowText(cur.Window):
		what = append(what, "window")
	}
	if !slices.Equal(old.Keys, cur.Keys) {
		what = append(what, "group keys")
	}
	if !sameAggFuncs(old.Aggregates, cur.Aggregates) || len(what) == 0 {
		what = append(what, "aggregates")
	}
	change := strings.Join(what, ", ")
	if several {
		change = fmt.Sprintf("%s of operator %d", change, cur.ID)
	}
	c.refuse(change, opStateText(old), opStateText(cur), spark, rule,
		errcode.StateSchemaMismatch, newCkpt+", or restore the previous query",
		"the %s changed, so the state schema changed: checkpoint has %s, query has %s", change, stateSchemaText(old.StateSchema), stateSchemaText(cur.StateSchema))
	return true
}

// stateSchemaText names a recorded state schema in errors; "" is a query
// without a stateful operator. A spec's "fields=" JSON value is left out:
// it is a machine copy of columns the spec's text names too (a join's
// format-2 spec keeps its sides' columns as JSON for state dump,
// join/spec.go specFields), and a message says them once.
func stateSchemaText(s string) string {
	if s == "" {
		return "no state (a query without an aggregation)"
	}
	const fields = " fields="
	i := strings.Index(s, fields)
	if i < 0 {
		return s
	}
	rest := s[i+len(fields):]
	dec := json.NewDecoder(strings.NewReader(rest))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return s
	}
	return s[:i] + rest[dec.InputOffset():]
}

func (c *shapeCheck) filterAndColumns() {
	old, cur := c.old, c.cur
	if old.Filter != cur.Filter {
		c.allow("filter", orNone(old.Filter), orNone(cur.Filter), sparkFilter,
			"allowed; results change from the first batch it applies to (logged)", c.first)
		c.warn("the filter changed from %s to %s: it applies from batch %d on; earlier batches keep the old filter's results",
			orNone(old.Filter), orNone(cur.Filter), c.first)
	}
	if !slices.Equal(old.Columns, cur.Columns) {
		c.allow("columns read", strings.Join(old.Columns, ", "), strings.Join(cur.Columns, ", "), sparkProjection,
			"allowed: sources decode the columns the new query reads", c.first)
	}
}

func (c *shapeCheck) watermark() {
	ow, nw := c.old.Watermark, c.cur.Watermark
	switch {
	case ow == nil && nw == nil:
	case ow == nil || nw == nil || ow.Column != nw.Column:
		c.refuse("watermark", watermarkText(ow), watermarkText(nw), sparkWatermark,
			"refused: adding, removing or moving the watermark changes which state is final",
			errcode.WatermarkChanged, newCkpt,
			"the watermark changed from %s to %s: removing it keeps every window forever and lets evicted windows restart from zero; adding or moving it changes which windows are final",
			watermarkText(ow), watermarkText(nw))
	case nw.DelayUs > ow.DelayUs:
		c.refuse("watermark delay increased", watermarkText(ow), watermarkText(nw), sparkWatermark,
			"refused (stricter than Spark): evicted windows would reopen from zero and overwrite full results",
			errcode.WatermarkDelayIncreased, "keep the delay at most "+durText(ow.DelayUs)+", or "+newCkpt,
			"the watermark delay grew from %s to %s: windows already evicted (final in the table) would accept late rows again, start from an empty state and, in update mode, overwrite the full count in the table with a partial one",
			durText(ow.DelayUs), durText(nw.DelayUs))
	case nw.DelayUs < ow.DelayUs:
		c.allow("watermark delay decreased", watermarkText(ow), watermarkText(nw), sparkWatermark,
			"allowed (looser than Spark): the watermark only moves forward, rows later than the new delay are dropped from the next newly planned batch (logged)", c.next)
		c.warn("the watermark delay shrank from %s to %s: from batch %d on, rows later than %s are dropped as late",
			durText(ow.DelayUs), durText(nw.DelayUs), c.next, durText(nw.DelayUs))
	}
}

func (c *shapeCheck) modeAndTrigger() {
	old, cur := c.old, c.cur
	switch {
	case old.OutputMode == cur.OutputMode:
	case cur.OutputMode == "append" && len(cur.OperatorList()) > 0:
		// Update and complete emit a group before it is final; append emits
		// it again when the watermark closes it, and an append sink (Delta's
		// blind append, the file sink) would hold it twice.
		c.refuse("output mode", old.OutputMode, cur.OutputMode, sparkMode,
			"refused: groups the old mode already wrote would be appended a second time when final",
			errcode.OutputModeChanged, "keep --output-mode "+old.OutputMode+", or "+newCkpt,
			"the output mode changed from %s to append: the %s mode wrote groups before they were final, and append mode writes each again when the watermark closes it, so the sink, which appends, would hold those groups twice",
			old.OutputMode, old.OutputMode)
	default:
		c.allow("output mode", old.OutputMode, cur.OutputMode, sparkMode,
			"allowed: update MERGEs full values by key and complete replaces the table; the rows emitted change from the first batch it applies to (logged)", c.first)
		c.warn("the output mode changed from %s to %s: it applies from batch %d on", old.OutputMode, cur.OutputMode, c.first)
	}
	if old.Trigger != cur.Trigger {
		c.allow("trigger", old.Trigger, cur.Trigger, sparkRate, "allowed: from the next newly planned batch", c.next)
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func windowText(w *shape.Window) string {
	if w == nil {
		return "none"
	}
	if w.Gap != "" {
		return "session_window(" + w.Column + ", '" + w.Gap + "')"
	}
	s := "window(" + w.Column + ", '" + w.Size + "'"
	if w.Slide != "" {
		s += ", '" + w.Slide + "'"
	}
	return s + ")"
}

func durText(us int64) string { return (time.Duration(us) * time.Microsecond).String() }

func watermarkText(w *shape.Watermark) string {
	if w == nil {
		return "none"
	}
	return w.Column + " - " + durText(w.DelayUs)
}

// aggFunc strips the alias: "sum(gas_used) as gas" -> "sum(gas_used)".
func aggFunc(a string) string {
	if i := strings.Index(a, " as "); i >= 0 {
		return a[:i]
	}
	return a
}

func sameAggFuncs(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if aggFunc(a[i]) != aggFunc(b[i]) {
			return false
		}
	}
	return true
}

func opStateText(o shape.Operator) string {
	if o.Kind == shape.KindDeduplicate {
		return dedupText(o)
	}
	return "group by " + strings.Join(append([]string{windowText(o.Window)}, o.Keys...), ", ") + "; " + strings.Join(o.Aggregates, ", ")
}

func opsText(ops []shape.Operator) string {
	if len(ops) == 0 {
		return "none"
	}
	t := make([]string, len(ops))
	for i, o := range ops {
		t[i] = strconv.Itoa(o.ID) + ": " + opText(o)
	}
	return strings.Join(t, " | ")
}

// opText renders an operator in a list: a join as one, an operator on a
// join's side with its side.
func opText(o shape.Operator) string {
	t := opStateText(o)
	if o.Kind == shape.KindJoin {
		t = joinText(o)
	}
	if o.Side != "" {
		t += " (" + o.Side + " side)"
	}
	return t
}

// operatorSide refuses an operator that moved between a join's sides and
// the main chain (an operator on a side is below the join: a
// deduplication of one relation's rows), reporting whether it refused:
// its state holds the other input's rows. Spark's state schema check
// compares the operator at that id, whose state then no longer matches.
func (c *shapeCheck) operatorSide(old, cur shape.Operator) bool {
	if old.Side == cur.Side {
		return false
	}
	side := func(s string) string {
		if s == "" {
			return "after the join"
		}
		return "the join's " + s + " side"
	}
	c.refuse(fmt.Sprintf("side of operator %d", cur.ID), opText(old), opText(cur), sparkOperators,
		"refused: the state holds the other input's rows",
		errcode.StateSchemaMismatch, newCkpt+", or restore the previous query",
		"operator %d moved from %s to %s: its state was built from the other input's rows", cur.ID, side(old.Side), side(cur.Side))
	return true
}

// Spark's rule for a join's type and equi-join columns, as Databricks'
// restart-compatibility notes state it.
const sparkJoin = "not allowed: join type or equi-join columns changed"

// joinState applies the state rule to a join (or an operator that became
// or stopped being one): another kind, join type or equi-join columns is
// refused, as Spark refuses it; the state schema check at Open refuses
// the rest of a state schema change (a side's columns).
func (c *shapeCheck) joinState(old, cur shape.Operator, several bool) bool {
	var what []string
	switch {
	case old.Kind != cur.Kind:
		what = append(what, "stateful operator kind")
	default:
		if old.JoinType != cur.JoinType {
			what = append(what, "join type")
		}
		if !slices.Equal(old.Keys, cur.Keys) {
			what = append(what, "equi-join columns")
		}
	}
	if len(what) == 0 {
		return c.sideWatermarks(old, cur)
	}
	change := strings.Join(what, ", ")
	if several {
		change = fmt.Sprintf("%s of operator %d", change, cur.ID)
	}
	c.refuse(change, joinText(old), joinText(cur), sparkJoin,
		"refused: the state was built for the old join type and keys",
		errcode.StateSchemaMismatch, newCkpt+", or restore the previous query",
		"the %s changed, so the state schema changed: checkpoint has %s, query has %s", change, stateSchemaText(old.StateSchema), stateSchemaText(cur.StateSchema))
	return true
}

// joinText renders an operator in a join's restart change.
func joinText(o shape.Operator) string {
	if o.Kind != shape.KindJoin {
		return o.Kind + " " + opStateText(o)
	}
	return o.JoinType + " join on " + strings.Join(o.Keys, ", ")
}
