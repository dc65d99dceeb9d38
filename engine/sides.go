package engine

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// Two-input queries (a stream-stream join), inside the linear plan.
//
// A query with Sides reads sources of two schemas: each side is a set of
// the query's named sources, unioned by name as a one-input query's
// sources are (same columns, the literal source column), with its own
// projection, filter and watermark. Every source keeps its own offsets,
// keyed by name in the offsets log, so source evolution (add, remove,
// tombstone) works on either side as on a one-input query: a side is a
// grouping of names, not a new entry in the log. Stage 0 is a
// stream.SideOperator (the join), the reads hand it each chunk with its
// side (ProcessSide) instead of Process, and everything after it (later
// operators, transforms, the sink) is a one-input plan. A side may have
// operators of its own before the join (Side.Stages: sidechain.go),
// which makes the plan a tree.
//
// Watermarks follow Spark's WatermarkTracker: each side with a watermark
// tracks its own, max event time read minus its delay, kept in memory only
// (a restart starts the sides afresh, as Spark's operatorToWatermarkMap
// does) and 0 for a side that has read no row yet; the batch's commit
// watermark is the policy's choice over the sides (min, the default, or
// max: spark.sql.streaming.multipleWatermarkPolicy), never below the
// current one. The policy is recorded in every offsets entry of such a
// query and pinned from the checkpoint; an entry without it (a checkpoint
// of a one-input query, or of Spark before 2.4) means min. A one-input
// query records nothing new, so its offsets entries stay byte for byte
// what they were.

// Side is one input of a two-input query: Query.Sides[stream.LeftSide] and
// Query.Sides[stream.RightSide].
type Side struct {
	// Name is the side's alias (a join's relation name), for errors.
	Name string
	// Sources are the names of the query's sources (NamedSource.Name) the
	// side unions; every source belongs to exactly one side.
	Sources []string
	// Columns is the side's projection, as Query.Columns (nil: every
	// column of its sources and the source column); a side without
	// Stages also reads the columns its open join reads
	// (stream.SideColumnsReader).
	Columns []string
	// Where filters the side's rows, as Query.Where.
	Where stream.Predicate
	// PreWatermark is the part of Where below the side's watermark, as
	// Query.PreWatermark: only the rows it keeps advance the side's
	// watermark (nil: every row read does).
	PreWatermark stream.Predicate
	// Watermark is the side's event time and delay (nil: none).
	Watermark *Watermark
	// Stages are the side's steps after its read path and before the
	// join (sidechain.go): stateful one-input operators (a deduplication
	// of the side's rows) and transforms, each stage's output the next
	// one's input, the last one's the join's input of this side. Nil: the
	// read path feeds the join.
	Stages []Stage
}

// Watermark policies (spark.sql.streaming.multipleWatermarkPolicy).
const (
	policyMin = "min"
	policyMax = "max"
)

// sideMark is one side's tracked watermark: set once the side read a row
// (Spark populates 0 for a side with none).
type sideMark struct {
	ms  int64
	set bool
}

// nextSidedWatermark is the commit watermark of a two-input batch run at
// batchWM, with ev the event times each side read and marks each side's
// tracked watermark before it (nil: none yet): Spark's
// WatermarkTracker.updateWatermark over the sides that have a watermark.
// It returns the new marks too, which take effect once the batch commits.
func nextSidedWatermark(batchWM int64, sides []Side, ev []eventStats, marks []sideMark, policy string) (int64, []sideMark) {
	next := slices.Clone(marks)
	if len(next) < len(sides) {
		next = append(next, make([]sideMark, len(sides)-len(next))...)
	}
	var vals []int64
	for i, s := range sides {
		if s.Watermark == nil {
			continue
		}
		if ev[i].n > 0 {
			w := ev[i].max/1000 - s.Watermark.Delay.Milliseconds()
			if !next[i].set || w > next[i].ms {
				next[i] = sideMark{ms: w, set: true}
			}
		} else if !next[i].set {
			next[i] = sideMark{ms: 0, set: true}
		}
		vals = append(vals, next[i].ms)
	}
	if len(vals) == 0 {
		return batchWM, next
	}
	chosen := slices.Min(vals)
	if policy == policyMax {
		chosen = slices.Max(vals)
	}
	return max(batchWM, chosen), next
}

