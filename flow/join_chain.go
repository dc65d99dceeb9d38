package flow

import (
	"sort"
	"strings"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/join"
	"github.com/ethstream/ethstream/stream"
)

// Stateful operators after a join (Spark 3.4+ multiple stateful
// operators). A join's output rows keep each side's event-time column, and
// with it that side's watermark, as Spark's attributes keep their
// watermark metadata through the join and through a rename: marks maps
// each such column of the rows at the end of the plan, under its current
// name, to its side's delay. An aggregation windows by one of them, a
// session window splits on one, a deduplication keys on one; the engine
// hands each of them the join's output watermark (engine/propagate.go),
// which is what keeps the rows the join emits late (an outer row, a match
// within the range) from being dropped as late by the operator after it.

// joinMarks records the event-time columns of a join's output rows: each
// side's watermark column under its output name (join.Operator.
// OutputColumn).
func (q *Query) joinMarks(op *join.Operator, sides ...*Side) {
	q.marks = map[string]time.Duration{}
	for i, s := range sides {
		if s.wm == nil {
			continue
		}
		if name, ok := op.OutputColumn(i, s.wm.Column); ok {
			q.marks[name] = s.wm.Delay
		}
	}
}

// renameMarks follows a Select: a column kept keeps its watermark under its
// new name, a column left out loses it.
func (q *Query) renameMarks(cols []Column) {
	if q.marks == nil {
		return
	}
	next := map[string]time.Duration{}
	for _, c := range cols {
		if d, ok := q.marks[c.name]; ok && !c.windowTime {
			next[c.outName()] = d
		}
	}
	q.marks = next
}

// markOf is the delay of the watermark column col of the rows after a
// join, false when col carries none.
func (q *Query) markOf(col string) (time.Duration, bool) {
	d, ok := q.marks[col]
	return d, ok
}

// markIn picks the event-time column of in, the rows a deduplication
// after a join reads, as Spark's WatermarkSupport.findEventTimeColumn does
// with several stateful operators: more than one is refused, with Spark's
// error class and message (select the one the deduplication needs first).
func (q *Query) markIn(in stream.Schema) (string, time.Duration, error) {
	var found []string
	for name := range q.marks {
		if in.Field(name) != nil {
			found = append(found, name)
		}
	}
	sort.Strings(found)
	switch len(found) {
	case 0:
		return "", 0, nil
	case 1:
		return found[0], q.marks[found[0]], nil
	}
	return "", 0, errcode.New(CodeMultipleEventTimeColumns, "", "select one side's event-time column before it (Select)",
		"More than one event time columns are available. Please ensure there is at most one event time column per stream. event time columns: (%s)", strings.Join(found, ","))
}

// CodeMultipleEventTimeColumns is Spark's error class for a stateful
// operator whose input has several event-time columns
// (WatermarkSupport.findEventTimeColumn).
const CodeMultipleEventTimeColumns = "_LEGACY_ERROR_TEMP_3077"
