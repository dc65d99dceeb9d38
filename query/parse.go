package query

import (
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/expr"
	"github.com/ethstream/ethstream/filter"
)

// Select is a parsed query: the syntax tree, not yet resolved against the
// input columns (Compile does that). Column names are lowercased (Spark
// resolves them case-insensitively); aliases and the FROM name keep the
// case they were written in.
type Select struct {
	Items   []Item
	From    string // the relation name as written
	FromPos int
	Where   filter.Expr // nil without WHERE
	// WherePos is the offset of the WHERE's first token: an unknown column
	// in it is reported at its first occurrence from there.
	WherePos int
	GroupBy  []GroupItem // empty without GROUP BY (a global aggregation)
	Having   filter.Expr // nil without HAVING
	// Star is SELECT *: every column of the relation read, in its order.
	Star bool
	// Distinct is SELECT DISTINCT.
	Distinct bool
	// Sub is the subquery FROM reads: one branch for FROM (SELECT ...),
	// several for a UNION ALL of them; nil when FROM names a relation.
	Sub []*Select
	// SubAlias is the subquery's alias as written, "" without one.
	SubAlias string
	// OrderBy is ORDER BY's keys, empty without one; OrderPos the offset of
	// ORDER.
	OrderBy  []OrderItem
	OrderPos int
	// Limit is LIMIT's count, nil without one; LimitPos the offset of LIMIT.
	Limit    *int64
	LimitPos int
}

// OrderItem is one ORDER BY key: an output column by name or by its
// position in the SELECT list (Ordinal, 1-based; 0 if a name).
type OrderItem struct {
	Col        string // lowercase
	Ordinal    int
	Desc       bool
	NullsFirst bool
	Pos        int
}

// String renders the key canonically, with Spark's default null order
// spelled out only when it is not the default.
func (o OrderItem) String() string {
	s := o.Col
	if o.Ordinal > 0 {
		s = strconv.Itoa(o.Ordinal)
	}
	if o.Desc {
		s += " desc"
	}
	if o.NullsFirst == o.Desc {
		if o.NullsFirst {
			s += " nulls first"
		} else {
			s += " nulls last"
		}
	}
	return s
}

// Item is one SELECT item: the window, a column, or an aggregate.
type Item struct {
	Window *WindowCall // window(...) or the bare identifier window (Window.Ref)
	Col    string      // a column (lowercase)
	Agg    string      // count, sum, min, max, avg (lowercase)
	AggCol string      // the aggregate's column; "" is count(*)
	// Expr is any other expression: one over the group keys, or one
	// holding aggregates (an aggregate of an expression, FILTER, count_if).
	Expr filter.Expr
	As   string // alias as written, "" if none
	Pos  int
}

// WindowCall is window(col, size[, slide[, startTime]]); Ref is set for
// the bare identifier window, which names the grouping window. Durations
// are parsed (every spelling Spark accepts: '1 hour', '60 minutes',
// INTERVAL 1 HOUR, INTERVAL '1' HOUR), so equal windows written
// differently are equal.
type WindowCall struct {
	Ref bool
	// OfWindow is window(window_time(window), ...): windows over the time of
	// the windows of the aggregation a subquery runs (Col is window_time).
	OfWindow bool
	Col      string
	Size     time.Duration
	Slide    time.Duration // 0: tumbling (Size)
	Start    time.Duration // startTime, 0 when not given
	Pos      int
	// Session is set for session_window(col, gap) (query/session.go): Size
	// is then the gap, or GapExpr a dynamic gap; Field is "start" or "end"
	// for session_window.start or .end in SELECT.
	Session bool
	GapExpr filter.Expr
	Field   string
}

// GroupItem is one GROUP BY expression: the window, a name (a column or,
// with spark.sql.groupByAliases, a SELECT alias), or a SELECT ordinal
// (spark.sql.groupByOrdinal).
type GroupItem struct {
	Window  *WindowCall
	Col     string      // lowercase
	Expr    filter.Expr // an expression other than a column
	Ordinal int         // 1-based position in SELECT; 0 if not an ordinal
	Pos     int
}

// slide is the effective slide (Size for a tumbling window).
func (w *WindowCall) slide() time.Duration {
	if w.Slide == 0 {
		return w.Size
	}
	return w.Slide
}

// Same reports whether w and o are the same window (the same column and
// durations, however they were written).
func (w *WindowCall) Same(o *WindowCall) bool {
	if w.Session || o.Session {
		return w.Session && w.sameSession(o)
	}
	return w.Col == o.Col && w.Size == o.Size && w.slide() == o.slide() && w.Start == o.Start
}

// String renders the window call canonically, durations in their largest
// whole units.
func (w *WindowCall) String() string {
	if w.Session {
		return w.sessionString()
	}
	if w.Ref {
		return "window"
	}
	col := w.Col
	if w.OfWindow {
		col = "window_time(window)"
	}
	s := "window(" + col + ", '" + FormatInterval(w.Size) + "'"
	if w.slide() != w.Size || w.Start != 0 {
		s += ", '" + FormatInterval(w.slide()) + "'"
	}
	if w.Start != 0 {
		s += ", '" + FormatInterval(w.Start) + "'"
	}
	return s + ")"
}

