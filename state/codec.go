package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/ethstream/ethstream/stream"
)

// Field describes one column of a key or value row.
type Field struct {
	Name string      `json:"name"`
	Type stream.Type `json:"type"` // any scalar type; encoded by its class (encClass)
	// Nullable (Int64 and Timestamp key fields only) gives the field a null:
	// its key encoding gains a marker byte (see the key encoding below).
	// Schemas recorded before it existed have none, and read as they did.
	Nullable bool `json:"nullable,omitempty"`
}

// RecordedType is the type a key or value field of type t is recorded with
// in a Schema: the integer kinds narrower than BIGINT, FLOAT and
// TIMESTAMP_NTZ keep the names BIGINT, DOUBLE and TIMESTAMP under which the
// engine held them before it had their own types (a DDL INT column was a
// BIGINT), so those checkpoints restart; their encoding is the same.
func RecordedType(t stream.Type) stream.Type {
	switch t {
	case stream.Int8, stream.Int16, stream.Int32:
		return stream.Int64
	case stream.Float32:
		return stream.Float64
	case stream.TimestampNTZ:
		return stream.Timestamp
	}
	return t
}

// Schema is recorded in every version's metadata file and checked on Open: a
// checkpoint written by one operator definition is never read by another.
type Schema struct {
	OperatorName string  `json:"operatorName"` // e.g. "stateStoreSave"
	Key          []Field `json:"key"`          // key fields in encoding order
	Value        []Field `json:"value"`        // value fields in encoding order
	Spec         string  `json:"spec"`         // free text the operator wants checked too
}

// Equal reports whether s and o describe the same state layout.
func (s Schema) Equal(o Schema) bool {
	if s.OperatorName != o.OperatorName || s.Spec != o.Spec ||
		len(s.Key) != len(o.Key) || len(s.Value) != len(o.Value) {
		return false
	}
	for i := range s.Key {
		if s.Key[i] != o.Key[i] {
			return false
		}
	}
	for i := range s.Value {
		if s.Value[i] != o.Value[i] {
			return false
		}
	}
	return true
}

// String renders the schema on one line for error messages, e.g.
// "aggregate key(window_end timestamp, miner string) value(count int64) spec(window=5m)".
func (s Schema) String() string {
	b := []byte(s.OperatorName)
	b = append(b, " key("...)
	b = appendFields(b, s.Key)
	b = append(b, ") value("...)
	b = appendFields(b, s.Value)
	b = append(b, ") spec("...)
	b = append(b, s.Spec...)
	b = append(b, ')')
	return string(b)
}

func appendFields(b []byte, fs []Field) []byte {
	for i, f := range fs {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, f.Name...)
		b = append(b, ' ')
		b = append(b, f.Type.String()...)
		if f.Nullable {
			b = append(b, " nullable"...)
		}
	}
	return b
}

func (s Schema) validate() error {
	if len(s.Key) == 0 {
		return errors.New("state schema has no key fields")
	}
	for _, fs := range [][]Field{s.Key, s.Value} {
		for _, f := range fs {
			if encClass(f.Type) == 0 {
				return fmt.Errorf("state schema field %q has unsupported type %v", f.Name, f.Type)
			}
		}
	}
	for _, f := range s.Value {
		if f.Nullable {
			return fmt.Errorf("state schema value field %q is nullable: only Int64 and Timestamp key fields may be", f.Name)
		}
	}
	for _, f := range s.Key {
		if f.Nullable && encClass(f.Type) != stream.Int64 && encClass(f.Type) != stream.Float64 {
			return fmt.Errorf("state schema key field %q (%v) is nullable: only integer, timestamp and float key fields may be (a String key always has a null)", f.Name, f.Type)
		}
	}
	return nil
}

// encClass is the encoding a field of type t uses, by the three classes
// below; 0 for a type the state does not hold (an array). The type itself
// is recorded by name in the schema (Field.MarshalJSON), so a state whose
// schema names a type an older version does not know is refused there,
// and the names recorded before the new types existed read unchanged.
//
//	Int64      int64, timestamp, boolean (0/1), tinyint, smallint, int,
//	           date (days), timestamp_ntz
//	Float64    float64, float
//	String     string, binary (its bytes), decimal(p,s): the 16 bytes of
//	           stream.Dec128.AppendKey, order-preserving
func encClass(t stream.Type) stream.Type {
	switch t.Kind() {
	case stream.Array, 0:
		return 0
	case stream.Decimal:
		if t == stream.Decimal {
			return 0 // a decimal without its precision
		}
		return stream.String
	}
	switch t.Storage() {
	case stream.Float64:
		return stream.Float64
	case stream.String:
		return stream.String
	case stream.Int64:
		if _, ok := int64Kinds[t]; ok {
			return stream.Int64
		}
	}
	return 0
}

