package expr

import (
	"math/big"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// Arrays: Spark's ARRAY<T> of a scalar T, its element access (a[i],
// element_at, try_element_at, get), size, array_contains, split and the
// array(...) constructor. An array value is a vec whose rows are ranges
// of a child vec of the elements (Arrow's list, as stream.Column holds
// it). Arrays take no part in comparisons, CASE, COALESCE or casts (wider
// and castable refuse them): docs/contracts.md, Arrays.

// Error classes of array access, raised for a row that is used.
const (
	// CodeInvalidArrayIndex: a[i] with i outside [0, size) under ANSI.
	CodeInvalidArrayIndex = "INVALID_ARRAY_INDEX"
	// CodeInvalidArrayIndexInElementAt: element_at(a, i) with |i| > size
	// under ANSI.
	CodeInvalidArrayIndexInElementAt = "INVALID_ARRAY_INDEX_IN_ELEMENT_AT"
	// CodeInvalidIndexOfZero: element_at or try_element_at at index 0, in
	// any mode.
	CodeInvalidIndexOfZero = "INVALID_INDEX_OF_ZERO"
)

// Index is the subscript X[I] (Spark's GetArrayItem: 0-based).
type Index struct{ X, I Expr }

func (Index) expr() {}

func (x Index) String() string { return x.X.String() + "[" + x.I.String() + "]" }

// ArrayOf is the type ARRAY<elem> (elem a scalar type).
func ArrayOf(elem Type) Type { return Type{Kind: stream.ArrayOf(elem.Stream())} }

// IsArray reports whether t is an ARRAY.
func (t Type) IsArray() bool { return t.Kind.Kind() == stream.Array }

// Elem is an ARRAY's element type.
func (t Type) Elem() Type { return Of(t.Kind.Elem()) }

// newArrayVec is n rows of arrays with no elements yet (each row's end
// offset is set as its elements are appended).
func newArrayVec(t Type, n int) *vec {
	return &vec{t: t, n: n, off: make([]int32, n+1), el: newVec(t.Elem(), 0)}
}

// appendElem appends a Go value (as get returns; nil is null) to the
// element vec el.
func appendElem(el *vec, x any) {
	r := el.n
	el.n++
	switch el.t.Kind {
	case stream.Float64:
		el.f = append(el.f, 0)
	case stream.String:
		el.s = append(el.s, "")
	case stream.Decimal:
		el.d = append(el.d, nil)
	default:
		el.i = append(el.i, 0)
	}
	if el.valid != nil {
		el.valid = append(el.valid, true)
	}
	set(el, r, x)
}

// endRow closes row r of the array vec v: its elements are those appended
// since the previous row's end.
func endRow(v *vec, r int) { v.off[r+1] = int32(v.el.n) }

// nullRow makes row r of the array vec v a null array.
func nullRow(v *vec, r int) {
	v.off[r+1] = v.off[r]
	v.setNull(r)
}

// arrayLen is the element count of row r of the array vec v.
func arrayLen(v *vec, r int) int { return int(v.off[r+1] - v.off[r]) }

// index compiles a[i].
func (c *compiler) index(x Index) (node, error) {
	a, err := c.compile(x.X)
	if err != nil {
		return nil, err
	}
	i, err := c.compile(x.I)
	if err != nil {
		return nil, err
	}
	if !a.typ().IsArray() {
		return nil, mismatch(x, "the subscript [] needs an ARRAY, not %s", a.typ())
	}
	if t := i.typ(); t != Null && !t.integral() {
		return nil, mismatch(x, "the array index is %s, not an integer", t)
	}
	return &elementNode{arr: a, idx: to(i, BigInt), mode: subscript, t: a.typ().Elem(), src: x}, nil
}

// elementMode is how an index reads: 0-based (a[i], get) or 1-based from
// either end (element_at), and whether out of range is an error.
type elementMode uint8

const (
	subscript    elementMode = iota // a[i]: ANSI raises INVALID_ARRAY_INDEX
	getItem                         // get(a, i): null out of range
	elementAt                       // element_at: ANSI raises INVALID_ARRAY_INDEX_IN_ELEMENT_AT
	tryElementAt                    // try_element_at: null out of range
)

type elementNode struct {
	arr, idx node
	mode     elementMode
	t        Type
	src      Expr
}

func (n *elementNode) typ() Type    { return n.t }
func (n *elementNode) source() Expr { return n.src }
func (n *elementNode) eval(c *ctx, sel []bool) (*vec, error) {
	a, err := n.arr.eval(c, sel)
	if err != nil {
		return nil, err
	}
	ix, err := n.idx.eval(c, sel)
	if err != nil {
		return nil, err
	}
	out := newVec(n.t, c.n)
	for r := 0; r < c.n; r++ {
		if a.null(r) || ix.null(r) {
			out.setNull(r)
			continue
		}
		size, i := int64(arrayLen(a, r)), ix.i[r]
		pos := i // 0-based position
		if n.mode == elementAt || n.mode == tryElementAt {
			switch {
			case i == 0:
				if live(sel, r) {
					return nil, errcode.New(CodeInvalidIndexOfZero, "", "use a 1-based index (the first element is 1, the last -1)",
						"the index 0 is invalid in %s: an index shall be either < 0 or > 0 (the first element has index 1)", n.src)
				}
				out.setNull(r)
				continue
			case i > 0:
				pos = i - 1
			default:
				pos = size + i
			}
		}
		if pos < 0 || pos >= size {
			if c.ansi && live(sel, r) {
				switch n.mode {
				case subscript:
					return nil, errcode.New(CodeInvalidArrayIndex, "", "use get(arr, i) to tolerate an index out of bounds and return NULL instead, or set spark.sql.ansi.enabled=false",
						"the index %d is out of bounds in %s: the array has %d elements", i, n.src, size)
				case elementAt:
					return nil, errcode.New(CodeInvalidArrayIndexInElementAt, "", "use try_element_at to tolerate an index out of bounds and return NULL instead, or set spark.sql.ansi.enabled=false",
						"the index %d is out of bounds in %s: the array has %d elements", i, n.src, size)
				}
			}
			out.setNull(r)
			continue
		}
		set(out, r, get(a.el, int(a.off[r])+int(pos)))
	}
	return out, nil
}

// sizeNode is size/cardinality (legacy: -1 for a null array when ANSI is
// off, Spark's spark.sql.legacy.sizeOfNull=true default) or array_size
// (always null).
type sizeNode struct {
	arr    node
	legacy bool
	src    Expr
}

func (n *sizeNode) typ() Type    { return Int }
func (n *sizeNode) source() Expr { return n.src }
func (n *sizeNode) eval(c *ctx, sel []bool) (*vec, error) {
	a, err := n.arr.eval(c, sel)
	if err != nil {
		return nil, err
	}
	out := newVec(Int, c.n)
	for r := 0; r < c.n; r++ {
		switch {
		case !a.null(r):
			out.i[r] = int64(arrayLen(a, r))
		case n.legacy && !c.ansi:
			out.i[r] = -1
		default:
			out.setNull(r)
		}
	}
	return out, nil
}

// containsNode is array_contains(a, v): true if an element equals v;
// else null if an element is null; else false. Null when a or v is.
type containsNode struct {
	arr, val node
	cmp      Type // the type elements and value compare in
	src      Expr
}

func (n *containsNode) typ() Type    { return Boolean }
func (n *containsNode) source() Expr { return n.src }
func (n *containsNode) eval(c *ctx, sel []bool) (*vec, error) {
	a, err := n.arr.eval(c, sel)
	if err != nil {
		return nil, err
	}
	v, err := n.val.eval(c, sel)
	if err != nil {
		return nil, err
	}
	et := n.arr.typ().Elem()
	// Elements and value of one type compare in their storage, without
	// boxing each element (get) and casting it (1.7x faster over strings).
	same := et == n.cmp && n.val.typ() == n.cmp && n.cmp.Kind != stream.Decimal && n.cmp.Kind != 0
	out := newVec(Boolean, c.n)
	for r := 0; r < c.n; r++ {
		if a.null(r) || v.null(r) {
			out.setNull(r)
			continue
		}
		if same {
			found, sawNull := containsSame(a.el, int(a.off[r]), int(a.off[r+1]), v, r)
			switch {
			case found:
				out.i[r] = 1
			case sawNull:
				out.setNull(r)
			}
			continue
		}
		want, _ := castValue(get(v, r), n.val.typ(), n.cmp, false)
		found, sawNull := false, false
		for e := a.off[r]; e < a.off[r+1] && !found; e++ {
			x := get(a.el, int(e))
			if x == nil {
				sawNull = true
				continue
			}
			x, _ = castValue(x, et, n.cmp, false)
			found = equalValues(x, want)
		}
		switch {
		case found:
			out.i[r] = 1
		case sawNull:
			out.setNull(r)
		}
	}
	return out, nil
}

// containsSame is array_contains over elements el[lo:hi] of v's type: whether one
// equals v's row r, and whether an element is null.
func containsSame(el *vec, lo, hi int, v *vec, r int) (found, sawNull bool) {
	for e := lo; e < hi; e++ {
		switch {
		case el.null(e):
			sawNull = true
		case el.i != nil:
			found = el.i[e] == v.i[r]
		case el.f != nil:
			found = sqlEqualFloat(el.f[e], v.f[r])
		case el.s != nil:
			found = el.s[e] == v.s[r]
		}
		if found {
			return true, sawNull
		}
	}
	return false, sawNull
}

// equalValues compares two Go values of one type (as get returns them).
func equalValues(a, b any) bool {
	if x, ok := a.(*big.Int); ok {
		y, ok := b.(*big.Int)
		return ok && x.Cmp(y) == 0
	}
	if x, ok := a.(float64); ok {
		y, ok := b.(float64)
		return ok && sqlEqualFloat(x, y)
	}
	return a != nil && a == b
}

// sqlEqualFloat is Spark's equality of doubles in its ordering
// (SQLOrderingUtil.compareDoubles): NaN equals NaN, -0.0 equals 0.0.
func sqlEqualFloat(x, y float64) bool {
	return x == y || (x != x && y != y)
}

// arrayNode is array(e1, ..., en).
type arrayNode struct {
	elems []node
	t     Type
	src   Expr
}

func (n *arrayNode) typ() Type    { return n.t }
func (n *arrayNode) source() Expr { return n.src }
func (n *arrayNode) eval(c *ctx, sel []bool) (*vec, error) {
	vals := make([]*vec, len(n.elems))
	for i, e := range n.elems {
		v, err := e.eval(c, sel)
		if err != nil {
			return nil, err
		}
		vals[i] = v
	}
	out := newArrayVec(n.t, c.n)
	for r := 0; r < c.n; r++ {
		for _, v := range vals {
			appendElem(out.el, get(v, r))
		}
		endRow(out, r)
	}
	return out, nil
}

// splitNode is split(str, regex[, limit]) with Java's String.split
// semantics (Spark's UTF8String.split; a limit of 0 or less keeps every
// piece, trailing empty ones too).
type splitNode struct {
	s, re, limit node // limit nil: -1
	src          Expr
}

func (n *splitNode) typ() Type    { return ArrayOf(String) }
func (n *splitNode) source() Expr { return n.src }
func (n *splitNode) eval(c *ctx, sel []bool) (*vec, error) {
	s, err := n.s.eval(c, sel)
	if err != nil {
		return nil, err
	}
	re, err := n.re.eval(c, sel)
	if err != nil {
		return nil, err
	}
	var lim *vec
	if n.limit != nil {
		if lim, err = n.limit.eval(c, sel); err != nil {
			return nil, err
		}
	}
	out := newArrayVec(ArrayOf(String), c.n)
	var last string
	var rx *regexp.Regexp
	for r := 0; r < c.n; r++ {
		if s.null(r) || re.null(r) || lim != nil && lim.null(r) {
			nullRow(out, r)
			continue
		}
		limit := int64(-1)
		if lim != nil {
			limit = lim.i[r]
		}
		pat := re.s[r]
		if rx == nil || pat != last {
			if rx, err = regexp.Compile(pat); err != nil {
				if live(sel, r) {
					return nil, errcode.New(CodeInvalidArgument, "", "write the pattern in RE2 syntax (docs/contracts.md, Arrays)",
						"the regular expression %q in %s is invalid: %v", pat, n.src, err)
				}
				rx = nil
				nullRow(out, r)
				continue
			}
			last = pat
		}
		for _, p := range javaSplit(s.s[r], pat, rx, limit) {
			appendElem(out.el, p)
		}
		endRow(out, r)
	}
	return out, nil
}

// javaSplit is Spark's UTF8String.split(pattern, limit): an empty pattern
// splits into characters (at most limit pieces, the last the rest); else
// Java's Pattern.split with a limit of 0 taken as -1.
func javaSplit(s, pat string, rx *regexp.Regexp, limit int64) []string {
	if limit == 0 {
		limit = -1
	}
	if s != "" && pat == "" {
		n := int64(utf8.RuneCountInString(s))
		if limit > 0 && limit < n {
			n = limit
		}
		out := make([]string, 0, n)
		for int64(len(out)) < n-1 {
			_, w := utf8.DecodeRuneInString(s)
			out, s = append(out, s[:w]), s[w:]
		}
		return append(out, s)
	}
	var out []string
	index := 0
	for _, m := range rx.FindAllStringIndex(s, -1) {
		if limit > 0 && int64(len(out)) >= limit-1 {
			break
		}
		if index == 0 && m[0] == 0 && m[1] == 0 {
			continue // no empty leading piece for a zero-width match at the start
		}
		out = append(out, s[index:m[0]])
		index = m[1]
	}
	if index == 0 && len(out) == 0 {
		return []string{s}
	}
	return append(out, s[index:])
}

// arrayArg compiles a function's array argument.
func arrayArg(call Call, a node) error {
	if a.typ() == Null || !a.typ().IsArray() {
		return mismatch(call, "argument 1 requires an ARRAY, not %s", a.typ())
	}
	return nil
}

// elementFn builds element_at, try_element_at and get.
func elementFn(mode elementMode) func(*compiler, Call, []node) (node, error) {
	return func(_ *compiler, call Call, args []node) (node, error) {
		if err := arrayArg(call, args[0]); err != nil {
			return nil, err
		}
		if t := args[1].typ(); t != Null && !t.integral() {
			return nil, mismatch(call, "argument 2 requires an INT, not %s", t)
		}
		return &elementNode{arr: args[0], idx: to(args[1], BigInt), mode: mode, t: args[0].typ().Elem(), src: call}, nil
	}
}

// sizeFn builds size/cardinality (legacy) and array_size.
func sizeFn(legacy bool) func(*compiler, Call, []node) (node, error) {
	return func(_ *compiler, call Call, args []node) (node, error) {
		if err := arrayArg(call, args[0]); err != nil {
			return nil, err
		}
		return &sizeNode{arr: args[0], legacy: legacy, src: call}, nil
	}
}

func arrayContainsFn(_ *compiler, call Call, args []node) (node, error) {
	if err := arrayArg(call, args[0]); err != nil {
		return nil, err
	}
	et, vt := args[0].typ().Elem(), args[1].typ()
	t, ok := wider(et, vt)
	if !ok {
		return nil, mismatch(call, "the array's elements are %s, the value %s", et, vt)
	}
	return &containsNode{arr: args[0], val: args[1], cmp: t, src: call}, nil
}

func arrayFn(_ *compiler, call Call, args []node) (node, error) {
	t, err := common(call, args)
	if err != nil {
		return nil, err
	}
	if len(args) == 0 {
		t = String // spark.sql.legacy.createEmptyCollectionUsingStringType: array() is ARRAY<STRING>
	}
	elems := make([]node, len(args))
	for i, a := range args {
		elems[i] = to(a, t)
	}
	return &arrayNode{elems: elems, t: ArrayOf(t), src: call}, nil
}

func splitFn(_ *compiler, call Call, args []node) (node, error) {
	types := []Type{String, String, Int}
	a, err := want(call, args, types[:len(args)]...)
	if err != nil {
		return nil, err
	}
	n := &splitNode{s: a[0], re: a[1], src: call}
	if len(a) == 3 {
		n.limit = to(a[2], BigInt)
	}
	return n, nil
}

// addArrays registers the array functions.
func addArrays() {
	functions["element_at"] = funcSpec{2, 2, elementFn(elementAt)}
	functions["try_element_at"] = funcSpec{2, 2, elementFn(tryElementAt)}
	functions["get"] = funcSpec{2, 2, elementFn(getItem)}
	functions["size"] = funcSpec{1, 1, sizeFn(true)}
	functions["cardinality"] = funcSpec{1, 1, sizeFn(true)}
	functions["array_size"] = funcSpec{1, 1, sizeFn(false)}
	functions["array_contains"] = funcSpec{2, 2, arrayContainsFn}
	functions["array"] = funcSpec{0, -1, arrayFn}
	functions["split"] = funcSpec{2, 3, splitFn}
}

// arrayText renders row r of an array vec as Spark's CAST(array AS
// STRING) does: [a, b, null].
func arrayText(v *vec, r int) string {
	var b strings.Builder
	b.WriteByte('[')
	for e := v.off[r]; e < v.off[r+1]; e++ {
		if e > v.off[r] {
			b.WriteString(", ")
		}
		x := get(v.el, int(e))
		if x == nil {
			b.WriteString("null")
			continue
		}
		b.WriteString(format(x, v.el.t))
	}
	b.WriteByte(']')
	return b.String()
}
