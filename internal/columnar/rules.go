package columnar

import (
	"errors"
	"math"
	"math/big"

	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// The one table of how a Parquet leaf's values become the engine's values,
// used by every reader of Parquet (the archive source, the file and Delta
// table sources, the Delta table's data files and its row-wise reader, the
// demo's recount; its DECIMAL width is also the writers', the file and
// Delta sinks):
//
//	physical  annotation                                   engine value
//	INT64     TIMESTAMP(MILLIS, any isAdjustedToUTC)       µs = x * 1,000
//	INT64     TIMESTAMP(MICROS, any isAdjustedToUTC)       µs = x
//	INT64     TIMESTAMP(NANOS, any isAdjustedToUTC)        µs = floor(x / 1,000)
//	INT64     converted TIMESTAMP_MILLIS / TIMESTAMP_MICROS as the logical type (UTC)
//	INT64     none, read as a timestamp                    unit inferred from |x|: < 1e11 s,
//	                                                       < 1e14 ms, < 1e17 µs, else ns (floor)
//	INT96     (Impala/Spark)                               nanos of day (8 bytes LE) + Julian
//	                                                       day (4 bytes LE), to µs
//	INT32/INT64/FLBA/BYTE_ARRAY  DECIMAL(p, s)             unscaled big-endian two's complement
//	                                                       (FLBA/BYTE_ARRAY); as an integer
//	                                                       column: x / 10^s, refused if fractional;
//	                                                       as a double: x / 10^s
//
// isAdjustedToUTC=false (Spark's TIMESTAMP_NTZ) keeps the stored number:
// the engine's timestamps are µs since the epoch and no session time zone
// applies, as Spark reads TIMESTAMP_NTZ. Timestamp.UTC says which one a
// column was.

// Unit is the unit of an INT64 timestamp column.
type Unit uint8

// Timestamp units. Infer is an unannotated integer read as a timestamp.
const (
	Micros Unit = iota
	Millis
	Nanos
	Int96
	Infer
)

// Timestamp is how a leaf's values convert to µs since the epoch.
type Timestamp struct {
	Unit Unit
	UTC  bool // isAdjustedToUTC (false: a TIMESTAMP_NTZ column)
}

// TimestampOf classifies a leaf read as a timestamp by its physical type
// and annotations (its LogicalType, else its ConvertedType); ok is false
// for a physical type that holds no timestamp.
func TimestampOf(el *format.SchemaElement) (Timestamp, bool) {
	switch el.Type.V {
	case format.Int96:
		return Timestamp{Unit: Int96, UTC: true}, el.Type.Valid
	case format.Int64:
		if !el.Type.Valid {
			return Timestamp{}, false
		}
	default:
		return Timestamp{}, false
	}
	{
		if ts, ok := el.LogicalType.Value.(*format.TimestampType); ok {
			t := Timestamp{Unit: Micros, UTC: ts.IsAdjustedToUTC}
			switch ts.Unit.Value.(type) {
			case *format.MilliSeconds:
				t.Unit = Millis
			case *format.NanoSeconds:
				t.Unit = Nanos
			}
			return t, true
		}
	}
	if el.ConvertedType.Valid {
		switch el.ConvertedType.V {
		case deprecated.TimestampMillis:
			return Timestamp{Unit: Millis, UTC: true}, true
		case deprecated.TimestampMicros:
			return Timestamp{Unit: Micros, UTC: true}, true
		}
	}
	return Timestamp{Unit: Infer, UTC: true}, true
}

// Micros converts a stored INT64 value (any unit but Int96) to µs.
func (t Timestamp) Micros(x int64) int64 {
	switch t.Unit {
	case Millis:
		return x * 1000
	case Nanos:
		return floorDiv(x, 1000)
	case Infer:
		a := x
		if a < 0 {
			a = -a
		}
		switch {
		case a < 1e11: // seconds until year 5138
			return x * 1_000_000
		case a < 1e14:
			return x * 1000
		case a < 1e17:
			return x
		default:
			return floorDiv(x, 1000)
		}
	}
	return x
}

// floorDiv is x / d rounded down (Spark's Math.floorDiv for nanoseconds
// to microseconds, which keeps an instant before 1970 in its microsecond).
func floorDiv(x, d int64) int64 {
	q := x / d
	if x%d != 0 && x < 0 {
		q--
	}
	return q
}

// julianUnixEpoch is the Julian day number of 1970-01-01.
const julianUnixEpoch = 2440588

// Int96Nanos converts an Impala/Spark INT96 timestamp to nanoseconds since
// the epoch (as a day count and nanoseconds of that day, so that no INT96 a
// writer produced overflows before the conversion).
func Int96Nanos(x deprecated.Int96) (days, nanos int64) {
	return int64(x[2]) - julianUnixEpoch, int64(uint64(x[1])<<32 | uint64(x[0]))
}

// Int96Micros converts an Impala/Spark INT96 timestamp to µs since the
// epoch.
func Int96Micros(x deprecated.Int96) int64 {
	days, nanos := Int96Nanos(x)
	return days*86_400_000_000 + nanos/1000
}

// IsDecimal reports whether a leaf is a DECIMAL (logical or converted).
func IsDecimal(el *format.SchemaElement) bool {
	if _, ok := el.LogicalType.Value.(*format.DecimalType); ok {
		return true
	}
	return el.ConvertedType.Valid && el.ConvertedType.V == deprecated.Decimal
}

// DecimalScale is a DECIMAL leaf's scale: the logical type's, else the
// schema element's.
func DecimalScale(el *format.SchemaElement) int32 {
	if dt, ok := el.LogicalType.Value.(*format.DecimalType); ok {
		return dt.Scale
	}
	if el.Scale.Valid {
		return el.Scale.V
	}
	return 0
}

// DecimalPrecision is a DECIMAL leaf's precision: the logical type's, else
// the schema element's.
func DecimalPrecision(el *format.SchemaElement) int {
	if dt, ok := el.LogicalType.Value.(*format.DecimalType); ok {
		return int(dt.Precision)
	}
	if el.Precision.Valid {
		return int(el.Precision.V)
	}
	return 0
}

// DecimalFixedLen is the FIXED_LEN_BYTE_ARRAY length of a DECIMAL(p, _)
// with 18 < p <= 38 as Spark writes it (ParquetWriteSupport): the fewest
// bytes whose two's complement holds 10^p - 1, Decimal.minBytesForPrecision
// (9 bytes for p = 19 and 20, 16 for 38). The writers of both sinks take
// it from here, AppendDecimalFixed its counterpart of BigEndianDec.
func DecimalFixedLen(p int) int { return decimalFixedLens[p] }

// decimalFixedLens[p] is DecimalFixedLen(p), computed once (a writer asks
// per value).
var decimalFixedLens = func() (lens [stream.MaxDecimalPrecision + 1]int) {
	for p := range lens {
		lim := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(p)), nil)
		n := 1
		for new(big.Int).Lsh(big.NewInt(1), uint(8*n-1)).Cmp(lim) < 0 {
			n++
		}
		lens[p] = n
	}
	return lens
}()