// multiWatermark reports whether the query combines several watermarks.
func (q *Query) multiWatermark() bool {
	n := 0
	for _, s := range q.Sides {
		if s.Watermark != nil {
			n++
		}
	}
	return n > 1
}

// hasSideWatermark reports whether a side of a two-input query has a
// watermark (the progress event then reports the batch's).
func (q *Query) hasSideWatermark() bool {
	for _, s := range q.Sides {
		if s.Watermark != nil {
			return true
		}
	}
	return false
}

// pinWatermarkPolicy sets the watermark policy of a query with several
// watermarks in sp's conf: the checkpoint's (min if an existing entry
// does not record it), else the session's, else min; a session value the
// checkpoint overrides is a warning. A query with one watermark or none
// records nothing.
func pinWatermarkPolicy(sp *startPlan, s settings, multi bool) {
	if !multi {
		return
	}
	k := checkpoint.ConfMultipleWatermarkPolicy
	if sp.Conf == nil {
		sp.Conf = map[string]string{}
	}
	cv, recorded := sp.Conf[k]
	switch {
	case recorded:
		if s.watermarkPolicy != "" && s.watermarkPolicy != strings.ToLower(cv) {
			sp.Warnings = append(sp.Warnings, fmt.Sprintf("conf %s=%s from the checkpoint overrides the session value %s", k, cv, s.watermarkPolicy))
		}
	case !sp.New && sp.Last != nil:
		// Spark's default for a checkpoint that does not record the key.
		sp.Conf[k] = policyMin
		if s.watermarkPolicy != "" && s.watermarkPolicy != policyMin {
			sp.Warnings = append(sp.Warnings, fmt.Sprintf("conf %s=min (the default of a checkpoint that does not record it) overrides the session value %s", k, s.watermarkPolicy))
		}
	case s.watermarkPolicy != "":
		sp.Conf[k] = s.watermarkPolicy
	default:
		sp.Conf[k] = policyMin
	}
}

// watermarkPolicy is the policy a start runs with (pinWatermarkPolicy).
func watermarkPolicy(conf map[string]string) string {
	if strings.ToLower(conf[checkpoint.ConfMultipleWatermarkPolicy]) == policyMax {
		return policyMax
	}
	return policyMin
}

// sideOf maps each source name to its side, -1 for a one-input query.
func (q *Query) sideOf() map[string]int {
	m := map[string]int{}
	for i, s := range q.Sides {
		for _, n := range s.Sources {
			m[n] = i
		}
	}
	return m
}