// String renders an item canonically (lowercase keywords, aliases kept).
func (it Item) String() string {
	var s string
	switch {
	case it.Window != nil:
		s = it.Window.String()
	case it.Agg != "":
		c := it.AggCol
		if c == "" {
			c = "*"
		}
		s = it.Agg + "(" + c + ")"
	case it.Expr != nil:
		s = it.Expr.String()
	default:
		s = it.Col
	}
	if it.As != "" {
		s += " as " + quoteIdent(it.As)
	}
	return s
}

// String renders a GROUP BY item canonically.
func (g GroupItem) String() string {
	switch {
	case g.Window != nil:
		return g.Window.String()
	case g.Ordinal > 0:
		return strconv.Itoa(g.Ordinal)
	case g.Expr != nil:
		return g.Expr.String()
	}
	return g.Col
}

// quoteIdent backquotes a name that would not lex back as itself.
func quoteIdent(s string) string {
	plain := s != "" && isIdentStart(s[0]) && !reserved[strings.ToLower(s)]
	for i := 0; i < len(s) && plain; i++ {
		plain = isIdentPart(s[i])
	}
	if plain {
		return s
	}
	return "`" + strings.ReplaceAll(s, "`", "``") + "`"
}

type parser struct {
	src  string
	toks []token
	i    int
}

// Parse parses one query of the supported grammar.
func Parse(src string) (*Select, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{src: src, toks: toks}
	return p.query()
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) errAt(t token, format string, args ...any) error {
	return syntaxErr(p.src, t.pos, format, args...)
}

func (p *parser) expectPunct(s string) (token, error) {
	t := p.next()
	if !t.punct(s) {
		return t, p.errAt(t, "expected '%s', found %s", s, t)
	}
	return t, nil
}

func (p *parser) expectKeyword(kw string) error {
	t := p.next()
	if !t.is(kw) {
		return p.errAt(t, "expected %s, found %s", strings.ToUpper(kw), t)
	}
	return nil
}

// reserved are words that cannot be bare identifiers (column names,
// aliases) here; `backticks` quote them.
var reserved = map[string]bool{
	"select": true, "from": true, "where": true, "group": true, "by": true, "as": true,
	"and": true, "or": true, "not": true, "in": true, "is": true, "null": true, "between": true,
	"having": true, "order": true, "limit": true, "join": true, "union": true, "on": true,
	"distinct": true, "true": true, "false": true, "case": true, "when": true, "then": true,
	"else": true, "end": true, "over": true, "with": true, "like": true, "except": true,
	"intersect": true, "inner": true, "left": true, "right": true, "full": true, "cross": true,
	"outer": true, "lateral": true, "window": false, "cluster": true, "distribute": true, "sort": true,
	"qualify": true, "pivot": true, "unpivot": true, "tablesample": true, "rlike": true, "ilike": true,
}

// ident reads an identifier (bare or `quoted`) as written.
func (p *parser) ident(what string) (string, token, error) {
	t := p.next()
	switch {
	case t.kind == tQuoted:
		return t.text, t, nil
	case t.kind == tIdent && !reserved[strings.ToLower(t.text)]:
		return t.text, t, nil
	}
	return "", t, p.errAt(t, "expected %s, found %s", what, t)
}

// column reads a column name, lowercased: Spark resolves column names
// case-insensitively, and the input's columns are lowercase.
func (p *parser) column(what string) (string, token, error) {
	c, t, err := p.ident(what)
	return strings.ToLower(c), t, err
}

func (p *parser) query() (*Select, error) {
	t := p.peek()
	switch {
	case t.is("with"):
		return nil, unsupported(p.src, t.pos, "WITH (common table expressions)")
	case t.punct("("):
		return nil, unsupported(p.src, t.pos, "a parenthesised query")
	case t.is("insert"), t.is("create"), t.is("update"), t.is("delete"), t.is("merge"):
		return nil, unsupported(p.src, t.pos, strings.ToUpper(t.text)+" (only a SELECT query runs)")
	}
	branches, err := p.union()
	if err != nil {
		return nil, err
	}
	q := branches[0]
	if len(branches) > 1 {
		// A UNION ALL at the top is the rows of its branches, every column.
		q = &Select{Star: true, Sub: branches, FromPos: branches[0].FromPos}
	}
	if err := p.orderBy(q); err != nil {
		return nil, err
	}
	if err := p.limit(q); err != nil {
		return nil, err
	}
	return q, p.end()
}

// union reads SELECT ... {UNION ALL SELECT ...}: the branches in order.
func (p *parser) union() ([]*Select, error) {
	var out []*Select
	for {
		q, err := p.selectCore()
		if err != nil {
			return nil, err
		}
		out = append(out, q)
		t := p.peek()
		if !t.is("union") {
			return out, nil
		}
		p.next()
		switch a := p.peek(); {
		case a.is("all"):
			p.next()
		case a.is("distinct"), a.is("select"):
			// Spark plans UNION [DISTINCT] as Distinct(Union): an aggregation.
			return nil, unsupported(p.src, t.pos, "UNION without ALL (a UNION DISTINCT: write SELECT DISTINCT * FROM (... UNION ALL ...))")
		}
	}
}

