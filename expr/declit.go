package expr

import "github.com/ethstream/ethstream/stream"

// Spark types an integral literal beside a DECIMAL by the literal's own
// digits, not by its type: DecimalPrecision's nondecimalAndDecimal casts
// it to DecimalType.fromLiteral (spark.sql.decimalOperations.
// literalPickMinimumPrecision, default true, in both ANSI modes), so
// decimal(12,2) * 2 is decimal(14,2) (2 is decimal(1,0)), not the
// decimal(23,2) of an INT's decimal(10,0). It applies at a binary
// operator only, arithmetic (+ - * / %) and comparison: greatest,
// coalesce, CASE and IN unify by the literal's type. The sign does not
// count (-100 has 3 digits, as 100; Spark's parser folds the minus into
// the literal) and 0 has one digit.

// literalDecimal is the decimal a binary operator reads n as when its
// other operand, of type other, is a DECIMAL: fromLiteral's for an INT or
// BIGINT literal, decimalOf for anything else.
func literalDecimal(n node, other Type) Type {
	t := n.typ()
	if other.Kind != stream.Decimal || !t.integral() {
		return decimalOf(t)
	}
	v, ok := intLiteral(n)
	if !ok {
		return decimalOf(t)
	}
	digits := 0
	for {
		digits++
		v /= 10
		if v == 0 {
			break
		}
	}
	return Decimal(digits, 0)
}

// intLiteral reports the value of an integer literal, or of a unary minus
// of one.
func intLiteral(n node) (int64, bool) {
	switch x := n.(type) {
	case *constNode:
		if _, lit := x.src.(Lit); lit && !x.null && x.t.integral() {
			return x.i, true
		}
	case *arithNode:
		if x.op == "neg" {
			if v, ok := intLiteral(x.l); ok {
				return -v, true
			}
		}
	}
	return 0, false
}
