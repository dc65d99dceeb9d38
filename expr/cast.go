package expr

import (
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// castable is Spark's ANSI cast table over ethstream's types (Cast.canAnsiCast):
// numbers, BOOLEAN and STRING convert among themselves; TIMESTAMP converts
// to and from numbers, STRING and DATE; DATE to and from STRING and
// TIMESTAMP; NULL to anything. FLOAT casts as DOUBLE does; BINARY converts
// to and from STRING only (ANSI has no integral to BINARY).
func castable(from, to Type) bool {
	switch {
	case from.IsArray() || to.IsArray():
		return false // no cast to or from an array (docs/contracts.md, Arrays)
	case from == to, from == Null, to == String && from != intervalType, from == String && to != intervalType:
		return true
	case from == intervalType || to == intervalType:
		return false
	case from == Float:
		return castable(Double, to)
	case to == Float:
		return castable(from, Double)
	case from == Binary || to == Binary:
		return false
	case from.numeric() || from == Boolean:
		return to.numeric() || to == Boolean || to == Timestamp && from != Boolean
	case from == Timestamp:
		return to.numeric() && to.Kind != stream.Decimal || to == Date
	case from == Date:
		return to == Timestamp
	}
	return false
}

type castNode struct {
	x        node
	to       Type
	try      bool
	implicit bool // inserted by coercion, not written
	src      Expr
}

// asNode reads its FLOAT or BINARY cast as DOUBLE or STRING, as the
// operators read FLOAT and BINARY columns (Of): a FLOAT's value is exact
// in a DOUBLE, a BINARY's bytes are the string's. Compile drops it at the
// root, so the result keeps its type, and a cast of it reads through it.
type asNode struct {
	x node
	t Type
}

func (n *asNode) typ() Type    { return n.t }
func (n *asNode) source() Expr { return n.x.source() }
func (n *asNode) eval(c *ctx, sel []bool) (*vec, error) {
	v, err := n.x.eval(c, sel)
	if err != nil {
		return nil, err
	}
	out := *v
	out.t = n.t
	return &out, nil
}

func (n *castNode) typ() Type    { return n.to }
func (n *castNode) source() Expr { return n.src }

func (n *castNode) eval(c *ctx, sel []bool) (*vec, error) {
	x, err := n.x.eval(c, sel)
	if err != nil {
		return nil, err
	}
	from := x.t
	out := newVec(n.to, c.n)
	out.nullsFrom(x)
	if from == Null {
		for r := 0; r < c.n; r++ {
			out.setNull(r)
		}
		return out, nil
	}
	if fastCast(x, out, from, n.to) {
		return out, nil
	}
	for r := 0; r < c.n; r++ {
		if out.null(r) {
			continue
		}
		v, failCode := castValue(get(x, r), from, n.to, c.ansi && !n.try)
		if failCode != "" {
			if c.ansi && !n.try && live(sel, r) {
				return nil, castError(failCode, get(x, r), from, n.to, n.src)
			}
			out.setNull(r)
			continue
		}
		set(out, r, v)
	}
	return out, nil
}

// fastCast converts the casts that cannot fail, a whole column at a
// time, and reports whether it did.
func fastCast(x, out *vec, from, to Type) bool {
	switch {
	case from.integral() && to.Kind == stream.Float64:
		for r, v := range x.i {
			out.f[r] = float64(v)
		}
	case from.Kind == stream.Int32 && to.Kind == stream.Int64, from == Boolean && to.integral():
		copy(out.i, x.i)
	case from.Kind == stream.Date && to.Kind == stream.Timestamp:
		for r, v := range x.i {
			out.i[r] = v * usPerDay
		}
	case from.Kind == stream.Timestamp && to.Kind == stream.Date:
		for r, v := range x.i {
			out.i[r] = floorDiv(v, usPerDay)
		}
	default:
		return false
	}
	return true
}

func castError(code string, v any, from, to Type, e Expr) error {
	lit := format(v, from)
	if from == String {
		lit = "'" + lit + "'"
	}
	if code == CodeCastInvalidInput {
		return errcode.New(code, "", "correct the value as per the syntax, or change its target type; use try_cast to tolerate malformed input and return NULL instead",
			"the value %s of the type %q cannot be cast to %q because it is malformed, in %s", lit, from.String(), to.String(), e)
	}
	return errcode.New(code, "", "use try_cast to tolerate overflow and return NULL instead, or a wider type",
		"the value %s of the type %q cannot be cast to %q due to an overflow, in %s", lit, from.String(), to.String(), e)
}

// get reads row r of v as a Go value: int64 (BOOLEAN 0/1, INT, BIGINT,
// DATE, TIMESTAMP), float64, string or *big.Int (DECIMAL, unscaled).
func get(v *vec, r int) any {
	switch {
	case v.null(r):
		return nil
	case v.i != nil:
		return v.i[r]
	case v.f != nil:
		return v.f[r]
	case v.s != nil:
		return v.s[r]
	case v.d != nil:
		return v.d[r]
	}
	return nil
}

// set writes a Go value (as get returns; nil is null) at row r.
func set(v *vec, r int, x any) {
	switch x := x.(type) {
	case nil:
		v.setNull(r)
	case int64:
		v.i[r] = x
	case float64:
		v.f[r] = x
	case string:
		v.s[r] = x
	case *big.Int:
		v.d[r] = x
	case bool:
		v.i[r] = 0
		if x {
			v.i[r] = 1
		}
	}
}

const usPerDay = 86400_000_000

// castValue converts v from one type to another with Spark's rules;
// failCode is the error class when it cannot (the caller makes it an
// error under ANSI, a null otherwise). ansi selects ANSI's checked integer
// narrowing; without it, Spark 3's legacy cast wraps.
func castValue(v any, from, to Type, ansi bool) (any, string) {
	if from == to {
		return v, ""
	}
	if to == String {
		return format(v, from), ""
	}
	if to == Binary {
		return v, "" // from STRING: its UTF-8 bytes, untrimmed
	}
	if from == String {
		return parse(v.(string), to)
	}
	if from == Float {
		if to == Double {
			return v, "" // a FLOAT's value, exact
		}
		from = Double
	}
	if to == Float {
		return toFloat(v, from, ansi)
	}
	switch from.Kind {
	case stream.Boolean:
		return fromExact(big.NewInt(v.(int64)), 0, to, ansi)
	case stream.Int32, stream.Int64:
		if to == Timestamp {
			s := v.(int64)
			if s > math.MaxInt64/1_000_000 || s < math.MinInt64/1_000_000 {
				return nil, CodeCastOverflow
			}
			return s * 1e6, ""
		}
		return fromExact(big.NewInt(v.(int64)), 0, to, ansi)
	case stream.Decimal:
		return fromExact(v.(*big.Int), from.S, to, ansi)
	case stream.Float64:
		return fromDouble(v.(float64), to, ansi)
	case stream.Timestamp:
		us := v.(int64)
		switch to.Kind {
		case stream.Date:
			return floorDiv(us, usPerDay), ""
		case stream.Float64:
			return float64(us) / 1e6, ""
		}
		return fromExact(big.NewInt(floorDiv(us, 1e6)), 0, to, ansi)
	case stream.Date:
		return v.(int64) * usPerDay, ""
	}
	return nil, CodeCastInvalidInput
}

// toFloat converts a number, BOOLEAN or TIMESTAMP to FLOAT, rounding
// once to the nearest float32 as Java's conversions do (Long.toFloat,
// BigDecimal.floatValue); a DOUBLE or TIMESTAMP through its double, as
// Spark's castToFloat. Out of FLOAT's range is ±Infinity, not an error.
func toFloat(v any, from Type, ansi bool) (any, string) {
	switch from.Kind {
	case stream.Boolean, stream.Int32, stream.Int64:
		return float64(float32(v.(int64))), ""
	case stream.Decimal:
		f, _ := new(big.Rat).SetFrac(v.(*big.Int), pow10[from.S]).Float32()
		return float64(f), ""
	}
	d, code := castValue(v, from, Double, ansi)
	if code != "" {
		return nil, code
	}
	return float64(float32(d.(float64))), ""
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// fromExact converts an exact number (unscaled u with scale s) to a
// numeric or boolean type. Integral targets truncate toward zero, as
// Spark's Decimal.toLong; out of range is CAST_OVERFLOW under ANSI and, in
// Spark 3's legacy cast, wraps for integers and is null for decimals.
func fromExact(u *big.Int, s uint8, to Type, ansi bool) (any, string) {
	switch to.Kind {
	case stream.Boolean:
		return u.Sign() != 0, ""
	case stream.Float64:
		f, _ := new(big.Rat).SetFrac(u, pow10[s]).Float64()
		return f, ""
	case stream.Decimal:
		r := rescale(u, s, to.S)
		if !fits(r, to.P) {
			return nil, CodeNumericOutOfRange
		}
		return r, ""
	case stream.Int32, stream.Int64:
		q := new(big.Int).Quo(u, pow10[s])
		lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
		if to.Kind == stream.Int32 {
			lo, hi = math.MinInt32, math.MaxInt32
		}
		if q.IsInt64() && q.Int64() >= lo && q.Int64() <= hi {
			return q.Int64(), ""
		}
		if ansi || s > 0 || !q.IsInt64() {
			return nil, CodeCastOverflow
		}
		if to.Kind == stream.Int32 {
			return int64(int32(q.Int64())), ""
		}
		return q.Int64(), ""
	case stream.Timestamp:
		return fromExact(u, s, BigInt, ansi)
	}
	return nil, CodeCastInvalidInput
}

// fromDouble converts a DOUBLE: to an integer truncating toward zero (out
// of range or NaN: CAST_OVERFLOW under ANSI; Spark 3's legacy cast
// saturates, NaN to 0), to a decimal rounding HALF_UP.
func fromDouble(f float64, to Type, ansi bool) (any, string) {
	switch to.Kind {
	case stream.Boolean:
		return f != 0, ""
	case stream.Int32, stream.Int64:
		lo, hi := float64(math.MinInt64), float64(math.MaxInt64)
		if to.Kind == stream.Int32 {
			lo, hi = math.MinInt32, math.MaxInt32
		}
		t := math.Trunc(f)
		if math.IsNaN(f) || t < lo || t > hi || (to.Kind == stream.Int64 && t >= 9.223372036854775807e18) {
			if ansi {
				return nil, CodeCastOverflow
			}
			switch {
			case math.IsNaN(f):
				return int64(0), ""
			case f > 0:
				return int64(hi), ""
			}
			return int64(lo), ""
		}
		return int64(t), ""
	case stream.Decimal:
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, CodeCastOverflow
		}
		r := new(big.Rat)
		r.SetFloat64(f)
		num := new(big.Int).Mul(r.Num(), pow10[to.S])
		u := divHalfUp(num, r.Denom())
		if !fits(u, to.P) {
			return nil, CodeNumericOutOfRange
		}
		return u, ""
	case stream.Timestamp:
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, CodeCastOverflow
		}
		return int64(f * 1e6), ""
	}
	return nil, CodeCastInvalidInput
}