// selectCore reads SELECT ... FROM ... [WHERE] [GROUP BY] [HAVING].
func (p *parser) selectCore() (*Select, error) {
	if t := p.peek(); t.punct("(") {
		return nil, unsupported(p.src, t.pos, "a parenthesised query")
	}
	if err := p.expectKeyword("select"); err != nil {
		return nil, err
	}
	q := &Select{}
	if t := p.peek(); t.is("distinct") || t.is("all") {
		p.next()
		q.Distinct = t.is("distinct")
	}
	if t := p.peek(); t.punct("*") && p.toks[p.i+1].is("from") {
		p.next()
		q.Star = true
	}
	for !q.Star {
		it, err := p.item()
		if err != nil {
			return nil, err
		}
		q.Items = append(q.Items, it)
		if !p.peek().punct(",") {
			break
		}
		p.next()
	}
	if err := p.from(q); err != nil {
		return nil, err
	}
	if p.peek().is("where") {
		p.next()
		q.WherePos = p.peek().pos
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		q.Where = e
	}
	if err := p.groupBy(q); err != nil {
		return nil, err
	}
	if p.peek().is("having") {
		p.next()
		e, err := p.or(0)
		if err != nil {
			return nil, err
		}
		q.Having = e
	}
	return q, nil
}

// orderBy reads ORDER BY key {, key}, if present: an output column or a
// SELECT position, [ASC | DESC], [NULLS FIRST | LAST].
func (p *parser) orderBy(q *Select) error {
	t := p.peek()
	if !t.is("order") {
		return nil
	}
	p.next()
	q.OrderPos = t.pos
	if err := p.expectKeyword("by"); err != nil {
		return err
	}
	for {
		k := p.peek()
		o := OrderItem{Pos: k.pos}
		if k.kind == tNumber {
			p.next()
			n, err := strconv.Atoi(k.text)
			if err != nil || n < 1 {
				return unsupported(p.src, k.pos, "ORDER BY a constant "+k.text+" (a position is a whole number from 1)")
			}
			o.Ordinal = n
		} else {
			c, _, err := p.column("a column after ORDER BY")
			if err != nil {
				return err
			}
			o.Col = c
			if nt := p.peek(); nt.punct("(") || nt.punct(".") || nt.kind == tPunct && !nt.punct(",") && !nt.punct(";") {
				return unsupported(p.src, k.pos, "ORDER BY an expression (order by an output column's name)")
			}
		}
		switch d := p.peek(); {
		case d.is("asc"):
			p.next()
		case d.is("desc"):
			p.next()
			o.Desc = true
		}
		o.NullsFirst = !o.Desc // Spark: NULLS FIRST ascending, NULLS LAST descending
		if n := p.peek(); n.is("nulls") {
			p.next()
			switch f := p.next(); {
			case f.is("first"):
				o.NullsFirst = true
			case f.is("last"):
				o.NullsFirst = false
			default:
				return p.errAt(f, "expected FIRST or LAST after NULLS, found %s", f)
			}
		}
		q.OrderBy = append(q.OrderBy, o)
		if !p.peek().punct(",") {
			return nil
		}
		p.next()
	}
}

// limit reads LIMIT n, if present.
func (p *parser) limit(q *Select) error {
	t := p.peek()
	if !t.is("limit") {
		return nil
	}
	p.next()
	q.LimitPos = t.pos
	n := p.next()
	if n.kind != tNumber {
		return p.errAt(n, "expected a row count after LIMIT, found %s", n)
	}
	v, err := strconv.ParseInt(n.text, 10, 64)
	if err != nil || v < 0 {
		return p.errAt(n, "LIMIT %s: the row count must be a whole number from 0", n.text)
	}
	q.Limit = &v
	return nil
}

// from reads FROM <relation>. A join is named as one wherever it starts,
// also after a table alias.
func (p *parser) from(q *Select) error {
	if err := p.expectKeyword("from"); err != nil {
		return err
	}
	ft := p.next()
	switch {
	case ft.punct("("):
		return p.subquery(q, ft)
	case ft.kind == tQuoted || ft.kind == tIdent && !reserved[strings.ToLower(ft.text)]:
		q.From = ft.text
	default:
		return p.errAt(ft, "expected a source name or blocks after FROM, found %s", ft)
	}
	q.FromPos = ft.pos
	if t := p.peek(); t.punct(".") {
		return unsupported(p.src, t.pos, "a qualified table name (catalog.schema.table)")
	}
	alias := -1
	if t := p.peek(); t.is("as") || t.kind == tQuoted || (t.kind == tIdent && !reserved[strings.ToLower(t.text)]) {
		alias = p.i
		p.next()
		if t.is("as") && p.peek().kind != tEOF {
			p.next()
		}
	}
	for _, kw := range []string{"join", "inner", "left", "right", "full", "cross", "natural", "lateral", "anti", "semi"} {
		if t := p.peek(); t.is(kw) {
			return unsupported(p.src, t.pos, "JOIN (a streaming aggregation here reads one relation)")
		}
	}
	if t := p.peek(); t.punct(",") {
		return unsupported(p.src, t.pos, "several tables in FROM (a join)")
	}
	if alias >= 0 {
		return unsupported(p.src, p.toks[alias].pos, "a table alias")
	}
	return nil
}

