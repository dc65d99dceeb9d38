package sparkref

import (
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/ethstream/ethstream/stream"
)

// Column is a column of the input schema.
type Column struct {
	Name string
	Type stream.Type // Int64, Float64, String, Timestamp (µs since the epoch, UTC) or a type of types.go
}

// Row is one input row, a value per schema column: nil for a null, else
// int64 (Int64, Timestamp), float64 or string.
type Row []any

// Query is a generated streaming aggregation.
type Query struct {
	From   string
	Window *Window
	// Keys are the group columns, in GROUP BY order.
	Keys []string
	// Aggs are the aggregates, in SELECT order.
	Aggs  []Agg
	Where Expr // nil: none
	// Watermark is withWatermark's delay on WatermarkColumn ("": no
	// watermark); a delay of 0 is a watermark, the max event time seen.
	Watermark       time.Duration
	WatermarkColumn string
	Mode            string // "update", "append" (windows with a watermark) or "complete"
	ANSI            bool   // spark.sql.ansi.enabled
	// Having is HAVING count(*) > *Having (nil: none).
	Having *int64
	// KeyExprs are group keys that are expressions, after Keys.
	KeyExprs []KeyExpr
	// Dedup is a deduplication before the aggregation (nil: none).
	Dedup *Dedup
	// Project, set for a query without an aggregation (Projection), is
	// its SELECT list of columns; the aggregation's fields are unset.
	Project []string
	// Sub reads From through a subquery: FROM (SELECT * FROM From [WHERE
	// SubWhere]) [AS t], the query's WHERE over its rows.
	Sub      bool
	SubWhere Expr
	SubAlias string
	// Distinct is SELECT DISTINCT of the window and the keys (no
	// aggregate, no HAVING).
	Distinct bool
	// Order is ORDER BY over output columns (complete mode); Limit is LIMIT
	// (nil: none).
	Order []OrderKey
	Limit *int64
	// Session, set, groups by session_window (session.go); Window is
	// then nil.
	Session *Session

	spell spelling
}

// OrderKey is one ORDER BY key: an output column (window is its bounds),
// ascending (nulls first) or descending (nulls last), Spark's defaults.
type OrderKey struct {
	Column string
	Desc   bool
}

// Window is window(Column, Size, Slide, Start).
type Window struct {
	Column             string
	Size, Slide, Start time.Duration // Slide == Size for tumbling windows
}

// Agg is one aggregate: Func is count, sum, min, max or avg; Column ""
// means count(*). Func "ratio" is the expression over aggregates
// sum(Column) / count(*), computed after the aggregation (always aliased).
type Agg struct {
	Func, Column string
	// Arg, when set, is the input: an expression (Column is then "" and
	// Alias is set).
	Arg   Operand
	Alias string // "" = the default name
}

// Name is the output column's name: the alias, else ethstream's default
// (count, <func>_<column>; docs/contracts.md lists the difference).
func (a Agg) Name() string {
	switch {
	case a.Alias != "":
		return a.Alias
	case a.Column == "":
		return "count"
	}
	return a.Func + "_" + a.Column
}

// Expr is a WHERE condition: And, Or, Not, Cmp, In, Between or IsNull.
type Expr interface{ render(*strings.Builder) }

// And, Or and Not are the boolean connectives.
type (
	And struct{ L, R Expr }
	Or  struct{ L, R Expr }
	Not struct{ X Expr }
)

// Cmp is L Op R, Op one of = <> < <= > >= (rendered in Spark's spellings).
type Cmp struct {
	Op   string
	L, R Operand
}

// In is X [NOT] IN (List...).
type In struct {
	X    Operand
	List []Lit
	Not  bool
}

// Between is X [NOT] BETWEEN Lo AND Hi.
type Between struct {
	X, Lo, Hi Operand
	Not       bool
}

// IsNull is X IS [NOT] NULL.
type IsNull struct {
	X   Operand
	Not bool
}

// Operand is a Col or a Lit.
type Operand interface{ renderOperand(*strings.Builder) }

// Col is a column reference, rendered as Spell (a case variant or a
// quoted name) when set.
type Col struct{ Name, Spell string }

// LitKind is a literal's Spark type.
type LitKind uint8

// Literal kinds.
const (
	LitNull LitKind = iota
	LitBigint
	LitDecimal
	LitDouble
	LitString
	LitTimestamp // TIMESTAMP '...'
	LitDate      // DATE '...'
	LitBool      // TRUE, FALSE (Int 1 or 0; types.go)
)

// Lit is a literal. Text is how it is written (it denotes the value:
// 200, 200L, '2' '00', 2e2, 200BD ...); the value is in the field of its
// kind: Int (BIGINT; TIMESTAMP and DATE in µs), Dec, Float, Str.
type Lit struct {
	Kind  LitKind
	Int   int64
	Dec   *big.Rat
	Float float64
	Str   string
	Text  string
}

