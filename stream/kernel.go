package stream

import (
	"fmt"
	"unsafe"
)

// Column and batch kernels, after Arrow's compute kernels (take, filter,
// concatenate): the one place that copies values by type, so that no
// operator, source or sink writes its own per-type loop. Validity follows
// Column's rule: Valid stays nil while every value is present. A
// dictionary view (Dict) follows its rows through Take, Filter and Slice
// and is dropped by an append.

// Take returns the rows of c at indices, in that order (Arrow's take). An
// index may repeat; it panics on one out of range.
func (c *Column) Take(indices []int) Column {
	out := Column{Name: c.Name, Type: c.Type}
	switch c.Type.Storage() {
	case Array:
		out.Offsets, out.Elems = c.takeElems(indices)
	case Decimal:
		out.Decimals = make([]Dec128, len(indices))
		for k, i := range indices {
			out.Decimals[k] = c.Decimals[i]
		}
	case Float64:
		out.Float64s = make([]float64, len(indices))
		for k, i := range indices {
			out.Float64s[k] = c.Float64s[i]
		}
	case String:
		out.Strings = make([]string, len(indices))
		for k, i := range indices {
			out.Strings[k] = c.Strings[i]
		}
		if v := c.DictView(); v != nil {
			index := make([]int32, len(indices))
			for k, i := range indices {
				index[k] = v.Index[i]
			}
			out.Dict = NewDict(out.Strings, index, v.Values)
		}
	default:
		out.Int64s = make([]int64, len(indices))
		for k, i := range indices {
			out.Int64s[k] = c.Int64s[i]
		}
	}
	if c.Valid != nil {
		valid := make([]bool, len(indices))
		all := true
		for k, i := range indices {
			valid[k] = c.Valid[i]
			all = all && valid[k]
		}
		if !all {
			out.Valid = valid
		}
	}
	return out
}

// Filter returns the rows of c where mask is true, in order (Arrow's
// filter); mask has c's length.
func (c *Column) Filter(mask []bool) Column {
	var out Column
	c.FilterInto(&out, mask)
	return out
}

// FilterInto is Filter writing into dst, reusing the storage of its value
// and validity slices (a hot path's buffer: no allocation once they are
// large enough). dst must not share storage with c; its previous rows,
// name and type are replaced.
func (c *Column) FilterInto(dst *Column, mask []bool) {
	n := 0
	for _, m := range mask {
		if m {
			n++
		}
	}
	dst.Name, dst.Type = c.Name, c.Type
	dst.Int64s, dst.Float64s, dst.Strings = dst.Int64s[:0], dst.Float64s[:0], dst.Strings[:0]
	dst.Decimals, dst.Offsets, dst.Elems = dst.Decimals[:0], nil, nil
	dict := dst.Dict
	dst.Dict = nil
	switch c.Type.Storage() {
	case Array:
		idx := make([]int, 0, n)
		for i, m := range mask {
			if m {
				idx = append(idx, i)
			}
		}
		dst.Offsets, dst.Elems = c.takeElems(idx)
	case Decimal:
		dst.Decimals = grow(dst.Decimals, n)
		for i, m := range mask {
			if m {
				dst.Decimals = append(dst.Decimals, c.Decimals[i])
			}
		}
	case Float64:
		dst.Float64s = grow(dst.Float64s, n)
		for i, m := range mask {
			if m {
				dst.Float64s = append(dst.Float64s, c.Float64s[i])
			}
		}
	case String:
		dst.Strings = grow(dst.Strings, n)
		for i, m := range mask {
			if m {
				dst.Strings = append(dst.Strings, c.Strings[i])
			}
		}
		if v := c.DictView(); v != nil {
			// dst's previous view lends its storage (never c's own).
			if dict == nil || dict == c.Dict {
				dict = &Dict{}
			}
			dict.Index, dict.Values, dict.rows = grow(dict.Index, n), v.Values, unsafe.SliceData(dst.Strings)
			for i, m := range mask {
				if m {
					dict.Index = append(dict.Index, v.Index[i])
				}
			}
			dst.Dict = dict
		}
	default:
		dst.Int64s = grow(dst.Int64s, n)
		for i, m := range mask {
			if m {
				dst.Int64s = append(dst.Int64s, c.Int64s[i])
			}
		}
	}
	valid := dst.Valid[:0]
	dst.Valid = nil
	if c.Valid != nil {
		valid = grow(valid, n)
		all := true
		for i, m := range mask {
			if m {
				valid = append(valid, c.Valid[i])
				all = all && c.Valid[i]
			}
		}
		if !all {
			dst.Valid = valid
		}
	}
}