// subquery reads the rest of FROM (SELECT ... [UNION ALL SELECT ...])
// [[AS] alias] after its parenthesis.
func (p *parser) subquery(q *Select, open token) error {
	if t := p.peek(); !t.is("select") {
		return unsupported(p.src, t.pos, "a parenthesised relation in FROM other than a subquery")
	}
	branches, err := p.union()
	if err != nil {
		return err
	}
	if t := p.peek(); t.is("order") || t.is("limit") {
		return unsupported(p.src, t.pos, strings.ToUpper(t.text)+" in a subquery (Spark sorts and limits a stream only at the query's end)")
	}
	if _, err := p.expectPunct(")"); err != nil {
		return err
	}
	q.Sub, q.FromPos = branches, open.pos
	if t := p.peek(); t.is("as") {
		p.next()
		a, _, err := p.ident("the subquery's alias after AS")
		if err != nil {
			return err
		}
		q.SubAlias = a
	} else if t.kind == tQuoted || t.kind == tIdent && !reserved[strings.ToLower(t.text)] {
		p.next()
		q.SubAlias = t.text
	}
	for _, kw := range []string{"join", "inner", "left", "right", "full", "cross", "natural", "lateral", "anti", "semi"} {
		if t := p.peek(); t.is(kw) {
			return unsupported(p.src, t.pos, "JOIN (a streaming aggregation here reads one relation)")
		}
	}
	if t := p.peek(); t.punct(",") {
		return unsupported(p.src, t.pos, "several tables in FROM (a join)")
	}
	return nil
}

// groupBy reads GROUP BY <group> {, <group>}, if present.
func (p *parser) groupBy(q *Select) error {
	if !p.peek().is("group") {
		return nil
	}
	p.next()
	if err := p.expectKeyword("by"); err != nil {
		return err
	}
	for {
		g, err := p.groupItem()
		if err != nil {
			return err
		}
		q.GroupBy = append(q.GroupBy, g)
		if !p.peek().punct(",") {
			break
		}
		p.next()
	}
	for _, kw := range []string{"grouping", "with", "rollup", "cube"} {
		if t := p.peek(); t.is(kw) {
			what := strings.ToUpper(kw)
			if kw == "with" {
				what = "WITH " + strings.ToUpper(p.toks[p.i+1].text)
			}
			return unsupported(p.src, t.pos, "GROUP BY ... "+what)
		}
	}
	return nil
}

// end refuses the clauses after GROUP BY that do not run here, then
// anything but an optional semicolon.
func (p *parser) end() error {
	t := p.peek()
	switch {
	case t.is("sort"), t.is("cluster"), t.is("distribute"):
		return unsupported(p.src, t.pos, strings.ToUpper(t.text)+" BY (write ORDER BY)")
	case t.is("order"), t.is("limit"), t.is("union"):
		return p.errAt(t, "unexpected %s here (the order is SELECT ... UNION ALL ... ORDER BY ... LIMIT ...)", t)
	case t.is("except"), t.is("intersect"), t.is("minus"):
		return unsupported(p.src, t.pos, strings.ToUpper(t.text))
	case t.is("window"):
		return unsupported(p.src, t.pos, "a WINDOW clause (named window specifications)")
	}
	if t.punct(";") {
		p.next()
	}
	if t := p.peek(); t.kind != tEOF {
		if t.punct(";") || t.is("select") {
			return unsupported(p.src, t.pos, "more than one statement")
		}
		return p.errAt(t, "unexpected %s after the query", t)
	}
	return nil
}

var aggFuncs = map[string]bool{"count": true, "sum": true, "min": true, "max": true, "avg": true, "mean": true,
	"approx_count_distinct": true}

func (p *parser) alias(it *Item) error {
	t := p.peek()
	switch {
	case t.is("as"):
		p.next()
		a, _, err := p.ident("an alias after AS")
		if err != nil {
			return err
		}
		it.As = a
	case t.kind == tQuoted || t.kind == tIdent && !reserved[strings.ToLower(t.text)] && !t.is("window"):
		a, _, err := p.ident("an alias")
		if err != nil {
			return err
		}
		it.As = a
	}
	return nil
}