func (c Col) renderOperand(b *strings.Builder) {
	if c.Spell != "" {
		b.WriteString(c.Spell)
		return
	}
	b.WriteString(c.Name)
}

func (l Lit) renderOperand(b *strings.Builder) { b.WriteString(l.Text) }

func (e And) render(b *strings.Builder) { binary(b, e.L, " AND ", e.R) }
func (e Or) render(b *strings.Builder)  { binary(b, e.L, " or ", e.R) }
func (e Not) render(b *strings.Builder) {
	b.WriteString("NOT (")
	e.X.render(b)
	b.WriteString(")")
}

func binary(b *strings.Builder, l Expr, op string, r Expr) {
	b.WriteString("(")
	l.render(b)
	b.WriteString(op)
	r.render(b)
	b.WriteString(")")
}

func (e Cmp) render(b *strings.Builder) {
	e.L.renderOperand(b)
	b.WriteString(" " + e.Op + " ")
	e.R.renderOperand(b)
}

func (e In) render(b *strings.Builder) {
	e.X.renderOperand(b)
	if e.Not {
		b.WriteString(" NOT")
	}
	b.WriteString(" IN (")
	for i, l := range e.List {
		if i > 0 {
			b.WriteString(", ")
		}
		l.renderOperand(b)
	}
	b.WriteString(")")
}

func (e Between) render(b *strings.Builder) {
	e.X.renderOperand(b)
	if e.Not {
		b.WriteString(" NOT")
	}
	b.WriteString(" BETWEEN ")
	e.Lo.renderOperand(b)
	b.WriteString(" AND ")
	e.Hi.renderOperand(b)
}

func (e IsNull) render(b *strings.Builder) {
	e.X.renderOperand(b)
	b.WriteString(" IS ")
	if e.Not {
		b.WriteString("NOT ")
	}
	b.WriteString("NULL")
}

// spelling is how Render writes the parts of a query that have several
// spellings with one meaning; the generator picks them.
type spelling struct {
	size, slide, start string // window durations as written
	windowAlias        bool   // SELECT window(...) AS window
	groupWindow        int    // GROUP BY the window as: 0 its expression, 1 the alias window, 2 its ordinal
	keyOrdinal         []bool // GROUP BY key i by its ordinal
	selectOrder        []int  // SELECT items (window, keys) in this order; aggregates after
	funcs              []string
	upper              bool // keywords in upper case
}

