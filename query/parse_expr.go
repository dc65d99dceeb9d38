package query

import (
	"strconv"
	"strings"

	"github.com/ethstream/ethstream/expr"
	"github.com/ethstream/ethstream/filter"
)

// Value expressions, by Spark's precedence (SqlBaseParser's
// valueExpression): additive := multiplicative (('+' | '-' | '||')
// multiplicative)*; multiplicative := unary (('*' | '/' | '%' | DIV)
// unary)*; unary := '-' unary | '+' unary | primary; primary := literal |
// column | function call | CASE | CAST | TRY_CAST | INTERVAL | '(' or ')'.

func (p *parser) additive(d int) (filter.Expr, error) {
	if d > maxDepth {
		return nil, p.errAt(p.peek(), "expression nested deeper than %d", maxDepth)
	}
	l, err := p.multiplicative(d + 1)
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if !t.punct("+") && !t.punct("-") && !t.punct("||") {
			return l, nil
		}
		p.next()
		r, err := p.multiplicative(d + 1)
		if err != nil {
			return nil, err
		}
		if t.text == "||" {
			l = expr.Call{Name: "concat", Args: []expr.Expr{l, r}}
		} else {
			l = expr.Arith{Op: t.text, L: l, R: r}
		}
	}
}

func (p *parser) multiplicative(d int) (filter.Expr, error) {
	l, err := p.unary(d + 1)
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		op := ""
		switch {
		case t.punct("*"), t.punct("/"), t.punct("%"):
			op = t.text
		case t.is("div"):
			op = "div"
		default:
			return l, nil
		}
		p.next()
		r, err := p.unary(d + 1)
		if err != nil {
			return nil, err
		}
		l = expr.Arith{Op: op, L: l, R: r}
	}
}

func (p *parser) unary(d int) (filter.Expr, error) {
	if d > maxDepth {
		return nil, p.errAt(p.peek(), "expression nested deeper than %d", maxDepth)
	}
	t := p.peek()
	if (t.punct("-") || t.punct("+")) && p.toks[p.i+1].kind == tNumber {
		return p.literal() // a signed number literal (so -9223372036854775808 is a BIGINT)
	}
	if t.punct("-") || t.punct("+") {
		p.next()
		x, err := p.unary(d + 1)
		if err != nil {
			return nil, err
		}
		if t.punct("-") {
			return expr.Neg{X: x}, nil
		}
		return x, nil
	}
	x, err := p.primary(d + 1)
	if err != nil {
		return nil, err
	}
	return p.subscripts(x, d)
}

// subscripts reads the subscripts after a primary: x[i][j]... (Spark's
// primaryExpression '[' valueExpression ']', GetArrayItem: 0-based).
func (p *parser) subscripts(x filter.Expr, d int) (filter.Expr, error) {
	for p.peek().punct("[") {
		p.next()
		i, err := p.additive(d + 1)
		if err != nil {
			return nil, err
		}
		if _, err := p.expectPunct("]"); err != nil {
			return nil, err
		}
		x = expr.Index{X: x, I: i}
	}
	return x, nil
}

func (p *parser) primary(d int) (filter.Expr, error) {
	t := p.peek()
	switch {
	case t.punct("("):
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
	case t.kind == tString || t.kind == tNumber || t.is("null") || t.is("true") || t.is("false"):
		return p.literal()
	case p.typedLiteral():
		return p.literal()
	case t.is("interval"):
		p.next()
		text, err := p.intervalLiteral(t)
		if err != nil {
			return nil, err
		}
		dur, err := ParseInterval(text)
		if err != nil {
			return nil, err
		}
		return expr.Interval{Micros: dur.Microseconds()}, nil
	case t.is("case"):
		return p.caseExpr(d)
	case (t.is("cast") || t.is("try_cast")) && p.toks[p.i+1].punct("("):
		return p.cast(d)
	case t.is("exists"):
		return nil, unsupported(p.src, t.pos, "EXISTS (subquery)")
	case t.punct("*"):
		return nil, unsupported(p.src, t.pos, "SELECT * (name the group keys and aggregates)")
	}
	if t.kind == tIdent && p.toks[p.i+1].punct("(") && !reserved[strings.ToLower(t.text)] {
		return p.call(d)
	}
	c, _, err := p.column("a column or a value")
	if err != nil {
		return nil, err
	}
	switch nt := p.peek(); {
	case nt.punct("."):
		return nil, p.fieldAccess(nt)
	}
	return filter.Col{Name: c}, nil
}