// afterOperand refuses arithmetic and other expression syntax after a
// SELECT or GROUP BY operand.
func (p *parser) afterOperand() error {
	t := p.peek()
	switch {
	case t.punct("+"), t.punct("-"), t.punct("*"), t.punct("/"), t.punct("%"), t.punct("||"):
		return unsupported(p.src, t.pos, "arithmetic ("+t.text+")")
	case t.punct("."):
		return p.fieldAccess(t)
	case t.punct("["):
		return unsupported(p.src, t.pos, "subscripts ([...])")
	case t.is("over"):
		return unsupported(p.src, t.pos, "window functions (OVER)")
	case t.is("filter"):
		return unsupported(p.src, t.pos, "aggregate FILTER (WHERE ...)")
	}
	return nil
}

func (p *parser) item() (Item, error) {
	t := p.peek()
	it := Item{Pos: t.pos}
	if t.punct("*") {
		return it, unsupported(p.src, t.pos, "SELECT * (name the group keys and aggregates)")
	}
	if t.is("window") {
		w, err := p.window()
		if err != nil {
			return it, err
		}
		it.Window = w
		if err := p.afterOperand(); err != nil {
			return it, err
		}
		return it, p.alias(&it)
	}
	if t.is("session_window") {
		w, err := p.sessionWindow()
		if err != nil {
			return it, err
		}
		if err := p.sessionField(w); err != nil {
			return it, err
		}
		it.Window = w
		if err := p.afterOperand(); err != nil {
			return it, err
		}
		return it, p.alias(&it)
	}
	e, err := p.or(0)
	if err != nil {
		return it, err
	}
	switch x := e.(type) {
	case filter.Col:
		it.Col = x.Name
	case expr.Call:
		if aggFuncs[x.Name] && x.Filter == nil && (x.Star || len(x.Args) == 1 && isCol(x.Args[0])) {
			it.Agg = x.Name
			if !x.Star {
				it.AggCol = x.Args[0].(filter.Col).Name
			}
			break
		}
		it.Expr = e
	default:
		it.Expr = e
	}
	if err := p.afterOperand(); err != nil {
		return it, err
	}
	return it, p.alias(&it)
}

func isCol(e filter.Expr) bool {
	_, ok := e.(filter.Col)
	return ok
}

// window parses window(col, size[, slide[, startTime]]) or the bare
// identifier window.
func (p *parser) window() (*WindowCall, error) {
	t := p.next()
	w := &WindowCall{Pos: t.pos}
	if !p.peek().punct("(") {
		w.Ref = true
		return w, nil
	}
	p.next()
	if t := p.peek(); t.is("window_time") && p.toks[p.i+1].punct("(") {
		// window(window_time(window), ...): Spark 3.4's chained windows.
		p.i += 2
		if a := p.next(); !a.is("window") {
			return nil, p.errAt(a, "window_time() takes the window column of an aggregation: window_time(window)")
		}
		if _, err := p.expectPunct(")"); err != nil {
			return nil, err
		}
		w.OfWindow = true
		w.Col = ColWindowTime
	} else {
		c, _, err := p.column("the event-time column of window()")
		if err != nil {
			return nil, err
		}
		w.Col = c
	}
	var args []time.Duration
	for p.peek().punct(",") {
		p.next()
		d, err := p.duration()
		if err != nil {
			return nil, err
		}
		args = append(args, d)
	}
	if _, err := p.expectPunct(")"); err != nil {
		return nil, err
	}
	switch len(args) {
	case 0:
		return nil, p.errAt(t, "window() needs a duration: window(%s, '5 minutes')", w.Col)
	case 1, 2, 3:
		w.Size = args[0]
		if len(args) > 1 {
			w.Slide = args[1]
		}
		if len(args) > 2 {
			w.Start = args[2]
		}
	default:
		return nil, p.errAt(t, "window() takes at most 3 durations (windowDuration, slideDuration, startTime)")
	}
	return w, nil
}

// duration reads a window() duration in every form Spark accepts: an
// interval string ('1 hour', '60 minutes', 'interval 1 hour'), INTERVAL
// '1 hour', INTERVAL '1' HOUR, or INTERVAL 1 HOUR [30 MINUTES ...].
func (p *parser) duration() (time.Duration, error) {
	a := p.next()
	switch {
	case a.kind == tString:
		return ParseInterval(a.text)
	case a.is("interval"):
		text, err := p.intervalLiteral(a)
		if err != nil {
			return 0, err
		}
		return ParseInterval(text)
	}
	return 0, p.errAt(a, "window() durations are strings or INTERVAL literals, e.g. '5 minutes' or INTERVAL 5 MINUTES; found %s", a)
}

// intervalLiteral reads what follows INTERVAL and returns it as an
// interval string.
func (p *parser) intervalLiteral(kw token) (string, error) {
	t := p.peek()
	if t.kind == tString {
		p.next()
		if u := p.peek(); u.kind == tIdent && isIntervalUnit(u.text) {
			p.next()
			if to := p.peek(); to.is("to") {
				return "", unsupported(p.src, to.pos, "an INTERVAL ... TO ... literal (write INTERVAL '90' MINUTE or '1 hour 30 minutes')")
			}
			return t.text + " " + u.text, nil
		}
		return t.text, nil
	}
	var parts []string
	for p.peek().kind == tNumber {
		n := p.next()
		u := p.next()
		if u.kind != tIdent || !isIntervalUnit(u.text) {
			return "", p.errAt(u, "expected an interval unit (SECOND, MINUTE, HOUR, DAY, WEEK, ...) after %s, found %s", n.text, u)
		}
		parts = append(parts, n.text+" "+u.text)
	}
	if len(parts) == 0 {
		return "", p.errAt(t, "expected a number or a string after INTERVAL, found %s", t)
	}
	_ = kw
	return strings.Join(parts, " "), nil
}