// grow returns s (empty) with room for n values, reusing its storage when
// it has the room (never nil).
func grow[T any](s []T, n int) []T {
	if s == nil || cap(s) < n {
		return make([]T, 0, n)
	}
	return s[:0]
}

// AppendRange appends rows [from, to) of src to dst, which has src's type
// (Arrow's concatenate of a slice): one copy per column, not per value.
func (dst *Column) AppendRange(src *Column, from, to int) {
	if dst.Type != src.Type {
		panic(fmt.Sprintf("stream: append %v column %q to %v column %q", src.Type, src.Name, dst.Type, dst.Name))
	}
	n := dst.Len()
	dst.Dict = nil // the rows of two columns share no one dictionary
	switch src.Type.Storage() {
	case Array:
		dst.appendElems(src, from, to)
	case Decimal:
		dst.Decimals = append(dst.Decimals, src.Decimals[from:to]...)
	case Float64:
		dst.Float64s = append(dst.Float64s, src.Float64s[from:to]...)
	case String:
		dst.Strings = append(dst.Strings, src.Strings[from:to]...)
	default:
		dst.Int64s = append(dst.Int64s, src.Int64s[from:to]...)
	}
	dst.Valid = appendValid(dst.Valid, n, src.Valid, from, to)
}

// Append appends row i of src to dst, which has src's type: the one-row
// case of AppendRange, without its slicing (a MERGE's updated rows arrive
// one at a time).
func (dst *Column) Append(src *Column, i int) {
	n := dst.Len()
	dst.Dict = nil
	switch src.Type.Storage() {
	case Array:
		dst.appendElems(src, i, i+1)
	case Decimal:
		dst.Decimals = append(dst.Decimals, src.Decimals[i])
	case Float64:
		dst.Float64s = append(dst.Float64s, src.Float64s[i])
	case String:
		dst.Strings = append(dst.Strings, src.Strings[i])
	default:
		dst.Int64s = append(dst.Int64s, src.Int64s[i])
	}
	valid := src.Valid == nil || src.Valid[i]
	if dst.Valid == nil && !valid {
		dst.Valid = make([]bool, n, n+1)
		for k := range dst.Valid {
			dst.Valid[k] = true
		}
	}
	if dst.Valid != nil {
		dst.Valid = append(dst.Valid, valid)
	}
}

// Slice returns rows [from, to) of c sharing its slices (capacity capped,
// so an append to the slice copies).
func (c *Column) Slice(from, to int) Column {
	out := Column{Name: c.Name, Type: c.Type}
	switch c.Type.Storage() {
	case Array:
		out.Offsets, out.Elems = c.Offsets[from:to+1:to+1], c.Elems
	case Decimal:
		out.Decimals = c.Decimals[from:to:to]
	case Float64:
		out.Float64s = c.Float64s[from:to:to]
	case String:
		out.Strings = c.Strings[from:to:to]
		if v := c.DictView(); v != nil {
			out.Dict = NewDict(out.Strings, v.Index[from:to:to], v.Values)
		}
	default:
		out.Int64s = c.Int64s[from:to:to]
	}
	if c.Valid != nil {
		out.Valid = c.Valid[from:to:to]
	}
	return out
}

// appendValid appends src[from:to] (nil: all valid) to dst, which holds n
// flags or is nil for n valid ones; it stays nil while every row is valid.
func appendValid(dst []bool, n int, src []bool, from, to int) []bool {
	if src == nil {
		if dst == nil {
			return nil
		}
		for range to - from {
			dst = append(dst, true)
		}
		return dst
	}
	if dst == nil {
		allValid := true
		for _, v := range src[from:to] {
			allValid = allValid && v
		}
		if allValid {
			return nil
		}
		dst = make([]bool, n, n+to-from)
		for i := range dst {
			dst[i] = true
		}
	}
	return append(dst, src[from:to]...)
}

// Take returns the rows of b at indices, in order, signs included.
func (b *Batch) Take(indices []int) *Batch {
	out := &Batch{Len: len(indices), Columns: make([]Column, len(b.Columns))}
	for i := range b.Columns {
		out.Columns[i] = b.Columns[i].Take(indices)
	}
	if b.Signs != nil {
		out.Signs = make([]int8, len(indices))
		for k, i := range indices {
			out.Signs[k] = b.Signs[i]
		}
	}
	return out
}

