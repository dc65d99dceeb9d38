package join

import (
	"container/heap"
	"slices"
)

// evictIndex orders one side's stored rows by the column its eviction
// compares (the key watermark column or the side's watermark column):
// eviction pops the keys of the rows at or before its limit instead of
// decoding every stored row of the side. It lives in memory only: built
// by one scan of the side's committed state when a batch first needs it (after
// Open, an Abort or a Repartition), then kept up to date as the batch
// stores rows and eviction removes them. A row with a null in the column
// is never evicted and has no entry. Every entry at or below a limit is
// popped by the eviction at that limit, which removes all of its key's
// rows at or below it, so no entry outlives its row.
type evictIndex struct{ h evictHeap }

type evictEntry struct {
	ts  int64  // the row's column value, µs
	key string // the encoded join key
}

type evictHeap []evictEntry

func (h evictHeap) Len() int           { return len(h) }
func (h evictHeap) Less(i, j int) bool { return h[i].ts < h[j].ts }
func (h evictHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *evictHeap) Push(x any)        { *h = append(*h, x.(evictEntry)) }
func (h *evictHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// add indexes a stored row of key whose column value is v.
func (x *evictIndex) add(key string, v value) {
	if !v.null {
		heap.Push(&x.h, evictEntry{ts: v.i, key: key})
	}
}

// due reports whether a row at or before limUs is stored.
func (x *evictIndex) due(limUs int64) bool { return len(x.h) > 0 && x.h[0].ts <= limUs }

// popDue removes the entries at or before limUs and returns their keys,
// each once, in encoded-key order (the order a scan of the side met them).
func (x *evictIndex) popDue(limUs int64) []string {
	var keys []string
	for x.due(limUs) {
		keys = append(keys, heap.Pop(&x.h).(evictEntry).key)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}
