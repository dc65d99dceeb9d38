package join

import (
	"math"

	"github.com/ethstream/ethstream/stream"
)

// value is one column of a side's row, unboxed: an integer storage (Int64,
// Timestamp µs, Boolean 0/1, Int32, Date days) in i, a double's IEEE bits
// in i, a string or binary in s. A row of []any cost an allocation per
// column and a type switch per read on the join's hot path.
type value struct {
	i    int64
	s    string
	null bool
}

// float reads a Float64-storage value.
func (v value) float() float64 { return math.Float64frombits(uint64(v.i)) }

// floatValue is a Float64-storage value.
func floatValue(x float64) value { return value{i: int64(math.Float64bits(x))} }

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
			r[j].null = true
		case c.Type.Storage() == stream.Float64:
			r[j] = floatValue(c.Float64s[i])
		case c.Type.Storage() == stream.String:
			r[j].s = c.Strings[i]
		default:
			r[j].i = c.Int64s[i]
		}
	}
	return r
}