func isIntervalUnit(s string) bool {
	switch strings.ToLower(s) {
	case "year", "years", "month", "months", "week", "weeks", "day", "days", "hour", "hours",
		"minute", "minutes", "second", "seconds", "millisecond", "milliseconds", "microsecond", "microseconds":
		return true
	}
	return false
}

func (p *parser) groupItem() (GroupItem, error) {
	t := p.peek()
	g := GroupItem{Pos: t.pos}
	if t.kind == tNumber {
		p.next()
		n, err := strconv.Atoi(t.text)
		if err != nil || n < 0 {
			return g, unsupported(p.src, t.pos, "GROUP BY a constant "+t.text+" (an ordinal is a whole number)")
		}
		g.Ordinal = n
		if n == 0 {
			g.Ordinal = -1 // out of range, reported with the SELECT list's size
		}
		return g, p.afterOperand()
	}
	if t.is("window") {
		w, err := p.window()
		if err != nil {
			return g, err
		}
		g.Window = w
		return g, p.afterOperand()
	}
	if t.is("session_window") {
		w, err := p.sessionWindow()
		if err != nil {
			return g, err
		}
		g.Window = w
		return g, p.afterOperand()
	}
	if t.kind == tIdent && p.toks[p.i+1].punct("(") {
		switch kw := strings.ToLower(t.text); kw {
		case "rollup", "cube", "grouping", "grouping_id":
			return g, unsupported(p.src, t.pos, "GROUP BY "+strings.ToUpper(kw)+"(...)")
		}
	}
	e, err := p.or(0)
	if err != nil {
		return g, err
	}
	if c, ok := e.(filter.Col); ok {
		g.Col = c.Name
	} else {
		g.Expr = e
	}
	return g, p.afterOperand()
}

// Conditions: or := and (OR and)*; and := not (AND not)*; not := NOT not |
// predicate; predicate := '(' or ')' | operand [cmp operand | [NOT] IN (...)
// | IS [NOT] NULL | [NOT] BETWEEN a AND b].

// maxDepth bounds nesting so that a hostile query cannot exhaust the stack.
const maxDepth = 200

func (p *parser) expr() (filter.Expr, error) { return p.or(0) }

func (p *parser) or(d int) (filter.Expr, error) {
	if d > maxDepth {
		return nil, p.errAt(p.peek(), "condition nested deeper than %d", maxDepth)
	}
	l, err := p.and(d + 1)
	if err != nil {
		return nil, err
	}
	for p.peek().is("or") || p.peek().punct("||") {
		if t := p.peek(); t.punct("||") {
			return nil, unsupported(p.src, t.pos, "|| (string concatenation)")
		}
		p.next()
		r, err := p.and(d + 1)
		if err != nil {
			return nil, err
		}
		l = filter.Or{L: l, R: r}
	}
	return l, nil
}

func (p *parser) and(d int) (filter.Expr, error) {
	l, err := p.not(d + 1)
	if err != nil {
		return nil, err
	}
	for p.peek().is("and") || p.peek().punct("&&") {
		p.next()
		r, err := p.not(d + 1)
		if err != nil {
			return nil, err
		}
		l = filter.And{L: l, R: r}
	}
	return l, nil
}

func (p *parser) not(d int) (filter.Expr, error) {
	if d > maxDepth {
		return nil, p.errAt(p.peek(), "condition nested deeper than %d", maxDepth)
	}
	if p.peek().is("not") || p.peek().punct("!") {
		p.next()
		x, err := p.not(d + 1)
		if err != nil {
			return nil, err
		}
		return filter.Not{X: x}, nil
	}
	return p.predicate(d + 1)
}

var cmpOps = map[string]filter.CmpOp{"=": filter.Eq, "==": filter.Eq, "<>": filter.Ne, "!=": filter.Ne,
	"<": filter.Lt, "<=": filter.Le, ">": filter.Gt, ">=": filter.Ge}

