package delta

import (
	"cmp"
	"slices"
	"strings"

	"github.com/ethstream/ethstream/stream"
)

// rowSet holds rows of one table layout by column: one engine column per
// layout leaf, as the engine's batches and Parquet's column chunks hold them, so
// a batch becomes a rowSet without copying its values and a file is decoded
// and encoded one column at a time. Timestamps are microseconds since the
// epoch, UTC.
type rowSet struct {
	l    *outLayout
	cols []stream.Column
	n    int
	// winNull, when non-nil, marks rows whose window struct itself is null
	// (a file another writer produced); their window leaves are null too.
	winNull []bool
	// del, when non-nil, marks batch rows with sign -1: the MERGE deletes
	// the target row with their key (never set on rows of a file).
	del []bool
}

func newRowSet(l *outLayout, capacity int) *rowSet {
	rs := &rowSet{l: l, cols: make([]stream.Column, len(l.leaves))}
	for i, lf := range l.leaves {
		rs.cols[i] = stream.MakeColumn(lf.col, lf.typ, 0, capacity)
	}
	return rs
}

// batchRowSet views an engine batch as a rowSet of layout l, sharing its
// columns (neither is modified afterwards). Only signs are converted.
func batchRowSet(l *outLayout, b *stream.Batch) (*rowSet, error) {
	rs := &rowSet{l: l, cols: make([]stream.Column, len(l.leaves)), n: b.Len}
	for i, lf := range l.leaves {
		c := b.Column(lf.col)
		if c == nil || c.Type != lf.typ && !widens(c.Type, lf.typ) {
			return nil, errBadBatch(lf.col, lf.typ)
		}
		rs.cols[i] = stream.Column{Name: lf.col, Type: lf.typ, Int64s: c.Int64s, Float64s: c.Float64s, Strings: c.Strings, Decimals: c.Decimals, Offsets: c.Offsets, Elems: c.Elems}
		if c.Valid != nil && slices.Contains(c.Valid, false) {
			rs.cols[i].Valid = c.Valid
		}
	}
	if b.Signs != nil && slices.Contains(b.Signs, -1) {
		rs.del = make([]bool, b.Len)
		for r, s := range b.Signs {
			rs.del[r] = s < 0
		}
	}
	return rs, nil
}

// batch returns the rows as an engine batch with the layout's column names
// (the window struct as window_start, window_end), sharing the columns.
func (rs *rowSet) batch() *stream.Batch {
	b := &stream.Batch{Len: rs.n, Columns: make([]stream.Column, len(rs.cols))}
	for i, lf := range rs.l.leaves {
		b.Columns[i] = rs.cols[i]
		b.Columns[i].Name = lf.col
	}
	return b
}

// cmpAt compares one column's values at rows i of a and j of b (same
// layout): null before every value, nulls equal to each other (Spark's <=>,
// so a null key is one key), NaN before every other double.
func cmpAt(t stream.Type, a *stream.Column, i int, b *stream.Column, j int) int {
	an, bn := a.IsNull(i), b.IsNull(j)
	if an || bn {
		return cmpNullable(an, bn)
	}
	switch t.Storage() {
	case stream.Array:
		return cmpArrays(t, a, i, b, j)
	case stream.Float64:
		return cmp.Compare(a.Float64s[i], b.Float64s[j])
	case stream.String:
		return strings.Compare(a.Strings[i], b.Strings[j])
	case stream.Decimal:
		return a.Decimals[i].Cmp(b.Decimals[j])
	}
	return cmp.Compare(a.Int64s[i], b.Int64s[j])
}

// cmpNullable orders null before non-null; 0 means "compare the values"
// (both present) or "equal" (both null).
func cmpNullable(an, bn bool) int {
	switch {
	case an == bn:
		return 0
	case an:
		return -1
	}
	return 1
}

// cmpKey orders row i of a and row j of b by the layout's key columns.
func cmpKey(a *rowSet, i int, b *rowSet, j int) int {
	for _, k := range a.l.keys {
		if c := cmpAt(a.l.leaves[k].typ, &a.cols[k], i, &b.cols[k], j); c != 0 {
			return c
		}
	}
	return 0
}

// sortedUnique reports whether the rows are in key order with no key twice.
func (rs *rowSet) sortedUnique() bool {
	if sorted, typed := rs.sortedUniqueTyped(); typed {
		return sorted
	}
	for i := 1; i < rs.n; i++ {
		if cmpKey(rs, i-1, rs, i) >= 0 {
			return false
		}
	}
	return true
}

// sortedUniqueTyped is sortedUnique (sorted) when every key column has no
// null and holds strings or integers (typed; otherwise it decides
// nothing): each column's values are compared directly, without cmpAt's
// null checks and type switch per value (two thirds of the check's 0.4
// CPU-s in a seed backfill's profile, where every batch is checked).
func (rs *rowSet) sortedUniqueTyped() (sorted, typed bool) {
	type keyCol struct {
		ints []int64
		strs []string
	}
	ks := make([]keyCol, 0, len(rs.l.keys))
	for _, k := range rs.l.keys {
		c := &rs.cols[k]
		if c.Valid != nil {
			return false, false
		}
		switch rs.l.leaves[k].typ.Storage() {
		case stream.Array, stream.Float64, stream.Decimal:
			return false, false
		case stream.String:
			ks = append(ks, keyCol{strs: c.Strings})
		default:
			ks = append(ks, keyCol{ints: c.Int64s})
		}
	}
	for i := 1; i < rs.n; i++ {
		c := 0
		for _, k := range ks {
			if k.strs != nil {
				c = strings.Compare(k.strs[i-1], k.strs[i])
			} else {
				c = cmp.Compare(k.ints[i-1], k.ints[i])
			}
			if c != 0 {
				break
			}
		}
		if c >= 0 {
			return false, true
		}
	}
	return true, true
}

