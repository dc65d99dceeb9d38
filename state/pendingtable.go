package state

// The pending batch's index: an open-addressing hash table from key bytes to
// entries, instead of a Go map keyed by strings. A backfill batch puts
// millions of keys; the map cost two string hashes per Put (lookup, then
// insert) on top of the partition hash, and a growth by rehashing strings.
// Here one FNV-1a pass per key gives both the partition (PartitionOf's hash,
// part of the format) and the slot, a lookup that misses is followed by an
// insert into the slot it found, and growth rehashes stored hashes. Each
// slot also holds 32 bits of its key's hash: a probe passes other keys'
// slots without reading their entries (most of a backfill's writes are of
// new keys, whose probe meets several occupied slots before an empty one,
// and an entry is a cache miss; it was 4% of the join shape's CPU).

// keyHash is PartitionOf's FNV-1a 64 of key, before the modulo.
func keyHash(key []byte) uint64 { return fnvMore(14695981039346656037, key) }

// fnvMore continues FNV-1a 64 from h over key.
func fnvMore(h uint64, key []byte) uint64 {
	for _, c := range key {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// pendingTable indexes the pending entries by key. Entries are never
// removed from it: a key that nets to nothing (forget) is marked gone and
// revived by a later write, so probing needs no tombstones.
type pendingTable struct {
	slots []pendingSlot   // len is a power of two
	ents  []*pendingEntry // insertion order
	live  int             // entries not gone
	// hint is the entries of the last batch whose arrays reset dropped,
	// at most maxPendingHint: the next one sizes its arrays for as many at
	// once instead of doubling up to them (a backfill's batches are
	// alike; a live batch after a backfill's pays a few MB once).
	hint int
	// indexed is the entries of ents that have their slots; those after
	// it were appended without a lookup (appendFirst) and get theirs at
	// the table's next lookup (find).
	indexed int
}

// pendingSlot locates one entry.
type pendingSlot struct {
	tag uint32 // tagOf(the entry's hash)
	idx int32  // index+1 into ents; 0 = empty
}

// tagOf is the hash bits a slot keeps (slotOf uses others).
func tagOf(h uint64) uint32 { return uint32(h) }

// slotOf spreads h over the table (FNV's low bits alone cluster).
func (t *pendingTable) slotOf(h uint64) int {
	return int((h * 0x9E3779B97F4A7C15) >> 32 & uint64(len(t.slots)-1))
}

// find returns key's entry (possibly gone) or nil, and the slot where an
// insert of key belongs.
func (t *pendingTable) find(key []byte, h uint64) (*pendingEntry, int) {
	if t.indexed < len(t.ents) {
		t.index()
	}
	if len(t.slots) == 0 {
		return nil, -1
	}
	mask, tag := len(t.slots)-1, tagOf(h)
	for i := t.slotOf(h); ; i = (i + 1) & mask {
		sl := t.slots[i]
		if sl.idx == 0 {
			return nil, i
		}
		if sl.tag != tag {
			continue
		}
		if e := t.ents[sl.idx-1]; e.hash == h && e.key == string(key) {
			return e, i
		}
	}
}

// get returns key's entry if it is pending (not gone).
func (t *pendingTable) get(key []byte, h uint64) *pendingEntry {
	e, _ := t.find(key, h)
	if e == nil || e.gone {
		return nil
	}
	return e
}

// insert adds e (whose key find reported missing at slot) to the table.
func (t *pendingTable) insert(e *pendingEntry, slot int) {
	if slot < 0 || 4*(len(t.ents)+1) > 3*len(t.slots) {
		t.grow()
		_, slot = t.find(keyBytes(e.key), e.hash)
	}
	t.ents = append(t.ents, e)
	t.indexed = len(t.ents)
	t.slots[slot] = pendingSlot{tag: tagOf(e.hash), idx: int32(len(t.ents))}
	t.live++
}

// appendFirst adds e, whose key the table does not hold, without looking
// it up: for a caller that writes each key at most once a batch (the
// join's flush: a lookup a write was 8% of the join leg's CPU, nearly all
// of it missing). Its slot is found only if a lookup follows (index).
func (t *pendingTable) appendFirst(e *pendingEntry) {
	if t.ents == nil && t.hint > 0 {
		t.ents = make([]*pendingEntry, 0, t.hint)
	}
	t.ents = append(t.ents, e)
	t.live++
}

// index gives the entries appendFirst added their slots, growing the
// table to hold them.
func (t *pendingTable) index() {
	n := max(len(t.slots), 64)
	for 3*n < 4*(len(t.ents)+1) {
		n *= 2
	}
	t.rehash(n)
}

// maxPendingHint bounds pendingTable.hint (6 MB of arrays).
const maxPendingHint = 1 << 18

func (t *pendingTable) grow() {
	n := max(2*len(t.slots), 64)
	if len(t.slots) == 0 && t.hint > 0 {
		for 3*n < 4*(t.hint+1) {
			n *= 2
		}
		if t.ents == nil {
			t.ents = make([]*pendingEntry, 0, t.hint)
		}
		t.hint = 0
	}
	t.rehash(n)
}

// rehash gives every entry a slot in a table of n slots.
func (t *pendingTable) rehash(n int) {
	t.slots = make([]pendingSlot, n)
	mask := n - 1
	for j, e := range t.ents {
		i := t.slotOf(e.hash)
		for t.slots[i].idx != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = pendingSlot{tag: tagOf(e.hash), idx: int32(j + 1)}
	}
	t.indexed = len(t.ents)
}

// reset empties the table for the next batch. It keeps small arrays, and
// large ones the batch filled to a quarter or more: a backfill's batches
// are alike, and each one that started from the hint's arrays grew them
// by doubling (a seed dedup batch of 2.1M keys: three rehashes of up to
// 1.6M entries, and fresh pages for each array, 2% of the shape's CPU).
// Large arrays a batch used little (a live batch after a backfill's) are
// dropped, the hint remembering their entries.
func (t *pendingTable) reset() {
	if len(t.slots) > 1<<14 && 4*len(t.ents) < len(t.slots) {
		*t = pendingTable{hint: min(len(t.ents), maxPendingHint)}
		return
	}
	clear(t.slots)
	clear(t.ents)
	t.ents = t.ents[:0]
	t.live, t.indexed = 0, 0
}
