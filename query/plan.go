package query

import (
	"strconv"
	"strings"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/filter"
	"github.com/ethstream/ethstream/generate"
)

// A compiled query is a read path (the sources, the columns read, the
// watermark, the WHERE over the rows read) and a plan: Compiled.Steps, the
// steps its rows go through after the read path, in order, the last one's
// output going to the sink. A step is a stateless transform (a filter, a
// derived column, a projection, a sort, a limit) or a stateful operator (an
// aggregation); the engine gives the stateful operators their ids as Spark
// numbers them (each keeps its state in <checkpoint>/state/<id>).
// The caller turns the steps into the Go API's calls (package flow) one by
// one, knowing nothing of SQL: a subquery in FROM is the inner query's
// steps followed by the outer one's.

// Step is one step of a plan: exactly one of its parts is set.
type Step struct {
	// Where keeps the rows for which the predicate is TRUE.
	Where *filter.Predicate
	// Derive appends columns computed from each row, in order.
	Derive []filter.Derived
	// Project keeps the listed columns, in order, each maybe renamed.
	Project []Column
	// Aggregate is a stateful grouped aggregation.
	Aggregate *Aggregation
	// Sort orders the rows the sink receives each batch (ORDER BY; Spark
	// allows it after an aggregation in complete mode only).
	Sort []SortKey
	// Limit, when set, keeps the first *Limit rows the sink receives each
	// batch (LIMIT).
	Limit *int64
	// GlobalLimit, when set, is LIMIT in append mode: the first
	// *GlobalLimit rows over the whole stream, a stateful operator of its
	// own (Spark's StreamingGlobalLimitExec, package limit), always the
	// last step. Stateful reports aggregations only.
	GlobalLimit *int64
	// Generate is a generator (explode and its kin, query/generate.go):
	// one row per element of an array column.
	Generate *generate.Explode
}

// Stateful reports whether the step is a stateful operator.
func (s Step) Stateful() bool { return s.Aggregate != nil }

// String renders the step canonically (the query shape's record of the
// stateless steps before an operator).
func (s Step) String() string {
	switch {
	case s.Where != nil:
		return "where " + s.Where.String()
	case s.Derive != nil:
		parts := make([]string, len(s.Derive))
		for i, d := range s.Derive {
			parts[i] = d.Expr.String() + " as " + d.Name
		}
		return "derive " + strings.Join(parts, ", ")
	case s.Project != nil:
		parts := make([]string, len(s.Project))
		for i, c := range s.Project {
			parts[i] = c.String()
		}
		return "select " + strings.Join(parts, ", ")
	case s.Aggregate != nil:
		return s.Aggregate.String()
	case s.Sort != nil:
		parts := make([]string, len(s.Sort))
		for i, k := range s.Sort {
			parts[i] = k.String()
		}
		return "order by " + strings.Join(parts, ", ")
	case s.Limit != nil:
		return "limit " + strconv.FormatInt(*s.Limit, 10)
	case s.GlobalLimit != nil:
		return "global limit " + strconv.FormatInt(*s.GlobalLimit, 10)
	case s.Generate != nil:
		return "generate " + s.Generate.String()
	}
	return "empty step"
}

// Column is one column of a projection: an input column kept under its
// name or As, or (WindowTime) Spark's window_time(window) of an
// aggregation's window, its end minus one microsecond.
type Column struct {
	Name       string
	As         string
	WindowTime bool
}

// Out is the column's output name.
func (c Column) Out() string {
	switch {
	case c.As != "":
		return c.As
	case c.WindowTime:
		return "window_time"
	}
	return c.Name
}

// String renders the column canonically.
func (c Column) String() string {
	s := c.Name
	if c.WindowTime {
		s = "window_time(window)"
	}
	if c.As != "" && c.As != c.Name {
		s += " as " + quoteIdent(c.As)
	}
	return s
}

// Aggregation is a stateful step: the aggregation, the columns derived
// from its input rows before it (group expressions, aggregates' inputs),
// and the stage over its output (HAVING, expressions over aggregates).
type Aggregation struct {
	Spec agg.Spec
	// Derived are computed over the rows the step receives, before the
	// aggregation reads them by name.
	Derived []filter.Derived
	// Post is the stage over the aggregation's output, nil without one.
	Post *filter.Post
	// Session, when set, makes the step a session window aggregation
	// (query/session.go): Spec's group keys, aggregates, mode and
	// watermark with this session window, run by package session.
	Session *SessionWindow
}

// String renders the aggregation: its window, keys and aggregates.
func (a *Aggregation) String() string {
	var keys []string
	if w := a.Spec.Window; w != nil {
		keys = append(keys, "window("+w.Column+", '"+FormatInterval(w.Size)+"')")
	}
	if w := a.Session; w != nil {
		gap := "'" + FormatInterval(w.Gap) + "'"
		if w.GapExpr != "" {
			gap = w.GapExpr
		}
		keys = append(keys, "session_window("+w.Column+", "+gap+")")
	}
	keys = append(keys, a.Spec.GroupBy...)
	aggs := make([]string, len(a.Spec.Aggregates))
	for i, x := range a.Spec.Aggregates {
		col := x.Column
		if col == "" {
			col = "*"
		}
		aggs[i] = x.Kind.String() + "(" + col + ") as " + x.As
	}
	return "aggregate by (" + strings.Join(keys, ", ") + "): " + strings.Join(aggs, ", ")
}

// SortKey is one ORDER BY key: an output column, its direction, and where
// its nulls go (Spark's default: NULLS FIRST ascending, NULLS LAST
// descending).
type SortKey struct {
	Column     string
	Desc       bool
	NullsFirst bool
}

// String renders the key as Spark's SQL writes it.
func (k SortKey) String() string {
	s := quoteIdent(k.Column)
	if k.Desc {
		s += " desc"
	} else {
		s += " asc"
	}
	if k.NullsFirst {
		return s + " nulls first"
	}
	return s + " nulls last"
}

// Operators is the number of stateful steps of the plan.
func (c *Compiled) Operators() int {
	n := 0
	for _, s := range c.Steps {
		if s.Stateful() {
			n++
		}
	}
	return n
}
