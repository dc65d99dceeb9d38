package files

import (
	"fmt"
	"reflect"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/columnar"
	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
)

// Parquet types of the columns, as Spark's ParquetWriteSupport writes each
// Spark type (spark.sql.parquet.writeLegacyFormat false, the default),
// every field OPTIONAL:
//
//	BIGINT          INT64 INT(64, signed) (Spark: bare INT64; same reading)
//	INT             INT32 INT(32, signed) (Spark: bare INT32)
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
//	                columnar.DecimalFixedLen),
//	                big-endian
//
// A TIMESTAMP is INT64 microseconds where Spark's default
// (spark.sql.parquet.outputTimestampType) is INT96: both read back as the
// same instant in Spark (docs/contracts.md, File sink (Parquet)). An ARRAY
// of BIGINT, INT, DOUBLE, STRING or BOOLEAN is Spark's three-level LIST of
// OPTIONAL elements (parquet.go, appendList); other arrays are refused.

// goType is the Go type and parquet tag of a column of type t, for
// parquetSchema's run-time struct.
func goType(t stream.Type) (reflect.Type, string, error) {
	ptr := func(v any) reflect.Type { return reflect.PointerTo(reflect.TypeOf(v)) }
	switch t.Kind() {
	case stream.Int64:
		return ptr(int64(0)), ",optional", nil
	case stream.Int32:
		return ptr(int32(0)), ",optional", nil
	case stream.Int16:
		return ptr(int16(0)), ",optional", nil
	case stream.Int8:
		return ptr(int8(0)), ",optional", nil
	case stream.Boolean:
		return ptr(false), ",optional", nil
	case stream.Float64:
		return ptr(float64(0)), ",optional", nil
	case stream.Float32:
		return ptr(float32(0)), ",optional", nil
	case stream.String:
		return ptr(""), ",optional", nil
	case stream.Binary:
		return reflect.TypeOf([]byte(nil)), ",optional", nil
	case stream.Date:
		return ptr(int32(0)), ",optional,date", nil
	case stream.Timestamp:
		return ptr(int64(0)), ",optional,timestamp(microsecond:utc)", nil
	case stream.TimestampNTZ:
		return ptr(int64(0)), ",optional,timestamp(microsecond:local)", nil
	case stream.Decimal:
		if t == stream.Decimal {
			break
		}
		tag := fmt.Sprintf(",optional,decimal(%d:%d)", t.Scale(), t.Precision())
		switch {
		case t.Precision() <= 9:
			return ptr(int32(0)), tag, nil
		case t.Precision() <= 18:
			return ptr(int64(0)), tag, nil
		}
		return reflect.PointerTo(reflect.ArrayOf(columnar.DecimalFixedLen(t.Precision()), reflect.TypeOf(byte(0)))), tag, nil
	}
	if t.Kind() == stream.Array {
		// []*T tagged list: parquet-go's three-level LIST, optional elements.
		elems := map[stream.Type]reflect.Type{stream.Int64: ptr(int64(0)), stream.Int32: ptr(int32(0)),
			stream.Float64: ptr(float64(0)), stream.String: ptr(""), stream.Boolean: ptr(false)}
		if e, ok := elems[t.Elem()]; ok {
			return reflect.SliceOf(e), ",optional,list", nil
		}
	}
	return nil, "", errcode.New(errcode.InvalidArgument, "", "emit scalar columns or arrays of bigint, int, double, string or boolean (explode or cast other arrays first)",
		"output column type %s cannot be written by the file sink", t)
}

// value is the non-null row r of column v as a parquet value.
func value(v *stream.Column, r int) parquet.Value {
	t := v.Type
	switch t.Kind() {
	case stream.Float64:
		return parquet.DoubleValue(v.Float64s[r])
	case stream.Float32:
		return parquet.FloatValue(float32(v.Float64s[r]))
	case stream.String, stream.Binary:
		return parquet.ByteArrayValue([]byte(v.Strings[r]))
	case stream.Boolean:
		return parquet.BooleanValue(v.Int64s[r] != 0)
	case stream.Int32, stream.Int16, stream.Int8, stream.Date:
		return parquet.Int32Value(int32(v.Int64s[r]))
	case stream.Decimal:
		d := v.Decimals[r]
		switch {
		case t.Precision() <= 9:
			return parquet.Int32Value(int32(d.Lo))
		case t.Precision() <= 18:
			return parquet.Int64Value(int64(d.Lo))
		}
		return parquet.FixedLenByteArrayValue(columnar.AppendDecimalFixed(nil, d, columnar.DecimalFixedLen(t.Precision())))
	}
	return parquet.Int64Value(v.Int64s[r])
}
