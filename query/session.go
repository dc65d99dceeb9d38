package query

import (
	"strings"
	"time"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/expr"
	"github.com/ethstream/ethstream/filter"
	"github.com/ethstream/ethstream/session"
	"github.com/ethstream/ethstream/stream"
)

// Session windows in SQL: GROUP BY session_window(ts, gap), keys... as
// Spark's (its gap a duration, or an expression per row, Spark 3.2+'s
// dynamic gap), selected as session_window (both columns,
// session_window_start and session_window_end) or as its fields
// session_window.start and session_window.end, each maybe renamed. The
// step is an Aggregation with Session set: package session's operator
// instead of agg's.

// SessionWindow is an aggregation's session_window.
type SessionWindow struct {
	// Column is the event time; Gap the constant gap, or GapColumn the
	// derived string column holding each row's gap.
	Column    string
	Gap       time.Duration
	GapColumn string
	// GapExpr is the dynamic gap's expression, canonical.
	GapExpr string
	// StartAs and EndAs are the output names of the session's start and
	// end ("" for session_window_start and session_window_end).
	StartAs, EndAs string
}

// SessionSpec is the session window aggregation a step with Session runs.
func (a *Aggregation) SessionSpec() session.Spec {
	s := a.Session
	return session.Spec{Column: s.Column, Gap: s.Gap, GapColumn: s.GapColumn, GapExpr: s.GapExpr, GroupBy: a.Spec.GroupBy,
		Aggregates: a.Spec.Aggregates, Mode: a.Spec.Mode, WatermarkDelay: a.Spec.WatermarkDelay, HasWatermark: a.Spec.HasWatermark,
		NonANSI: a.Spec.NonANSI, ColumnTypes: a.Spec.ColumnTypes, StartAs: s.StartAs, EndAs: s.EndAs}
}

// sessionGapColumn is the derived column holding a dynamic gap.
const sessionGapColumn = "__session_gap"

// sessionWindow parses session_window(col, gap) or the bare identifier
// session_window; a gap is a duration literal, or any other expression
// (a dynamic gap).
func (p *parser) sessionWindow() (*WindowCall, error) {
	t := p.next()
	w := &WindowCall{Pos: t.pos, Session: true}
	if !p.peek().punct("(") {
		w.Ref = true
		return w, nil
	}
	p.next()
	c, _, err := p.column("the event-time column of session_window()")
	if err != nil {
		return nil, err
	}
	w.Col = c
	if _, err := p.expectPunct(","); err != nil {
		return nil, p.errAt(t, "session_window() needs a gap: session_window(%s, '10 minutes')", c)
	}
	a := p.peek()
	if a.kind == tString && p.toks[p.i+1].punct(")") || a.is("interval") {
		if w.Size, err = p.duration(); err != nil {
			return nil, err
		}
	} else if w.GapExpr, err = p.or(0); err != nil {
		return nil, err
	}
	if _, err := p.expectPunct(")"); err != nil {
		return nil, err
	}
	return w, nil
}

// sessionField reads .start or .end after session_window in SELECT.
func (p *parser) sessionField(w *WindowCall) error {
	if !p.peek().punct(".") {
		return nil
	}
	p.next()
	// end is a reserved word: read the token as it is.
	t := p.next()
	f := strings.ToLower(t.text)
	if (t.kind != tIdent && t.kind != tQuoted) || f != "start" && f != "end" {
		return p.errAt(t, "session_window has the fields start and end, not %s", f)
	}
	w.Field = f
	return nil
}

// sessionString renders a session window call canonically.
func (w *WindowCall) sessionString() string {
	if w.Ref {
		s := "session_window"
		if w.Field != "" {
			s += "." + w.Field
		}
		return s
	}
	gap := "'" + FormatInterval(w.Size) + "'"
	if w.GapExpr != nil {
		gap = w.GapExpr.String()
	}
	s := "session_window(" + w.Col + ", " + gap + ")"
	if w.Field != "" {
		s += "." + w.Field
	}
	return s
}

