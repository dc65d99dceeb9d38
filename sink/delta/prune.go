package delta

import (
	"encoding/json"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/ethstream/ethstream/stream"
)

// Which live files may hold a key: MERGE reads only the files whose stats
// (min, max and null count of every key column) admit one of the batch's
// keys. A bound the stats lack leaves the range open on that side.

// fileRange is what a file's stats say about its row count and window, for
// OPTIMIZE's order and MERGE's first cut.
type fileRange struct {
	numRecords   int64 // -1 unknown
	hasWS        bool
	minWS, maxWS int64 // maxWS already widened for millisecond truncation
}

// leafRange is what a file's stats say about one key column.
type leafRange struct {
	bounded  bool  // min and max known
	lo, hi   int64 // Int64; Timestamp in µs, hi widened by 999 µs (stats are cut to ms)
	flo, fhi float64
	slo, shi string // hi may be a 32-character prefix followed by U+10FFFF
	nulls    int64  // -1 unknown
	allNull  bool   // every row is null here
}

func statTime(v any) (int64, bool) {
	s, ok := v.(string)
	if !ok {
		return 0, false
	}
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, false
	}
	return ts.UnixMicro(), true
}

// statNumber reads a JSON number of the stats (json.Number) or a typed
// checkpoint stat.
func statNumber(v any) (int64, float64, bool) {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, float64(i), true
		}
		f, err := x.Float64()
		return int64(f), f, err == nil
	case int64:
		return x, float64(x), true
	case int32:
		return int64(x), float64(x), true
	case float64:
		return int64(x), x, true
	case float32:
		return int64(x), float64(x), true
	}
	return 0, 0, false
}

func rangeOf(f *AddFile) fileRange {
	fr := fileRange{numRecords: -1}
	st, err := parseStats(f.Stats)
	if err != nil {
		return fr
	}
	if st.NumRecords != nil {
		fr.numRecords = *st.NumRecords
	}
	mw, _ := st.MinValues[windowField].(map[string]any)
	xw, _ := st.MaxValues[windowField].(map[string]any)
	lo, ok1 := statTime(mw[windowStart])
	hi, ok2 := statTime(xw[windowStart])
	if ok1 && ok2 {
		fr.hasWS, fr.minWS, fr.maxWS = true, lo, hi+999
	}
	return fr
}

// statAt returns the stat of a column path in one of the stats' maps.
func statAt(m map[string]any, path []string) any {
	if len(path) == 2 {
		sub, _ := m[path[0]].(map[string]any)
		return sub[path[1]]
	}
	return m[path[0]]
}

// keyRanges parses the ranges of the layout's key columns from a file's
// stats, in key order.
func keyRanges(f *AddFile, l *outLayout) []leafRange {
	out := make([]leafRange, len(l.keys))
	st, err := parseStats(f.Stats)
	for p, k := range l.keys {
		r := &out[p]
		r.nulls = -1
		if err != nil {
			continue
		}
		lf := l.leaves[k]
		if n, _, ok := statNumber(statAt(st.NullCount, lf.path)); ok {
			r.nulls = n
			r.allNull = st.NumRecords != nil && n == *st.NumRecords
		}
		lo, hi := statAt(st.MinValues, lf.path), statAt(st.MaxValues, lf.path)
		switch lf.typ {
		case stream.Timestamp:
			a, ok1 := statTime(lo)
			b, ok2 := statTime(hi)
			r.bounded, r.lo, r.hi = ok1 && ok2, a, b+999
		case stream.Int64, stream.Int32, stream.Int16, stream.Int8:
			a, _, ok1 := statNumber(lo)
			b, _, ok2 := statNumber(hi)
			r.bounded, r.lo, r.hi = ok1 && ok2, a, b
		case stream.Float64:
			_, a, ok1 := statNumber(lo)
			_, b, ok2 := statNumber(hi)
			r.bounded, r.flo, r.fhi = ok1 && ok2, a, b
		case stream.String:
			a, ok1 := lo.(string)
			b, ok2 := hi.(string)
			r.bounded, r.slo, r.shi = ok1 && ok2, a, b
		}
	}
	return out
}

