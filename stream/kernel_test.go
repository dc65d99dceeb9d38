package stream

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// cell is row i of c as a comparable value, independently of the kernels.
func cell(c *Column, i int) any {
	if c.Valid != nil && !c.Valid[i] {
		return nil
	}
	switch c.Type.Storage() {
	case Float64:
		return c.Float64s[i]
	case String:
		return c.Strings[i]
	case Decimal:
		return c.Decimals[i]
	case Array:
		// The elements, read through the offsets, as text.
		var parts []string
		for e := c.Offsets[i]; e < c.Offsets[i+1]; e++ {
			parts = append(parts, fmt.Sprint(cell(c.Elems, int(e))))
		}
		return fmt.Sprint(parts)
	}
	return c.Int64s[i]
}

func randColumn(r *rand.Rand, typ Type, n int, nulls bool) Column {
	c := Column{Name: "c", Type: typ}
	if nulls {
		c.Valid = make([]bool, n)
	}
	if typ.Kind() == Array {
		c.Offsets = []int32{0}
		e := randColumn(r, typ.Elem(), 0, false)
		c.Elems = &e
	}
	for i := 0; i < n; i++ {
		switch typ.Storage() {
		case Array:
			k := r.IntN(4)
			more := randColumn(r, typ.Elem(), k, r.IntN(2) == 0)
			c.Elems.AppendRange(&more, 0, k)
			c.Offsets = append(c.Offsets, c.Offsets[i]+int32(k))
		case Decimal:
			c.Decimals = append(c.Decimals, Dec128{Hi: r.Int64N(3) - 1, Lo: r.Uint64()})
		case Float64:
			c.Float64s = append(c.Float64s, r.Float64())
		case String:
			c.Strings = append(c.Strings, fmt.Sprint(r.IntN(50)))
		default:
			c.Int64s = append(c.Int64s, r.Int64N(1000))
		}
		if nulls {
			c.Valid[i] = r.IntN(4) > 0
		}
	}
	return c
}

// withDict gives a String column a dictionary view (as a Parquet
// decoder's) half the time: its rows then share the dictionary's strings.
func withDict(r *rand.Rand, c Column) Column {
	if c.Type.Storage() != String || c.Type.Kind() == Array || r.IntN(2) == 0 {
		return c
	}
	d := NewDict(c.Strings, make([]int32, len(c.Strings)), nil)
	seen := map[string]int32{}
	for i, s := range c.Strings {
		if c.IsNull(i) {
			d.Index[i] = -1
			continue
		}
		k, ok := seen[s]
		if !ok {
			k = int32(len(d.Values))
			seen[s] = k
			d.Values = append(d.Values, s)
		}
		d.Index[i], c.Strings[i] = k, d.Values[k]
	}
	c.Dict = d
	return c
}

