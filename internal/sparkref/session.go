package sparkref

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ethstream/ethstream/stream"
)

// Session is GROUP BY session_window(Column, gap): a constant Gap, or a
// dynamic gap (Spark 3.2+) CASE WHEN When THEN Then ELSE Else END, each
// branch a string literal Spark casts to an interval (Else nil: no ELSE,
// a null gap).
type Session struct {
	Column string
	Gap    time.Duration
	When   Expr
	Then   *GapText
	Else   *GapText
	// Fields selects session_window.start AS session_start and
	// session_window.end AS session_end rather than session_window.
	Fields bool
	// GapSpell is the constant gap as written.
	GapSpell string
}

// GapText is a gap string of a dynamic gap: Text as written, D the
// interval it casts to (0 or negative: the row has no session).
type GapText struct {
	Text string
	D    time.Duration
}

// gapVocab are the dynamic gaps' strings, in the spellings Spark's cast
// from STRING to INTERVAL reads, with a zero and a negative one (Spark's
// SessionWindowing filters a row whose session does not end after it
// starts).
var gapVocab = []GapText{
	{"5 minutes", 5 * time.Minute}, {"10 minutes", 10 * time.Minute}, {"interval 2 minutes", 2 * time.Minute},
	{"1 hour", time.Hour}, {"90 seconds", 90 * time.Second}, {"1 minute 30 seconds", 90 * time.Second},
	{"0 seconds", 0}, {"-2 minutes", -2 * time.Minute},
}

// SessionQuery generates a session window aggregation: GROUP BY
// session_window(EventTime, gap) and one or two key columns (Spark refuses
// a session window without another group column in a stream), aggregates
// as Query draws them, a WHERE, HAVING; append mode with a watermark,
// complete mode with or without one, and update mode one time in twelve
// (which Spark refuses).
func (g *Gen) SessionQuery(rng *rand.Rand) *Query {
	q := &Query{ANSI: rng.IntN(5) != 0}
	q.From = pick(rng, []string{"blocks", "BLOCKS", g.Source})
	q.spell.upper = rng.IntN(2) == 0
	switch x := rng.IntN(12); {
	case x == 0:
		q.Mode = "update"
	case x < 7:
		q.Mode = "append"
	default:
		q.Mode = "complete"
	}
	if q.Mode != "complete" || rng.IntN(2) == 0 {
		q.Watermark = pick(rng, []time.Duration{time.Minute, 10 * time.Minute, time.Hour})
		q.WatermarkColumn = g.EventTime
	}
	s := &Session{Column: g.EventTime, Fields: rng.IntN(2) == 0}
	if rng.IntN(5) < 3 {
		s.Gap = pick(rng, []time.Duration{time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, time.Hour})
		s.GapSpell = spellDuration(rng, s.Gap)
	} else {
		s.When = g.gapCond(rng)
		t := pick(rng, gapVocab[:6])
		s.Then = &t
		if rng.IntN(5) != 0 {
			e := pick(rng, gapVocab)
			s.Else = &e
		}
	}
	q.Session = s
	// Group keys of the types ethstream's session state keys hold
	// (docs/contracts.md, Session windows).
	keyCols := g.cols(stream.String, stream.Int64, stream.Timestamp)
	if g.SourceCol != "" {
		keyCols = append(keyCols, Column{Name: g.SourceCol, Type: stream.String})
	}
	for len(q.Keys) == 0 || len(q.Keys) < 2 && rng.IntN(3) == 0 {
		c := pick(rng, keyCols)
		if c.Name != g.EventTime && !containsStr(q.Keys, c.Name) {
			q.Keys = append(q.Keys, c.Name)
		}
	}
	for i := range 1 + rng.IntN(3) {
		a := g.agg(rng)
		// ethstream's session aggregates take no DECIMAL, and it computes an
		// aggregate's input expression also for a row without a session,
		// where Spark filters the row first: neither is drawn
		// (docs/contracts.md, Session windows).
		for a.Func != "count" && g.isDecimal(a.Column) || a.Arg != nil {
			a = g.agg(rng)
		}
		if a.Arg != nil || a.Func == "ratio" || rng.IntN(3) == 0 || containsAgg(q.Aggs, a) {
			a.Alias = pick(rng, []string{"n", "X", "total"}) + strconv.Itoa(i)
		}
		q.Aggs = append(q.Aggs, a)
	}
	if rng.IntN(10) < 6 {
		q.Where = g.expr(rng, q, 1)
	}
	if rng.IntN(6) == 0 {
		k := int64(rng.IntN(3))
		q.Having = &k
	}
	q.spell.selectOrder = rng.Perm(1 + len(q.Keys))
	return q
}

