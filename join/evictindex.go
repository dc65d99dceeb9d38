package join

import (
	"cmp"
	"encoding/binary"
	"slices"
	"strings"
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
//
// Rows mostly arrive in the column's order (blocks in event-time order):
// those that do not go below the last one added queue in run, in order,
// and cost no heap work (a heap pop per stored row was 1% of the join
// shape's instructions); the others go to the heap.
type evictIndex struct {
	run  []evictEntry // ascending ts from head
	head int
	h    evictHeap
	// due is popDue's result, its array reused by the next call (a
	// backfill's eviction pops every row of a batch), and sorting its
	// sort buffer.
	due     []string
	sorting []dueKey
}

// dueKey is a key popDue sorts, with its first 8 bytes as a number: most
// comparisons stop there instead of reading both keys (a string sort of
// a batch's keys was most of eviction's instructions).
type dueKey struct {
	pfx uint64
	key string
}

func newDueKey(key string) dueKey {
	var b [8]byte
	copy(b[:], key)
	return dueKey{pfx: binary.BigEndian.Uint64(b[:]), key: key}
}

// cmpDueKey orders as the keys do: a shorter key's missing bytes count
// as zeros in pfx, and equal prefixes fall back to the keys.
func cmpDueKey(a, b dueKey) int {
	if c := cmp.Compare(a.pfx, b.pfx); c != 0 {
		return c
	}
	return strings.Compare(a.key, b.key)
}

type evictEntry struct {
	ts  int64  // the row's column value, µs
	key string // the encoded join key
}

// evictHeap is a binary min-heap by ts, typed (container/heap boxes each
// pushed entry: an allocation per stored row).
type evictHeap []evictEntry

func (h *evictHeap) push(e evictEntry) {
	*h = append(*h, e)
	x := *h
	for i := len(x) - 1; i > 0; {
		up := (i - 1) / 2
		if x[up].ts <= x[i].ts {
			break
		}
		x[up], x[i] = x[i], x[up]
		i = up
	}
}

func (h *evictHeap) pop() evictEntry {
	x := *h
	top := x[0]
	n := len(x) - 1
	x[0] = x[n]
	x[n] = evictEntry{}
	x = x[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && x[r].ts < x[l].ts {
			m = r
		}
		if x[i].ts <= x[m].ts {
			break
		}
		x[i], x[m] = x[m], x[i]
		i = m
	}
	*h = x
	return top
}

// add indexes a stored row of key whose column value is v.
func (x *evictIndex) add(key string, v value) {
	if v.null() {
		return
	}
	e := evictEntry{ts: v.i(), key: key}
	if x.head == len(x.run) || e.ts >= x.run[len(x.run)-1].ts {
		if len(x.run) == cap(x.run) {
			x.growRun()
		}
		x.run = append(x.run, e)
		return
	}
	x.h.push(e)
}

// growRun gives run room for as many entries again as it holds from head,
// dropping the popped ones before it. append grows a large slice by a
// quarter: a backfill's run (two batches of rows) was copied into fresh
// memory about four times its size, and fresh memory's page faults were
// most of that (3% of the join shape's CPU profile).
func (x *evictIndex) growRun() {
	live := x.run[x.head:]
	run := make([]evictEntry, len(live), max(2*len(live), 1024))
	copy(run, live)
	x.run, x.head = run, 0
}

// len is the number of rows indexed.
func (x *evictIndex) len() int { return len(x.run) - x.head + len(x.h) }

// popDue removes the entries at or before limUs and returns their keys,
// valid until the next call. sorted: each once, in encoded-key order (the
// order a scan of the side met them), for a side whose evicted rows are
// emitted in that order; otherwise in the order popped, a key of several
// due rows as often (the sort was a quarter of an inner join's eviction).
func (x *evictIndex) popDue(limUs int64, sorted bool) []string {
	clear(x.due)
	keys := x.due[:0]
	for x.head < len(x.run) && x.run[x.head].ts <= limUs {
		keys = append(keys, x.run[x.head].key)
		x.run[x.head] = evictEntry{}
		x.head++
	}
	switch {
	case x.head == len(x.run):
		x.run, x.head = x.run[:0], 0
	case x.head > len(x.run)/2:
		n := copy(x.run, x.run[x.head:])
		clear(x.run[n:])
		x.run, x.head = x.run[:n], 0
	}
	for len(x.h) > 0 && x.h[0].ts <= limUs {
		keys = append(keys, x.h.pop().key)
	}
	if !sorted {
		x.due = keys
		return x.due
	}
	srt := x.sorting[:0]
	for _, k := range keys {
		srt = append(srt, newDueKey(k))
	}
	slices.SortFunc(srt, cmpDueKey)
	keys = keys[:0]
	for i, d := range srt {
		if i == 0 || d.key != keys[len(keys)-1] {
			keys = append(keys, d.key)
		}
	}
	clear(srt)
	x.sorting, x.due = srt[:0], keys
	return x.due
}