func checkColumn(t *testing.T, what string, got *Column, want []any) {
	t.Helper()
	if err := got.validateDict(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got.Len() != len(want) || (got.Valid != nil && len(got.Valid) != len(want)) {
		t.Fatalf("%s: %d values (%d flags), want %d", what, got.Len(), len(got.Valid), len(want))
	}
	allValid := true
	for i, w := range want {
		if g := cell(got, i); g != w {
			t.Fatalf("%s: row %d is %v, want %v", what, i, g, w)
		}
		allValid = allValid && w != nil
	}
	if allValid && got.Valid != nil {
		t.Fatalf("%s: Valid set with every row present", what)
	}
}

// TestKernelsAgainstNaive checks Take, Filter, AppendRange and Slice on
// random columns of every type, with and without nulls, against a row by
// row copy.
func TestKernelsAgainstNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for iter := 0; iter < 300; iter++ {
		typ := []Type{Int64, Float64, String, Timestamp, DecimalOf(38, 4), ArrayOf(String), ArrayOf(DecimalOf(20, 2))}[iter%7]
		n := r.IntN(40)
		src := withDict(r, randColumn(r, typ, n, r.IntN(2) == 0))
		// Take
		idx := make([]int, r.IntN(50))
		for k := range idx {
			if n == 0 {
				idx = nil
				break
			}
			idx[k] = r.IntN(n)
		}
		var want []any
		for _, i := range idx {
			want = append(want, cell(&src, i))
		}
		got := src.Take(idx)
		checkColumn(t, "take", &got, want)
		keepsDict(t, "take", &src, &got)
		// Filter
		mask := make([]bool, n)
		want = want[:0]
		for i := range mask {
			mask[i] = r.IntN(2) == 0
			if mask[i] {
				want = append(want, cell(&src, i))
			}
		}
		got = src.Filter(mask)
		checkColumn(t, "filter", &got, want)
		keepsDict(t, "filter", &src, &got)
		// AppendRange onto a column with or without nulls (and a view, which
		// the append drops)
		dst := withDict(r, randColumn(r, typ, r.IntN(10), r.IntN(2) == 0))
		want = want[:0]
		for i := 0; i < dst.Len(); i++ {
			want = append(want, cell(&dst, i))
		}
		from := r.IntN(n + 1)
		to := from + r.IntN(n-from+1)
		for i := from; i < to; i++ {
			want = append(want, cell(&src, i))
		}
		if dst.Valid != nil && !containsFalse(dst.Valid) {
			dst.Valid = nil // a column with every row present has no flags
		}
		dst.AppendRange(&src, from, to)
		checkColumn(t, "append", &dst, want)
		// Append, row by row
		one := randColumn(r, typ, r.IntN(5), r.IntN(2) == 0)
		if one.Valid != nil && !containsFalse(one.Valid) {
			one.Valid = nil
		}
		want = want[:0]
		for i := 0; i < one.Len(); i++ {
			want = append(want, cell(&one, i))
		}
		for i := from; i < to; i++ {
			one.Append(&src, i)
			want = append(want, cell(&src, i))
		}
		checkColumn(t, "append row", &one, want)
		// Slice
		want = want[:0]
		for i := from; i < to; i++ {
			want = append(want, cell(&src, i))
		}
		got = src.Slice(from, to)
		if got.Valid != nil && !containsFalse(got.Valid) {
			got.Valid = nil // Slice shares the flags as they are
		}
		checkColumn(t, "slice", &got, want)
		keepsDict(t, "slice", &src, &got)
	}
}

// keepsDict: a kernel that selects rows carries the source's view.
func keepsDict(t *testing.T, what string, src, got *Column) {
	t.Helper()
	if (src.DictView() == nil) != (got.DictView() == nil) {
		t.Fatalf("%s: dictionary view %v from %v", what, got.Dict, src.Dict)
	}
}

func containsFalse(v []bool) bool {
	for _, x := range v {
		if !x {
			return true
		}
	}
	return false
}

