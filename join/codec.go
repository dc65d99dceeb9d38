package join

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// Column names of the join's state rows (doc.go, State layout), and the
// names of its stores, Spark's.
const (
	ColSide  = "side"
	ColStore = "store"
	ColIndex = "index"
	ColValue = "value"

	StoreKeyToNumValues      = "keyToNumValues"
	StoreKeyWithIndexToValue = "keyWithIndexToValue"
)

// row is one side's row: int64 (Int64, Timestamp, Boolean, Int32, Date),
// float64, string or nil for a null, in the side's schema order.
type row []any

// rowAt reads row i of the side's columns.
func rowAt(cols []*stream.Column, i int) row {
	r := make(row, len(cols))
	for j, c := range cols {
		switch {
		case c.IsNull(i):
		case c.Type.Storage() == stream.Float64:
			r[j] = c.Float64s[i]
		case c.Type.Storage() == stream.String:
			r[j] = c.Strings[i]
		default:
			r[j] = c.Int64s[i]
		}
	}
	return r
}

// stateKey encodes a state row's key: side, store, the join key (already
// encoded, keyBytes) and the index (null for keyToNumValues).
func stateKey(dst []byte, side int, store string, keyBytes []byte, index int64, hasIndex bool) []byte {
	dst = state.AppendStringKey(dst, sideName(side))
	dst = state.AppendStringKey(dst, store)
	dst = append(dst, keyBytes...)
	return state.AppendNullableInt64Key(dst, index, !hasIndex)
}

// stateKeyPrefix is the bytes every key of (side, store) starts with.
func stateKeyPrefix(side int, store string) []byte {
	return state.AppendStringKey(state.AppendStringKey(nil, sideName(side)), store)
}

// encodeJoinKey encodes a row's join key columns (keys: column indexes)
// with the state's order-preserving encoding; null reports a null in any.
func encodeJoinKey(dst []byte, r row, keys []int, types []stream.Type) (b []byte, null bool) {
	for k, j := range keys {
		v := r[j]
		if v == nil {
			null = true
		}
		if stateType(types[k]) == stream.String {
			if v == nil {
				dst = state.AppendNullStringKey(dst)
			} else {
				dst = state.AppendStringKey(dst, v.(string))
			}
			continue
		}
		var x int64
		if v != nil {
			x = v.(int64)
		}
		dst = state.AppendNullableInt64Key(dst, x, v == nil)
	}
	return dst, null
}

// encodeCount is a keyToNumValues value.
func encodeCount(n int64) []byte {
	return state.AppendStringValue(nil, `{"value":`+strconv.FormatInt(n, 10)+`}`)
}

// decodeCount reads a keyToNumValues value.
func decodeCount(val []byte) (int64, error) {
	if n, ok := fastDecodeCount(val); ok {
		return n, nil
	}
	return decodeCountJSON(val)
}

// decodeCountJSON is decodeCount by encoding/json, for any text.
func decodeCountJSON(val []byte) (int64, error) {
	s, err := stringValue(val)
	if err != nil {
		return 0, err
	}
	var v struct {
		Value *int64 `json:"value"`
	}
	if err := json.Unmarshal([]byte(s), &v); err != nil || v.Value == nil || *v.Value < 0 {
		return 0, fmt.Errorf("malformed %s value %q", StoreKeyToNumValues, s)
	}
	return *v.Value, nil
}

// encodeRow is a keyWithIndexToValue value: the row as a JSON object in
// the side's column order, then "matched".
func encodeRow(fields []stream.Field, r row, matched bool) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for j, f := range fields {
		b.Write(strconv.AppendQuote(nil, f.Name))
		b.WriteByte(':')
		switch v := r[j].(type) {
		case nil:
			b.WriteString("null")
		case int64:
			b.WriteString(strconv.FormatInt(v, 10))
		case float64:
			if math.IsNaN(v) || math.IsInf(v, 0) {
				b.WriteString(strconv.Quote(strconv.FormatFloat(v, 'g', -1, 64)))
			} else {
				b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
			}
		case string:
			if !utf8.ValidString(v) {
				return nil, fmt.Errorf("column %q holds a string that is not UTF-8, which the join's state cannot keep", f.Name)
			}
			enc, _ := json.Marshal(v)
			b.Write(enc)
		}
		b.WriteByte(',')
	}
	b.WriteString(`"matched":` + strconv.FormatBool(matched) + "}")
	return state.AppendStringValue(nil, b.String()), nil
}

// decodeRow reads a keyWithIndexToValue value by the side's fields; fast
// is fastNames(fields), computed once per side by the caller.
func decodeRow(fields []stream.Field, fast bool, val []byte) (row, bool, error) {
	if fast {
		if r, m, ok := fastDecodeRow(fields, val); ok {
			return r, m, nil
		}
	}
	return decodeRowJSON(fields, val)
}

// decodeRowJSON is decodeRow by encoding/json, for any text.
func decodeRowJSON(fields []stream.Field, val []byte) (row, bool, error) {
	s, err := stringValue(val)
	if err != nil {
		return nil, false, err
	}
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, false, fmt.Errorf("malformed %s value: %w", StoreKeyWithIndexToValue, err)
	}
	var matched bool
	if err := json.Unmarshal(m["matched"], &matched); err != nil {
		return nil, false, fmt.Errorf("malformed %s value: no matched flag", StoreKeyWithIndexToValue)
	}
	r := make(row, len(fields))
	for j, f := range fields {
		raw, ok := m[f.Name]
		if !ok {
			return nil, false, fmt.Errorf("%s value has no column %q", StoreKeyWithIndexToValue, f.Name)
		}
		if string(raw) == "null" {
			continue
		}
		switch f.Type.Storage() {
		case stream.String:
			var v string
			err = json.Unmarshal(raw, &v)
			r[j] = v
		case stream.Float64:
			var v float64
			if raw[0] == '"' {
				var t string
				if err = json.Unmarshal(raw, &t); err == nil {
					v, err = strconv.ParseFloat(t, 64)
				}
			} else {
				v, err = strconv.ParseFloat(string(raw), 64)
			}
			r[j] = v
		default:
			var v int64
			v, err = strconv.ParseInt(string(raw), 10, 64)
			r[j] = v
		}
		if err != nil {
			return nil, false, fmt.Errorf("%s value: column %q: %w", StoreKeyWithIndexToValue, f.Name, err)
		}
	}
	return r, matched, nil
}

func stringValue(val []byte) (string, error) {
	vals, err := state.DecodeValue([]state.Field{{Name: ColValue, Type: stream.String}}, val)
	if err != nil {
		return "", err
	}
	return vals[0].(string), nil
}