// parse is a cast from STRING: the text trimmed of white space, as Spark's.
func parse(s string, to Type) (any, string) {
	t := strings.TrimSpace(s)
	switch to.Kind {
	case stream.Boolean:
		switch strings.ToLower(t) {
		case "t", "true", "y", "yes", "1":
			return true, ""
		case "f", "false", "n", "no", "0":
			return false, ""
		}
	case stream.Int32, stream.Int64:
		bitSize := 64
		if to.Kind == stream.Int32 {
			bitSize = 32
		}
		t = strings.TrimPrefix(t, "+")
		if v, err := strconv.ParseInt(t, 10, bitSize); err == nil {
			return v, ""
		}
	case stream.Float64, stream.Float32:
		switch strings.ToLower(t) {
		case "nan":
			return math.NaN(), ""
		case "inf", "+inf", "infinity", "+infinity":
			return math.Inf(1), ""
		case "-inf", "-infinity":
			return math.Inf(-1), ""
		}
		if strings.ContainsAny(t, "xXpP_") {
			break
		}
		if to.Kind == stream.Float32 {
			// Java's Float.parseFloat: one rounding to float32, f/F/d/D
			// suffixes, out of range as ±Infinity.
			if n := len(t); n > 0 && strings.ContainsRune("fFdD", rune(t[n-1])) {
				t = t[:n-1]
			}
			if v, err := strconv.ParseFloat(t, 32); err == nil || errors.Is(err, strconv.ErrRange) {
				return v, ""
			}
			break
		}
		t = strings.TrimSuffix(strings.TrimSuffix(t, "d"), "D")
		if v, err := strconv.ParseFloat(t, 64); err == nil {
			return v, ""
		}
	case stream.Decimal:
		if strings.ContainsAny(t, "xXpP_/") {
			break
		}
		if r, ok := new(big.Rat).SetString(t); ok {
			num := new(big.Int).Mul(r.Num(), pow10[to.S])
			u := divHalfUp(num, r.Denom())
			if !fits(u, to.P) {
				return nil, CodeNumericOutOfRange
			}
			return u, ""
		}
	case stream.Timestamp:
		if us, ok := ParseTimestamp(t); ok {
			return us, ""
		}
	case stream.Date:
		if d, ok := parseDate(t); ok {
			return d, ""
		}
	}
	return nil, CodeCastInvalidInput
}

