package columnar

import (
	"sync"

	"github.com/ethstream/ethstream/stream"
)

// Pool recycles the value slices of decoded batches: a reader that is done
// with a batch (a source whose emit returned: stream.Source's ReadBatch
// contract forbids the consumer to retain it) puts it back, and the next
// row group of a File using the pool decodes into its slices instead of
// new ones. In a seed backfill the decoded columns were 46% of every byte
// allocated (1.1 GB), and so most of the garbage collector's cycles.
//
// Only BIGINT-stored (integers, timestamps, dates, booleans) and STRING
// columns are recycled, the archive's (and a STRING's dictionary indexes,
// stream.Dict); a String slice's headers are cleared
// when it is put back, so the pool holds no string alive. Every value of
// a recycled slice is overwritten by the decode (decodeChunk fills each
// row or fails). Safe for concurrent use.
type Pool struct {
	mu   sync.Mutex
	ints [][]int64
	strs [][]string
	idx  [][]int32 // dictionary views' indexes (stream.Dict)
}

// poolMax bounds each free list: the batches in flight at once (files read
// ahead and the one being emitted) times their columns stay well below it.
const poolMax = 64

// Put hands b's recyclable slices to the pool. b must not be used after.
func (p *Pool) Put(b *stream.Batch) {
	if p == nil || b == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range b.Columns {
		c := &b.Columns[i]
		switch {
		case c.Type.Kind() == stream.Array:
		case c.Type.Storage() == stream.String:
			if cap(c.Strings) > 0 && len(p.strs) < poolMax {
				clear(c.Strings[:cap(c.Strings)])
				p.strs = append(p.strs, c.Strings[:0])
			}
		case c.Type.Storage() == stream.Int64:
			if cap(c.Int64s) > 0 && len(p.ints) < poolMax {
				p.ints = append(p.ints, c.Int64s[:0])
			}
		}
		if c.Dict != nil && cap(c.Dict.Index) > 0 && len(p.idx) < poolMax {
			p.idx = append(p.idx, c.Dict.Index[:0])
		}
		c.Int64s, c.Strings, c.Dict = nil, nil, nil
	}
}

// index returns n dictionary indexes for the caller to overwrite, recycled
// when the pool has room for them (nil for no rows).
func (p *Pool) index(n int) []int32 {
	if n == 0 {
		return nil
	}
	if p != nil {
		if s := takeFit(p, &p.idx, n); s != nil {
			return s[:n]
		}
	}
	return make([]int32, n)
}

// putIndex hands back indexes index returned that no view took.
func (p *Pool) putIndex(s []int32) {
	if p == nil || cap(s) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idx) < poolMax {
		p.idx = append(p.idx, s[:0])
	}
}

// column returns a column of n rows whose values the caller overwrites,
// with a recycled slice when the pool has one with room for n (a nil pool
// allocates, as stream.MakeColumn). A column of no rows takes nothing: its
// batch (an empty row group) is never emitted, so never put back, and any
// slice of the pool fits it.
func (p *Pool) column(name string, t stream.Type, n int) stream.Column {
	if p == nil || n == 0 || t.Kind() == stream.Array {
		return stream.MakeColumn(name, t, n, n)
	}
	switch t.Storage() {
	case stream.String:
		if s := takeFit(p, &p.strs, n); s != nil {
			return stream.Column{Name: name, Type: t, Strings: s[:n]}
		}
	case stream.Int64:
		if s := takeFit(p, &p.ints, n); s != nil {
			return stream.Column{Name: name, Type: t, Int64s: s[:n]}
		}
	}
	return stream.MakeColumn(name, t, n, n)
}

// takeFit removes and returns a slice of free with capacity for n. If none
// has, it empties free (row groups grow over an archive's history, so the
// slices too small now would stay too small and fill the list) and
// returns nil.
func takeFit[T any](p *Pool, free *[][]T, n int) []T {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(*free) - 1; i >= 0; i-- {
		if s := (*free)[i]; cap(s) >= n {
			last := len(*free) - 1
			(*free)[i] = (*free)[last]
			(*free)[last] = nil
			*free = (*free)[:last]
			return s
		}
	}
	clear(*free)
	*free = (*free)[:0]
	return nil
}