// AppendDecimalFixed appends d as an n-byte big-endian two's complement
// integer (n <= 16; d must fit, as a value of DecimalFixedLen(p) for its
// precision p does).
func AppendDecimalFixed(dst []byte, d stream.Dec128, n int) []byte {
	var b [16]byte
	d.AppendKey(b[:0])
	b[0] ^= 0x80 // AppendKey flips the sign bit for ordering
	return append(dst, b[16-n:]...)
}

// BigEndianDec decodes a big-endian two's complement integer of up to 16
// significant bytes (the unscaled value of a FIXED_LEN_BYTE_ARRAY or
// BYTE_ARRAY DECIMAL of up to 38 digits).
func BigEndianDec(b []byte) (stream.Dec128, error) {
	if len(b) == 0 {
		return stream.Dec128{}, nil
	}
	neg := b[0]&0x80 != 0
	for len(b) > 16 {
		if (neg && b[0] != 0xff) || (!neg && b[0] != 0) {
			return stream.Dec128{}, errors.New("decimal value does not fit in 128 bits")
		}
		b = b[1:]
	}
	var hi, lo uint64
	if neg {
		hi, lo = math.MaxUint64, math.MaxUint64
	}
	for _, c := range b {
		hi = hi<<8 | lo>>56
		lo = lo<<8 | uint64(c)
	}
	d := stream.Dec128{Hi: int64(hi), Lo: lo}
	if (d.Hi < 0) != neg {
		return stream.Dec128{}, errors.New("decimal value does not fit in 128 bits")
	}
	return d, nil
}

// BigEndianInt decodes a big-endian two's complement integer (the unscaled
// value of a FIXED_LEN_BYTE_ARRAY or BYTE_ARRAY DECIMAL). Leading sign
// bytes beyond 8 are allowed (decimal(38,0) of a small value).
func BigEndianInt(b []byte) (int64, error) {
	if len(b) == 0 {
		return 0, nil
	}
	neg := b[0]&0x80 != 0
	for len(b) > 8 {
		if (neg && b[0] != 0xff) || (!neg && b[0] != 0) {
			return 0, errors.New("decimal value does not fit in int64")
		}
		b = b[1:]
	}
	var x uint64
	if neg {
		x = math.MaxUint64
	}
	for _, c := range b {
		x = x<<8 | uint64(c)
	}
	if (int64(x) < 0) != neg {
		return 0, errors.New("decimal value does not fit in int64")
	}
	return int64(x), nil
}

// NodeElement is the schema element of a leaf node of a file's schema
// (its physical type and annotations), for a reader that walks parquet-go's
// nodes rather than the footer's elements.
func NodeElement(n parquet.Node) *format.SchemaElement {
	t := n.Type()
	el := &format.SchemaElement{}
	el.Type.V, el.Type.Valid = format.Type(t.Kind()), true
	if lt := t.LogicalType(); lt != nil {
		el.LogicalType = *lt
		if dt, ok := lt.Value.(*format.DecimalType); ok {
			el.Scale.V, el.Scale.Valid = dt.Scale, true
		}
	}
	if ct := t.ConvertedType(); ct != nil {
		el.ConvertedType.V, el.ConvertedType.Valid = *ct, true
	}
	return el
}

// pow10 are the powers of ten an int64 holds.
var pow10 = func() (p [19]int64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()