func (p *parser) predicate(d int) (filter.Expr, error) {
	t := p.peek()
	l, err := p.additive(d + 1)
	if err != nil {
		return nil, err
	}
	t = p.peek()
	if op, ok := cmpOps[t.text]; ok && t.kind == tPunct {
		p.next()
		r, err := p.additive(d + 1)
		if err != nil {
			return nil, err
		}
		return filter.Cmp{Op: op, L: l, R: r}, nil
	}
	neg := false
	if t.is("not") {
		nt := p.toks[p.i+1]
		if nt.is("in") || nt.is("between") || nt.is("like") || nt.is("rlike") || nt.is("ilike") {
			p.next()
			neg = true
			t = p.peek()
		}
	}
	switch {
	case t.is("in"):
		return p.inList(l, neg)
	case t.is("between"):
		return p.between(l, neg)
	case t.is("is"):
		return p.isNull(l)
	case t.is("like"), t.is("rlike"), t.is("regexp"):
		p.next()
		if nt := p.peek(); nt.is("any") || nt.is("all") || nt.is("some") {
			return nil, unsupported(p.src, nt.pos, strings.ToUpper(t.text)+" "+strings.ToUpper(nt.text))
		}
		pat, err := p.additive(d + 1)
		if err != nil {
			return nil, err
		}
		if nt := p.peek(); nt.is("escape") {
			return nil, unsupported(p.src, nt.pos, "LIKE ... ESCAPE (the escape character is \\)")
		}
		op := "like"
		if !t.is("like") {
			op = "rlike"
		}
		return expr.Like{Op: op, X: l, Pattern: pat, Neg: neg}, nil
	case t.is("ilike"):
		return nil, unsupported(p.src, t.pos, "ILIKE")
	}
	return l, nil
}

// inList reads IN (literal, ...) after operand l.
func (p *parser) inList(l filter.Expr, neg bool) (filter.Expr, error) {
	p.next()
	if _, err := p.expectPunct("("); err != nil {
		return nil, err
	}
	if p.peek().is("select") {
		return nil, unsupported(p.src, p.peek().pos, "IN (subquery)")
	}
	in := filter.In{X: l, Neg: neg}
	for {
		lit, err := p.literal()
		if err != nil {
			return nil, err
		}
		in.List = append(in.List, lit)
		if !p.peek().punct(",") {
			break
		}
		p.next()
	}
	if _, err := p.expectPunct(")"); err != nil {
		return nil, err
	}
	return in, nil
}

// between reads BETWEEN lo AND hi after operand l: l >= lo AND l <= hi.
func (p *parser) between(l filter.Expr, neg bool) (filter.Expr, error) {
	p.next()
	lo, err := p.additive(0)
	if err != nil {
		return nil, err
	}
	if err := p.expectKeyword("and"); err != nil {
		return nil, err
	}
	hi, err := p.additive(0)
	if err != nil {
		return nil, err
	}
	var e filter.Expr = filter.And{L: filter.Cmp{Op: filter.Ge, L: l, R: lo}, R: filter.Cmp{Op: filter.Le, L: l, R: hi}}
	if neg {
		e = filter.Not{X: e}
	}
	return e, nil
}

// isNull reads IS [NOT] NULL after operand l.
func (p *parser) isNull(l filter.Expr) (filter.Expr, error) {
	p.next()
	isNeg := false
	if p.peek().is("not") {
		p.next()
		isNeg = true
	}
	nt := p.next()
	if !nt.is("null") {
		if nt.is("true") || nt.is("false") || nt.is("distinct") || nt.is("unknown") {
			return nil, unsupported(p.src, nt.pos, "IS "+strings.ToUpper(nt.text))
		}
		return nil, p.errAt(nt, "expected NULL after IS, found %s", nt)
	}
	return filter.IsNull{X: l, Neg: isNeg}, nil
}

// fieldAccess refuses the dot at t. After a name and before one it is a
// qualified column (a.number, as a join or a table alias writes it): the
// message names it and says to write the column alone, since a query reads
// one relation; anything else (window.start: a field of the window struct)
// is a field access.
func (p *parser) fieldAccess(t token) error {
	if p.i > 0 && p.i+1 < len(p.toks) {
		q, col := p.toks[p.i-1], p.toks[p.i+1]
		if (q.kind == tIdent || q.kind == tQuoted) && (col.kind == tIdent || col.kind == tQuoted) && !q.is("window") {
			return unsupported(p.src, q.pos, "a qualified column "+q.text+"."+col.text+
				" (a query reads one relation, without joins or table aliases: write "+col.text+")")
		}
	}
	return unsupported(p.src, t.pos, "a field access (.)")
}

// typedLiteral reports whether the next tokens are TIMESTAMP 'text' or
// DATE 'text'.
func (p *parser) typedLiteral() bool {
	t := p.peek()
	return (t.is("timestamp") || t.is("date")) && p.i+1 < len(p.toks) && p.toks[p.i+1].kind == tString
}

// literal reads a value: a string, a number, NULL, TRUE, FALSE, or a
// TIMESTAMP or DATE literal (kept as its string, which the comparison
// casts to the column's TIMESTAMP as Spark casts a DATE: midnight UTC).
func (p *parser) literal() (filter.Lit, error) {
	if p.typedLiteral() {
		p.next()
		s := p.next()
		return filter.Lit{Kind: filter.LitString, Str: s.text}, nil
	}
	t := p.next()
	neg := false
	if t.punct("-") || t.punct("+") {
		neg = t.punct("-")
		t = p.next()
		if t.kind != tNumber {
			return filter.Lit{}, p.errAt(t, "expected a number after a sign, found %s", t)
		}
	}
	switch {
	case t.kind == tString:
		return filter.Lit{Kind: filter.LitString, Str: t.text}, nil
	case t.kind == tNumber:
		return p.number(t, neg)
	case t.is("null"):
		return filter.Lit{Kind: filter.LitNull}, nil
	case t.is("true"), t.is("false"):
		return filter.Lit{Kind: filter.LitBool, Bool: t.is("true")}, nil
	}
	return filter.Lit{}, p.errAt(t, "expected a value, found %s", t)
}

