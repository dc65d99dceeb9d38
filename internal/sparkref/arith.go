package sparkref

import (
	"math"
	"math/big"
	"strings"

	"github.com/ethstream/ethstream/stream"
)

// Arith is L Op R over numbers (Op one of + - * / %), an Operand: Spark's
// arithmetic with its result types (BIGINT with BIGINT or INT is BIGINT, a
// DOUBLE makes DOUBLE, / is always DOUBLE), overflow and division by zero
// raising under ANSI, wrapping or null without.
type Arith struct {
	Op   string
	L, R Operand
}

// Coalesce is coalesce(X, Else): X unless it is null.
type Coalesce struct{ X, Else Operand }

func (a Arith) renderOperand(b *strings.Builder) {
	b.WriteString("(")
	a.L.renderOperand(b)
	b.WriteString(" " + a.Op + " ")
	a.R.renderOperand(b)
	b.WriteString(")")
}

func (c Coalesce) renderOperand(b *strings.Builder) {
	b.WriteString("coalesce(")
	c.X.renderOperand(b)
	b.WriteString(", ")
	c.Else.renderOperand(b)
	b.WriteString(")")
}

// numType is the Spark type of a numeric operand: Int64 (BIGINT; an
// integer literal, INT in Spark, widens to it here since every generated
// expression reads a column) or Float64.
func (ev *evaluator) numType(o Operand) stream.Type {
	switch o := o.(type) {
	case Col:
		return ev.typ[o.Name]
	case Lit:
		if o.Kind == LitDouble {
			return stream.Float64
		}
		return stream.Int64
	case Arith:
		if o.Op == "/" {
			return stream.Float64
		}
		if ev.numType(o.L) == stream.Float64 || ev.numType(o.R) == stream.Float64 {
			return stream.Float64
		}
		return stream.Int64
	case Coalesce:
		if ev.numType(o.X) == stream.Float64 || ev.numType(o.Else) == stream.Float64 {
			return stream.Float64
		}
		return stream.Int64
	}
	return 0
}

// num evaluates a numeric operand at row r: nil (null), int64 or float64,
// and the error class Spark raises for it under ANSI ("" for none).
func (ev *evaluator) num(o Operand, r Row) (any, string) {
	switch o := o.(type) {
	case Col:
		return r[ev.idx[o.Name]], ""
	case Lit:
		switch o.Kind {
		case LitNull:
			return nil, ""
		case LitDouble:
			return o.Float, ""
		}
		return o.Int, ""
	case Coalesce:
		v, code := ev.num(o.X, r)
		if code != "" {
			return nil, code
		}
		if v == nil {
			v, code = ev.num(o.Else, r)
		}
		return ev.widen(v, ev.numType(o)), code
	case Arith:
		l, code := ev.num(o.L, r)
		if code != "" {
			return nil, code
		}
		rv, code := ev.num(o.R, r)
		if code != "" || l == nil || rv == nil {
			return nil, code
		}
		if ev.numType(o) == stream.Float64 {
			return ev.double(o.Op, toFloat(l), toFloat(rv))
		}
		return ev.long(o.Op, l.(int64), rv.(int64))
	}
	panic("sparkref: numeric operand")
}

func (ev *evaluator) widen(v any, t stream.Type) any {
	if i, ok := v.(int64); ok && t == stream.Float64 {
		return float64(i)
	}
	return v
}

func toFloat(v any) float64 {
	if i, ok := v.(int64); ok {
		return float64(i)
	}
	return v.(float64)
}

func (ev *evaluator) double(op string, a, b float64) (any, string) {
	switch op {
	case "+":
		return a + b, ""
	case "-":
		return a - b, ""
	case "*":
		return a * b, ""
	}
	if b == 0 {
		if ev.q.ANSI {
			return nil, "DIVIDE_BY_ZERO"
		}
		return nil, ""
	}
	if op == "/" {
		return a / b, ""
	}
	return math.Mod(a, b), ""
}

// long is BIGINT arithmetic computed exactly, then checked (ANSI) or
// reduced modulo 2^64 (Java's wrapping long).
func (ev *evaluator) long(op string, a, b int64) (any, string) {
	x, y := big.NewInt(a), big.NewInt(b)
	var z big.Int
	switch op {
	case "+":
		z.Add(x, y)
	case "-":
		z.Sub(x, y)
	case "*":
		z.Mul(x, y)
	case "%":
		if b == 0 {
			if ev.q.ANSI {
				return nil, "DIVIDE_BY_ZERO"
			}
			return nil, ""
		}
		z.Rem(x, y) // truncated: the sign of the dividend, as Java's %
	}
	if z.Cmp(minLong) < 0 || z.Cmp(maxLong) > 0 {
		if ev.q.ANSI {
			return nil, "ARITHMETIC_OVERFLOW"
		}
		var m big.Int
		m.And(&z, new(big.Int).SetUint64(math.MaxUint64))
		return int64(m.Uint64()), ""
	}
	return z.Int64(), ""
}

// compareNum compares a numeric expression with a numeric operand at row r.
func (ev *evaluator) compareNum(op string, l, r Operand, row Row) (tri, string) {
	a, code := ev.num(l, row)
	if code != "" {
		return tNull, code
	}
	b, code := ev.num(r, row)
	if code != "" {
		return tNull, code
	}
	if a == nil || b == nil {
		return tNull, ""
	}
	if ev.numType(l) == stream.Float64 || ev.numType(r) == stream.Float64 {
		return truth(op, cmpFloat(toFloat(a), toFloat(b))), ""
	}
	return truth(op, cmpInt(a.(int64), b.(int64))), ""
}

// isExpr reports whether o is an expression rather than a column or a
// literal.
func isExpr(o Operand) bool {
	switch o.(type) {
	case Arith, Coalesce:
		return true
	}
	return false
}

// operandReads reports whether o reads column name.
func operandReads(o Operand, name string) bool {
	switch o := o.(type) {
	case Col:
		return o.Name == name
	case Arith:
		return operandReads(o.L, name) || operandReads(o.R, name)
	case Coalesce:
		return operandReads(o.X, name) || operandReads(o.Else, name)
	}
	return false
}

// Expressions reports whether q computes an expression (in WHERE, an
// aggregate's input, a group key or HAVING).
func (q *Query) Expressions() bool {
	if q.Having != nil || len(q.KeyExprs) > 0 {
		return true
	}
	for _, a := range q.Aggs {
		if a.Arg != nil || a.Func == "ratio" {
			return true
		}
	}
	found := false
	var walk func(Expr)
	walk = func(e Expr) {
		switch e := e.(type) {
		case And:
			walk(e.L)
			walk(e.R)
		case Or:
			walk(e.L)
			walk(e.R)
		case Not:
			walk(e.X)
		case Cmp:
			found = found || isExpr(e.L) || isExpr(e.R)
		}
	}
	walk(q.Where)
	return found
}