// parseDate reads yyyy-[m]m-[d]d (optionally followed by a time, which is
// ignored, as Spark's stringToDate does).
func parseDate(s string) (int64, bool) {
	if i := strings.IndexAny(s, " T"); i >= 0 {
		s = s[:i]
	}
	parts := strings.Split(s, "-")
	if len(parts) < 1 || len(parts) > 3 {
		return 0, false
	}
	nums := []int{1, 1, 1}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || p == "" || strings.HasPrefix(p, "+") {
			return 0, false
		}
		nums[i] = n
	}
	if nums[1] < 1 || nums[1] > 12 || nums[2] < 1 || nums[2] > 31 {
		return 0, false
	}
	t := time.Date(nums[0], time.Month(nums[1]), nums[2], 0, 0, 0, 0, time.UTC)
	if t.Day() != nums[2] {
		return 0, false
	}
	return floorDiv(t.Unix(), 86400), true
}

// format is a value's text as Spark's CAST(... AS STRING) writes it.
func format(v any, t Type) string {
	switch t.Kind {
	case stream.Boolean:
		if v.(int64) != 0 {
			return "true"
		}
		return "false"
	case stream.Int32, stream.Int64:
		return strconv.FormatInt(v.(int64), 10)
	case stream.Float64:
		return javaDouble(v.(float64))
	case stream.Float32:
		return javaNumber(v.(float64), 32)
	case stream.String, stream.Binary:
		return v.(string)
	case stream.Decimal:
		return decimalText(v.(*big.Int), t.S)
	case stream.Date:
		return time.Unix(v.(int64)*86400, 0).UTC().Format("2006-01-02")
	case stream.Timestamp:
		return formatTimestamp(v.(int64))
	}
	return ""
}

