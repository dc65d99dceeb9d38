package files

import (
	"reflect"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/parquettype"
	"github.com/ethstream/ethstream/stream"
)

// The part files' columns have the Parquet types Spark writes, laid out by
// package parquettype (the Delta sink's data files too), every field
// OPTIONAL. A TIMESTAMP is INT64 microseconds where Spark's default
// (spark.sql.parquet.outputTimestampType) is INT96: both read back as the
// same instant in Spark (docs/contracts.md, File sink (Parquet)). An ARRAY
// of BIGINT, INT, DOUBLE, STRING or BOOLEAN is Spark's three-level LIST of
// OPTIONAL elements; other arrays are refused.

// goType is the Go type and parquet tag of a column of type t, for
// parquetSchema's run-time struct; INVALID_ARGUMENT for a type the sink
// does not write.
func goType(t stream.Type) (reflect.Type, string, error) {
	if rt, tag, ok := parquettype.GoType(t); ok {
		return rt, tag, nil
	}
	return nil, "", errcode.New(errcode.InvalidArgument, "", "emit scalar columns or arrays of bigint, int, double, string or boolean (explode or cast other arrays first)",
		"output column type %s cannot be written by the file sink", t)
}
