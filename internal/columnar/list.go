package columnar

import (
	"fmt"
	"strings"

	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/encoding"
	"github.com/parquet-go/parquet-go/format"
)

// Lists. A Field of type ARRAY<T> names a list column (its Path ends at
// the list, not at its leaf) and decodes to an Array column whose
// elements are read by the scalar rules of rules.go. The list shapes read
// are parquet-format's (LogicalTypes.md, "Lists", with its
// backward-compatibility rules):
//
//	<opt|req> group name (LIST) {          three-level (Spark, parquet-mr,
//	  repeated group list {                 Arrow): the list may be null,
//	    <opt|req> T element; } }            each element may be null
//	<opt|req> group name (LIST) {          two-level (legacy writers): the
//	  repeated T array; }                   elements are never null
//	repeated T name;                        a bare repeated leaf: a list
//	                                        that is never null
//
// A repeated group of several fields, or one named "array" or
// "<name>_tuple", is a list of structs (rule 2 and 3 of the spec): refused,
// as is any deeper nesting (a list of lists, of maps, a list inside a
// repeated field). The levels then read as (D(x) the definition level at
// which node x is present):
//
//	definition < D(list)         the list is null (or a struct above it)
//	definition = D(list)          an empty list (nothing repeated)
//	D(repeated) <= def < maxDef   a null element
//	definition = maxDef           an element with a value
//
// and a repetition level of 0 starts a row, 1 continues its list.

// listShape is how a list column's levels read.
type listShape struct {
	nullDef int // definition < nullDef: the list is null
	elemDef int // definition >= elemDef: an element (else an empty list)
}

// isListGroup reports whether n is a group annotated LIST (logical type
// or converted type).
func isListGroup(n parquet.Node) bool {
	if n.Leaf() {
		return false
	}
	if lt := n.Type().LogicalType(); lt != nil {
		if _, ok := lt.Value.(*format.ListType); ok {
			return true
		}
	}
	ct := n.Type().ConvertedType()
	return ct != nil && *ct == deprecated.List
}

// ListElement resolves the list node n (a LIST group, or a bare repeated
// leaf) to its element leaf and that leaf's path below n (nil for a bare
// repeated leaf, which is its own element); an error for a node that is
// no list of scalars.
func ListElement(n parquet.Node) (parquet.Node, []string, error) {
	if n.Leaf() {
		if n.Repeated() {
			return n, nil, nil
		}
		return nil, nil, fmt.Errorf("not a list")
	}
	if !isListGroup(n) {
		return nil, nil, fmt.Errorf("a group that is not a LIST (a struct)")
	}
	fs := n.Fields()
	if len(fs) != 1 || !fs[0].Repeated() {
		return nil, nil, fmt.Errorf("a LIST group without one repeated field")
	}
	r := fs[0]
	if r.Leaf() {
		return r, []string{r.Name()}, nil // two-level
	}
	name := ""
	if f, ok := n.(parquet.Field); ok {
		name = f.Name()
	}
	if len(r.Fields()) != 1 || r.Name() == "array" || (name != "" && r.Name() == name+"_tuple") {
		return nil, nil, fmt.Errorf("a list of structs")
	}
	e := r.Fields()[0]
	if !e.Leaf() {
		return nil, nil, fmt.Errorf("a list of nested values (lists, maps or structs)")
	}
	return e, []string{r.Name(), e.Name()}, nil
}

