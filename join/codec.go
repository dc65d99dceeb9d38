package join

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

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

// formatBinary is the first byte of a format-2 value's text (doc.go, State
// layout); a format-1 value is a JSON object, whose text starts with '{'.
const formatBinary = 0x02

// stateKey encodes a state row's key: side, store, the join key (already
// encoded, keyBytes) and the index (null for keyToNumValues).
func stateKey[K []byte | string](dst []byte, side int, store string, keyBytes K, index int64, hasIndex bool) []byte {
	dst = append(dst, keyPrefixOf(side, store)...)
	dst = append(dst, keyBytes...)
	return state.AppendNullableInt64Key(dst, index, !hasIndex)
}

// keyPrefixes are stateKeyPrefix of each side and store ([side][0]
// keyToNumValues, [side][1] keyWithIndexToValue), encoded once: a batch
// encodes four state keys a stored row.
var keyPrefixes = func() (p [2][2][]byte) {
	for side := range p {
		p[side][0] = encodeKeyPrefix(side, StoreKeyToNumValues)
		p[side][1] = encodeKeyPrefix(side, StoreKeyWithIndexToValue)
	}
	return p
}()

// keyPrefixOf is stateKeyPrefix, shared: read only.
func keyPrefixOf(side int, store string) []byte {
	switch store {
	case StoreKeyToNumValues:
		return keyPrefixes[side][0]
	case StoreKeyWithIndexToValue:
		return keyPrefixes[side][1]
	}
	return encodeKeyPrefix(side, store)
}

// stateKeyPrefix is the bytes every key of (side, store) starts with.
func stateKeyPrefix(side int, store string) []byte {
	return slices.Clone(keyPrefixOf(side, store))
}

func encodeKeyPrefix(side int, store string) []byte {
	return state.AppendStringKey(state.AppendStringKey(nil, sideName(side)), store)
}

// encodeJoinKey encodes a row's join key columns (keys: column indexes)
// with the state's order-preserving encoding; null reports a null in any.
func encodeJoinKey(dst []byte, r row, keys []int, types []stream.Type) (b []byte, null bool) {
	for k, j := range keys {
		v := r[j]
		null = null || v.null()
		if stateType(types[k]) == stream.String {
			if v.null() {
				dst = state.AppendNullStringKey(dst)
			} else {
				dst = state.AppendStringKey(dst, v.s())
			}
			continue
		}
		dst = state.AppendNullableInt64Key(dst, v.i(), v.null())
	}
	return dst, null
}

// encodeCount is a keyToNumValues value, format 2: the tag, then the
// count as a uvarint.
func encodeCount(n int64) []byte { return appendCount(nil, n) }

// appendCount appends encodeCount(n) to dst.
func appendCount(dst []byte, n int64) []byte {
	m := uvarintLen(uint64(n))
	dst = binary.AppendUvarint(dst, uint64(1+m)) // the state's string length
	dst = append(dst, formatBinary)
	return binary.AppendUvarint(dst, uint64(n))
}

// decodeCount reads a keyToNumValues value of either format.
func decodeCount(val []byte) (int64, error) {
	if s, ok := fastStringValue(val); ok && len(s) > 0 && s[0] == formatBinary {
		n, m := binary.Uvarint([]byte(s[1:]))
		if m <= 0 || m != len(s)-1 || n > math.MaxInt64 {
			return 0, fmt.Errorf("malformed %s value %x", StoreKeyToNumValues, s)
		}
		return int64(n), nil
	}
	if n, ok := fastDecodeCount(val); ok {
		return n, nil
	}
	return decodeCountJSON(val)
}

// decodeCountJSON is decodeCount by encoding/json, for any format-1 text.
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