// Render writes q as Spark SQL text.
func (q *Query) Render() string {
	if q.Project != nil {
		return q.renderProjection()
	}
	if q.Session != nil {
		return q.renderSession()
	}
	var b strings.Builder
	win := q.windowExpr()
	head, order := q.selectHead(win)
	items := make([]string, 0, len(order)+len(q.Aggs))
	for _, i := range order {
		items = append(items, head[i])
	}
	for _, k := range q.KeyExprs {
		items = append(items, k.Text()+" "+q.kw("as")+" "+k.Alias)
	}
	items = append(items, q.aggItems()...)
	b.WriteString(q.kw("select") + " ")
	if q.Distinct {
		b.WriteString(q.kw("distinct") + " ")
	}
	b.WriteString(strings.Join(items, ", "))
	b.WriteString(" " + q.kw("from") + " ")
	if q.Sub {
		b.WriteString("(" + q.kw("select") + " * " + q.kw("from") + " " + q.From)
		if q.SubWhere != nil {
			b.WriteString(" " + q.kw("where") + " ")
			q.SubWhere.render(&b)
		}
		b.WriteString(")")
		if q.SubAlias != "" {
			b.WriteString(" " + q.SubAlias)
		}
	} else {
		b.WriteString(q.From)
	}
	if q.Where != nil {
		b.WriteString(" " + q.kw("where") + " ")
		q.Where.render(&b)
	}
	groups := q.groupBy(win, order)
	for _, k := range q.KeyExprs {
		if k.ByAlias {
			groups = append(groups, k.Alias)
		} else {
			groups = append(groups, k.Text())
		}
	}
	if len(groups) > 0 && !q.Distinct {
		b.WriteString(" " + q.kw("group by") + " " + strings.Join(groups, ", "))
	}
	if q.Having != nil {
		fmt.Fprintf(&b, " %s count(*) > %d", q.kw("having"), *q.Having)
	}
	for i, k := range q.Order {
		if i == 0 {
			b.WriteString(" " + q.kw("order by") + " ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(k.Column)
		if k.Desc {
			b.WriteString(" " + q.kw("desc"))
		}
	}
	if q.Limit != nil {
		fmt.Fprintf(&b, " %s %d", q.kw("limit"), *q.Limit)
	}
	return b.String()
}

// where is the condition a row of From must meet: the subquery's WHERE,
// then the query's (Spark's CombineFilters keeps that order).
func (q *Query) where() Expr {
	switch {
	case q.SubWhere == nil:
		return q.Where
	case q.Where == nil:
		return q.SubWhere
	}
	return And{L: q.SubWhere, R: q.Where}
}

// kw spells keyword s in the query's case.
func (q *Query) kw(s string) string {
	if q.spell.upper {
		return strings.ToUpper(s)
	}
	return s
}

// windowExpr is the window(...) call as spelled, "" without a window.
func (q *Query) windowExpr() string {
	w := q.Window
	if w == nil {
		return ""
	}
	win := "window(" + w.Column + ", " + q.spell.size
	if q.spell.slide != "" || q.spell.start != "" {
		win += ", " + q.spell.slide
	}
	if q.spell.start != "" {
		win += ", " + q.spell.start
	}
	return win + ")"
}

// selectHead returns the non-aggregate SELECT items (the window, then the
// keys) and the order they are written in (selectOrder, or as listed).
func (q *Query) selectHead(win string) (head []string, order []int) {
	if win != "" {
		if q.spell.windowAlias {
			head = append(head, win+" "+q.kw("as")+" window")
		} else {
			head = append(head, win)
		}
	}
	head = append(head, q.Keys...)
	order = q.spell.selectOrder
	if len(order) != len(head) {
		order = make([]int, len(head))
		for i := range order {
			order[i] = i
		}
	}
	return head, order
}

// aggItems returns the aggregate SELECT items, each function as spelled.
func (q *Query) aggItems() []string {
	var items []string
	for i, a := range q.Aggs {
		f := a.Func
		if i < len(q.spell.funcs) && q.spell.funcs[i] != "" {
			f = q.spell.funcs[i]
		}
		arg := a.Column
		if a.Arg != nil {
			var ab strings.Builder
			a.Arg.renderOperand(&ab)
			arg = ab.String()
		} else if arg == "" {
			arg = "*"
			if f == "count(1)" {
				f, arg = "count", "1"
			}
		}
		s := f + "(" + arg + ")"
		if a.Func == "ratio" {
			s = "sum(" + arg + ") / count(*)"
		}
		if a.Alias != "" {
			s += " " + q.kw("as") + " " + a.Alias
		}
		items = append(items, s)
	}
	return items
}

// groupBy returns the GROUP BY items: the window and the keys, each by its
// expression, alias or ordinal as spelled. Ordinals are positions in the
// SELECT list (1-based), which order gives.
func (q *Query) groupBy(win string, order []int) []string {
	pos := func(headIndex int) int {
		for p, i := range order {
			if i == headIndex {
				return p + 1
			}
		}
		panic("sparkref: select item not found")
	}
	var groups []string
	base := 0
	if win != "" {
		base = 1
		switch {
		case q.spell.groupWindow == 1 && q.spell.windowAlias:
			groups = append(groups, "window")
		case q.spell.groupWindow == 2:
			groups = append(groups, fmt.Sprint(pos(0)))
		default:
			groups = append(groups, win)
		}
	}
	for i, k := range q.Keys {
		if i < len(q.spell.keyOrdinal) && q.spell.keyOrdinal[i] {
			groups = append(groups, fmt.Sprint(pos(base+i)))
		} else {
			groups = append(groups, k)
		}
	}
	return groups
}

// hasWatermark says the query has a watermark, whatever its delay.
func (q *Query) hasWatermark() bool { return q.WatermarkColumn != "" }

// WatermarkOption is the --with-watermark value ("" without one).
func (q *Query) WatermarkOption() string {
	if !q.hasWatermark() {
		return ""
	}
	return fmt.Sprintf("%s, %d seconds", q.WatermarkColumn, int64(q.Watermark/time.Second))
}

// aggOrder is the order of the aggregates' output columns: the aggregates,
// then the expressions over aggregates (ratio), each in SELECT order (the
// post-aggregation stage appends its columns).
func (q *Query) aggOrder() []int {
	var out, post []int
	for i, a := range q.Aggs {
		if a.Func == "ratio" {
			post = append(post, i)
		} else {
			out = append(out, i)
		}
	}
	return append(out, post...)
}

// KeyExpr is a group key computed from a column: Func is lower (a STRING
// column), mod3 (BIGINT % 3) or hour (date_trunc('HOUR', ts)).
type KeyExpr struct {
	Func, Column, Alias string
	ByAlias             bool // GROUP BY the alias rather than the expression
}

// Text is the expression as written.
func (k KeyExpr) Text() string {
	switch k.Func {
	case "lower":
		return "lower(" + k.Column + ")"
	case "mod3":
		return "(" + k.Column + " % 3)"
	case "str":
		return "CAST(" + k.Column + " AS STRING)"
	}
	return "date_trunc('HOUR', " + k.Column + ")"
}
