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

// widerDecimal is Spark 4's DecimalPrecision.widerDecimalType: the scale
// of the larger and the integral digits of the larger, and past 38 digits
// DecimalType.boundedPreferIntegralDigits, which keeps every integral
// digit and gives up scale (down to 0), so both operands always fit:
// DECIMAL(38,0) against DECIMAL(4,2) is DECIMAL(38,0), where Spark 3's
// bounded() kept the scale, DECIMAL(38,2), into which a 37-digit value
// did not fit (NUMERIC_VALUE_OUT_OF_RANGE on a comparison that Spark 4
// answers).
func widerDecimal(a, b Type) Type {
	s := int(max(a.S, b.S))
	rng := int(max(a.P-a.S, b.P-b.S))
	if rng+s <= MaxPrecision {
		return Decimal(rng+s, s)
	}
	return Decimal(MaxPrecision, max(s-(rng+s-MaxPrecision), 0))
}