// int64Kinds are the kinds of the Int64 class.
var int64Kinds = map[stream.Type]bool{stream.Int64: true, stream.Timestamp: true, stream.Boolean: true,
	stream.Int8: true, stream.Int16: true, stream.Int32: true, stream.Date: true, stream.TimestampNTZ: true}

// Key encoding. It is order-preserving: bytes.Compare on two encoded keys
// orders them like a field-by-field comparison of the values, so a range scan
// over a key prefix (agg evicts [min, enc(watermark)) on the leading
// window_end field) is a plain Pebble range.
//
//	Int64, Timestamp  8 bytes big-endian of uint64(v) XOR 1<<63
//	Float64           8 bytes big-endian of the IEEE bits, all bits flipped
//	                  for negatives, only the sign bit flipped otherwise
//	String            the bytes with 0x00 escaped as 0x00 0xFF, then 0x00 0x01
//	null String       0x00 0x00 (a null group key; it sorts before every
//	                  string, as Spark's NULLS FIRST)
//
//	nullable Int64,   0x00 for a null (sorting before every value, NULLS
//	  Timestamp,      FIRST), else 0x01 then the 8 bytes above
//	  Float64 (a nullable Float64 key exists only in schemas naming
//	  the types added with it, so no earlier key holds the marker)
//
// The null String form was added after the others: a key written before
// never holds 0x00 0x00 (every 0x00 was followed by 0xFF or 0x01), so old
// files read unchanged. A nullable Int64 or Timestamp field is declared in
// the schema (Field.Nullable), so the fields of schemas recorded before it
// keep their 8 bytes. A null Float64 key is not representable.
const (
	strEscape = 0x00
	strEscNul = 0xFF
	strEnd    = 0x01
	strNull   = 0x00
)

// AppendNullStringKey appends the encoding of a null String key field;
// DecodeKey returns it as a nil field.
func AppendNullStringKey(dst []byte) []byte { return append(dst, strEscape, strNull) }

// Markers of a nullable Int64 or Timestamp key field.
const (
	keyNull    = 0x00
	keyPresent = 0x01
)

// AppendNullableInt64Key appends a nullable Int64 or Timestamp key field
// (Field.Nullable): null, or v.
func AppendNullableInt64Key(dst []byte, v int64, null bool) []byte {
	if null {
		return append(dst, keyNull)
	}
	return AppendInt64Key(append(dst, keyPresent), v)
}

// AppendInt64Key appends the order-preserving encoding of v to dst.
func AppendInt64Key(dst []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(v)^(1<<63))
}

// AppendTimestampKey appends a timestamp (µs since the epoch, UTC) to dst; it is
// AppendInt64Key under another name.
func AppendTimestampKey(dst []byte, micros int64) []byte { return AppendInt64Key(dst, micros) }

// AppendFloat64Key appends the order-preserving encoding of v to dst. -0 and +0
// encode differently (-0 sorts first); NaNs sort beyond ±Inf by their bits.
func AppendFloat64Key(dst []byte, v float64) []byte {
	u := math.Float64bits(v)
	if u&(1<<63) != 0 {
		u = ^u
	} else {
		u |= 1 << 63
	}
	return binary.BigEndian.AppendUint64(dst, u)
}

// AppendStringKey appends the escaped, terminated encoding of v to dst.
// It copies the runs between escapes whole: the byte-at-a-time loop it
// replaced was 6% of a seed backfill's CPU (one call per group per batch,
// on the aggregation's serial Finish).
func AppendStringKey(dst []byte, v string) []byte {
	for {
		i := strings.IndexByte(v, strEscape)
		if i < 0 {
			break
		}
		dst = append(append(dst, v[:i]...), strEscape, strEscNul)
		v = v[i+1:]
	}
	return append(append(dst, v...), strEscape, strEnd)
}

// Value encoding: not order-preserving, compact.
//
//	Int64, Timestamp  zig-zag varint (encoding/binary.AppendVarint)
//	Float64           8 bytes little-endian IEEE bits
//	String            uvarint length, then the bytes

