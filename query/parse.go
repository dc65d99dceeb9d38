package query

import (
	"strconv"
	"strings"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/filter"
)

// Select is a parsed query: the syntax tree, not yet resolved against the
// input columns (Compile does that).
type Select struct {
	Items   []Item
	From    string // "blocks" (lowercase) or a source name as written
	FromPos int
	Where   filter.Expr // nil without WHERE
	GroupBy []GroupItem
}

// Item is one SELECT item: the window, a column, or an aggregate.
type Item struct {
	Window *WindowCall // window(...) or the bare identifier window (Window.Ref)
	Col    string      // a column (lowercase)
	Agg    string      // count, sum, min, max, avg (lowercase)
	AggCol string      // the aggregate's column; "" is count(*)
	As     string      // alias, "" if none
	Pos    int
}

// WindowCall is window(col, size[, slide]); Ref is set for the bare
// identifier window, which names the grouping window.
type WindowCall struct {
	Ref         bool
	Col         string
	Size, Slide string // interval text as written; Slide "" = tumbling
	Pos         int
}

// GroupItem is one GROUP BY expression.
type GroupItem struct {
	Window *WindowCall
	Col    string
	Pos    int
}

// String renders the window call canonically.
func (w *WindowCall) String() string {
	if w.Ref {
		return "window"
	}
	s := "window(" + w.Col + ", '" + w.Size + "'"
	if w.Slide != "" {
		s += ", '" + w.Slide + "'"
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
	default:
		s = it.Col
	}
	if it.As != "" {
		s += " as " + it.As
	}
	return s
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

// ident reads an identifier (bare or `quoted`), lowercased when bare... and
// quoted alike: Spark resolves column names case-insensitively.
func (p *parser) ident(what string) (string, token, error) {
	t := p.next()
	switch {
	case t.kind == tQuoted:
		return strings.ToLower(t.text), t, nil
	case t.kind == tIdent && !reserved[strings.ToLower(t.text)]:
		return strings.ToLower(t.text), t, nil
	}
	return "", t, p.errAt(t, "expected %s, found %s", what, t)
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
	if err := p.expectKeyword("select"); err != nil {
		return nil, err
	}
	if t := p.peek(); t.is("distinct") || t.is("all") {
		return nil, unsupported(p.src, t.pos, "SELECT "+strings.ToUpper(t.text))
	}
	q := &Select{}
	for {
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
	if err := p.expectKeyword("from"); err != nil {
		return nil, err
	}
	ft := p.next()
	switch {
	case ft.punct("("):
		return nil, unsupported(p.src, ft.pos, "a subquery in FROM")
	case ft.kind == tQuoted:
		q.From = ft.text
	case ft.kind == tIdent && !reserved[strings.ToLower(ft.text)]:
		q.From = ft.text
		if strings.EqualFold(ft.text, "blocks") {
			q.From = "blocks"
		}
	default:
		return nil, p.errAt(ft, "expected a source name or blocks after FROM, found %s", ft)
	}
	q.FromPos = ft.pos
	if t := p.peek(); t.punct(".") {
		return nil, unsupported(p.src, t.pos, "a qualified table name (catalog.schema.table)")
	}
	if t := p.peek(); t.is("as") || (t.kind == tIdent && !reserved[strings.ToLower(t.text)]) {
		return nil, unsupported(p.src, t.pos, "a table alias")
	}
	for _, kw := range []string{"join", "inner", "left", "right", "full", "cross", "natural", "lateral"} {
		if t := p.peek(); t.is(kw) {
			return nil, unsupported(p.src, t.pos, "JOIN")
		}
	}
	if t := p.peek(); t.punct(",") {
		return nil, unsupported(p.src, t.pos, "several tables in FROM (a join)")
	}
	if p.peek().is("where") {
		p.next()
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		q.Where = e
	}
	if p.peek().is("group") {
		p.next()
		if err := p.expectKeyword("by"); err != nil {
			return nil, err
		}
		for {
			g, err := p.groupItem()
			if err != nil {
				return nil, err
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
				return nil, unsupported(p.src, t.pos, "GROUP BY ... "+what)
			}
		}
	}
	t = p.peek()
	switch {
	case t.is("having"):
		return nil, unsupported(p.src, t.pos, "HAVING")
	case t.is("order"), t.is("sort"), t.is("cluster"), t.is("distribute"):
		return nil, unsupported(p.src, t.pos, strings.ToUpper(t.text)+" BY (a streaming aggregation emits rows as windows change)")
	case t.is("limit"):
		return nil, unsupported(p.src, t.pos, "LIMIT")
	case t.is("union"), t.is("except"), t.is("intersect"), t.is("minus"):
		return nil, unsupported(p.src, t.pos, strings.ToUpper(t.text))
	case t.is("window"):
		return nil, unsupported(p.src, t.pos, "a WINDOW clause (named window specifications)")
	}
	if t.punct(";") {
		p.next()
	}
	if t := p.peek(); t.kind != tEOF {
		if t.punct(";") || t.is("select") {
			return nil, unsupported(p.src, t.pos, "more than one statement")
		}
		return nil, p.errAt(t, "unexpected %s after the query", t)
	}
	return q, nil
}

var aggFuncs = map[string]bool{"count": true, "sum": true, "min": true, "max": true, "avg": true, "mean": true}

// unsupportedFuncs are Spark functions named in errors rather than reported
// as syntax errors.
func (p *parser) funcCall(name string, t token) error {
	lower := strings.ToLower(name)
	switch lower {
	case "session_window":
		return unsupported(p.src, t.pos, "session_window (session windows)")
	case "window_time":
		return unsupported(p.src, t.pos, "window_time")
	case "approx_count_distinct", "count_distinct", "first", "last", "collect_list", "collect_set",
		"stddev", "variance", "percentile", "percentile_approx", "any_value", "max_by", "min_by":
		return unsupported(p.src, t.pos, "aggregate "+lower+"() (count, sum, min, max, avg are)")
	}
	return unsupported(p.src, t.pos, "function "+lower+"()")
}

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
		return unsupported(p.src, t.pos, "a field access (.)")
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
	switch {
	case t.punct("*"):
		return it, unsupported(p.src, t.pos, "SELECT * (name the group keys and aggregates)")
	case t.is("case"):
		return it, unsupported(p.src, t.pos, "CASE")
	case t.is("cast"):
		return it, unsupported(p.src, t.pos, "CAST")
	case t.kind == tString || t.kind == tNumber:
		return it, unsupported(p.src, t.pos, "a literal in SELECT")
	case t.punct("("):
		return it, unsupported(p.src, t.pos, "a parenthesised expression in SELECT")
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
	if t.kind == tIdent && p.toks[p.i+1].punct("(") {
		name := strings.ToLower(t.text)
		if !aggFuncs[name] {
			return it, p.funcCall(t.text, t)
		}
		p.next()
		p.next()
		if name == "mean" {
			name = "avg"
		}
		it.Agg = name
		a := p.peek()
		switch {
		case a.punct("*"):
			if name != "count" {
				return it, p.errAt(a, "%s(*) is not valid; name a column", name)
			}
			p.next()
		case a.kind == tNumber && name == "count":
			p.next() // count(1) is count(*)
		case a.is("distinct"):
			return it, unsupported(p.src, a.pos, name+"(DISTINCT ...)")
		case a.punct(")"):
			return it, p.errAt(a, "%s() needs an argument", name)
		default:
			c, ct, err := p.ident("a column")
			if err != nil {
				return it, err
			}
			if nt := p.peek(); !nt.punct(")") {
				if nt.punct(",") {
					return it, p.errAt(nt, "%s takes one argument", name)
				}
				if nt.punct("(") {
					return it, unsupported(p.src, ct.pos, "a function call inside "+name+"()")
				}
				return it, unsupported(p.src, nt.pos, "an expression inside "+name+"() (name a column)")
			}
			it.AggCol = c
		}
		if _, err := p.expectPunct(")"); err != nil {
			return it, err
		}
		if err := p.afterOperand(); err != nil {
			return it, err
		}
		return it, p.alias(&it)
	}
	c, ct, err := p.ident("a column, window(...) or an aggregate")
	if err != nil {
		return it, err
	}
	if p.peek().punct("(") {
		return it, p.funcCall(c, ct)
	}
	it.Col = c
	if err := p.afterOperand(); err != nil {
		return it, err
	}
	return it, p.alias(&it)
}

// window parses window(col, 'size'[, 'slide'[, 'start']]) or the bare
// identifier window.
func (p *parser) window() (*WindowCall, error) {
	t := p.next()
	w := &WindowCall{Pos: t.pos}
	if !p.peek().punct("(") {
		w.Ref = true
		return w, nil
	}
	p.next()
	c, _, err := p.ident("the event-time column of window()")
	if err != nil {
		return nil, err
	}
	w.Col = c
	var args []string
	for p.peek().punct(",") {
		p.next()
		a := p.next()
		switch a.kind {
		case tString:
			args = append(args, a.text)
		case tIdent:
			if a.is("interval") {
				return nil, unsupported(p.src, a.pos, "an INTERVAL literal in window() (write the duration as a string, e.g. '5 minutes')")
			}
			return nil, p.errAt(a, "window() durations are strings, e.g. '5 minutes'; found %s", a)
		default:
			return nil, p.errAt(a, "window() durations are strings, e.g. '5 minutes'; found %s", a)
		}
	}
	if _, err := p.expectPunct(")"); err != nil {
		return nil, err
	}
	switch len(args) {
	case 0:
		return nil, p.errAt(t, "window() needs a duration: window(%s, '5 minutes')", c)
	case 1:
		w.Size = args[0]
	case 2:
		w.Size, w.Slide = args[0], args[1]
	case 3:
		return nil, unsupported(p.src, t.pos, "the startTime argument of window()")
	default:
		return nil, p.errAt(t, "window() takes at most 3 durations")
	}
	return w, nil
}

func (p *parser) groupItem() (GroupItem, error) {
	t := p.peek()
	g := GroupItem{Pos: t.pos}
	if t.kind == tNumber {
		return g, unsupported(p.src, t.pos, "GROUP BY position (name the column)")
	}
	if t.is("window") {
		w, err := p.window()
		if err != nil {
			return g, err
		}
		g.Window = w
		return g, p.afterOperand()
	}
	c, ct, err := p.ident("a column or window(...)")
	if err != nil {
		return g, err
	}
	if p.peek().punct("(") {
		return g, p.funcCall(c, ct)
	}
	g.Col = c
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
	if t.punct("(") {
		if p.toks[p.i+1].is("select") {
			return nil, unsupported(p.src, t.pos, "a subquery")
		}
		p.next()
		e, err := p.or(d + 1)
		if err != nil {
			return nil, err
		}
		if _, err := p.expectPunct(")"); err != nil {
			return nil, err
		}
		return e, nil
	}
	l, err := p.operand()
	if err != nil {
		return nil, err
	}
	t = p.peek()
	if op, ok := cmpOps[t.text]; ok && t.kind == tPunct {
		p.next()
		r, err := p.operand()
		if err != nil {
			return nil, err
		}
		if err := p.noArith(); err != nil {
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
	case t.is("between"):
		p.next()
		lo, err := p.operand()
		if err != nil {
			return nil, err
		}
		if err := p.expectKeyword("and"); err != nil {
			return nil, err
		}
		hi, err := p.operand()
		if err != nil {
			return nil, err
		}
		var e filter.Expr = filter.And{L: filter.Cmp{Op: filter.Ge, L: l, R: lo}, R: filter.Cmp{Op: filter.Le, L: l, R: hi}}
		if neg {
			e = filter.Not{X: e}
		}
		return e, nil
	case t.is("is"):
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
	case t.is("like"), t.is("rlike"), t.is("ilike"), t.is("regexp"):
		return nil, unsupported(p.src, t.pos, strings.ToUpper(t.text))
	}
	if err := p.noArith(); err != nil {
		return nil, err
	}
	return l, nil
}

func (p *parser) noArith() error {
	t := p.peek()
	switch {
	case t.punct("+"), t.punct("-"), t.punct("*"), t.punct("/"), t.punct("%"):
		return unsupported(p.src, t.pos, "arithmetic ("+t.text+")")
	case t.punct("."):
		return unsupported(p.src, t.pos, "a field access (.)")
	}
	return nil
}

// operand is a column or a literal.
func (p *parser) operand() (filter.Expr, error) {
	t := p.peek()
	switch {
	case t.kind == tString || t.kind == tNumber || t.punct("-") || t.is("null") || t.is("true") || t.is("false"):
		return p.literal()
	case t.is("interval"):
		return nil, unsupported(p.src, t.pos, "INTERVAL literals")
	case t.is("case"):
		return nil, unsupported(p.src, t.pos, "CASE")
	case t.is("cast"):
		return nil, unsupported(p.src, t.pos, "CAST")
	case t.is("exists"):
		return nil, unsupported(p.src, t.pos, "EXISTS (subquery)")
	case t.is("timestamp") || t.is("date"):
		if p.toks[p.i+1].kind == tString {
			p.next()
			s := p.next()
			return filter.Lit{Kind: filter.LitString, Str: s.text}, nil
		}
	}
	c, ct, err := p.ident("a column or a value")
	if err != nil {
		return nil, err
	}
	if p.peek().punct("(") {
		if aggFuncs[c] {
			return nil, unsupported(p.src, ct.pos, "an aggregate in WHERE (HAVING)")
		}
		return nil, p.funcCall(c, ct)
	}
	return filter.Col{Name: c}, nil
}

func (p *parser) literal() (filter.Lit, error) {
	t := p.next()
	neg := false
	if t.punct("-") {
		neg = true
		t = p.next()
		if t.kind != tNumber {
			return filter.Lit{}, p.errAt(t, "expected a number after '-', found %s", t)
		}
	}
	switch {
	case t.kind == tString:
		return filter.Lit{Kind: filter.LitString, Str: t.text}, nil
	case t.kind == tNumber:
		text := t.text
		if neg {
			text = "-" + text
		}
		if !strings.ContainsAny(text, ".eE") {
			v, err := strconv.ParseInt(text, 10, 64)
			if err != nil {
				return filter.Lit{}, errcode.New(CodeParseSyntax, "", "use a number between -9223372036854775808 and 9223372036854775807",
					"syntax error at %s: integer %s is out of range", position(p.src, t.pos), text)
			}
			return filter.Lit{Kind: filter.LitInt, Int: v}, nil
		}
		v, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return filter.Lit{}, p.errAt(t, "malformed number %s", text)
		}
		return filter.Lit{Kind: filter.LitFloat, Flt: v}, nil
	case t.is("null"):
		return filter.Lit{Kind: filter.LitNull}, nil
	case t.is("true"), t.is("false"):
		return filter.Lit{Kind: filter.LitBool, Bool: t.is("true")}, nil
	}
	return filter.Lit{}, p.errAt(t, "expected a value, found %s", t)
}