// call reads name(args) [FILTER (WHERE cond)]; aggregates are calls too
// (the resolver takes them out).
func (p *parser) call(d int) (filter.Expr, error) {
	nt := p.next()
	name := strings.ToLower(nt.text)
	switch name {
	case "session_window":
		return nil, unsupported(p.src, nt.pos, "session_window() inside an expression (group by it, and select session_window or its fields)")
	case "window_time":
		return nil, unsupported(p.src, nt.pos, "window_time")
	case "window":
		return nil, unsupported(p.src, nt.pos, "window() inside an expression")
	case "mean":
		name = "avg"
	}
	p.next() // (
	c := expr.Call{Name: name}
	if a := p.peek(); a.is("distinct") {
		if aggFuncs[name] {
			return nil, unsupported(p.src, a.pos, name+"(DISTINCT ...): distinct aggregations are not supported on streaming DataFrames/Datasets")
		}
		return nil, p.errAt(a, "DISTINCT in %s()", name)
	}
	if a := p.peek(); a.punct("*") {
		if name != "count" {
			return nil, p.errAt(a, "%s(*) is not valid; name a column", name)
		}
		p.next()
		c.Star = true
	}
	for !c.Star && !p.peek().punct(")") {
		a, err := p.or(d + 1)
		if err != nil {
			return nil, err
		}
		c.Args = append(c.Args, a)
		if !p.peek().punct(",") {
			break
		}
		p.next()
	}
	if _, err := p.expectPunct(")"); err != nil {
		return nil, err
	}
	if name == "count" && len(c.Args) == 1 {
		if l, ok := c.Args[0].(filter.Lit); ok && l.Kind != filter.LitNull {
			c.Args, c.Star = nil, true // count(1) is count(*)
		}
	}
	if t := p.peek(); t.is("filter") {
		p.next()
		if _, err := p.expectPunct("("); err != nil {
			return nil, err
		}
		if err := p.expectKeyword("where"); err != nil {
			return nil, err
		}
		cond, err := p.or(d + 1)
		if err != nil {
			return nil, err
		}
		if _, err := p.expectPunct(")"); err != nil {
			return nil, err
		}
		c.Filter = cond
	}
	if t := p.peek(); t.is("over") {
		return nil, unsupported(p.src, t.pos, "window functions (OVER)")
	}
	return c, nil
}

func (p *parser) caseExpr(d int) (filter.Expr, error) {
	p.next() // CASE
	c := expr.Case{}
	if !p.peek().is("when") {
		op, err := p.or(d + 1)
		if err != nil {
			return nil, err
		}
		c.Operand = op
	}
	for p.peek().is("when") {
		p.next()
		cond, err := p.or(d + 1)
		if err != nil {
			return nil, err
		}
		if err := p.expectKeyword("then"); err != nil {
			return nil, err
		}
		then, err := p.or(d + 1)
		if err != nil {
			return nil, err
		}
		c.Whens = append(c.Whens, expr.When{Cond: cond, Then: then})
	}
	if len(c.Whens) == 0 {
		return nil, p.errAt(p.peek(), "expected WHEN, found %s", p.peek())
	}
	if p.peek().is("else") {
		p.next()
		e, err := p.or(d + 1)
		if err != nil {
			return nil, err
		}
		c.Else = e
	}
	return c, p.expectKeyword("end")
}

// cast reads CAST(x AS type) or TRY_CAST(x AS type).
func (p *parser) cast(d int) (filter.Expr, error) {
	kw := p.next()
	p.next() // (
	x, err := p.or(d + 1)
	if err != nil {
		return nil, err
	}
	if err := p.expectKeyword("as"); err != nil {
		return nil, err
	}
	tt := p.next()
	if tt.kind != tIdent {
		return nil, p.errAt(tt, "expected a type after AS, found %s", tt)
	}
	var args []int
	if p.peek().punct("(") {
		p.next()
		for {
			n := p.next()
			v, err := strconv.Atoi(n.text)
			if n.kind != tNumber || err != nil {
				return nil, p.errAt(n, "expected a number in the type's parameters, found %s", n)
			}
			args = append(args, v)
			if !p.peek().punct(",") {
				break
			}
			p.next()
		}
		if _, err := p.expectPunct(")"); err != nil {
			return nil, err
		}
	}
	typ, ok := expr.ParseType(tt.text, args)
	if !ok {
		return nil, unsupported(p.src, tt.pos, "the type "+strings.ToUpper(tt.text)+" (types: BOOLEAN, INT, BIGINT, FLOAT, DOUBLE, DECIMAL(p,s) up to 38 digits, STRING, BINARY, DATE, TIMESTAMP)")
	}
	if _, err := p.expectPunct(")"); err != nil {
		return nil, err
	}
	return expr.Cast{X: x, To: typ, Try: kw.is("try_cast")}, nil
}