// Filter returns the rows of b where mask is true, signs included.
func (b *Batch) Filter(mask []bool) *Batch {
	out := &Batch{}
	b.FilterInto(out, mask)
	return out
}

// FilterInto is Filter writing into dst, reusing its columns' and signs'
// storage (see Column.FilterInto); dst must not share storage with b.
func (b *Batch) FilterInto(dst *Batch, mask []bool) {
	if cap(dst.Columns) < len(b.Columns) {
		dst.Columns = make([]Column, len(b.Columns))
	}
	dst.Columns = dst.Columns[:len(b.Columns)]
	for i := range b.Columns {
		b.Columns[i].FilterInto(&dst.Columns[i], mask)
	}
	dst.Len = 0
	for _, m := range mask {
		if m {
			dst.Len++
		}
	}
	signs := dst.Signs[:0]
	dst.Signs = nil
	if b.Signs != nil {
		signs = grow(signs, dst.Len)
		for i, m := range mask {
			if m {
				signs = append(signs, b.Signs[i])
			}
		}
		dst.Signs = signs
	}
}

// AppendRange appends rows [from, to) of src to b, column by column in
// order (same names and types, checked), signs included.
func (b *Batch) AppendRange(src *Batch, from, to int) error {
	if len(b.Columns) != len(src.Columns) {
		return fmt.Errorf("append a batch of %d columns to one of %d", len(src.Columns), len(b.Columns))
	}
	for i := range src.Columns {
		d, s := &b.Columns[i], &src.Columns[i]
		if d.Name != s.Name || d.Type != s.Type {
			return fmt.Errorf("column %d is %s %v, want %s %v", i, s.Name, s.Type, d.Name, d.Type)
		}
	}
	for i := range src.Columns {
		b.Columns[i].AppendRange(&src.Columns[i], from, to)
	}
	if src.Signs != nil || b.Signs != nil {
		if b.Signs == nil {
			b.Signs = make([]int8, b.Len, b.Len+to-from)
			for i := range b.Signs {
				b.Signs[i] = 1
			}
		}
		for i := from; i < to; i++ {
			b.Signs = append(b.Signs, src.Sign(i))
		}
	}
	b.Len += to - from
	return nil
}

// MakeColumn returns a column of typ holding length zero values, with room
// for capacity (at least length).
func MakeColumn(name string, typ Type, length, capacity int) Column {
	c := Column{Name: name, Type: typ}
	capacity = max(capacity, length)
	switch typ.Storage() {
	case Array:
		// length empty arrays
		c.Offsets = make([]int32, length+1, capacity+1)
		e := MakeColumn("element", typ.Elem(), 0, 0)
		c.Elems = &e
	case Decimal:
		c.Decimals = make([]Dec128, length, capacity)
	case Float64:
		c.Float64s = make([]float64, length, capacity)
	case String:
		c.Strings = make([]string, length, capacity)
	default:
		c.Int64s = make([]int64, length, capacity)
	}
	return c
}

// takeElems gathers the elements of rows indices of the Array column c:
// the new offsets (from 0) and the child column of their elements.
func (c *Column) takeElems(indices []int) ([]int32, *Column) {
	offs := make([]int32, len(indices)+1)
	var idx []int
	for k, i := range indices {
		for e := c.Offsets[i]; e < c.Offsets[i+1]; e++ {
			idx = append(idx, int(e))
		}
		offs[k+1] = int32(len(idx))
	}
	var elems Column
	if c.Elems != nil {
		elems = c.Elems.Take(idx)
	} else {
		elems = MakeColumn("element", c.Type.Elem(), 0, 0)
	}
	return offs, &elems
}

// appendElems appends the arrays of rows [from, to) of src to the Array
// column dst.
func (dst *Column) appendElems(src *Column, from, to int) {
	if dst.Elems == nil {
		e := MakeColumn("element", src.Type.Elem(), 0, 0)
		dst.Elems = &e
	}
	if len(dst.Offsets) == 0 {
		dst.Offsets = append(dst.Offsets, int32(dst.Elems.Len()))
	}
	lo, hi := int(src.Offsets[from]), int(src.Offsets[to])
	base := int32(dst.Elems.Len()) - src.Offsets[from]
	dst.Elems.AppendRange(src.Elems, lo, hi)
	for i := from + 1; i <= to; i++ {
		dst.Offsets = append(dst.Offsets, src.Offsets[i]+base)
	}
}

// ArrayLen is the number of elements of row i of the Array column c.
func (c *Column) ArrayLen(i int) int { return int(c.Offsets[i+1] - c.Offsets[i]) }