// maxDecimalPrecision is Spark's DecimalType.MAX_PRECISION.
const maxDecimalPrecision = 38

// number types a numeric literal as Spark's parser does (AstBuilder): an
// integer is INT or BIGINT when it fits, else a DECIMAL (so
// 9223372036854775808 is a decimal, not an error); a number with a
// fraction is a DECIMAL; one with an exponent a DOUBLE; the suffixes L
// (BIGINT), S (SMALLINT), Y (TINYINT), D (DOUBLE), F (FLOAT) and BD
// (DECIMAL) force the type, and a value outside it is an error.
func (p *parser) number(t token, neg bool) (filter.Lit, error) {
	text := strings.ToLower(t.text)
	sign := ""
	if neg {
		sign = "-"
	}
	outOfRange := func(typ, lo, hi string) error {
		return errcode.New(CodeParseSyntax, "", "use a number between "+lo+" and "+hi+", or drop the suffix",
			"syntax error at %s: numeric literal %s%s is out of range for %s [%s, %s]", position(p.src, t.pos), sign, t.text, typ, lo, hi)
	}
	intLit := func(digits string, bits int, typ string) (filter.Lit, error) {
		v, err := strconv.ParseInt(sign+digits, 10, bits)
		if err != nil {
			lo, hi := -(int64(1) << (bits - 1)), int64(1)<<(bits-1)-1
			return filter.Lit{}, outOfRange(typ, strconv.FormatInt(lo, 10), strconv.FormatInt(hi, 10))
		}
		return filter.Lit{Kind: filter.LitInt, Int: v}, nil
	}
	switch {
	case strings.HasSuffix(text, "bd"):
		return p.decimal(t, sign+text[:len(text)-2])
	case strings.HasSuffix(text, "l") && !strings.ContainsAny(text, ".e"):
		return intLit(text[:len(text)-1], 64, "BIGINT")
	case strings.HasSuffix(text, "s") && !strings.ContainsAny(text, ".e"):
		return intLit(text[:len(text)-1], 16, "SMALLINT")
	case strings.HasSuffix(text, "y") && !strings.ContainsAny(text, ".e"):
		return intLit(text[:len(text)-1], 8, "TINYINT")
	case strings.HasSuffix(text, "d"), strings.HasSuffix(text, "f"):
		bits := 64
		if strings.HasSuffix(text, "f") {
			bits = 32
		}
		v, err := strconv.ParseFloat(sign+text[:len(text)-1], bits)
		if err != nil {
			return filter.Lit{}, outOfRange(map[int]string{32: "FLOAT", 64: "DOUBLE"}[bits], "-inf", "inf")
		}
		return filter.Lit{Kind: filter.LitFloat, Flt: v}, nil
	case strings.HasSuffix(text, "l") || strings.HasSuffix(text, "s") || strings.HasSuffix(text, "y"):
		return filter.Lit{}, p.errAt(t, "malformed number %s (an integer suffix after a fraction or exponent)", t.text)
	case strings.Contains(text, "e"):
		v, err := strconv.ParseFloat(sign+text, 64)
		if err != nil {
			return filter.Lit{}, outOfRange("DOUBLE", "-1.7976931348623157E308", "1.7976931348623157E308")
		}
		return filter.Lit{Kind: filter.LitFloat, Flt: v}, nil
	case strings.Contains(text, "."):
		return p.decimal(t, sign+text)
	}
	if v, err := strconv.ParseInt(sign+text, 10, 64); err == nil {
		return filter.Lit{Kind: filter.LitInt, Int: v}, nil
	}
	return p.decimal(t, sign+text)
}

// decimal makes a DECIMAL literal of text, refusing more than 38 digits
// (Spark's DECIMAL_PRECISION_EXCEEDS_MAX_PRECISION).
func (p *parser) decimal(t token, text string) (filter.Lit, error) {
	r, ok := new(big.Rat).SetString(text)
	if !ok {
		return filter.Lit{}, p.errAt(t, "malformed number %s", t.text)
	}
	digits := strings.TrimLeft(strings.NewReplacer("-", "", ".", "").Replace(text), "0")
	if len(digits) > maxDecimalPrecision {
		return filter.Lit{}, errcode.New(CodeParseSyntax, "", "use at most 38 digits, or a DOUBLE literal (1.5E40)",
			"syntax error at %s: decimal literal %s is out of range: its precision exceeds the maximum of %d digits",
			position(p.src, t.pos), text, maxDecimalPrecision)
	}
	return filter.DecimalLit(r), nil
}
