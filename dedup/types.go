package dedup

import "github.com/ethstream/ethstream/stream"

// Key fields of every scalar type. A deduplication column is keyed by its
// storage class, as the aggregation keys a group column (agg/types.go):
//
//	BIGINT, TIMESTAMP, BOOLEAN, TINYINT, SMALLINT, INT, DATE,
//	TIMESTAMP_NTZ     a nullable Int64 key (null first)
//	STRING, BINARY    a String key of the value's bytes (state's null
//	                  String key for a null)
//	DECIMAL(p,s)      a String key of its 16 order-preserving bytes
//	                  (stream.Dec128.AppendKey)
//	DOUBLE, FLOAT     a Float64 key (a null is refused, as before)
//
// The state schema records TINYINT, SMALLINT and INT as int64, FLOAT as
// float64 and TIMESTAMP_NTZ as timestamp (state.RecordedType): a DDL INT column was a
// BIGINT before the engine had INT, so a checkpoint written then restarts
// with the same schema. An ARRAY column is refused.

// keyClass is the key encoding of a column of type t (Int64, String,
// Float64), 0 for a type that cannot be a key.
func keyClass(t stream.Type) stream.Type {
	switch t.Kind() {
	case stream.Int64, stream.Timestamp, stream.Boolean, stream.Int8, stream.Int16, stream.Int32, stream.Date, stream.TimestampNTZ:
		return stream.Int64
	case stream.String, stream.Binary:
		return stream.String
	case stream.Decimal:
		if t != stream.Decimal {
			return stream.String
		}
	case stream.Float64, stream.Float32:
		return stream.Float64
	}
	return 0
}
