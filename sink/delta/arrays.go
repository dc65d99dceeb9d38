package delta

import (
	"cmp"
	"fmt"

	"github.com/ethstream/ethstream/internal/parquettype"
	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
)

// Array columns. An ARRAY<T> output column is the Delta type
// {"type":"array","elementType":T,"containsNull":true} (Spark writes every
// streaming column nullable, elements too) and, in the data files, Spark's
// three-level LIST:
//
//	optional group name (LIST) {
//	  repeated group list {
//	    optional T element; } }
//
// whose levels are: definition 0 a null array, 1 an empty one, 2 a null
// element, 3 an element with a value; repetition 0 for a row's first
// level, 1 for its next elements. Element types written: the ones whose
// Parquet leaf needs no annotation beyond its Go type's (string, long,
// integer, double, boolean); other element types are refused when the
// table's schema is made. Arrays keep no min/max statistics (Delta skips
// them for complex types), only their null count. A table's read path
// (internal/columnar) reads any element type.

// arrayDataType is the Delta type of an array column type.
func arrayDataType(t stream.Type) (DataType, error) {
	e := t.Elem()
	if !parquettype.ArrayElem(e) {
		return DataType{}, fmt.Errorf("no Delta writer for an array of %s (arrays of string, bigint, int, double and boolean are written)", e)
	}
	p, err := deltaPrimitive(e)
	if err != nil {
		return DataType{}, err
	}
	return DataType{Element: &DataType{Primitive: p}, ContainsNull: true}, nil
}

// arrayOfDelta is the engine type of a Delta array type, false for one the
// sink does not write (an array of a complex type, or of an element type
// without a writer).
func arrayOfDelta(t DataType) (stream.Type, bool) {
	if t.Element == nil || t.Element.Primitive == "" {
		return 0, false
	}
	e, ok := streamOfDelta(t.Element.Primitive)
	if !ok || !parquettype.ArrayElem(e) {
		return 0, false
	}
	return stream.ArrayOf(e), true
}

// appendListValues appends the parquet values of the array column c, rows
// [lo, hi), with their repetition and definition levels.
func (rs *rowSet) appendListValues(dst []parquet.Value, sc *parquettype.Scratch, c, lo, hi int) []parquet.Value {
	v := &rs.cols[c]
	et := rs.l.leaves[c].typ.Elem()
	for i := lo; i < hi; i++ {
		dst = sc.AppendList(dst, et, v, i, c)
	}
	return dst
}

// cmpArrays orders two present arrays as Spark's array ordering does:
// element by element (a null element first), then the shorter first.
func cmpArrays(t stream.Type, a *stream.Column, i int, b *stream.Column, j int) int {
	ai, aj, bi, bj := int(a.Offsets[i]), int(a.Offsets[i+1]), int(b.Offsets[j]), int(b.Offsets[j+1])
	for x, y := ai, bi; x < aj && y < bj; x, y = x+1, y+1 {
		if c := cmpAt(t.Elem(), a.Elems, x, b.Elems, y); c != 0 {
			return c
		}
	}
	return cmp.Compare(aj-ai, bj-bi)
}

// arrayValue is row r of an array column for Show: its elements' values
// (as value gives a column's), nil for a null element.
func arrayValue(v *stream.Column, t stream.Type, r int) []any {
	out := make([]any, 0, v.ArrayLen(r))
	for e := int(v.Offsets[r]); e < int(v.Offsets[r+1]); e++ {
		out = append(out, cellValue(v.Elems, t.Elem(), e))
	}
	return out
}
