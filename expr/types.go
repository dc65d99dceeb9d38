package expr

import (
	"fmt"
	"math/big"
	"strings"

	"github.com/ethstream/ethstream/stream"
)

// Type is the SQL type of an expression: a column type, with the
// precision and scale of a DECIMAL. The zero Type is Spark's NullType, the
// type of an untyped NULL literal.
type Type struct {
	Kind stream.Type
	P, S uint8 // DECIMAL(P, S); zero for other kinds
}

// The types expressions have.
var (
	Null      = Type{}
	Boolean   = Type{Kind: stream.Boolean}
	Int       = Type{Kind: stream.Int32}
	BigInt    = Type{Kind: stream.Int64}
	Double    = Type{Kind: stream.Float64}
	String    = Type{Kind: stream.String}
	Timestamp = Type{Kind: stream.Timestamp}
	Date      = Type{Kind: stream.Date}
	// Float and Binary are only a CAST's result: an operator reads them as
	// DOUBLE and STRING (asNode), as it reads FLOAT and BINARY columns (Of).
	Float  = Type{Kind: stream.Float32}
	Binary = Type{Kind: stream.Binary}
)

// MaxPrecision is Spark's DecimalType.MAX_PRECISION.
const MaxPrecision = 38

// Decimal is DECIMAL(p, s).
func Decimal(p, s int) Type { return Type{Kind: stream.Decimal, P: uint8(p), S: uint8(s)} }

// String is the type's name in Spark SQL (BIGINT, DECIMAL(38,0), ...).
func (t Type) String() string {
	if t.IsArray() {
		return "ARRAY<" + t.Elem().String() + ">"
	}
	switch t.Kind {
	case 0:
		return "VOID"
	case stream.Boolean:
		return "BOOLEAN"
	case stream.Int32:
		return "INT"
	case stream.Int64:
		return "BIGINT"
	case stream.Float64:
		return "DOUBLE"
	case stream.Float32:
		return "FLOAT"
	case stream.String:
		return "STRING"
	case stream.Binary:
		return "BINARY"
	case stream.Timestamp:
		return "TIMESTAMP"
	case stream.Date:
		return "DATE"
	case stream.Decimal:
		return fmt.Sprintf("DECIMAL(%d,%d)", t.P, t.S)
	}
	return t.Kind.String()
}

// Of is the expression type of a column type. The column kinds expressions
// have no arithmetic of their own read as the type Spark widens them to
// first: TINYINT and SMALLINT as INT, FLOAT as DOUBLE (a float's value is
// exact in a double), BINARY as STRING (its bytes), TIMESTAMP_NTZ as
// TIMESTAMP (its wall clock as UTC); docs/contracts.md, Types.
func Of(t stream.Type) Type {
	switch t.Kind() {
	case stream.Array:
		return ArrayOf(Of(t.Elem()))
	case stream.Decimal:
		return Type{Kind: stream.Decimal, P: uint8(t.Precision()), S: uint8(t.Scale())}
	case stream.Int8, stream.Int16:
		return Int
	case stream.Float32:
		return Double
	case stream.Binary:
		return String
	case stream.TimestampNTZ:
		return Timestamp
	}
	return Type{Kind: t}
}

// Stream is the column type of an expression's values (DECIMAL with its
// precision and scale; NULL as BIGINT, a column of nulls).
func (t Type) Stream() stream.Type {
	switch t.Kind {
	case stream.Decimal:
		return stream.DecimalOf(int(t.P), int(t.S))
	case 0:
		return stream.Int64
	}
	return t.Kind
}

func (t Type) integral() bool { return t.Kind == stream.Int32 || t.Kind == stream.Int64 }
func (t Type) numeric() bool {
	return t.integral() || t.Kind == stream.Float64 || t.Kind == stream.Decimal
}

