package sparkref

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/ethstream/ethstream/stream"
)

// The scalar types beyond BIGINT, DOUBLE, STRING and TIMESTAMP, as the
// generator draws them and the oracle evaluates them (Spark's rules,
// written out here without the engine's packages):
//
//   - BOOLEAN, TINYINT, SMALLINT, INT, DATE (days) and TIMESTAMP_NTZ (µs)
//     are int64 in a Row; FLOAT a float64 holding a float32's value;
//     BINARY a string of its bytes; DECIMAL(p,s) a Decimal, its text
//     with exactly s fractional digits.
//   - Each is a GROUP BY key (nulls one group) and count(x)'s input.
//     min/max take all but BINARY and keep the input type; sum and avg
//     take the integer kinds (a BIGINT sum; avg a DOUBLE), FLOAT (DOUBLE)
//     and DECIMAL(p,s): sum DECIMAL(min(38, p+10), s), avg
//     DECIMAL(min(38, p+4), min(38, s+4)) of sum/count rounded HALF_UP.
//     A DECIMAL sum that leaves its precision is ARITHMETIC_OVERFLOW in
//     both ANSI modes: ethstream's documented difference from Spark, whose
//     non-ANSI sum is null (docs/contracts.md, Types).
//   - WHERE draws IS [NOT] NULL of any of them, and comparisons of the
//     integer kinds with small integer literals, of BOOLEAN with TRUE and
//     FALSE, of DATE with a DATE literal, of DECIMAL with an integer or
//     decimal literal (exactly, as Spark's DecimalPrecision compares).

// Decimal is a DECIMAL value: its text with exactly the type's scale of
// fractional digits ("-1.50"), as Spark prints one.
type Decimal string

// rat is d's exact value.
func (d Decimal) rat() *big.Rat {
	r, ok := new(big.Rat).SetString(string(d))
	if !ok {
		panic("sparkref: decimal " + string(d))
	}
	return r
}

// decimalText renders the unscaled u at scale s.
func decimalText(u *big.Int, s int) Decimal {
	neg := u.Sign() < 0
	digits := new(big.Int).Abs(u).String()
	if s > 0 {
		if len(digits) <= s {
			digits = strings.Repeat("0", s-len(digits)+1) + digits
		}
		digits = digits[:len(digits)-s] + "." + digits[len(digits)-s:]
	}
	if neg {
		return Decimal("-" + digits)
	}
	return Decimal(digits)
}

// roundHalfUp is r at scale s, rounded half away from zero.
func roundHalfUp(r *big.Rat, s int) Decimal {
	scaled := new(big.Rat).Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(s)), nil)))
	num, den := scaled.Num(), scaled.Denom()
	q, m := new(big.Int).QuoRem(new(big.Int).Abs(num), den, new(big.Int))
	if new(big.Int).Mul(m, big.NewInt(2)).Cmp(den) >= 0 {
		q.Add(q, big.NewInt(1))
	}
	if num.Sign() < 0 {
		q.Neg(q)
	}
	return decimalText(q, s)
}

// TypedColumns are the extra columns of every new type the differential
// test adds to the block schema.
var TypedColumns = []Column{
	{Name: "flag", Type: stream.Boolean}, {Name: "tiny", Type: stream.Int8}, {Name: "small", Type: stream.Int16},
	{Name: "i32", Type: stream.Int32}, {Name: "real", Type: stream.Float32}, {Name: "amt", Type: stream.DecimalOf(12, 2)},
	{Name: "wei", Type: stream.DecimalOf(38, 0)}, {Name: "day", Type: stream.Date}, {Name: "raw", Type: stream.Binary},
	{Name: "local", Type: stream.TimestampNTZ},
}

// isNew reports whether t is one of the types this file models.
func isNew(t stream.Type) bool {
	switch t.Kind() {
	case stream.Boolean, stream.Int8, stream.Int16, stream.Int32, stream.Float32, stream.Decimal, stream.Date, stream.Binary, stream.TimestampNTZ:
		return true
	}
	return false
}