// keyRangesOf is keyRanges, parsed once per snapshot and layout (a live
// batch checks every file).
func (s *Snapshot) keyRangesOf(f *AddFile, l *outLayout) []leafRange {
	s.rangeMu.Lock()
	defer s.rangeMu.Unlock()
	if s.keyLayout != l {
		s.keyLayout, s.keyRanges = l, nil
	}
	if r, ok := s.keyRanges[f]; ok {
		return r
	}
	if s.keyRanges == nil {
		s.keyRanges = map[*AddFile][]leafRange{}
	}
	r := keyRanges(f, l)
	s.keyRanges[f] = r
	return r
}

// strMayContain reports whether s can lie within [lo, hi] given that hi may
// be a truncated prefix (with or without a tie-breaker).
func strMayContain(s string, lo, hi string) bool {
	return s >= lo && strBelow(s, hi)
}

// strBelow reports whether s can be at most hi, a max that may be cut.
func strBelow(s, hi string) bool {
	return s <= hi || strings.HasPrefix(s, strings.TrimSuffix(hi, maxTieBreaker))
}

// admits reports whether the ranges kr (in key order) may hold row i's key.
func admits(rs *rowSet, i int, kr []leafRange) bool {
	for p, k := range rs.l.keys {
		r := &kr[p]
		v := &rs.cols[k]
		if v.IsNull(i) {
			if r.nulls == 0 {
				return false
			}
			continue
		}
		if r.allNull {
			return false
		}
		if !r.bounded {
			continue
		}
		switch rs.l.leaves[k].typ {
		case stream.Float64:
			x := v.Float64s[i]
			if !math.IsNaN(x) && !math.IsInf(x, 0) && (x < r.flo || x > r.fhi) {
				return false // NaN and infinities are not in the stats
			}
		case stream.String:
			if !strMayContain(v.Strings[i], r.slo, r.shi) {
				return false
			}
		default:
			if x := v.Int64s[i]; x < r.lo || x > r.hi {
				return false
			}
		}
	}
	return true
}

// mergeCandidates returns the live files whose stats may hold a key of
// uniq (sorted by key, nulls first), in path order. The first key column
// narrows the rows to check by binary search; the others are checked per
// row.
func (s *Snapshot) mergeCandidates(uniq *rowSet) []*AddFile {
	if uniq.n == 0 {
		return nil
	}
	if len(uniq.l.keys) == 0 { // one key, which every row has
		var out []*AddFile
		for _, f := range s.files {
			if fr := s.rangeOf(f); fr.numRecords != 0 {
				out = append(out, f)
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
		return out
	}
	k0 := uniq.l.keys[0]
	v0 := &uniq.cols[k0]
	typ0 := uniq.l.leaves[k0].typ
	// Rows [0, nulls) have a null first key column.
	nulls := sort.Search(uniq.n, func(i int) bool { return !v0.IsNull(i) })
	var out []*AddFile
	for _, f := range s.files {
		if fr := s.rangeOf(f); fr.numRecords == 0 {
			continue
		}
		kr := s.keyRangesOf(f, uniq.l)
		if s.mayHoldAny(uniq, kr, nulls, typ0, v0) {
			out = append(out, f)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func (s *Snapshot) mayHoldAny(uniq *rowSet, kr []leafRange, nulls int, typ0 stream.Type, v0 *stream.Column) bool {
	r0 := &kr[0]
	if r0.nulls != 0 {
		for i := range nulls {
			if admits(uniq, i, kr) {
				return true
			}
		}
	}
	if r0.allNull {
		return false
	}
	lo, hi := nulls, uniq.n
	if r0.bounded && typ0 != stream.Float64 {
		switch typ0 {
		case stream.String:
			lo += sort.Search(hi-lo, func(i int) bool { return v0.Strings[nulls+i] >= r0.slo })
		default:
			lo += sort.Search(hi-lo, func(i int) bool { return v0.Int64s[nulls+i] >= r0.lo })
		}
	}
	for i := lo; i < hi; i++ {
		if r0.bounded && typ0 != stream.Float64 {
			past := typ0 == stream.String && !strBelow(v0.Strings[i], r0.shi) || typ0 != stream.String && v0.Int64s[i] > r0.hi
			if past {
				break
			}
		}
		if admits(uniq, i, kr) {
			return true
		}
	}
	return false
}