// openList plans a list field whose list node is at path: the element's
// leaf, the levels' meaning, and its column's physical type.
func openList(f *parquet.File, d *colDecoder, path []string, leaves []*format.SchemaElement) (bool, error) {
	s := f.Schema()
	// Walk to the list node, counting the definition levels on the way.
	var node parquet.Node = s
	spelled := make([]string, 0, len(path)+2)
	def := 0
	for i, part := range path {
		next := childNamed(node, part, i == 0)
		if next == nil {
			return false, nil
		}
		if i < len(path)-1 && next.Repeated() {
			return false, fmt.Errorf("column %q is inside a repeated field", d.arch)
		}
		if next.Optional() {
			def++
		}
		node, spelled = next, append(spelled, next.Name())
	}
	elem, sub, err := ListElement(node)
	if err != nil {
		return false, fmt.Errorf("column %q cannot be read as %s: it is %s", d.arch, d.arr, err)
	}
	// The repeated field (the LIST group's child, or a bare repeated leaf
	// itself) is the one level above the list's own.
	shape := listShape{nullDef: def, elemDef: def + 1}
	lc, ok := s.Lookup(append(spelled, sub...)...)
	if !ok || lc.ColumnIndex >= len(leaves) || !leaves[lc.ColumnIndex].Type.Valid {
		return false, fmt.Errorf("column %q: list element not found", d.arch)
	}
	if lc.MaxRepetitionLevel != 1 {
		return false, fmt.Errorf("column %q is a list inside a repeated field", d.arch)
	}
	if node.Repeated() && !node.Leaf() {
		return false, fmt.Errorf("column %q is a repeated group", d.arch)
	}
	if !elem.Optional() && lc.MaxDefinitionLevel != shape.elemDef || elem.Optional() && lc.MaxDefinitionLevel != shape.elemDef+1 {
		return false, fmt.Errorf("column %q: list levels %d do not match its schema", d.arch, lc.MaxDefinitionLevel)
	}
	el := leaves[lc.ColumnIndex]
	d.leaf, d.maxDef, d.phys, d.list = lc.ColumnIndex, lc.MaxDefinitionLevel, el.Type.V, &shape
	if IsDecimal(el) {
		d.scale = DecimalScale(el)
	}
	if !d.planType(el) {
		return false, fmt.Errorf("column %q has elements of physical type %s (%s), which cannot be read as %s", d.arch, d.phys, el.LogicalType.String(), d.arr)
	}
	return true, nil
}

// childNamed is the child of n named name: exactly, else (top-level
// only) case-insensitively, as lookup matches.
func childNamed(n parquet.Node, name string, fold bool) parquet.Field {
	var folded parquet.Field
	for _, f := range n.Fields() {
		if f.Name() == name {
			return f
		}
		if fold && folded == nil && strings.EqualFold(f.Name(), name) {
			folded = f
		}
	}
	return folded
}

// listState carries a chunk's decoding from page to page: a row's list
// may continue on the next page.
type listState struct {
	row   int    // the row being filled; -1 before the first
	open  bool   // the row's list has elements (more may follow)
	valid []bool // the rows' validity
	evals []bool // the elements' validity
}

// decodeListPage decodes one page of a list column: its levels into the
// rows' offsets and validity, its values into the elements.
func (d *colDecoder) decodeListPage(p parquet.Page, col *stream.Column, st *listState, n int) error {
	defs, reps := p.DefinitionLevels(), p.RepetitionLevels()
	if len(defs) != len(reps) {
		return fmt.Errorf("column %q: page has %d definition and %d repetition levels", d.arch, len(defs), len(reps))
	}
	nonNull := 0
	for _, l := range defs {
		if int(l) == d.maxDef {
			nonNull++
		}
	}
	d.nBool = nonNull
	e := col.Elems
	switch {
	case d.decimal:
		vals, err := pageValues(d, p, nonNull, &d.dictDecs, &d.decs, func(v encoding.Values, dst []stream.Dec128, _ bool) ([]stream.Dec128, error) { return d.toDecs(v, dst) })
		if err != nil {
			return err
		}
		return walkList(d, defs, reps, vals, &e.Decimals, col, st, n)
	case d.typ.Storage() == stream.String:
		vals, err := pageValues(d, p, nonNull, &d.dictStrs, &d.strs, func(v encoding.Values, dst []string, dict bool) ([]string, error) { return d.toStrs(v, dst, dict), nil })
		if err != nil {
			return err
		}
		return walkList(d, defs, reps, vals, &e.Strings, col, st, n)
	case d.typ.Storage() == stream.Float64:
		vals, err := pageValues(d, p, nonNull, &d.dictFlts, &d.flts, func(v encoding.Values, dst []float64, _ bool) ([]float64, error) { return d.toFloats(v, dst) })
		if err != nil {
			return err
		}
		return walkList(d, defs, reps, vals, &e.Float64s, col, st, n)
	default:
		vals, err := pageValues(d, p, nonNull, &d.dictInts, &d.ints, func(v encoding.Values, dst []int64, _ bool) ([]int64, error) { return d.toInts(v, dst) })
		if err != nil {
			return err
		}
		return walkList(d, defs, reps, vals, &e.Int64s, col, st, n)
	}
}