// newCell draws a value of a new type: small ranges so that groups and
// duplicates form, the extremes of each type, and DECIMAL(38,0) values
// near its limit (two of them overflow a sum).
func newCell(rng *rand.Rand, t stream.Type, t0 time.Time) any {
	switch t.Kind() {
	case stream.Boolean:
		return int64(rng.IntN(2))
	case stream.Int8:
		return pick(rng, []int64{-128, 127, 0, 1, 2, -3})
	case stream.Int16:
		return pick(rng, []int64{-32768, 32767, 0, 5, 7, -100})
	case stream.Int32:
		return pick(rng, []int64{-2147483648, 2147483647, 0, 3, 4, 1000})
	case stream.Float32:
		return float64(float32(rng.IntN(400)-200) / 16)
	case stream.Date:
		return t0.UnixMicro()/86_400_000_000 + int64(rng.IntN(4)) - 1
	case stream.TimestampNTZ:
		return t0.UnixMicro() + int64(rng.IntN(5))*int64(time.Hour/time.Microsecond) + int64(rng.IntN(3))
	case stream.Binary:
		return pick(rng, []string{"", "\x00", "\x00\xff", "\xff", "ab"})
	case stream.Decimal:
		if t.Precision() == 38 {
			if rng.IntN(4) == 0 {
				u, _ := new(big.Int).SetString("6"+strings.Repeat("0", 37), 10) // two of them leave DECIMAL(38,0)
				return decimalText(u.Add(u, big.NewInt(int64(rng.IntN(9)))), 0)
			}
			return decimalText(big.NewInt(int64(rng.IntN(2001)-1000)), 0)
		}
		return decimalText(big.NewInt(pick(rng, []int64{-99999999999, 99999999999, 0, 150, 250, -1, 12345})), t.Scale())
	}
	panic(fmt.Sprintf("sparkref: cell of %v", t))
}

// newLit draws a literal to compare a column of new type t with, or false
// when t has none the oracle models (FLOAT, BINARY, TIMESTAMP_NTZ).
func newLit(rng *rand.Rand, t stream.Type, t0 time.Time) (Lit, bool) {
	switch t.Kind() {
	case stream.Boolean:
		b := rng.IntN(2) == 0
		return Lit{Kind: LitBool, Int: map[bool]int64{false: 0, true: 1}[b], Text: pick(rng, []string{strings.ToUpper(strconv.FormatBool(b)), strconv.FormatBool(b)})}, true
	case stream.Int8, stream.Int16, stream.Int32:
		v := pick(rng, []int64{0, 1, 2, 3, -3, 100})
		return Lit{Kind: LitBigint, Int: v, Text: intText(v)}, true
	case stream.Date:
		d := t0.Truncate(24*time.Hour).AddDate(0, 0, rng.IntN(3)-1)
		return Lit{Kind: LitDate, Int: d.UnixMicro() / 86_400_000_000, Text: "DATE '" + d.Format("2006-01-02") + "'"}, true
	case stream.Decimal:
		if rng.IntN(2) == 0 {
			v := pick(rng, []int64{0, 150, -1, 2})
			return Lit{Kind: LitBigint, Int: v, Text: intText(v)}, true
		}
		d := pick(rng, []string{"1.5", "2.50", "-0.01", "123.45"})
		r, _ := new(big.Rat).SetString(d)
		return Lit{Kind: LitDecimal, Dec: r, Text: d}, true
	}
	return Lit{}, false
}

// compareNew compares a column value x of new type t with y (a value of
// the same column type, or a literal from newLit); ok false for a null.
func compareNew(t stream.Type, x, y any) (int, bool) {
	switch t.Kind() {
	case stream.Decimal:
		switch y := y.(type) {
		case Decimal:
			return x.(Decimal).rat().Cmp(y.rat()), true
		case Lit:
			// Both sides are cast to Spark 4's wider decimal type
			// (widerDecimalType, boundedPreferIntegralDigits past 38
			// digits: the scale gives way), rounding HALF_UP.
			r, lp, ls := litDecimal(y)
			s := max(t.Scale(), ls)
			rng := max(t.Precision()-t.Scale(), lp-ls)
			if rng+s > 38 {
				s = max(s-(rng+s-38), 0)
			}
			return roundHalfUp(x.(Decimal).rat(), s).rat().Cmp(roundHalfUp(r, s).rat()), true
		}
	case stream.Float32:
		return cmpFloat(x.(float64), y.(float64)), true
	case stream.Binary:
		return strings.Compare(x.(string), y.(string)), true
	}
	xi := x.(int64)
	switch y := y.(type) {
	case int64:
		return cmpInt(xi, y), true
	case Lit:
		return cmpInt(xi, y.Int), true
	}
	panic(fmt.Sprintf("sparkref: %v compared with %T", t, y))
}

// litDecimal is a literal's value and decimal type: an integer literal
// DECIMAL(its digits, 0) (DecimalType.fromLiteral), a decimal literal
// DECIMAL(max(digits of its unscaled value, scale), scale).
func litDecimal(l Lit) (r *big.Rat, p, s int) {
	if l.Kind == LitBigint {
		return new(big.Rat).SetInt64(l.Int), len(strconv.FormatInt(max(l.Int, -l.Int), 10)), 0
	}
	text := strings.TrimPrefix(l.Text, "-")
	if i := strings.IndexByte(text, '.'); i >= 0 {
		s = len(text) - i - 1
	}
	digits := strings.TrimLeft(strings.ReplaceAll(text, ".", ""), "0")
	return l.Dec, max(len(digits), s, 1), s
}

