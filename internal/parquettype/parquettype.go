// Package parquettype is how ethstream's writers (the Delta sink and the
// file sink) lay an engine column out in Parquet, written once: the Go
// type and tag of the column in the run-time struct parquet.SchemaOf makes
// the file's schema from, a row's value, and an array row's levels.
//
// The Parquet types, as Spark's ParquetWriteSupport writes each Spark type
// (spark.sql.parquet.writeLegacyFormat false, the default), every field
// OPTIONAL:
//
//	BIGINT          INT64 (parquet-go annotates INT(64, signed); same reading)
//	INT             INT32 (likewise INT(32, signed))
//	SMALLINT        INT32 INT(16, signed)
//	TINYINT         INT32 INT(8, signed)
//	BOOLEAN         BOOLEAN
//	DOUBLE          DOUBLE
//	FLOAT           FLOAT
//	STRING          BYTE_ARRAY STRING
//	BINARY          BYTE_ARRAY
//	DATE            INT32 DATE (days since the epoch)
//	TIMESTAMP       INT64 TIMESTAMP(MICROS, isAdjustedToUTC=true)
//	TIMESTAMP_NTZ   INT64 TIMESTAMP(MICROS, isAdjustedToUTC=false)
//	DECIMAL(p,s)    DECIMAL(p,s) over INT32 (p <= 9), INT64 (p <= 18), else
//	                FIXED_LEN_BYTE_ARRAY of the fewest bytes that hold
//	                10^p - 1 in two's complement (Decimal.minBytesForPrecision,
//	                columnar.DecimalFixedLen), big-endian
//	ARRAY<T>        Spark's three-level LIST of OPTIONAL elements, T one of
//	                BIGINT, INT, DOUBLE, STRING, BOOLEAN (AppendList)
//
// A TIMESTAMP is INT64 microseconds where Spark's default
// (spark.sql.parquet.outputTimestampType) is INT96: both read back as the
// same instant in Spark. The readers are elsewhere (internal/columnar).
package parquettype

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/ethstream/ethstream/internal/columnar"
	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
)

// arrayElems are the element types of the arrays written, with the Go
// types of their elements (pointers: every element is optional).
var arrayElems = map[stream.Type]reflect.Type{
	stream.String: reflect.TypeOf((*string)(nil)), stream.Int64: reflect.TypeOf((*int64)(nil)),
	stream.Int32: reflect.TypeOf((*int32)(nil)), stream.Float64: reflect.TypeOf((*float64)(nil)),
	stream.Boolean: reflect.TypeOf((*bool)(nil)),
}

// ArrayElem reports whether an ARRAY of elem is written.
func ArrayElem(elem stream.Type) bool {
	_, ok := arrayElems[elem]
	return ok
}

// GoType is the Go type and parquet tag (after the column's name: ",optional"
// and the logical type) of a column of type t in a run-time struct that
// parquet.SchemaOf turns into the file's schema; false for a type no
// writer writes (a DECIMAL without a precision, an ARRAY of another
// element type).
func GoType(t stream.Type) (reflect.Type, string, bool) {
	ptr := func(v any) reflect.Type { return reflect.PointerTo(reflect.TypeOf(v)) }
	switch t.Kind() {
	case stream.Int64:
		return ptr(int64(0)), ",optional", true
	case stream.Int32:
		return ptr(int32(0)), ",optional", true
	case stream.Int16:
		return ptr(int16(0)), ",optional", true
	case stream.Int8:
		return ptr(int8(0)), ",optional", true
	case stream.Boolean:
		return ptr(false), ",optional", true
	case stream.Float64:
		return ptr(float64(0)), ",optional", true
	case stream.Float32:
		return ptr(float32(0)), ",optional", true
	case stream.String:
		return ptr(""), ",optional", true
	case stream.Binary:
		return reflect.TypeOf([]byte(nil)), ",optional", true
	case stream.Date:
		return ptr(int32(0)), ",optional,date", true
	case stream.Timestamp:
		return ptr(int64(0)), ",optional,timestamp(microsecond:utc)", true
	case stream.TimestampNTZ:
		return ptr(int64(0)), ",optional,timestamp(microsecond:local)", true
	case stream.Decimal:
		if t == stream.Decimal {
			return nil, "", false
		}
		tag := fmt.Sprintf(",optional,decimal(%d:%d)", t.Scale(), t.Precision())
		switch {
		case t.Precision() <= 9:
			return ptr(int32(0)), tag, true
		case t.Precision() <= 18:
			return ptr(int64(0)), tag, true
		}
		// parquet-go sizes a tagged array from the precision anyway; the
		// Go type says the same length.
		return reflect.PointerTo(reflect.ArrayOf(columnar.DecimalFixedLen(t.Precision()), reflect.TypeOf(byte(0)))), tag, true
	case stream.Array:
		// []*T tagged list: parquet-go's three-level LIST, optional elements.
		if e, ok := arrayElems[t.Elem()]; ok {
			return reflect.SliceOf(e), ",optional,list", true
		}
	}
	return nil, "", false
}