// encodeRow is a keyWithIndexToValue value, format 2 (doc.go, State
// layout): the tag, the matched flag, a null bitmap, then each non-null
// column by its storage with the state's value encodings.
func encodeRow(dst []byte, fields []stream.Field, r row, matched bool) []byte {
	nb := (len(fields) + 7) / 8
	size := 2 + nb
	for j, f := range fields {
		switch v := r[j]; {
		case v.null():
		case f.Type.Storage() == stream.Float64:
			size += 8
		case f.Type.Storage() == stream.String:
			size += uvarintLen(uint64(v.n)) + int(v.n)
		default:
			size += uvarintLen(uint64(v.n<<1) ^ uint64(v.n>>63))
		}
	}
	dst = binary.AppendUvarint(dst, uint64(size))
	var flags byte
	if matched {
		flags = 1
	}
	dst = append(dst, formatBinary, flags)
	nulls := len(dst)
	for range nb {
		dst = append(dst, 0)
	}
	for j, f := range fields {
		v := r[j]
		switch {
		case v.null():
			dst[nulls+j/8] |= 1 << (j % 8)
		case f.Type.Storage() == stream.Float64:
			dst = state.AppendFloat64Value(dst, v.float())
		case f.Type.Storage() == stream.String:
			dst = state.AppendStringValue(dst, v.s())
		default:
			dst = state.AppendInt64Value(dst, v.i())
		}
	}
	return dst
}

// uvarintLen is the length of binary.AppendUvarint's encoding of x.
func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

var errMalformedRow = errors.New("malformed " + StoreKeyWithIndexToValue + " value")

// decodeRowBinary reads a format-2 row from s, the value's text after
// the state's length prefix. The strings of the row share one copy of s.
func decodeRowBinary(fields []stream.Field, s string) (row, bool, error) {
	nb := (len(fields) + 7) / 8
	if len(s) < 2+nb || s[0] != formatBinary || s[1]&^1 != 0 {
		return nil, false, fmt.Errorf("%w: bad header", errMalformedRow)
	}
	matched := s[1] == 1
	nulls, p := s[2:2+nb], 2+nb
	r := make(row, len(fields))
	for j, f := range fields {
		if nulls[j/8]&(1<<(j%8)) != 0 {
			r[j] = nullValue
			continue
		}
		switch f.Type.Storage() {
		case stream.Float64:
			if len(s)-p < 8 {
				return nil, false, fmt.Errorf("%w: column %q truncated", errMalformedRow, f.Name)
			}
			r[j] = intValue(int64(binary.LittleEndian.Uint64([]byte(s[p : p+8]))))
			p += 8
		case stream.String:
			l, n := uvarintAt(s, p)
			if n <= 0 || l > uint64(len(s)-p-n) {
				return nil, false, fmt.Errorf("%w: column %q truncated", errMalformedRow, f.Name)
			}
			r[j] = strValue(s[p+n : p+n+int(l)])
			p += n + int(l)
		default:
			v, n := varintAt(s, p)
			if n <= 0 {
				return nil, false, fmt.Errorf("%w: column %q truncated", errMalformedRow, f.Name)
			}
			r[j] = intValue(v)
			p += n
		}
	}
	if p != len(s) {
		return nil, false, fmt.Errorf("%w: %d trailing bytes", errMalformedRow, len(s)-p)
	}
	return r, matched, nil
}

// uvarintAt is binary.Uvarint of s[p:] without copying s.
func uvarintAt(s string, p int) (uint64, int) {
	var x uint64
	var shift uint
	for i := 0; p+i < len(s) && i < binary.MaxVarintLen64; i++ {
		b := s[p+i]
		if b < 0x80 {
			if i == binary.MaxVarintLen64-1 && b > 1 {
				return 0, -(i + 1)
			}
			return x | uint64(b)<<shift, i + 1
		}
		x |= uint64(b&0x7f) << shift
		shift += 7
	}
	return 0, 0
}

// varintAt is binary.Varint of s[p:] without copying s.
func varintAt(s string, p int) (int64, int) {
	ux, n := uvarintAt(s, p)
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x, n
}

