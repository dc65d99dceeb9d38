package agg

import (
	"bytes"
	"encoding/binary"
	"slices"
	"sync"
)

// closedCarry is the state a version left out because the next batch's
// watermark closes it (doc.go, Closed at commit): each closed key with its
// encoded value, kept in memory from Finish(N) until batch N+1, which may
// still merge rows into those windows (Spark 3.4+ drops late input by the
// previous batch's watermark). Records live in one byte arena (key length,
// key, value length, value, as uvarints and bytes) so that the ~700k keys
// of a backfill batch cost their bytes plus four per key, not a map's
// per-entry overhead; offs indexes them in key order for a binary search.
// It is not safe for concurrent use.
type closedCarry struct {
	// version is the state version that left these keys out.
	version int64
	arena   []byte
	offs    []uint32
	// sorted says offs is in key order (the order update mode merges in,
	// so sorting is rarely needed).
	sorted bool
	// sortOnce sorts offs at the first get: most carries are never read
	// (in a backfill no row of batch N+1 falls in a window batch N
	// closed), so a carry no row reads is never sorted.
	sortOnce sync.Once
}

// newClosedCarry starts the carry of version v, with room for about
// sizeHint bytes of records.
func newClosedCarry(v int64, sizeHint int) *closedCarry {
	return &closedCarry{version: v, sorted: true, arena: make([]byte, 0, sizeHint)}
}

// reuse starts the carry of version v in c's memory, which its caller no
// longer reads (nil: fresh memory with room for the size of last, the
// carry before it: batches are alike, and growing the arena by doubling
// copied it about twice).
func (c *closedCarry) reuse(v int64, last *closedCarry) *closedCarry {
	if c == nil {
		hint := 0
		if last != nil {
			hint = len(last.arena)
		}
		return newClosedCarry(v, hint)
	}
	return &closedCarry{version: v, sorted: true, arena: c.arena[:0], offs: c.offs[:0]}
}

// add appends key with its encoded value (both copied).
func (c *closedCarry) add(key, val []byte) {
	if c.sorted && len(c.offs) > 0 && bytes.Compare(c.keyAt(len(c.offs)-1), key) >= 0 {
		c.sorted = false
	}
	if len(c.arena) > 1<<32-1-len(key)-len(val)-20 {
		panic("aggregation: the closed-at-commit carry exceeds 4 GiB")
	}
	c.offs = append(c.offs, uint32(len(c.arena)))
	c.arena = binary.AppendUvarint(c.arena, uint64(len(key)))
	c.arena = append(c.arena, key...)
	c.arena = binary.AppendUvarint(c.arena, uint64(len(val)))
	c.arena = append(c.arena, val...)
}

// record returns record i's key and value (views into the arena).
func (c *closedCarry) record(i int) (key, val []byte) { return recordAt(c.arena, c.offs[i]) }

// recordAt decodes the record at offset off of arena.
func recordAt(arena []byte, off uint32) (key, val []byte) {
	b := arena[off:]
	n, w := binary.Uvarint(b)
	key = b[w : w+int(n)]
	b = b[w+int(n):]
	n, w = binary.Uvarint(b)
	return key, b[w : w+int(n)]
}

func (c *closedCarry) keyAt(i int) []byte {
	k, _ := c.record(i)
	return k
}

// sort orders the records by key.
func (c *closedCarry) sort() {
	if c.sorted {
		return
	}
	// Each key is decoded once: a comparison that decoded both records'
	// uvarints was most of a seed backfill's carry cost (5.7 of its 22 CPU-s;
	// evicted keys arrive partition by partition, so a sort orders ~700k).
	type rec struct {
		key []byte
		off uint32
	}
	recs := make([]rec, len(c.offs))
	for i, off := range c.offs {
		k, _ := recordAt(c.arena, off)
		recs[i] = rec{k, off}
	}
	slices.SortFunc(recs, func(a, b rec) int { return bytes.Compare(a.key, b.key) })
	for i := range recs {
		c.offs[i] = recs[i].off
	}
	c.sorted = true
}

// get returns key's value, and whether the carry holds it; the first get
// orders the records by key, so no add may follow it.
func (c *closedCarry) get(key []byte) ([]byte, bool) {
	c.sortOnce.Do(c.sort)
	i, found := slices.BinarySearchFunc(c.offs, key, func(off uint32, k []byte) int {
		ok, _ := recordAt(c.arena, off)
		return bytes.Compare(ok, k)
	})
	if !found {
		return nil, false
	}
	_, v := c.record(i)
	return v, true
}

// len is the number of keys carried.
func (c *closedCarry) len() int { return len(c.offs) }

// bytes is the carry's memory: its arena and index.
func (c *closedCarry) bytes() int64 {
	if c == nil {
		return 0
	}
	return int64(cap(c.arena) + 4*cap(c.offs))
}