// AppendInt64Value appends v to a value row.
func AppendInt64Value(dst []byte, v int64) []byte { return binary.AppendVarint(dst, v) }

// AppendTimestampValue appends a timestamp (µs, UTC) to a value row.
func AppendTimestampValue(dst []byte, micros int64) []byte { return binary.AppendVarint(dst, micros) }

// AppendFloat64Value appends v to a value row.
func AppendFloat64Value(dst []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
}

// AppendStringValue appends v to a value row.
func AppendStringValue(dst []byte, v string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

// EncodeKey appends the key row vals, typed by the store's key schema, to dst.
// It accepts int64/int for Int64, int64 (µs) or time.Time for Timestamp,
// float64 for Float64 and string for String; anything else panics (a bug).
func (s *Store) EncodeKey(dst []byte, vals ...any) []byte {
	return EncodeKeyRow(dst, s.schema.Key, vals...)
}

// EncodeValue appends the value row vals, typed by the store's value schema.
func (s *Store) EncodeValue(dst []byte, vals ...any) []byte {
	return EncodeValueRow(dst, s.schema.Value, vals...)
}

// EncodeKeyRow is EncodeKey for an explicit field list.
func EncodeKeyRow(dst []byte, fields []Field, vals ...any) []byte {
	if len(vals) != len(fields) {
		panic(fmt.Sprintf("state: %d key values for %d key fields", len(vals), len(fields)))
	}
	for i, f := range fields {
		switch encClass(f.Type) {
		case stream.Int64:
			if f.Nullable {
				if vals[i] == nil {
					dst = AppendNullableInt64Key(dst, 0, true)
					continue
				}
				dst = AppendNullableInt64Key(dst, toInt64(f, vals[i]), false)
				continue
			}
			dst = AppendInt64Key(dst, toInt64(f, vals[i]))
		case stream.Float64:
			if f.Nullable {
				if vals[i] == nil {
					dst = append(dst, keyNull)
					continue
				}
				dst = append(dst, keyPresent)
			}
			dst = AppendFloat64Key(dst, toFloat64(f, vals[i]))
		case stream.String:
			if vals[i] == nil {
				dst = AppendNullStringKey(dst)
				continue
			}
			dst = AppendStringKey(dst, toString(f, vals[i]))
		default:
			panic(fmt.Sprintf("state: field %q has unsupported type %v", f.Name, f.Type))
		}
	}
	return dst
}

// EncodeValueRow appends a value row typed by fields to dst (see EncodeKey for
// the accepted Go types).
func EncodeValueRow(dst []byte, fields []Field, vals ...any) []byte {
	if len(vals) != len(fields) {
		panic(fmt.Sprintf("state: %d values for %d value fields", len(vals), len(fields)))
	}
	for i, f := range fields {
		switch encClass(f.Type) {
		case stream.Int64:
			dst = AppendInt64Value(dst, toInt64(f, vals[i]))
		case stream.Float64:
			dst = AppendFloat64Value(dst, toFloat64(f, vals[i]))
		case stream.String:
			dst = AppendStringValue(dst, toString(f, vals[i]))
		default:
			panic(fmt.Sprintf("state: field %q has unsupported type %v", f.Name, f.Type))
		}
	}
	return dst
}

func toInt64(f Field, v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case int:
		return int64(x)
	case time.Time:
		if f.Type == stream.Timestamp {
			return x.UnixMicro()
		}
	}
	panic(fmt.Sprintf("state: field %q (%v) given %T", f.Name, f.Type, v))
}

func toFloat64(f Field, v any) float64 {
	if x, ok := v.(float64); ok {
		return x
	}
	panic(fmt.Sprintf("state: field %q (%v) given %T", f.Name, f.Type, v))
}

func toString(f Field, v any) string {
	if x, ok := v.(string); ok {
		return x
	}
	panic(fmt.Sprintf("state: field %q (%v) given %T", f.Name, f.Type, v))
}

// errMalformedRow is wrapped by the row decoders.
var errMalformedRow = errors.New("malformed state row")

