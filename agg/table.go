package agg

import (
	"bytes"
	"hash/maphash"
)

// groupTable maps encoded group keys to dense entry indexes 0, 1, 2, ... in
// insertion order. It is an open-addressing (linear probing) table over one
// byte arena, so inserting a key costs no allocation of its own (only the
// amortised growth of a few slices) and a lookup allocates nothing: a plain
// map[string]int32 would allocate one string per distinct key per batch.
// Not safe for concurrent use.
type groupTable struct {
	seed maphash.Seed
	// slots: 0 = empty, otherwise the high 32 bits of the key's hash (a
	// tag that rejects almost every other key without touching the entry's
	// memory, one cache miss saved per probe) and entry index + 1.
	slots  []uint64
	hashes []uint64 // per entry, for rehashing on growth
	ends   []uint32 // per entry: end of its key in arena (start = previous end)
	arena  []byte
}

func newGroupTable() groupTable {
	return groupTable{seed: maphash.MakeSeed(), slots: make([]uint64, 64)}
}

func slot(h uint64, e int32) uint64 { return h&^(1<<32-1) | uint64(uint32(e+1)) }

// len returns the number of entries.
func (t *groupTable) len() int { return len(t.hashes) }

func (t *groupTable) key(e int32) []byte {
	var start uint32
	if e > 0 {
		start = t.ends[e-1]
	}
	return t.arena[start:t.ends[e]]
}

// find returns key's entry index, inserting it (with a copy of key) if absent.
func (t *groupTable) find(key []byte) (idx int32, inserted bool) {
	if 2*(len(t.hashes)+1) > len(t.slots) {
		t.grow()
	}
	h := maphash.Bytes(t.seed, key)
	mask := uint64(len(t.slots) - 1)
	tag := h &^ (1<<32 - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			e := int32(len(t.hashes))
			t.slots[i] = slot(h, e)
			t.hashes = append(t.hashes, h)
			t.arena = append(t.arena, key...)
			t.ends = append(t.ends, uint32(len(t.arena)))
			return e, true
		}
		if s&^(1<<32-1) == tag {
			if e := int32(uint32(s)) - 1; bytes.Equal(t.key(e), key) {
				return e, false
			}
		}
	}
}

func (t *groupTable) grow() {
	n := 2 * len(t.slots)
	if cap(t.slots) >= n {
		t.slots = t.slots[:n]
		clear(t.slots)
	} else {
		t.slots = make([]uint64, n)
	}
	mask := uint64(n - 1)
	for e, h := range t.hashes {
		i := h & mask
		for t.slots[i] != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = slot(h, int32(e))
	}
}

// reset empties the table, keeping its memory for the next batch unless it
// grew far beyond what small (live) batches need and the batch just done was
// small: backfill batches of similar size then reuse the slots and the arena
// (regrowing them costs a copy per doubling and fresh pages every batch),
// and the first small batch after them lets the memory go. An empty table
// says nothing about the batch size (the operator resets after Finish and
// again after Commit), so it keeps its memory.
func (t *groupTable) reset() {
	const keep = 1 << 20
	if n := len(t.hashes); len(t.slots) > keep && n > 0 && 8*n < len(t.slots) {
		*t = newGroupTable()
		return
	}
	clear(t.slots)
	t.hashes = t.hashes[:0]
	t.ends = t.ends[:0]
	t.arena = t.arena[:0]
}