// sumDecimal is Spark's sum type of DECIMAL(p,s): DECIMAL(min(38, p+10), s).
func sumDecimal(t stream.Type) (p, s int) { return min(38, t.Precision()+10), t.Scale() }

// decimalResult is a DECIMAL column's sum or avg of buffer b (b.dsum the
// exact sum), and whether the sum overflowed its type.
func decimalResult(fn string, t stream.Type, b *buffer) (any, bool) {
	p, s := sumDecimal(t)
	lim := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(p-s)), nil))
	if new(big.Rat).Abs(&b.dsum).Cmp(lim) >= 0 {
		return nil, true
	}
	if fn == "sum" {
		return roundHalfUp(&b.dsum, s), false
	}
	// avg is DECIMAL(min(38, p+4), min(38, s+4)); an average it cannot
	// hold fails the batch (ethstream's ARITHMETIC_OVERFLOW; Spark's ANSI
	// cast error, null without ANSI).
	avgP, avgS := min(38, t.Precision()+4), min(38, t.Scale()+4)
	avg := roundHalfUp(new(big.Rat).Quo(&b.dsum, new(big.Rat).SetInt64(b.n)), avgS)
	intLim := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(avgP-avgS)), nil))
	if new(big.Rat).Abs(avg.rat()).Cmp(intLim) >= 0 {
		return nil, true
	}
	return avg, false
}

// newCols are the schema's columns of new types.
func (g *Gen) newCols() []Column {
	var out []Column
	for _, c := range g.Schema {
		if isNew(c.Type) {
			out = append(out, c)
		}
	}
	return out
}

// newAgg draws an aggregate over a column of a new type: count of any,
// min/max of all but BINARY, sum/avg of the numeric ones.
func (g *Gen) newAgg(rng *rand.Rand, cols []Column) Agg {
	c := pick(rng, cols)
	fns := []string{"count"}
	if c.Type != stream.Binary {
		fns = append(fns, "min", "max")
	}
	switch c.Type.Kind() {
	case stream.Int8, stream.Int16, stream.Int32, stream.Float32, stream.Decimal:
		fns = append(fns, "sum", "sum", "avg")
	}
	return Agg{Func: pick(rng, fns), Column: c.Name}
}

// newExpr draws a WHERE conjunct over a column of a new type.
func (g *Gen) newExpr(rng *rand.Rand, cols []Column) Expr {
	c := pick(rng, cols)
	col := Col{Name: c.Name}
	l, ok := newLit(rng, c.Type, g.T0)
	if !ok || rng.IntN(4) == 0 {
		return IsNull{X: col, Not: rng.IntN(2) == 0}
	}
	op := pick(rng, []string{"=", "<>", "<", "<=", ">", ">="})
	if rng.IntN(3) == 0 {
		return Cmp{Op: op, L: l, R: col}
	}
	return Cmp{Op: op, L: col, R: l}
}

// castCols are the columns CAST(x AS STRING) is drawn over: the new types
// but BINARY (whose bytes need not be UTF-8).
func (g *Gen) castCols() []Column {
	var out []Column
	for _, c := range g.newCols() {
		if c.Type != stream.Binary {
			out = append(out, c)
		}
	}
	return out
}

// castString is Spark's CAST(v AS STRING) of a value of type t: booleans
// as true/false, integers in decimal, a FLOAT as Java's Float.toString
// (the generator's values, multiples of 1/16 below 13, are plain
// decimals with at least one fractional digit), a DECIMAL with its
// scale, a DATE as yyyy-MM-dd, a TIMESTAMP_NTZ as yyyy-MM-dd HH:mm:ss and
// the fraction without trailing zeros.
func castString(t stream.Type, v any) string {
	switch t.Kind() {
	case stream.Boolean:
		return strconv.FormatBool(v.(int64) != 0)
	case stream.Float32:
		s := strconv.FormatFloat(v.(float64), 'f', -1, 32)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	case stream.Decimal:
		return string(v.(Decimal))
	case stream.Date:
		return time.Unix(v.(int64)*86400, 0).UTC().Format("2006-01-02")
	case stream.TimestampNTZ:
		us := v.(int64)
		s := time.UnixMicro(us).UTC().Format("2006-01-02 15:04:05")
		if f := us % 1_000_000; f != 0 {
			s += strings.TrimRight(fmt.Sprintf(".%06d", (f+1_000_000)%1_000_000), "0")
		}
		return s
	}
	return strconv.FormatInt(v.(int64), 10)
}
