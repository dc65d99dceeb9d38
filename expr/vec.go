package expr

import (
	"math/big"
	"slices"

	"github.com/ethstream/ethstream/stream"
)

// vec is one expression's values over a batch's rows: one slice by the
// type's kind, and valid (nil when no value is null).
type vec struct {
	t     Type
	n     int
	i     []int64 // Boolean (0/1), Int, BigInt, Date (days), Timestamp (µs)
	f     []float64
	s     []string
	d     []*big.Int // Decimal: unscaled values
	off   []int32    // ARRAY: row r's elements are el's rows off[r] .. off[r+1]-1
	el    *vec       // ARRAY: the elements (array.go)
	valid []bool
	// borrowed: valid is a batch column's (fromColumn), which a bare
	// column or a CASE arm taken whole hands on; setNull copies it before
	// its first write, so the input batch is never written.
	borrowed bool
}

func newVec(t Type, n int) *vec {
	if t.IsArray() {
		return newArrayVec(t, n)
	}
	v := &vec{t: t, n: n}
	switch t.Kind {
	case stream.Float64, stream.Float32:
		v.f = make([]float64, n)
	case stream.String, stream.Binary:
		v.s = make([]string, n)
	case stream.Decimal:
		v.d = make([]*big.Int, n)
	case 0:
		v.valid = make([]bool, n)
	default:
		v.i = make([]int64, n)
	}
	return v
}

func (v *vec) null(r int) bool { return v.valid != nil && !v.valid[r] }

func (v *vec) setNull(r int) {
	switch {
	case v.valid == nil:
		v.valid = make([]bool, v.n)
		for i := range v.valid {
			v.valid[i] = true
		}
	case v.borrowed:
		v.valid = slices.Clone(v.valid)
	}
	v.borrowed = false
	v.valid[r] = false
}

// nullsFrom marks v null wherever one of the inputs is.
func (v *vec) nullsFrom(ins ...*vec) {
	for _, in := range ins {
		if in.valid == nil {
			continue
		}
		for r, ok := range in.valid {
			if !ok {
				v.setNull(r)
			}
		}
	}
}

// fromColumn reads a batch column as a vec (sharing its slices).
func fromColumn(c *stream.Column, n int) *vec {
	v := &vec{t: Of(c.Type), n: n, i: c.Int64s, f: c.Float64s, s: c.Strings, valid: c.Valid, borrowed: c.Valid != nil}
	if c.Type.Kind() == stream.Array {
		v.off, v.el = c.Offsets, fromColumn(c.Elems, c.Elems.Len())
	}
	if c.Type.Kind() == stream.Decimal {
		v.d = make([]*big.Int, n)
		for r := range v.d {
			v.d[r] = c.Decimals[r].Big()
		}
	}
	return v
}

// live reports whether row r is selected (nil selects every row).
func live(sel []bool, r int) bool { return sel == nil || sel[r] }

// and narrows sel to the rows where keep is true.
func narrow(sel []bool, n int, keep func(r int) bool) []bool {
	out := make([]bool, n)
	for r := range out {
		out[r] = live(sel, r) && keep(r)
	}
	return out
}