// decodeRow reads a keyWithIndexToValue value of either format by the
// side's fields; fast is fastNames(fields), computed once per side by the
// caller (format 1's in-place decoder).
func decodeRow(fields []stream.Field, fast bool, val []byte) (row, bool, error) {
	s, ok := fastStringValue(val)
	if ok && len(s) > 0 && s[0] == formatBinary {
		return decodeRowBinary(fields, s)
	}
	if fast {
		if r, m, ok := fastDecodeRow(fields, val); ok {
			return r, m, nil
		}
	}
	return decodeRowJSON(fields, val)
}

// rowText is format 1's value text of a row: a JSON object of the
// side's columns in order (timestamps in µs, a NaN or infinite double as
// a string), then "matched". Format 2 keeps no text; state dump prints
// this one (dump.go). Names and strings are quoted as encoding/json
// quotes them: strconv.Quote wrote \x7f for DEL, which no JSON reader
// takes, and a string that is not UTF-8 (a BINARY column, which format 2
// keeps) shows its invalid bytes as U+FFFD.
func rowText(fields []stream.Field, r row, matched bool) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for j, f := range fields {
		name, _ := json.Marshal(f.Name)
		b.Write(name)
		b.WriteByte(':')
		v := r[j]
		switch {
		case v.null():
			b.WriteString("null")
		case f.Type.Storage() == stream.Float64:
			if x := v.float(); math.IsNaN(x) || math.IsInf(x, 0) {
				b.WriteString(strconv.Quote(strconv.FormatFloat(x, 'g', -1, 64)))
			} else {
				b.WriteString(strconv.FormatFloat(x, 'g', -1, 64))
			}
		case f.Type.Storage() == stream.String:
			enc, _ := json.Marshal(v.s())
			b.Write(enc)
		default:
			b.WriteString(strconv.FormatInt(v.i(), 10))
		}
		b.WriteByte(',')
	}
	b.WriteString(`"matched":` + strconv.FormatBool(matched) + "}")
	return b.Bytes()
}

// decodeRowJSON reads a format-1 value by encoding/json, for any text:
// positionally, the object's i-th member is field i (its name must be
// field i's), then "matched". A map by name read a repeated column name's
// last value into both columns.
func decodeRowJSON(fields []stream.Field, val []byte) (row, bool, error) {
	s, err := stringValue(val)
	if err != nil {
		return nil, false, err
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	malformed := func(what string, args ...any) (row, bool, error) {
		return nil, false, fmt.Errorf("%w: %s", errMalformedRow, fmt.Sprintf(what, args...))
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return malformed("not a JSON object")
	}
	r := make(row, len(fields))
	for j, f := range fields {
		t, err := dec.Token()
		if name, ok := t.(string); err != nil || !ok || name != f.Name {
			return malformed("member %d is %v, want column %q", j, t, f.Name)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return malformed("column %q: %v", f.Name, err)
		}
		if string(raw) == "null" {
			r[j] = nullValue
			continue
		}
		switch f.Type.Storage() {
		case stream.String:
			var t string
			err = json.Unmarshal(raw, &t)
			r[j] = strValue(t)
		case stream.Float64:
			var x float64
			if raw[0] == '"' {
				var t string
				if err = json.Unmarshal(raw, &t); err == nil {
					x, err = strconv.ParseFloat(t, 64)
				}
			} else {
				x, err = strconv.ParseFloat(string(raw), 64)
			}
			r[j] = floatValue(x)
		default:
			var x int64
			x, err = strconv.ParseInt(string(raw), 10, 64)
			r[j] = intValue(x)
		}
		if err != nil {
			return malformed("column %q: %v", f.Name, err)
		}
	}
	var matched bool
	if t, err := dec.Token(); err != nil || t != "matched" {
		return malformed("no matched flag after the columns")
	}
	if err := dec.Decode(&matched); err != nil {
		return malformed("matched flag: %v", err)
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return malformed("members after the matched flag")
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
