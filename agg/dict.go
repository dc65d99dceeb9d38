package agg

import "github.com/ethstream/ethstream/stream"

// Dictionary views (stream.Dict): a source that hands a string column over
// with its dictionary's indexes (the archive's Parquet decoder, the
// engine's literal source column) lets Process intern and hash each of the
// chunk's distinct values once, and find a row's key by its indexes where
// a row otherwise costs a probe by its strings' identity and a hash of
// them (a seed backfill's rows share a few hundred miners per row group).
// The view is the producer's promise (stream.Dict): Process trusts a live
// one (DictView) and reads no row's string, only its validity, which must
// agree with its index (-1 for null) or the row takes the strings' path.

// dictVal is a view's value d interned (gen: the chunk's dgen when set).
type dictVal struct {
	gen uint32
	interned
}

// dictKey is the chunk's key of a code (assignDict): entry e of window
// start start (gen: the chunk's dgen when set).
type dictKey struct {
	gen   uint32
	e     int32
	start int64
}

// maxDictKeys bounds dkeys: the product of the views' sizes (plus one for
// null) past which the codes are not used.
const maxDictKeys = 1 << 16

// resolveDicts takes the chunk's views (after newChunk): a String group
// column's live view. dictAll is set when every group column has one and
// their codes fit maxDictKeys.
func (pt *partial) resolveDicts() {
	pt.dgen++
	if pt.dgen == 0 { // wrapped: a stamp could match again
		for k := range pt.dvals {
			clear(pt.dvals[k])
		}
		clear(pt.dkeys)
		pt.dgen = 1
	}
	all, codes := true, 1
	for k, c := range pt.cols.group {
		d := c.DictView()
		if !pt.strCol[k] || c.Type.Kind() == stream.Decimal {
			d = nil
		}
		if pt.cols.dict[k] = d; d == nil {
			all = false
			continue
		}
		if len(pt.dvals[k]) < len(d.Values) {
			pt.dvals[k] = append(pt.dvals[k], make([]dictVal, len(d.Values)-len(pt.dvals[k]))...)
		}
		if all {
			pt.dstride[k] = codes
			codes *= len(d.Values) + 1 // 0 is null
			all = codes <= maxDictKeys
		}
	}
	pt.dictAll = all && len(pt.cols.group) > 0
	if pt.dictAll && len(pt.dkeys) < codes {
		pt.dkeys = append(pt.dkeys, make([]dictKey, codes-len(pt.dkeys))...)
	}
}

// dictAt returns row i's index in group column k's view, ok when it has
// one and the row is valid with an index in range.
func (pt *partial) dictAt(k, i int) (int32, bool) {
	v := pt.cols.dict[k]
	if v == nil {
		return 0, false
	}
	d := v.Index[i]
	if d < 0 || int(d) >= len(v.Values) || pt.cols.group[k].IsNull(i) {
		return 0, false
	}
	return d, true
}

// dictValue is value d of group column k's view, interned (its id), and its
// hash (internOf's), once per chunk.
func (pt *partial) dictValue(k int, d int32) (uint32, uint64) {
	dv := &pt.dvals[k][d]
	if dv.gen != pt.dgen {
		s := pt.cols.dict[k].Values[d]
		if s == "" {
			dv.interned = interned{h: emptyHash}
		} else {
			dv.interned = pt.internContent(s)
		}
		dv.gen = pt.dgen
	}
	return dv.id, dv.h
}

// assignDict finds (or inserts) the entry of row i (window start start, in
// groupIndex part part) by its code, the sum of its views' indexes plus
// one (0 for a null) times their strides; ok is false when a row's index
// disagrees with its validity or lies outside its view, and the caller
// finds it by its strings.
func (pt *partial) assignDict(part, start int64, i int) (int32, bool) {
	code := 0
	for k, v := range pt.cols.dict {
		d := v.Index[i]
		if (d == -1) != pt.cols.group[k].IsNull(i) || d < -1 || int(d) >= len(v.Values) {
			return 0, false
		}
		code += int(d+1) * pt.dstride[k]
	}
	slot := &pt.dkeys[code]
	if slot.gen == pt.dgen && slot.start == start {
		return slot.e, true
	}
	h := pt.rowHash(start, i)
	e, inserted := pt.groups.find(part, h, func(e int32) bool { return pt.rowIs(e, start, i) })
	if inserted {
		pt.addEntry(start, i)
	}
	*slot = dictKey{gen: pt.dgen, e: e, start: start}
	return e, true
}