// gapCond is a dynamic gap's WHEN: a column compared with a literal, or
// IS NULL (a null condition takes the ELSE).
func (g *Gen) gapCond(rng *rand.Rand) Expr {
	c := pick(rng, g.cols(stream.String, stream.Int64, stream.Float64))
	if rng.IntN(4) == 0 {
		return IsNull{X: Col{Name: c.Name}, Not: rng.IntN(2) == 0}
	}
	return Cmp{Op: pick(rng, []string{"=", "<>", "<", ">="}), L: Col{Name: c.Name}, R: g.lit(rng, c, false)}
}

// gapText renders the session's gap argument.
func (s *Session) gapText() string {
	if s.When == nil {
		return s.GapSpell
	}
	var b strings.Builder
	b.WriteString("CASE WHEN ")
	s.When.render(&b)
	b.WriteString(" THEN '" + s.Then.Text + "'")
	if s.Else != nil {
		b.WriteString(" ELSE '" + s.Else.Text + "'")
	}
	b.WriteString(" END")
	return b.String()
}

// renderSession writes a session window query as Spark SQL.
func (q *Query) renderSession() string {
	s := q.Session
	call := "session_window(" + s.Column + ", " + s.gapText() + ")"
	head := []string{"session_window"}
	if s.Fields {
		head[0] = "session_window.start " + q.kw("as") + " session_start, session_window.end " + q.kw("as") + " session_end"
	}
	head = append(head, q.Keys...)
	var items []string
	for _, i := range q.spell.selectOrder {
		items = append(items, head[i])
	}
	items = append(items, q.aggItems()...)
	var b strings.Builder
	b.WriteString(q.kw("select") + " " + strings.Join(items, ", ") + " " + q.kw("from") + " " + q.From)
	if q.Where != nil {
		b.WriteString(" " + q.kw("where") + " ")
		q.Where.render(&b)
	}
	b.WriteString(" " + q.kw("group by") + " " + strings.Join(append([]string{call}, q.Keys...), ", "))
	if q.Having != nil {
		fmt.Fprintf(&b, " %s count(*) > %d", q.kw("having"), *q.Having)
	}
	return b.String()
}

// sessionColumns are a session query's output columns: the session's
// bounds, the keys, the aggregates.
func (q *Query) sessionColumns() []string {
	cols := []string{"session_window_start", "session_window_end"}
	if q.Session.Fields {
		cols = []string{"session_start", "session_end"}
	}
	cols = append(cols, q.Keys...)
	for _, i := range q.aggOrder() {
		cols = append(cols, q.Aggs[i].Name())
	}
	return cols
}

// rowGap is row r's gap in µs: the constant, or the CASE's branch (a
// null or false WHEN takes the ELSE; no ELSE is a null gap, 0 here).
func (ev *evaluator) rowGap(r Row) int64 {
	s := ev.q.Session
	if s.When == nil {
		return s.Gap.Microseconds()
	}
	if ev.eval(s.When, r) == tTrue {
		return s.Then.D.Microseconds()
	}
	if s.Else == nil {
		return 0
	}
	return s.Else.D.Microseconds()
}

// sessionRow is an input row a session holds, with its aggregates' input
// expressions' values.
type sessionRow struct {
	r    Row
	args []any
}

// span is one session of a group key: [start, end) in µs and every row
// merged into it (the oracle keeps rows, not buffers, and folds them
// afresh: brute force).
type span struct {
	start, end int64
	rows       []sessionRow
}