// ParseType reads a type name as CAST takes it: BOOLEAN, INT/INTEGER,
// BIGINT/LONG, DOUBLE, FLOAT/REAL, STRING, BINARY, DATE, TIMESTAMP, DECIMAL[(p[, s])] (DECIMAL
// alone is DECIMAL(10,0), as in Spark). ok is false for a name Spark has
// but ethstream does not (the caller names it).
func ParseType(name string, args []int) (Type, bool) {
	switch strings.ToLower(name) {
	case "boolean":
		return Boolean, len(args) == 0
	case "int", "integer":
		return Int, len(args) == 0
	case "bigint", "long":
		return BigInt, len(args) == 0
	case "double":
		return Double, len(args) == 0
	case "float", "real":
		return Float, len(args) == 0
	case "string":
		return String, len(args) == 0
	case "binary":
		return Binary, len(args) == 0
	case "date":
		return Date, len(args) == 0
	case "timestamp", "timestamp_ltz":
		return Timestamp, len(args) == 0
	case "decimal", "dec", "numeric":
		p, s := 10, 0
		switch len(args) {
		case 0:
		case 1:
			p = args[0]
		case 2:
			p, s = args[0], args[1]
		default:
			return Type{}, false
		}
		if p < 1 || p > MaxPrecision || s < 0 || s > p {
			return Type{}, false
		}
		return Decimal(p, s), true
	}
	return Type{}, false
}

// pow10 holds 10^i for i in [0, 2*MaxPrecision+8].
var pow10 = func() []*big.Int {
	out := make([]*big.Int, 2*MaxPrecision+9)
	v := big.NewInt(1)
	for i := range out {
		out[i] = new(big.Int).Set(v)
		v.Mul(v, big.NewInt(10))
	}
	return out
}()

// fits reports whether the unscaled value v has at most p digits.
func fits(v *big.Int, p uint8) bool { return new(big.Int).Abs(v).Cmp(pow10[p]) < 0 }

// rescale changes v's scale from `from` to `to`, rounding HALF_UP (Spark's
// Decimal rounding for arithmetic and casts).
func rescale(v *big.Int, from, to uint8) *big.Int {
	if to >= from {
		return new(big.Int).Mul(v, pow10[to-from])
	}
	return divHalfUp(v, pow10[from-to])
}

// divHalfUp is a/b rounded half away from zero (b > 0 or < 0).
func divHalfUp(a, b *big.Int) *big.Int {
	q, r := new(big.Int).QuoRem(a, b, new(big.Int))
	if r.Sign() == 0 {
		return q
	}
	twice := new(big.Int).Abs(r)
	twice.Lsh(twice, 1)
	if twice.Cmp(new(big.Int).Abs(b)) >= 0 {
		if (a.Sign() < 0) != (b.Sign() < 0) {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	return q
}

// decimalText renders an unscaled value with scale s as Spark prints a
// decimal (plain notation, s fractional digits).
func decimalText(v *big.Int, s uint8) string {
	neg := v.Sign() < 0
	digits := new(big.Int).Abs(v).String()
	if s > 0 {
		if len(digits) <= int(s) {
			digits = strings.Repeat("0", int(s)-len(digits)+1) + digits
		}
		digits = digits[:len(digits)-int(s)] + "." + digits[len(digits)-int(s):]
	}
	if neg {
		return "-" + digits
	}
	return digits
}

// adjust is Spark's DecimalType.adjustPrecisionScale (with
// spark.sql.decimalOperations.allowPrecisionLoss, the default): a result
// wider than 38 digits keeps its integral digits and at least 6 (or its
// own, if fewer) fractional digits.
func adjust(p, s int) Type {
	if p <= MaxPrecision {
		return Decimal(p, s)
	}
	intDigits := p - s
	minScale := min(s, 6)
	return Decimal(MaxPrecision, max(MaxPrecision-intDigits, minScale))
}

// decimalOf is the DECIMAL an integral type widens to (Spark's
// DecimalType.forType: INT is DECIMAL(10,0), BIGINT DECIMAL(20,0)).
func decimalOf(t Type) Type {
	switch t.Kind {
	case stream.Int32:
		return Decimal(10, 0)
	case stream.Int64:
		return Decimal(20, 0)
	}
	return t
}
