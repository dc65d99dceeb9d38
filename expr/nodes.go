package expr

import (
	"strconv"
	"strings"
)

// Arith is a binary arithmetic operator: + - * / % or div (Spark's
// IntegralDivide).
type Arith struct {
	Op   string
	L, R Expr
}

// Neg is unary minus.
type Neg struct{ X Expr }

// Call is a function call by name (lowercase), scalar or aggregate; the
// query layer takes the aggregates out before Compile sees the tree.
// Star is f(*); Distinct is f(DISTINCT ...); Filter is the aggregate's
// FILTER (WHERE ...), nil without.
type Call struct {
	Name     string
	Args     []Expr
	Star     bool
	Distinct bool
	Filter   Expr
}

// When is one WHEN ... THEN ... arm of a CASE.
type When struct{ Cond, Then Expr }

// Case is CASE [operand] WHEN ... THEN ... [ELSE ...] END; Operand is nil
// for a searched CASE.
type Case struct {
	Operand Expr
	Whens   []When
	Else    Expr
}

// Cast is CAST(X AS To), or try_cast when Try.
type Cast struct {
	X   Expr
	To  Type
	Try bool
}

// Like is X [NOT] LIKE pattern (Op "like") or X [NOT] RLIKE pattern (Op
// "rlike"). LIKE's escape character is Spark's default, the backslash.
type Like struct {
	Op         string
	X, Pattern Expr
	Neg        bool
}

// Interval is a day-time interval literal (INTERVAL '1' HOUR), in
// microseconds.
type Interval struct{ Micros int64 }

func (Arith) expr()    {}
func (Neg) expr()      {}
func (Call) expr()     {}
func (Case) expr()     {}
func (Cast) expr()     {}
func (Like) expr()     {}
func (Interval) expr() {}

func (a Arith) String() string { return "(" + a.L.String() + " " + a.Op + " " + a.R.String() + ")" }
func (n Neg) String() string   { return "(- " + n.X.String() + ")" }

func (c Call) String() string {
	var b strings.Builder
	b.WriteString(c.Name + "(")
	if c.Distinct {
		b.WriteString("distinct ")
	}
	if c.Star {
		b.WriteString("*")
	}
	for i, a := range c.Args {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(a.String())
	}
	b.WriteString(")")
	if c.Filter != nil {
		b.WriteString(" filter (where " + c.Filter.String() + ")")
	}
	return b.String()
}

func (c Case) String() string {
	var b strings.Builder
	b.WriteString("case")
	if c.Operand != nil {
		b.WriteString(" " + c.Operand.String())
	}
	for _, w := range c.Whens {
		b.WriteString(" when " + w.Cond.String() + " then " + w.Then.String())
	}
	if c.Else != nil {
		b.WriteString(" else " + c.Else.String())
	}
	return b.String() + " end"
}

func (c Cast) String() string {
	f := "cast("
	if c.Try {
		f = "try_cast("
	}
	return f + c.X.String() + " as " + c.To.String() + ")"
}

func (l Like) String() string {
	op := " " + l.Op + " "
	if l.Neg {
		op = " not" + op
	}
	return "(" + l.X.String() + op + l.Pattern.String() + ")"
}

func (i Interval) String() string {
	return "interval '" + strconv.FormatInt(i.Micros, 10) + "' microsecond"
}

// Walk calls f on e and every node below it, parents first.
func Walk(e Expr, f func(Expr)) {
	if e == nil {
		return
	}
	f(e)
	switch x := e.(type) {
	case Cmp:
		Walk(x.L, f)
		Walk(x.R, f)
	case And:
		Walk(x.L, f)
		Walk(x.R, f)
	case Or:
		Walk(x.L, f)
		Walk(x.R, f)
	case Not:
		Walk(x.X, f)
	case In:
		Walk(x.X, f)
	case IsNull:
		Walk(x.X, f)
	case Arith:
		Walk(x.L, f)
		Walk(x.R, f)
	case Neg:
		Walk(x.X, f)
	case Call:
		for _, a := range x.Args {
			Walk(a, f)
		}
		Walk(x.Filter, f)
	case Case:
		Walk(x.Operand, f)
		for _, w := range x.Whens {
			Walk(w.Cond, f)
			Walk(w.Then, f)
		}
		Walk(x.Else, f)
	case Cast:
		Walk(x.X, f)
	case Like:
		Walk(x.X, f)
		Walk(x.Pattern, f)
	case Index:
		Walk(x.X, f)
		Walk(x.I, f)
	}
}

// Simple reports whether e uses only columns, literals, comparisons,
// AND/OR/NOT, IN and IS NULL (the predicate grammar package filter
// compiles on its own).
func Simple(e Expr) bool {
	ok := true
	Walk(e, func(n Expr) {
		switch x := n.(type) {
		case Col, Lit, And, Or, Not:
		case In:
			_, col := x.X.(Col)
			ok = ok && col
		case Cmp:
			_, lc := x.L.(Col)
			_, rc := x.R.(Col)
			ok = ok && isOperand(x.L) && isOperand(x.R) && (lc || rc)
		case IsNull:
			_, col := x.X.(Col)
			ok = ok && col
		default:
			ok = false
		}
	})
	return ok
}

func isOperand(e Expr) bool {
	switch e.(type) {
	case Col, Lit:
		return true
	}
	return false
}

// Rewrite returns e with every node f replaces (f returns the new node and
// true) replaced, children first otherwise.
func Rewrite(e Expr, f func(Expr) (Expr, bool)) Expr {
	if e == nil {
		return nil
	}
	if n, ok := f(e); ok {
		return n
	}
	rw := func(x Expr) Expr { return Rewrite(x, f) }
	switch x := e.(type) {
	case Cmp:
		return Cmp{Op: x.Op, L: rw(x.L), R: rw(x.R)}
	case And:
		return And{L: rw(x.L), R: rw(x.R)}
	case Or:
		return Or{L: rw(x.L), R: rw(x.R)}
	case Not:
		return Not{X: rw(x.X)}
	case In:
		return In{X: rw(x.X), List: x.List, Neg: x.Neg}
	case IsNull:
		return IsNull{X: rw(x.X), Neg: x.Neg}
	case Arith:
		return Arith{Op: x.Op, L: rw(x.L), R: rw(x.R)}
	case Neg:
		return Neg{X: rw(x.X)}
	case Call:
		c := x
		c.Args = make([]Expr, len(x.Args))
		for i, a := range x.Args {
			c.Args[i] = rw(a)
		}
		c.Filter = rw(x.Filter)
		return c
	case Case:
		c := Case{Operand: rw(x.Operand), Else: rw(x.Else)}
		for _, w := range x.Whens {
			c.Whens = append(c.Whens, When{Cond: rw(w.Cond), Then: rw(w.Then)})
		}
		return c
	case Cast:
		return Cast{X: rw(x.X), To: x.To, Try: x.Try}
	case Like:
		return Like{Op: x.Op, X: rw(x.X), Pattern: rw(x.Pattern), Neg: x.Neg}
	case Index:
		return Index{X: rw(x.X), I: rw(x.I)}
	}
	return e
}
