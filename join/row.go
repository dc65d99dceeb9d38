package join

import (
	"math"
	"strings"
	"unsafe"

	"github.com/ethstream/ethstream/stream"
)

// value is one column of a side's row, unboxed: an integer storage (Int64,
// Timestamp µs, Boolean 0/1, Int32, Date days) or a double's IEEE bits in
// n, a string or binary as its bytes' address in p and its length in n, a
// null as p == &nullMark. A row of []any cost an allocation per column and
// a type switch per read on the join's hot path. The column's type says
// which a value holds: a reader asks an integer column for i and a string
// column for s only.
//
// 16 bytes, not the 32 of an integer, a string header and a null flag side
// by side: the join keeps every row the watermark has not passed, and the
// leg's cost follows the memory it touches (README, Performance, "Tried,
// left out: the join's pending batch memory").
type value struct {
	p *byte
	n int64
}

// nullMark is the address a null value holds.
var nullMark byte

// nullValue is a null of any type.
var nullValue = value{p: &nullMark}

// intValue is an integer-storage value.
func intValue(i int64) value { return value{n: i} }

// strValue is a string-storage value.
func strValue(s string) value {
	if len(s) == 0 {
		return value{}
	}
	return value{p: unsafe.StringData(s), n: int64(len(s))}
}

// floatValue is a Float64-storage value.
func floatValue(x float64) value { return value{n: int64(math.Float64bits(x))} }

// null reports a null.
func (v value) null() bool { return v.p == &nullMark }

// i reads an integer-storage value (0 for a null).
func (v value) i() int64 { return v.n }

// s reads a string-storage value ("" for a null).
func (v value) s() string {
	if v.p == nil || v.p == &nullMark {
		return ""
	}
	return unsafe.String(v.p, int(v.n))
}

// float reads a Float64-storage value.
func (v value) float() float64 { return math.Float64frombits(uint64(v.n)) }

// row is one side's row in the side's schema order.
type row []value

// rowAt reads row i of the side's columns.
func rowAt(cols []*stream.Column, i int) row { return rowInto(make(row, len(cols)), cols, i) }

// rowInto reads row i of the side's columns into r, a zeroed row of as
// many columns.
func rowInto(r row, cols []*stream.Column, i int) row {
	for j, c := range cols {
		switch {
		case c.IsNull(i):
			r[j] = nullValue
		case c.Type.Storage() == stream.Float64:
			r[j] = floatValue(c.Float64s[i])
		case c.Type.Storage() == stream.String:
			r[j] = strValue(c.Strings[i])
		default:
			r[j] = intValue(c.Int64s[i])
		}
	}
	return r
}

// shareKeyBytes points r's column col at the first bytes of key, the
// row's encoded join key, when they are that column's string: the state's
// key encoding starts with the first key column's bytes (unless they
// need escapes), and a stored row kept its own copy beside the key's,
// which also kept the input's whole decoded column alive until the
// row's eviction. An integer, a null or an escaped string keeps its
// value.
func shareKeyBytes(r row, col int, key string) {
	v := r[col]
	if v.p == nil || v.null() || !strings.HasPrefix(key, v.s()) {
		return
	}
	r[col] = strValue(key[:v.n])
}
