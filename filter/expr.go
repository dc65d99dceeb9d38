package filter

import (
	"github.com/ethstream/ethstream/expr"
	"github.com/ethstream/ethstream/stream"
)

// The predicate tree is package expr's expression tree; these aliases keep
// the names the filter's callers use.
type (
	// Expr is an expression node (expr.Expr).
	Expr = expr.Expr
	// Col references an input column.
	Col = expr.Col
	// Lit is a literal.
	Lit = expr.Lit
	// LitKind is the kind of a literal as written.
	LitKind = expr.LitKind
	// CmpOp is a comparison operator.
	CmpOp = expr.CmpOp
	// Cmp compares two operands.
	Cmp = expr.Cmp
	// And is a conjunction.
	And = expr.And
	// Or is a disjunction.
	Or = expr.Or
	// Not negates.
	Not = expr.Not
	// In is X [NOT] IN (list).
	In = expr.In
	// IsNull is X IS [NOT] NULL.
	IsNull = expr.IsNull
)

// Literal kinds and comparison operators (expr's).
const (
	LitInt     = expr.LitInt
	LitFloat   = expr.LitFloat
	LitString  = expr.LitString
	LitBool    = expr.LitBool
	LitNull    = expr.LitNull
	LitDecimal = expr.LitDecimal

	Eq = expr.Eq
	Ne = expr.Ne
	Lt = expr.Lt
	Le = expr.Le
	Gt = expr.Gt
	Ge = expr.Ge
)

// DecimalLit is expr.DecimalLit.
var DecimalLit = expr.DecimalLit

// Conjuncts is expr.Conjuncts.
var Conjuncts = expr.Conjuncts

// Columns is expr.Columns.
var Columns = expr.Columns

// typeName is how errors name a column type.
func typeName(t stream.Type) string { return t.String() }
