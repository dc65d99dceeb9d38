package join

import "unsafe"

// The rows and keys the join keeps are carved from larger arrays instead
// of allocated one by one (three allocations a stored row were most of
// the join shape's allocations). A kept row, key or keyRows holds its
// whole array alive, so the arrays are small: a row or key the watermark
// keeps for long (a straggler of a batch whose other rows were evicted)
// holds at most one array of slabRows of them (10 KB for the join shape's
// rows of five columns).

// slabRows is the rows, keys or keyRows an array holds.
const slabRows = 64

// slabs hands out one side's or the operator's rows, join keys and
// keyRows; the zero value is ready. Nothing is ever handed out twice: a
// slab is only appended to, so what it handed out stays valid and
// unchanged however long it is kept.
type slabs struct {
	vals []value
	keys []byte
	krs  []keyRows
}

// row returns a zeroed row of n columns.
func (s *slabs) row(n int) row {
	if len(s.vals) < n {
		s.vals = make([]value, n*slabRows)
	}
	r := s.vals[:n:n]
	s.vals = s.vals[n:]
	return r
}

// key returns a string copy of b.
func (s *slabs) key(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if cap(s.keys)-len(s.keys) < len(b) {
		s.keys = make([]byte, 0, max(len(b), 80*slabRows))
	}
	start := len(s.keys)
	s.keys = append(s.keys, b...)
	// The bytes are never written again (the slab is only appended to,
	// and a full one is replaced, not reused).
	return unsafe.String(&s.keys[start], len(b))
}

// keyRows returns a zeroed keyRows.
func (s *slabs) keyRows() *keyRows {
	if len(s.krs) == 0 {
		s.krs = make([]keyRows, slabRows)
	}
	k := &s.krs[0]
	s.krs = s.krs[1:]
	return k
}