// validateSides checks a two-input query before anything is read: two
// sides, every source named and in exactly one side, no one-input read
// path beside them, a first stage that is a stream.SideOperator with no
// transform before it, and each side's columns in each of its sources'
// schemas with one type (validateReadPath, side by side).
func (q *Query) validateSides() error {
	if len(q.Sides) == 0 {
		return nil
	}
	bad := func(remedy, format string, args ...any) error {
		return errcode.New(errcode.InvalidArgument, "", remedy, format, args...)
	}
	if len(q.Sides) != 2 {
		return bad("give a join two sides", "a two-input query has %d sides", len(q.Sides))
	}
	if q.Columns != nil || q.Where != nil || q.PreWatermark != nil || q.Watermark != nil {
		return bad("set the columns, filter and watermark on each side", "a two-input query has a read path of its own besides its sides'")
	}
	stages := q.stages()
	if len(stages) == 0 || stages[0].Operator == nil {
		return bad("make the join the plan's first step", "a two-input query's first stage is not a stateful operator")
	}
	if _, ok := stages[0].Operator.(stream.SideOperator); !ok {
		return bad("make the join the plan's first step", "a two-input query's first operator does not take two inputs")
	}
	side := map[string]int{}
	for i, s := range q.Sides {
		if len(s.Sources) == 0 {
			return bad("read a source on each side", "side %q reads no source", s.Name)
		}
		if s.Watermark != nil && s.Watermark.Column == "" {
			return bad("name the side's event-time column", "side %q has a watermark without a column", s.Name)
		}
		for _, n := range s.Sources {
			if n == "" {
				return bad("name every source of a two-input query", "side %q reads an unnamed source", s.Name)
			}
			if j, dup := side[n]; dup {
				return bad("read each source on one side", "source %q is on side %q and side %q", n, q.Sides[j].Name, s.Name)
			}
			side[n] = i
		}
	}
	for _, ns := range q.Sources {
		if _, ok := side[ns.Name]; !ok {
			return bad("put every source on a side of the join", "source %q is on no side of the two-input query", ns.Name)
		}
	}
	for i, s := range q.Sides {
		if err := validateSideStages(i, s); err != nil {
			return err
		}
	}
	for _, s := range q.Sides {
		one := Query{Columns: s.Columns, Where: s.Where, PreWatermark: s.PreWatermark, Watermark: s.Watermark, Stages: q.Stages, Operator: q.Operator}
		for _, ns := range q.Sources {
			if slices.Contains(s.Sources, ns.Name) {
				one.Sources = append(one.Sources, ns)
			}
		}
		if err := one.validateReadPath(); err != nil {
			return err
		}
	}
	return nil
}

// sideReads is the driver's per-side read path of a two-input query.
type sideReads struct {
	rp      readPath
	withSrc bool
	proj    []string
}

// openSides sets up the per-side read paths (nil for a one-input query).
func openSides(q *Query) []*sideReads {
	var out []*sideReads
	for _, s := range q.Sides {
		proj, withSrc := queryColumns(s.Columns)
		if wmk := s.Watermark; wmk != nil && s.Columns != nil && !contains(proj, wmk.Column) {
			proj = append(proj, wmk.Column)
		}
		sr := &sideReads{rp: readPath{where: s.Where, pre: s.PreWatermark}, withSrc: withSrc, proj: proj}
		if s.Watermark != nil {
			sr.rp.eventTime = s.Watermark.Column
		}
		out = append(out, sr)
	}
	return out
}

// widenSides adds to each projected side the columns the open join reads
// of its rows (stream.SideColumnsReader): a join that keeps a state's
// recorded layout reads more than the query does. A side with stages of
// its own feeds them, not the join, and keeps its projection.
func (d *driver) widenSides() {
	stages := d.q.stages()
	if len(d.sides) == 0 || len(stages) == 0 {
		return
	}
	r, ok := stages[0].Operator.(stream.SideColumnsReader)
	if !ok {
		return
	}
	for i, sr := range d.sides {
		if sr.proj == nil || len(d.q.Sides[i].Stages) > 0 {
			continue
		}
		cols := r.InputColumns(i)
		if cols == nil {
			sr.proj, sr.withSrc = nil, true
			continue
		}
		for _, c := range cols {
			switch {
			case c == stream.ColSource:
				sr.withSrc = true
			case !contains(sr.proj, c):
				sr.proj = append(sr.proj, c)
			}
		}
	}
}

// sideLabel names a side in errors: "left side (a)".
func sideLabel(i int, s Side) string {
	name := "left"
	if i == stream.RightSide {
		name = "right"
	}
	if s.Name != "" {
		return name + " side (" + s.Name + ")"
	}
	return name + " side " + strconv.Itoa(i)
}

// readSide runs one chunk of a two-input query's source st through its
// side's read path into the side's first operator, or the join
// (ProcessSide: sidechain.go says which); the side's event times count
// for its watermark and the batch's progress.
func (d *driver) readSide(ctx context.Context, b *batchRun, s step, st *srcState, in *stream.Batch) error {
	sr := d.sides[st.side]
	in, err := sr.rp.chunk(st, sr.withSrc, in, &b.rec.in.sides[st.side])
	if err != nil {
		return err
	}
	return d.intoSide(ctx, b, s.Batch, st.side, in)
}