// TestBatchKernelsSigns: the batch kernels carry signs with the rows and
// refuse a batch of another shape.
func TestBatchKernelsSigns(t *testing.T) {
	b := &Batch{Len: 3, Columns: []Column{{Name: "n", Type: Int64, Int64s: []int64{1, 2, 3}}}, Signs: []int8{1, -1, 1}}
	if got := b.Take([]int{1, 1, 0}); got.Len != 3 || fmt.Sprint(got.Signs, got.Columns[0].Int64s) != "[-1 -1 1] [2 2 1]" {
		t.Fatalf("take: %v %v", got.Signs, got.Columns[0].Int64s)
	}
	if got := b.Filter([]bool{false, true, true}); got.Len != 2 || fmt.Sprint(got.Signs, got.Columns[0].Int64s) != "[-1 1] [2 3]" {
		t.Fatalf("filter: %v %v", got.Signs, got.Columns[0].Int64s)
	}
	dst := &Batch{Len: 1, Columns: []Column{{Name: "n", Type: Int64, Int64s: []int64{9}}}}
	if err := dst.AppendRange(b, 1, 3); err != nil || dst.Len != 3 || fmt.Sprint(dst.Signs, dst.Columns[0].Int64s) != "[1 -1 1] [9 2 3]" {
		t.Fatalf("append: %v %v %v", err, dst.Signs, dst.Columns[0].Int64s)
	}
	if err := dst.AppendRange(&Batch{Len: 1, Columns: []Column{{Name: "m", Type: Int64, Int64s: []int64{0}}}}, 0, 1); err == nil {
		t.Fatal("appended a batch with another column")
	}
	if err := dst.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestFilterIntoAgainstNaive: FilterInto, reusing one destination batch
// across random batches of changing types, nulls and signs, keeps exactly
// the masked rows (a row by row copy), stays valid, and allocates nothing
// once its buffers have grown.
func TestFilterIntoAgainstNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	types := []Type{Int64, Float64, String, Timestamp}
	var dst Batch
	for iter := 0; iter < 300; iter++ {
		n := r.IntN(40)
		in := &Batch{Len: n}
		for k := range 1 + r.IntN(3) {
			c := withDict(r, randColumn(r, types[(iter+k)%4], n, r.IntN(2) == 0))
			c.Name = fmt.Sprint("c", k)
			in.Columns = append(in.Columns, c)
		}
		if r.IntN(2) == 0 {
			in.Signs = make([]int8, n)
			for i := range in.Signs {
				in.Signs[i] = int8(1 - 2*r.IntN(2))
			}
		}
		mask := make([]bool, n)
		for i := range mask {
			mask[i] = r.IntN(2) == 0
		}
		in.FilterInto(&dst, mask)
		if err := dst.Validate(); err != nil {
			t.Fatalf("iteration %d: %v", iter, err)
		}
		if len(dst.Columns) != len(in.Columns) || (dst.Signs == nil) != (in.Signs == nil) {
			t.Fatalf("iteration %d: %d columns, signs %v; want %d, %v", iter, len(dst.Columns), dst.Signs, len(in.Columns), in.Signs)
		}
		var signs []int8
		for ci := range in.Columns {
			src, got := &in.Columns[ci], &dst.Columns[ci]
			if got.Name != src.Name || got.Type != src.Type {
				t.Fatalf("iteration %d: column %s %v, want %s %v", iter, got.Name, got.Type, src.Name, src.Type)
			}
			var want []any
			signs = signs[:0]
			for i, m := range mask {
				if m {
					want = append(want, cell(src, i))
					signs = append(signs, in.Sign(i))
				}
			}
			checkColumn(t, fmt.Sprint("filter into, iteration ", iter), got, want)
			keepsDict(t, fmt.Sprint("filter into, iteration ", iter), src, got)
		}
		if dst.Len != len(signs) && len(in.Columns) > 0 {
			t.Fatalf("iteration %d: %d rows, want %d", iter, dst.Len, len(signs))
		}
		for i := range dst.Len {
			if dst.Sign(i) != signs[i] {
				t.Fatalf("iteration %d: row %d has sign %d, want %d", iter, i, dst.Sign(i), signs[i])
			}
		}
		// The same batch again agrees with Filter.
		if want := in.Filter(mask); printBatch(want) != printBatch(&dst) {
			t.Fatalf("iteration %d: FilterInto %v, Filter %v", iter, &dst, want)
		}
	}
	in := &Batch{Len: 8, Columns: []Column{{Name: "s", Type: String, Strings: []string{"a", "b", "c", "d", "e", "f", "g", "h"}, Valid: []bool{true, false, true, true, true, true, true, true}}}, Signs: []int8{1, -1, 1, 1, 1, 1, 1, 1}}
	mask := []bool{true, true, false, true, false, true, true, false}
	in.FilterInto(&dst, mask)
	if allocs := testing.AllocsPerRun(20, func() { in.FilterInto(&dst, mask) }); allocs != 0 {
		t.Fatalf("FilterInto into a grown buffer allocates %v times", allocs)
	}
}

// printBatch prints b with its dictionary views' contents (not addresses).
func printBatch(b *Batch) string {
	out := fmt.Sprint(b.Len, b.Signs)
	for _, c := range b.Columns {
		d := c.Dict
		c.Dict = nil
		out += fmt.Sprint(c)
		if d != nil {
			out += fmt.Sprint(d.Index, d.Values)
		}
	}
	return out
}
