package agg

import (
	"fmt"
	"math"

	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// Group keys for an operator that forms its own groups (package session),
// in the grouped aggregation's state key encoding (StateFormat2): a STRING
// or BINARY is state's string key (null: AppendNullStringKey), a DECIMAL
// the string key of its 16 order-preserving bytes, a FLOAT or DOUBLE a
// null marker then its normalised IEEE bits, every integer-like type
// (BIGINT, INT, SMALLINT, TINYINT, BOOLEAN, DATE, TIMESTAMP) a nullable
// long (AppendNullableInt64Key).

// CheckGroupKey returns DATATYPE_MISMATCH when a column of type t cannot be
// a group key.
func CheckGroupKey(t stream.Type) error { return groupable(t) }

// GroupKeyField is the state key field of group column name of type t.
func GroupKeyField(name string, t stream.Type) state.Field {
	return state.Field{Name: name, Type: state.RecordedType(t), Nullable: !strKeyType(t)}
}

// strKeyType reports whether a group key of type t uses the strings path.
func strKeyType(t stream.Type) bool {
	return t.Storage() == stream.String || t.Kind() == stream.Decimal
}

// AppendGroupKey appends row i of group column c in GroupKeyField's
// encoding.
func AppendGroupKey(dst []byte, c *stream.Column, i int) []byte {
	null := c.IsNull(i)
	switch {
	case strKeyType(c.Type) && null:
		return state.AppendNullStringKey(dst)
	case c.Type.Kind() == stream.Decimal:
		return state.AppendStringKey(dst, string(c.Decimals[i].AppendKey(nil)))
	case strKeyType(c.Type):
		return state.AppendStringKey(dst, c.Strings[i])
	case c.Type.Storage() == stream.Float64 && null:
		return append(dst, 0x00) // a nullable float key's null (state, Key encoding)
	case c.Type.Storage() == stream.Float64:
		return state.AppendFloat64Key(append(dst, 0x01), math.Float64frombits(uint64(floatKeyBits(c.Float64s[i]))))
	}
	return state.AppendNullableInt64Key(dst, c.Int64s[i], null)
}

// AppendGroupValue appends to c (a column of the group's type) the value
// state.DecodeKey returned for its GroupKeyField, nil for a null, which
// the caller marks in c.Valid.
func AppendGroupValue(c *stream.Column, v any) error {
	switch {
	case c.Type.Kind() == stream.Decimal:
		var d stream.Dec128
		if s, ok := v.(string); ok && len(s) == 16 {
			d = stream.Dec128FromKey([]byte(s))
		} else if v != nil {
			return fmt.Errorf("group key %s is %T, want 16 bytes", c.Name, v)
		}
		c.Decimals = append(c.Decimals, d)
	case c.Type.Storage() == stream.String:
		s, ok := v.(string)
		if !ok && v != nil {
			return fmt.Errorf("group key %s is %T", c.Name, v)
		}
		c.Strings = append(c.Strings, s)
	case c.Type.Storage() == stream.Float64:
		f, ok := v.(float64)
		if !ok && v != nil {
			return fmt.Errorf("group key %s is %T", c.Name, v)
		}
		c.Float64s = append(c.Float64s, f)
	default:
		n, ok := v.(int64)
		if !ok && v != nil {
			return fmt.Errorf("group key %s is %T", c.Name, v)
		}
		c.Int64s = append(c.Int64s, n)
	}
	return nil
}
