package expr

import (
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Expr is a node of an expression tree as parsed, before it is typed
// (Compile does that). String renders it in a canonical SQL form (fully
// parenthesised operators, lowercase keywords), which is what the query
// shape records: two expressions are the same exactly when their strings
// are equal.
type Expr interface {
	String() string
	expr()
}

// Col references an input column.
// Display, when set, is how the column prints: the expression it stands
// for (an aggregate computed before, named in errors as written).
type Col struct {
	Name    string
	Display string
}

// LitKind is the kind of a literal as written.
type LitKind uint8

// Literal kinds.
const (
	LitInt LitKind = iota + 1
	LitFloat
	LitString
	LitBool
	LitNull
	// LitDecimal is an exact decimal (Spark's DECIMAL literal: 1.5,
	// 9223372036854775808); Str holds its canonical text.
	LitDecimal
)

// Lit is a literal: an integer (Int), a double (Flt), an exact decimal
// (Str, made by DecimalLit), a string (Str), true/false or null.
type Lit struct {
	Kind LitKind
	Int  int64
	Flt  float64
	Str  string
	Bool bool
}

// CmpOp is a comparison operator.
type CmpOp string

// Comparison operators (SQL spelling; "<>" and "!=" both parse to Ne).
const (
	Eq CmpOp = "="
	Ne CmpOp = "<>"
	Lt CmpOp = "<"
	Le CmpOp = "<="
	Gt CmpOp = ">"
	Ge CmpOp = ">="
)

// Cmp compares two operands.
type Cmp struct {
	Op   CmpOp
	L, R Expr
}

// And, Or and Not are the logical connectives.
type And struct{ L, R Expr }

// Or is a disjunction.
type Or struct{ L, R Expr }

// Not negates.
type Not struct{ X Expr }

// In is X [NOT] IN (list).
type In struct {
	X    Expr
	List []Lit
	Neg  bool
}

// IsNull is X IS [NOT] NULL.
type IsNull struct {
	X   Expr
	Neg bool
}

func (Col) expr()    {}
func (Lit) expr()    {}
func (Cmp) expr()    {}
func (And) expr()    {}
func (Or) expr()     {}
func (Not) expr()    {}
func (In) expr()     {}
func (IsNull) expr() {}

func (c Col) String() string {
	if c.Display != "" {
		return c.Display
	}
	return c.Name
}

func (l Lit) String() string {
	switch l.Kind {
	case LitInt:
		return strconv.FormatInt(l.Int, 10)
	case LitFloat:
		return strconv.FormatFloat(l.Flt, 'g', -1, 64)
	case LitString:
		return "'" + strings.ReplaceAll(l.Str, "'", "''") + "'"
	case LitBool:
		return strconv.FormatBool(l.Bool)
	case LitDecimal:
		return l.Str
	}
	return "null"
}

// DecimalLit is the DECIMAL literal of r, its text canonical: no trailing
// fractional zeros, so 1.50 and 1.5 are the same literal.
func DecimalLit(r *big.Rat) Lit {
	s := r.FloatString(decimalScale(r))
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		s = "0"
	}
	return Lit{Kind: LitDecimal, Str: s}
}

// decimalScale is the number of fractional digits r needs: its
// denominator is 2^a * 5^b (it came from decimal text), so max(a, b).
func decimalScale(r *big.Rat) int {
	count := func(f int64) int {
		d, n := new(big.Int).Set(r.Denom()), 0
		q, m, bf := new(big.Int), new(big.Int), big.NewInt(f)
		for d.Sign() > 0 {
			q.QuoRem(d, bf, m)
			if m.Sign() != 0 {
				break
			}
			d.Set(q)
			n++
		}
		return n
	}
	return max(count(2), count(5))
}

// Rat is the exact value of an integer or decimal literal, nil for
// another kind.
func (l Lit) Rat() *big.Rat {
	switch l.Kind {
	case LitInt:
		return new(big.Rat).SetInt64(l.Int)
	case LitDecimal:
		r, _ := new(big.Rat).SetString(l.Str)
		return r
	}
	return nil
}

func (c Cmp) String() string {
	return "(" + c.L.String() + " " + string(c.Op) + " " + c.R.String() + ")"
}
func (a And) String() string { return "(" + a.L.String() + " and " + a.R.String() + ")" }
func (o Or) String() string  { return "(" + o.L.String() + " or " + o.R.String() + ")" }
func (n Not) String() string { return "(not " + n.X.String() + ")" }

func (i In) String() string {
	parts := make([]string, len(i.List))
	for k, l := range i.List {
		parts[k] = l.String()
	}
	op := " in ("
	if i.Neg {
		op = " not in ("
	}
	return "(" + i.X.String() + op + strings.Join(parts, ", ") + "))"
}

func (n IsNull) String() string {
	if n.Neg {
		return "(" + n.X.String() + " is not null)"
	}
	return "(" + n.X.String() + " is null)"
}

// Conjuncts splits e at its top-level ANDs, left to right (Spark's
// splitConjunctivePredicates).
func Conjuncts(e Expr) []Expr {
	if a, ok := e.(And); ok {
		return append(Conjuncts(a.L), Conjuncts(a.R)...)
	}
	return []Expr{e}
}

// Columns returns the columns e reads, each once, in first-use order.
func Columns(e Expr) []string {
	var out []string
	Walk(e, func(n Expr) {
		if c, ok := n.(Col); ok && !slices.Contains(out, c.Name) {
			out = append(out, c.Name)
		}
	})
	return out
}

// timestampLayouts are the literal forms a timestamp column compares with
// (Spark casts the string to a timestamp, in UTC here).
var timestampLayouts = []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999", "2006-01-02 15:04:05", "2006-01-02T15:04:05", "2006-01-02"}

// ParseTimestamp reads a timestamp literal's text as microseconds since
// the epoch, UTC.
func ParseTimestamp(s string) (int64, bool) {
	for _, l := range timestampLayouts {
		if t, err := time.ParseInLocation(l, s, time.UTC); err == nil {
			return t.UnixMicro(), true
		}
	}
	return 0, false
}
