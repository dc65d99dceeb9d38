package join

import (
	"hash/maphash"
	"unsafe"
)

// keyTable is one side's keys in memory (sideMem.keys): an open-addressing
// hash table (linear probing) from the encoded join key to its keyRows,
// instead of a Go map keyed by strings. A backfill batch stores every row
// under a key of its own and evicts it the next batch: each row cost a
// probe of the other side, a lookup and an insert of its own key, and at
// flush a delete, each hashing its 66-byte key again (the Go map's
// lookups, inserts and deletes were about 16% of the join shape's CPU
// profile). Here a row's key is hashed once for both sides, a lookup
// that misses returns the slot its insert takes, each slot holds its
// key's hash (a probe passes other keys without reading them) and a
// delete finds its keyRows by pointer, shifting the probe run back
// instead of leaving tombstones.
type keyTable struct {
	slots []keySlot // len is 0 or a power of two
	n     int       // keys held
}

// keySlot is one slot of a keyTable: empty when k is nil.
type keySlot struct {
	h uint64 // keyHash(k.key)
	k *keyRows
}

// keySeed is the keyTables' hash seed (chosen per process).
var keySeed = maphash.MakeSeed()

// keyHash is the hash of an encoded join key in a keyTable.
func keyHash(key []byte) uint64 { return maphash.Bytes(keySeed, key) }

// keyHashString is keyHash of a key held as a string.
func keyHashString(key string) uint64 { return maphash.String(keySeed, key) }

// find returns key's keyRows (h is keyHash(key)), or nil and the slot an
// insert of key takes (-1 if the table must grow first).
func (t *keyTable) find(key []byte, h uint64) (*keyRows, int) {
	if len(t.slots) == 0 {
		return nil, -1
	}
	mask := len(t.slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.k == nil {
			return nil, i
		}
		if s.h == h && s.k.key == string(key) {
			return s.k, i
		}
	}
}

// touch loads the slot where a lookup of hash h starts, for a caller
// reading ahead (ProcessSide); it changes nothing.
func (t *keyTable) touch(h uint64) uintptr {
	if len(t.slots) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(t.slots[int(h)&(len(t.slots)-1)].k))
}

// insert adds k, whose key the table does not hold, with its hash k.mh:
// at slot, find's answer for the key, or -1 for insert to find it.
func (t *keyTable) insert(k *keyRows, slot int) {
	if full := 4*(t.n+1) > 3*len(t.slots); full || slot < 0 {
		if full {
			t.grow()
		}
		mask := len(t.slots) - 1
		for slot = int(k.mh) & mask; t.slots[slot].k != nil; slot = (slot + 1) & mask {
		}
	}
	t.slots[slot] = keySlot{h: k.mh, k: k}
	t.n++
}

// reserve makes room for n more keys in one growth: a chunk of input
// whose rows each add a key of their own would double the table several
// times over (its rehashes were 1.5% of the join leg's CPU).
func (t *keyTable) reserve(n int) {
	size := max(len(t.slots), 64)
	for 4*(t.n+n) > 3*size {
		size *= 2
	}
	if size > len(t.slots) {
		t.resize(size)
	}
}

// grow doubles the slots, rehashing the stored hashes.
func (t *keyTable) grow() { t.resize(max(2*len(t.slots), 64)) }

// resize moves the keys to a table of size slots (a power of two holding
// them).
func (t *keyTable) resize(size int) {
	old := t.slots
	t.slots = make([]keySlot, size)
	mask := len(t.slots) - 1
	for _, s := range old {
		if s.k == nil {
			continue
		}
		i := int(s.h) & mask
		for t.slots[i].k != nil {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}

// remove deletes k (held by the table) and closes the gap: each later
// slot of the probe run whose home is not between the gap and itself
// moves back into the gap, so that every key stays reachable from its
// home without tombstones.
func (t *keyTable) remove(k *keyRows) {
	mask := len(t.slots) - 1
	i := int(k.mh) & mask
	for t.slots[i].k != k {
		i = (i + 1) & mask
	}
	for j := i; ; {
		j = (j + 1) & mask
		s := t.slots[j]
		if s.k == nil {
			break
		}
		// s stays unless its home lies cyclically outside (i, j].
		if home := int(s.h) & mask; (j-home)&mask < (j-i)&mask {
			continue
		}
		t.slots[i] = s
		i = j
	}
	t.slots[i] = keySlot{}
	t.n--
}

// all yields every key's keyRows, in no particular order.
func (t *keyTable) all(yield func(*keyRows) bool) {
	for _, s := range t.slots {
		if s.k != nil && !yield(s.k) {
			return
		}
	}
}