// formatTimestamp writes yyyy-MM-dd HH:mm:ss with the fraction's trailing
// zeros dropped, in UTC (Spark's session time zone here).
func formatTimestamp(us int64) string {
	t := time.UnixMicro(us).UTC()
	s := t.Format("2006-01-02 15:04:05")
	if frac := t.Nanosecond() / 1000; frac != 0 {
		f := strings.TrimRight(strconv.Itoa(1_000_000 + frac)[1:], "0")
		s += "." + f
	}
	return s
}

// javaDouble is Java's Double.toString, which Spark's cast to STRING uses:
// plain notation with at least one fractional digit for 1e-3 <= |x| <
// 1e7, computerized scientific notation (1.0E10) otherwise.
func javaDouble(f float64) string { return javaNumber(f, 64) }

// javaNumber is Java's Double.toString (bits 64) or Float.toString (bits
// 32, the shortest digits that read back as the same float32).
func javaNumber(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	a := math.Abs(f)
	if a >= 1e-3 && a < 1e7 {
		s := strconv.FormatFloat(f, 'f', -1, bits)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	s := strconv.FormatFloat(f, 'E', -1, bits) // 1.2345E+10
	mant, exp, _ := strings.Cut(s, "E")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	exp = strings.TrimPrefix(exp, "+")
	neg := strings.HasPrefix(exp, "-")
	exp = strings.TrimLeft(strings.TrimPrefix(exp, "-"), "0")
	if neg {
		exp = "-" + exp
	}
	return mant + "E" + exp
}
