package filter

import (
	"math"

	"github.com/ethstream/ethstream/expr"
	"github.com/ethstream/ethstream/stream"
)

// A column compared with a constant, or an AND of such, is the WHERE of
// most queries; evaluated a row at a time through eval it took 13-16% of
// the stateless shape's CPU (issue 43). fastCmp evaluates one such
// comparison over the whole column in a typed loop instead. An AND is TRUE
// exactly when every conjunct is TRUE, so a row is kept when each
// comparison holds and its column is not null: unknown and false both drop
// it, and no three-valued state has to be carried.

// fastCmp is column col OP constant (the literal on the right), compared
// in class cls: clsInt for BIGINT and TIMESTAMP against an integer,
// clsFloat for DOUBLE, or BIGINT against a double (then as float64(x)).
type fastCmp struct {
	col int
	op  CmpOp
	cls class
	i   int64
	f   float64
}

// flipOp is the operator that keeps a comparison's truth when its sides
// swap (a < b is b > a).
var flipOp = map[CmpOp]CmpOp{Eq: Eq, Ne: Ne, Lt: Gt, Le: Ge, Gt: Lt, Ge: Le}

// compileFast returns the comparisons n is the AND of, or false when n is
// anything else (OR, NOT, IN, IS NULL, a null literal, two columns,
// strings), which eval then runs.
func (p *Predicate) compileFast(n *node) ([]fastCmp, bool) {
	switch n.kind {
	case nAnd:
		l, ok := p.compileFast(n.kids[0])
		if !ok {
			return nil, false
		}
		r, ok := p.compileFast(n.kids[1])
		if !ok {
			return nil, false
		}
		return append(l, r...), true
	case nCmp:
		c, o, op := n.l, n.r, n.op
		if c.col < 0 {
			c, o, op = n.r, n.l, flipOp[op]
		}
		if c.col < 0 || o.col >= 0 || o.null || n.cls == clsString {
			return nil, false
		}
		return []fastCmp{{col: c.col, op: op, cls: n.cls, i: o.i, f: o.f}}, true
	}
	return nil, false
}

// keepFast sets keep[r] to whether every comparison of fs is TRUE at row
// r of the bound columns.
func (p *Predicate) keepFast(fs []fastCmp, keep []bool) {
	for k, f := range fs {
		c := p.bound[f.col]
		first := k == 0
		switch {
		case f.cls == clsInt:
			cmpColumn(keep, c.Int64s[:len(keep)], f.op, f.i, first)
		case c.Type == stream.Float64 && !math.IsNaN(f.f):
			cmpColumn(keep, c.Float64s[:len(keep)], f.op, f.f, first)
		default: // BIGINT against a double, or a NaN constant: Spark's order
			cmpOrdered(keep, c, f.op, f.f, first)
		}
		if c.Valid != nil {
			for r, v := range c.Valid[:len(keep)] {
				keep[r] = both(keep[r], v)
			}
		}
	}
}

// cmpColumn sets (first) or narrows keep to x[r] OP v, for BIGINT (and
// TIMESTAMP) and for a double column against a constant v that is not NaN.
// Go's operators are Spark's order there except for a NaN x, which Spark
// puts above every other value: so > and >= also hold for it (x != x, never
// true of an integer). -0.0 and 0.0 are equal in both. int64 and float64
// are instantiated apart (their GC shapes differ), so each loop compiles to
// the plain typed comparison; a func argument per operator did not inline
// and cost 2.7x (BenchmarkWhereColumnConstant).
func cmpColumn[T int64 | float64](keep []bool, x []T, op CmpOp, v T, first bool) {
	if first {
		switch op {
		case Eq:
			for r, a := range x {
				keep[r] = a == v
			}
		case Ne:
			for r, a := range x {
				keep[r] = a != v
			}
		case Lt:
			for r, a := range x {
				keep[r] = a < v
			}
		case Le:
			for r, a := range x {
				keep[r] = a <= v
			}
		case Gt:
			for r, a := range x {
				keep[r] = a > v || a != a
			}
		case Ge:
			for r, a := range x {
				keep[r] = a >= v || a != a
			}
		}
		return
	}
	switch op {
	case Eq:
		for r, a := range x {
			keep[r] = both(keep[r], a == v)
		}
	case Ne:
		for r, a := range x {
			keep[r] = both(keep[r], a != v)
		}
	case Lt:
		for r, a := range x {
			keep[r] = both(keep[r], a < v)
		}
	case Le:
		for r, a := range x {
			keep[r] = both(keep[r], a <= v)
		}
	case Gt:
		for r, a := range x {
			keep[r] = both(keep[r], a > v || a != a)
		}
	case Ge:
		for r, a := range x {
			keep[r] = both(keep[r], a >= v || a != a)
		}
	}
}

// cmpOrdered is the rare rest, a row at a time through expr.CompareDouble.
func cmpOrdered(keep []bool, c *stream.Column, op CmpOp, v float64, first bool) {
	for r := range keep {
		var x float64
		if c.Type == stream.Float64 {
			x = c.Float64s[r]
		} else {
			x = float64(c.Int64s[r])
		}
		t := holds(op, expr.CompareDouble(x, v))
		if first {
			keep[r] = t
		} else {
			keep[r] = both(keep[r], t)
		}
	}
}

// both is a && b without a branch: the rows a WHERE keeps are in no
// order a CPU predicts, and a short-circuit's mispredictions cost more
// than the comparison.
func both(a, b bool) bool { return b2u(a)&b2u(b) != 0 }

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// holds is whether a comparison whose sides compare as c (-1, 0, 1) is
// true under op.
func holds(op CmpOp, c int) bool {
	switch op {
	case Eq:
		return c == 0
	case Ne:
		return c != 0
	case Lt:
		return c < 0
	case Le:
		return c <= 0
	case Gt:
		return c > 0
	case Ge:
		return c >= 0
	}
	return false
}