// pageValues are the page's non-null values, through its dictionary
// (converted once per dictionary into *dict) or converted into *scratch.
func pageValues[T any](d *colDecoder, p parquet.Page, nonNull int, dict, scratch *[]T,
	conv func(v encoding.Values, dst []T, dict bool) ([]T, error)) ([]T, error) {
	var err error
	if pd := p.Dictionary(); pd != nil {
		if pd != d.dict {
			d.dict = pd
			if *dict, err = conv(pd.Page().Data(), (*dict)[:0], true); err != nil {
				return nil, err
			}
		}
		data := p.Data()
		idx := data.Int32()
		if len(idx) != nonNull {
			return nil, fmt.Errorf("column %q: page has %d values, want %d", d.arch, len(idx), nonNull)
		}
		out := (*scratch)[:0]
		for _, k := range idx {
			if k < 0 || int(k) >= len(*dict) {
				return nil, fmt.Errorf("column %q: dictionary index %d out of range", d.arch, k)
			}
			out = append(out, (*dict)[k])
		}
		*scratch = out
		return out, nil
	}
	if *scratch, err = conv(p.Data(), (*scratch)[:0], false); err != nil {
		return nil, err
	}
	if len(*scratch) != nonNull {
		return nil, fmt.Errorf("column %q: page has %d values, want %d", d.arch, len(*scratch), nonNull)
	}
	return *scratch, nil
}

// walkList reads a page's levels: a repetition level of 0 starts the next
// row (its offset the elements so far), a definition level at or above
// elemDef adds an element (the next value when it is maxDef, else null).
func walkList[T any](d *colDecoder, defs, reps []byte, vals []T, elems *[]T, col *stream.Column, st *listState, n int) error {
	k := 0
	var zero T
	for i, def := range defs {
		l := int(def)
		switch reps[i] {
		case 0:
			st.row++
			if st.row >= n {
				return fmt.Errorf("column %q holds more lists than its row group's %d rows", d.arch, n)
			}
			col.Offsets[st.row] = int32(len(*elems))
			st.valid[st.row] = l >= d.list.nullDef
			st.open = l >= d.list.elemDef
		case 1:
			if !st.open || l < d.list.elemDef {
				return fmt.Errorf("column %q: a repeated value outside a list", d.arch)
			}
		default:
			return fmt.Errorf("column %q: repetition level %d in a list", d.arch, reps[i])
		}
		if l > d.maxDef {
			return fmt.Errorf("column %q: definition level %d above %d", d.arch, l, d.maxDef)
		}
		if l < d.list.elemDef {
			continue
		}
		if l == d.maxDef {
			*elems = append(*elems, vals[k])
			k++
			st.evals = append(st.evals, true)
		} else {
			*elems = append(*elems, zero)
			st.evals = append(st.evals, false)
		}
		if len(*elems) > 1<<31-1 {
			return fmt.Errorf("column %q: more than 2^31 elements in a row group", d.arch)
		}
	}
	return nil
}

// finishList closes a chunk's lists: the last offset, the validity of the
// rows and of the elements (nil when all are present).
func (d *colDecoder) finishList(col *stream.Column, st *listState, n int) error {
	if st.row != n-1 {
		return fmt.Errorf("column %q holds %d lists, row group has %d rows", d.arch, st.row+1, n)
	}
	col.Offsets[n] = int32(col.Elems.Len())
	col.Valid = nil
	for _, v := range st.valid {
		if !v {
			col.Valid = st.valid
			break
		}
	}
	col.Elems.Valid = nil
	for _, v := range st.evals {
		if !v {
			col.Elems.Valid = st.evals
			break
		}
	}
	return nil
}
