package agg

import (
	"bytes"
	"encoding/binary"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// closedCarry is a carry read back (carryfile.go): the keys a version
// closed at commit with their encoded values (doc.go, Closed at commit),
// which batch N+1 merges its rows of those windows with. Records live in
// one byte arena (key length, key, value length, value, as uvarints and
// bytes: the carry's durable form) so that a carry costs its bytes plus
// four per key, not a map's per-entry overhead; offs indexes them in key
// order for a binary search. It is not safe for concurrent use.
type closedCarry struct {
	// version is the state version that left these keys out.
	version int64
	arena   []byte
	offs    []uint32
	// sorted says offs is in key order (the order update mode merges in,
	// so sorting is rarely needed).
	sorted bool
}

// newClosedCarry starts the carry of version v, with room for about
// sizeHint bytes of records.
func newClosedCarry(v int64, sizeHint int) *closedCarry {
	return &closedCarry{version: v, sorted: true, arena: make([]byte, 0, sizeHint)}
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
	c.arena = appendCarryRecord(c.arena, key, val)
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
	c.sort()
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

// carryRef is the carry a committed version left (named by its record),
// read on the first get: in a backfill no row of batch N+1 falls in a
// window batch N closed, so the carry is never read. It is not safe for
// concurrent use.
type carryRef struct {
	// version is the state version whose carry it is.
	version int64
	// upUs is the largest window end the carry may hold: the watermark
	// that closed it (the version's nextWatermarkMs).
	upUs int64
	rec  opRecord
	c    *closedCarry
}

// get returns key's value in the carry, and whether it holds it; the
// first get reads the carry (from fs under stateDir when in a file).
func (r *carryRef) get(fs vfs.FS, stateDir string, key []byte) ([]byte, bool, error) {
	if r.c == nil {
		c, err := readCarry(fs, stateDir, r.version, r.rec)
		if err != nil {
			return nil, false, err
		}
		r.c = c
	}
	v, ok := r.c.get(key)
	return v, ok, nil
}