// DecodeKey decodes an encoded key row. Int64 and Timestamp fields decode to
// int64 (Timestamp in µs since the epoch, UTC), Float64 to float64 and String
// to string; a null String (AppendNullStringKey) or a null of a nullable
// field to nil.
func DecodeKey(schema []Field, key []byte) ([]any, error) {
	out := make([]any, 0, len(schema))
	for _, f := range schema {
		if f.Nullable && encClass(f.Type) == stream.Float64 {
			if len(key) < 1 || (key[0] != keyNull && key[0] != keyPresent) {
				return nil, fmt.Errorf("%w: nullable key field %q has no null marker", errMalformedRow, f.Name)
			}
			null := key[0] == keyNull
			key = key[1:]
			if null {
				out = append(out, nil)
				continue
			}
		}
		switch encClass(f.Type) {
		case stream.Int64:
			if f.Nullable {
				if len(key) < 1 || (key[0] != keyNull && key[0] != keyPresent) {
					return nil, fmt.Errorf("%w: nullable key field %q has no null marker", errMalformedRow, f.Name)
				}
				null := key[0] == keyNull
				key = key[1:]
				if null {
					out = append(out, nil)
					continue
				}
			}
			if len(key) < 8 {
				return nil, fmt.Errorf("%w: key field %q truncated", errMalformedRow, f.Name)
			}
			out = append(out, int64(binary.BigEndian.Uint64(key)^(1<<63)))
			key = key[8:]
		case stream.Float64:
			if len(key) < 8 {
				return nil, fmt.Errorf("%w: key field %q truncated", errMalformedRow, f.Name)
			}
			u := binary.BigEndian.Uint64(key)
			if u&(1<<63) != 0 {
				u &^= 1 << 63
			} else {
				u = ^u
			}
			out = append(out, math.Float64frombits(u))
			key = key[8:]
		case stream.String:
			if len(key) >= 2 && key[0] == strEscape && key[1] == strNull {
				out = append(out, nil)
				key = key[2:]
				continue
			}
			var b []byte
			done := false
			i := 0
			for !done && i < len(key) {
				c := key[i]
				if c != strEscape {
					b = append(b, c)
					i++
					continue
				}
				if i+1 >= len(key) || (key[i+1] != strEscNul && key[i+1] != strEnd) {
					break
				}
				if key[i+1] == strEnd {
					done = true
				} else {
					b = append(b, 0)
				}
				i += 2
			}
			if !done {
				return nil, fmt.Errorf("%w: key field %q has a bad string encoding", errMalformedRow, f.Name)
			}
			key = key[i:]
			out = append(out, string(b))
		default:
			return nil, fmt.Errorf("%w: key field %q has unsupported type %v", errMalformedRow, f.Name, f.Type)
		}
	}
	if len(key) != 0 {
		return nil, fmt.Errorf("%w: %d trailing key bytes", errMalformedRow, len(key))
	}
	return out, nil
}

// DecodeValue decodes an encoded value row (types as in DecodeKey).
func DecodeValue(schema []Field, val []byte) ([]any, error) {
	out := make([]any, 0, len(schema))
	for _, f := range schema {
		switch encClass(f.Type) {
		case stream.Int64:
			v, n := binary.Varint(val)
			if n <= 0 {
				return nil, fmt.Errorf("%w: value field %q truncated", errMalformedRow, f.Name)
			}
			out = append(out, v)
			val = val[n:]
		case stream.Float64:
			if len(val) < 8 {
				return nil, fmt.Errorf("%w: value field %q truncated", errMalformedRow, f.Name)
			}
			out = append(out, math.Float64frombits(binary.LittleEndian.Uint64(val)))
			val = val[8:]
		case stream.String:
			l, n := binary.Uvarint(val)
			if n <= 0 || l > uint64(len(val)-n) {
				return nil, fmt.Errorf("%w: value field %q truncated", errMalformedRow, f.Name)
			}
			out = append(out, string(val[n:n+int(l)]))
			val = val[n+int(l):]
		default:
			return nil, fmt.Errorf("%w: value field %q has unsupported type %v", errMalformedRow, f.Name, f.Type)
		}
	}
	if len(val) != 0 {
		return nil, fmt.Errorf("%w: %d trailing value bytes", errMalformedRow, len(val))
	}
	return out, nil
}

// PartitionOf is the stable key -> partition function: FNV-1a 64 over the
// encoded key bytes (offset basis 14695981039346656037, prime 1099511628211),
// modulo n. It is part of the checkpoint format and never changes: snapshot and
// delta records carry their partition and readers verify it against this.
func PartitionOf(key []byte, n int) int {
	if n <= 0 {
		panic(fmt.Sprintf("state: PartitionOf with %d partitions", n))
	}
	return int(keyHash(key) % uint64(n))
}