// evaluateSession runs a session window query as Spark does, written from
// Spark's SessionWindowing (a row's session is [t, t+gap); a null event
// time or gap, or a gap <= 0, filters the row), SessionWindowStateStore-
// RestoreExec (a row whose own session ends at or before the previous
// batch's watermark is late and dropped; the key's stored sessions join
// the batch's rows), MergingSessionsIterator (by key, sorted by start, a
// session absorbs the next while that starts at or before its end, the end
// growing to the larger) and SessionWindowStateStoreSaveExec (append:
// the sessions whose end is at or before the batch's watermark are emitted
// once and removed; complete: every stored session each batch, none
// evicted; update: refused at the start).
func evaluateSession(q *Query, ev *evaluator, batches [][]Row) Result {
	res := Result{Columns: q.sessionColumns()}
	if q.Mode == "update" {
		res.Fail = &Failure{Code: "UNSUPPORTED_OUTPUT_MODE", Codes: []string{"UNSUPPORTED_OUTPUT_MODE"}, Batch: -1}
		return res
	}
	state := map[string][]*span{}
	// gone are the sessions append mode evicted, by key.
	gone := map[string][]*span{}
	keys := map[string][]any{}
	var out []*span
	outKey := map[*span]string{}
	evict := func(wmMs int64) {
		for kt, ss := range state {
			kept := ss[:0]
			for _, s := range ss {
				if s.end <= wmMs*1000 {
					out = append(out, s)
					outKey[s] = kt
					gone[kt] = append(gone[kt], s)
				} else {
					kept = append(kept, s)
				}
			}
			state[kt] = kept
		}
	}
	wmMs, prevMs := int64(0), int64(0)
	tsIdx := ev.idx[q.Session.Column]
	for n, batch := range batches {
		ev.codes = ev.codes[:0]
		maxMs, seen := int64(math.MinInt64), false
		for _, r := range batch {
			if q.hasWatermark() && ev.pushed(r) {
				if ts := r[ev.idx[q.WatermarkColumn]]; ts != nil {
					maxMs, seen = max(maxMs, floorDiv(ts.(int64), 1000)), true
				}
			}
		}
		touched := map[string]bool{}
		for _, r := range batch {
			if ev.eval(q.Where, r) != tTrue {
				continue
			}
			gap := ev.rowGap(r)
			ts := r[tsIdx]
			if ts == nil || gap <= 0 {
				continue
			}
			// The aggregates' inputs are projected for every row with a
			// session, late or not (the partial aggregate runs before the
			// restore exec drops late rows).
			args := make([]any, len(q.Aggs))
			for i, a := range q.Aggs {
				if a.Arg != nil {
					v, code := ev.num(a.Arg, r)
					if code != "" {
						ev.codes = append(ev.codes, code)
					}
					args[i] = v
				}
			}
			start := ts.(int64)
			if q.hasWatermark() && start+gap <= prevMs*1000 {
				res.Late++
				continue
			}
			key := make([]any, len(q.Keys))
			for i, c := range q.Keys {
				key[i] = r[ev.idx[c]]
			}
			kt := KeyText(key)
			keys[kt] = key
			state[kt] = append(state[kt], &span{start: start, end: start + gap, rows: []sessionRow{{r, args}}})
			touched[kt] = true
		}
		for kt := range touched {
			state[kt] = mergeSpans(state[kt])
			for _, s := range state[kt] {
				for _, g := range gone[kt] {
					if s.start <= g.end && g.start <= s.end {
						res.Split++ // would have merged with an evicted session
					}
				}
			}
			for _, s := range state[kt] {
				ev.fold(s, &ev.codes)
			}
		}
		if len(ev.codes) > 0 {
			res.Fail = &Failure{Code: ev.codes[0], Codes: slices.Compact(slices.Sorted(slices.Values(ev.codes))), Batch: n}
			return res
		}
		if q.Mode == "append" {
			evict(wmMs)
		}
		prevMs = wmMs
		if seen {
			wmMs = max(wmMs, maxMs-q.Watermark.Milliseconds())
		}
	}
	if q.Mode == "append" {
		evict(wmMs) // the no-data batch after the last
	} else {
		out = out[:0]
		for kt, ss := range state {
			for _, s := range ss {
				out = append(out, s)
				outKey[s] = kt
			}
		}
	}
	for _, s := range out {
		var codes []string
		g := ev.fold(s, &codes)
		if q.Having != nil && g.rows <= *q.Having {
			continue
		}
		vals := append([]any{s.start, s.end}, keys[outKey[s]]...)
		for _, i := range q.aggOrder() {
			vals = append(vals, ev.result(q.Aggs[i], &g.aggs[i], g.rows))
		}
		res.Rows = append(res.Rows, OutRow{Key: KeyText(vals[:2+len(q.Keys)]), Values: vals})
	}
	slices.SortFunc(res.Rows, func(a, b OutRow) int { return strings.Compare(a.Key, b.Key) })
	return res
}

// mergeSpans merges a key's sessions as MergingSessionsIterator does.
func mergeSpans(ss []*span) []*span {
	slices.SortStableFunc(ss, func(a, b *span) int { return cmpInt(a.start, b.start) })
	var out []*span
	for _, s := range ss {
		if c := len(out) - 1; c >= 0 && s.start <= out[c].end {
			out[c].end = max(out[c].end, s.end)
			out[c].rows = append(out[c].rows, s.rows...)
			continue
		}
		out = append(out, s)
	}
	return out
}

// fold aggregates a session's rows, adding the error classes a fold
// raises (a BIGINT sum leaving BIGINT under ANSI, a DECIMAL sum leaving
// its precision) to codes.
func (ev *evaluator) fold(s *span, codes *[]string) *group {
	g := &group{aggs: make([]buffer, len(ev.q.Aggs))}
	over := false
	for _, sr := range s.rows {
		copy(ev.args, sr.args)
		if a := ev.add(g, sr.r); a >= 0 && ev.q.ANSI || ev.decOver {
			over = true
		}
		ev.decOver = false
	}
	if over {
		*codes = append(*codes, "ARITHMETIC_OVERFLOW")
	}
	return g
}

// isDecimal reports whether column name is a DECIMAL.
func (g *Gen) isDecimal(name string) bool {
	for _, c := range g.Schema {
		if c.Name == name {
			return c.Type.Kind() == stream.Decimal
		}
	}
	return false
}