// sameSession reports whether two session_window calls are the same.
func (w *WindowCall) sameSession(o *WindowCall) bool {
	if !o.Session || w.Col != o.Col || w.Size != o.Size || (w.GapExpr == nil) != (o.GapExpr == nil) {
		return false
	}
	return w.GapExpr == nil || w.GapExpr.String() == o.GapExpr.String()
}

// sessionSpec checks the grouping session window and records it.
func (r *resolver) sessionSpec(w *WindowCall) error {
	t, ok := r.colType(w.Col)
	if !ok {
		return r.unresolved(w.Pos, w.Col)
	}
	if t != stream.Timestamp {
		return invalidQuery(r.src, w.Pos, "session_window over a timestamp column such as block_ts",
			"session_window(%s, ...): %s is %s, not a timestamp", w.Col, w.Col, t)
	}
	r.spec.ColumnTypes[w.Col] = t
	r.session = &SessionWindow{Column: w.Col, Gap: w.Size}
	if w.GapExpr == nil {
		if w.Size <= 0 {
			return invalidQuery(r.src, w.Pos, "use a positive gap", "the session gap of %s is not positive", w.sessionString())
		}
		return nil
	}
	c, err := expr.Compile(w.GapExpr, r.colType, r.exprOptions())
	if err != nil {
		return err
	}
	if c.Type().Kind != stream.String {
		return invalidQuery(r.src, w.Pos, "give the gap as an interval string per row: CASE WHEN ... THEN '5 minutes' ELSE '10 minutes' END",
			"the session gap %s is %s, not a string", w.GapExpr, c.Type())
	}
	r.c.Derived = append(r.c.Derived, filter.Derived{Name: sessionGapColumn, Expr: c})
	r.spec.ColumnTypes[sessionGapColumn] = stream.String
	r.session.GapColumn, r.session.GapExpr = sessionGapColumn, w.GapExpr.String()
	return nil
}

// selectSession resolves a SELECT item naming the session window or one of
// its fields.
func (r *resolver) selectSession(it Item) error {
	w := it.Window
	if r.session == nil {
		return invalidQuery(r.src, it.Pos, "add the session window to GROUP BY", "SELECT %s without GROUP BY session_window(...)", w.sessionString())
	}
	if !w.Ref && !w.sameSession(r.window) {
		return invalidQuery(r.src, it.Pos, "select the session window of GROUP BY ("+r.window.sessionString()+"), or just session_window",
			"SELECT %s differs from GROUP BY %s", w.sessionString(), r.window.sessionString())
	}
	r.selected["session_window"] = true
	switch w.Field {
	case "":
		if it.As != "" && !strings.EqualFold(it.As, "session_window") {
			return unsupported(r.src, it.Pos, "renaming the session window (select session_window.start AS name and session_window.end AS name)")
		}
		if err := r.claim(it.Pos, session.ColStart); err != nil {
			return err
		}
		return r.claim(it.Pos, session.ColEnd)
	case "start":
		name := session.ColStart
		if it.As != "" {
			name, r.session.StartAs = it.As, it.As
		}
		return r.claim(it.Pos, name)
	default:
		name := session.ColEnd
		if it.As != "" {
			name, r.session.EndAs = it.As, it.As
		}
		return r.claim(it.Pos, name)
	}
}

// outputSchema is the schema of the aggregation's output: agg's, or the
// session window's, which also refuses what Spark refuses of it (update
// mode, append without a watermark, no group key besides the window).
func (r *resolver) outputSchema() (stream.Schema, error) {
	if r.session == nil {
		a, err := agg.New(r.spec)
		if err != nil {
			return stream.Schema{}, err
		}
		return a.OutputSchema(), nil
	}
	a := &Aggregation{Spec: r.spec, Session: r.session}
	op, err := session.New(a.SessionSpec())
	if err != nil {
		return stream.Schema{}, err
	}
	return op.OutputSchema(), nil
}

// sessionCheck refuses a session window aggregation its operator refuses,
// at compile time.
func (r *resolver) sessionCheck() error {
	if r.session == nil || r.c.Select != nil {
		return nil
	}
	_, err := r.outputSchema()
	return err
}