// dedupeSorted returns the rows sorted by key, keeping the last row of each
// key (the engine's order is the update order). When they are sorted with
// unique keys already (an update-mode batch in key order) rs itself is
// returned rather than copied: a copy of a seed backfill batch's ~1M rows
// would be live at the batch's memory peak.
func (rs *rowSet) dedupeSorted() *rowSet {
	if rs.sortedUnique() {
		return rs
	}
	perm := make([]int32, rs.n)
	for i := range perm {
		perm[i] = int32(i)
	}
	// Stable by input position, so that of equal keys the last comes last.
	slices.SortFunc(perm, func(a, b int32) int {
		if c := cmpKey(rs, int(a), rs, int(b)); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	out := perm[:0]
	for _, r := range perm {
		if len(out) > 0 && cmpKey(rs, int(out[len(out)-1]), rs, int(r)) == 0 {
			out[len(out)-1] = r
			continue
		}
		out = append(out, r)
	}
	idx := make([]int, len(out))
	for k, r := range out {
		idx[k] = int(r)
	}
	return rs.take(idx)
}

// sortByKey sorts the rows by key in place (order among equal keys is not
// kept: callers sort rows whose keys are unique).
func (rs *rowSet) sortByKey() {
	if rs.sortedUnique() {
		return
	}
	perm := make([]int, rs.n)
	for i := range perm {
		perm[i] = i
	}
	slices.SortFunc(perm, func(a, b int) int { return cmpKey(rs, a, rs, b) })
	*rs = *rs.take(perm)
}

// take returns the rows of rs at indices, in order (stream.Column.Take).
func (rs *rowSet) take(indices []int) *rowSet {
	out := &rowSet{l: rs.l, cols: make([]stream.Column, len(rs.cols)), n: len(indices)}
	for c := range rs.cols {
		out.cols[c] = rs.cols[c].Take(indices)
	}
	out.winNull = takeFlags(rs.winNull, indices)
	out.del = takeFlags(rs.del, indices)
	return out
}

// takeFlags is flags at indices, nil while none is set.
func takeFlags(flags []bool, indices []int) []bool {
	if flags == nil {
		return nil
	}
	out := make([]bool, len(indices))
	for k, i := range indices {
		out[k] = flags[i]
	}
	return out
}

// appendRow appends row i of src (same layout).
func (rs *rowSet) appendRow(src *rowSet, i int) {
	for c := range rs.cols {
		rs.cols[c].Append(&src.cols[c], i)
	}
	wn := src.winNull != nil && src.winNull[i]
	if wn && rs.winNull == nil {
		rs.winNull = make([]bool, rs.n)
	}
	if rs.winNull != nil {
		rs.winNull = append(rs.winNull, wn)
	}
	if d := src.deleted(i); d || rs.del != nil {
		if rs.del == nil {
			rs.del = make([]bool, rs.n)
		}
		rs.del = append(rs.del, d)
	}
	rs.n++
}

// appendRange appends rows [lo, hi) of src (same layout) column by column:
// the MERGE moves long runs of rows (a file's unchanged rows, a backfill's
// inserts), which a row at a time would copy value by value.
func (rs *rowSet) appendRange(src *rowSet, lo, hi int) {
	k := hi - lo
	if k <= 0 {
		return
	}
	for c := range rs.cols {
		rs.cols[c].AppendRange(&src.cols[c], lo, hi)
	}
	rs.winNull = appendFlags(rs.winNull, rs.n, src.winNull, lo, hi)
	rs.del = appendFlags(rs.del, rs.n, src.del, lo, hi)
	rs.n += k
}

// appendFlags appends src[lo:hi] (nil: all false) to dst, which holds n
// flags or is nil for n false ones; it stays nil while every flag is false.
func appendFlags(dst []bool, n int, src []bool, lo, hi int) []bool {
	if src == nil || !slices.Contains(src[lo:hi], true) {
		if dst == nil {
			return nil
		}
		return append(dst, make([]bool, hi-lo)...)
	}
	if dst == nil {
		dst = make([]bool, n, n+hi-lo)
	}
	return append(dst, src[lo:hi]...)
}

// slice returns rows [lo, hi) sharing rs's columns.
func (rs *rowSet) slice(lo, hi int) *rowSet {
	out := &rowSet{l: rs.l, cols: make([]stream.Column, len(rs.cols)), n: hi - lo}
	for c := range rs.cols {
		out.cols[c] = rs.cols[c].Slice(lo, hi)
	}
	if rs.winNull != nil {
		out.winNull = rs.winNull[lo:hi:hi]
	}
	if rs.del != nil {
		out.del = rs.del[lo:hi:hi]
	}
	return out
}

func (rs *rowSet) deleted(i int) bool { return rs.del != nil && rs.del[i] }