// Scratch holds the bytes of the values Scratch.Value encodes into bytes
// of their own (a DECIMAL of more than 18 digits, a FIXED_LEN_BYTE_ARRAY),
// reused from one chunk of rows to the next: a value's bytes stay valid
// until Reset. A writer calls Reset once the values were written
// (parquet-go's column buffers copy them); a value per allocation was the
// cost of such a column before. The zero Scratch is ready to use; it is
// not safe for concurrent use.
type Scratch struct{ buf []byte }

// Reset lets the next values reuse the bytes of those encoded so far,
// which must not be read again.
func (s *Scratch) Reset() { s.buf = s.buf[:0] }

// Value is row i of v (not null) as the parquet value of its leaf type t
// (v's type, or an array's element type for its Elems), for one value: a
// wide DECIMAL's bytes are allocated (Scratch.Value reuses them).
func Value(t stream.Type, v *stream.Column, i int) parquet.Value {
	return new(Scratch).Value(t, v, i)
}

// Value is row i of v (not null) as the parquet value of its leaf type t
// (v's type, or an array's element type for its Elems); a wide DECIMAL's
// bytes are s's until s.Reset.
func (s *Scratch) Value(t stream.Type, v *stream.Column, i int) parquet.Value {
	switch t.Kind() {
	case stream.Decimal:
		d := v.Decimals[i]
		switch {
		case t.Precision() <= 9:
			return parquet.Int32Value(int32(d.Lo))
		case t.Precision() <= 18:
			return parquet.Int64Value(int64(d.Lo))
		}
		// Appended past the end: a value encoded before keeps its bytes
		// (when buf grows, they stay in the old array).
		n := len(s.buf)
		s.buf = columnar.AppendDecimalFixed(s.buf, d, columnar.DecimalFixedLen(t.Precision()))
		return parquet.FixedLenByteArrayValue(s.buf[n:len(s.buf):len(s.buf)])
	case stream.Float64:
		return parquet.DoubleValue(v.Float64s[i])
	case stream.Float32:
		return parquet.FloatValue(float32(v.Float64s[i]))
	case stream.String, stream.Binary:
		return parquet.ByteArrayValue(Bytes(v.Strings[i]))
	case stream.Boolean:
		return parquet.BooleanValue(v.Int64s[i] != 0)
	case stream.Int32, stream.Int16, stream.Int8, stream.Date:
		return parquet.Int32Value(int32(v.Int64s[i]))
	}
	return parquet.Int64Value(v.Int64s[i])
}

// Bytes is s's bytes without a copy, for a parquet value that a writer's
// column buffer copies (and that parquet-go never writes to): s outlives
// the call.
func Bytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// AppendList appends row r of the array column v, of elements of type et,
// as the values of leaf c,
// Spark's three-level LIST (optional group (LIST) { repeated group list {
// optional T element } }): definition 0 a null array, 1 an empty one, 2 a
// null element, 3 an element with a value; repetition 0 for the row's
// first value, 1 for its next elements.
func AppendList(dst []parquet.Value, et stream.Type, v *stream.Column, r, c int) []parquet.Value {
	return new(Scratch).AppendList(dst, et, v, r, c)
}

// AppendList is the package's AppendList with the elements' wide DECIMAL
// bytes in s (valid until s.Reset).
func (s *Scratch) AppendList(dst []parquet.Value, et stream.Type, v *stream.Column, r, c int) []parquet.Value {
	from, to := int(v.Offsets[r]), int(v.Offsets[r+1])
	switch {
	case v.IsNull(r):
		return append(dst, parquet.NullValue().Level(0, 0, c))
	case from == to:
		return append(dst, parquet.NullValue().Level(0, 1, c))
	}
	for e := from; e < to; e++ {
		rep := 1
		if e == from {
			rep = 0
		}
		if v.Elems.IsNull(e) {
			dst = append(dst, parquet.NullValue().Level(rep, 2, c))
			continue
		}
		dst = append(dst, s.Value(et, v.Elems, e).Level(rep, 3, c))
	}
	return dst
}
