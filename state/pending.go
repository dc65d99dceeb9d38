package state

// The pending batch: the keys the current batch changed, and reads as of it.

import (
	"bytes"
	"fmt"
	"unsafe"
)

// pendingEntry is one key changed by the current batch.
type pendingEntry struct {
	key     string // backed by the batch's arena (pendingAlloc)
	hash    uint64 // keyHash(key)
	val     []byte
	part    int32
	del     bool
	known   bool // existed has been looked up
	existed bool // the key is in the committed version (if known)
	gone    bool // netted to nothing (forget): not pending until written again
}

// committedGet reads key from the committed version.
func (s *Store) committedGet(key []byte) ([]byte, bool, error) {
	if s.outsideCommitted(key) {
		// A key outside every partition's range (a backfill's new
		// windows): known missing without hashing it to its partition.
		s.lastGet = append(s.lastGet[:0], key...)
		s.lastFound = false
		return nil, false, nil
	}
	return s.committedAt(key, keyHash(key))
}

// committedAt is committedGet for a key whose keyHash is h.
func (s *Store) committedAt(key []byte, h uint64) ([]byte, bool, error) {
	p := int(h % uint64(s.n))
	if s.partRows[p] == 0 {
		return nil, false, nil
	}
	if s.beyondBounds(p, key) {
		// Usually a key of a new window: known missing without opening
		// the partition (Commit opens the partitions it writes together).
		s.lastGet = append(s.lastGet[:0], key...)
		s.lastFound = false
		return nil, false, nil
	}
	v, ok, err := s.parts.get(p, key, s.getBuf)
	if ok {
		s.getBuf = v
	}
	if err == nil {
		s.lastGet = append(s.lastGet[:0], key...)
		s.lastFound = ok
	}
	return v, ok, err
}

// GetCommitted returns key's value in the committed version, ignoring the
// pending batch: for a caller that knows the key has no pending change (the
// aggregation's merge writes each distinct key once, into an empty pending
// batch). A Put or Delete of the same key right after it costs no lookup of
// the committed version. val is valid until the next call on the store.
func (s *Store) GetCommitted(key []byte) (val []byte, ok bool, err error) {
	if err := s.usable(); err != nil {
		return nil, false, err
	}
	return s.committedGet(key)
}

// PendingLen returns the number of keys the pending batch changes.
func (s *Store) PendingLen() int { return s.ptab.live }

// Get returns key's value as of the pending batch. val is valid until the
// next call on the store.
func (s *Store) Get(key []byte) (val []byte, ok bool, err error) {
	return s.GetHashed(key, keyHash(key))
}

// GetHashed is Get for a key whose KeyHash is h (hashed.go).
func (s *Store) GetHashed(key []byte, h uint64) (val []byte, ok bool, err error) {
	if err := s.usable(); err != nil {
		return nil, false, err
	}
	if e := s.ptab.get(key, h); e != nil {
		if e.del {
			return nil, false, nil
		}
		return e.val, true, nil
	}
	return s.committedAt(key, h)
}

// contrib is a known entry's share of NumKeys relative to the committed
// version.
func (e *pendingEntry) contrib() int64 {
	var c int64
	if !e.del {
		c++
	}
	if e.existed {
		c--
	}
	return c
}

// entry returns key's pending entry, creating it if needed. Whether the key
// exists in the committed version is taken from the last committed lookup
// if it read this key, and otherwise looked up later, in key order, by
// resolve: blind writes of many keys then cost a sequential pass instead of
// a random read each.
func (s *Store) entry(key []byte) *pendingEntry { return s.entryOf(key, presenceUnknown) }

// A caller's knowledge of whether a key is in the committed version
// (PutKnown, DeleteKnown).
const (
	presenceUnknown = iota
	presenceMissing
	presenceExisted
)

// entryOf is entry for a key whose presence in the committed version the
// caller knows unless presence is presenceUnknown: a new entry then needs
// no lookup, now or at commit. An entry the batch has already is kept.
func (s *Store) entryOf(key []byte, presence int) *pendingEntry {
	return s.entryAt(key, keyHash(key), presence)
}

// entryAt is entryOf for a key whose keyHash is h.
func (s *Store) entryAt(key []byte, h uint64, presence int) *pendingEntry {
	e, slot := s.ptab.find(key, h)
	if e != nil {
		if e.gone {
			// Forgotten as known missing from the committed version:
			// pending again, unchanged so far.
			e.gone, e.del, e.val = false, true, nil
			s.ptab.live++
			s.pendingBytes += int64(len(key)) + 80
		}
		return e
	}
	e = s.newEntry(key, h, presence)
	s.ptab.insert(e, slot)
	return e
}

// newEntry is a new pending entry of key, whose keyHash is h, not yet in
// the table.
func (s *Store) newEntry(key []byte, h uint64, presence int) *pendingEntry {
	p := int(h % uint64(s.n))
	e := s.alloc.entry(p)
	e.key, e.hash, e.part = s.alloc.str(p, key), h, int32(p)
	switch {
	// A caller's known missing first: the bounds' check (a cache miss a
	// key) would say no more (0.7% of the seed dedup shape's CPU).
	case presence == presenceMissing || s.partRows[p] == 0 || s.beyondBounds(p, key):
		e.known = true
	case presence == presenceExisted:
		e.known, e.existed = true, true
	case s.lastGet != nil && string(s.lastGet) == string(key):
		e.known, e.existed = true, s.lastFound
	default:
		s.unknown++
	}
	e.del = !e.existed // unchanged so far (an unknown entry is set right away)
	s.pendingBytes += int64(len(key)) + 80
	return e
}

// writable refuses a change to a frozen pending batch (Prepare).
func (s *Store) writable() error {
	if err := s.usable(); err != nil {
		return err
	}
	if s.prep != nil {
		return fmt.Errorf("state: write to the pending batch after Prepare of version %d (Commit or Abort first)", s.prep.version)
	}
	return nil
}

// Put sets key to val in the pending batch (both are copied).
func (s *Store) Put(key, val []byte) error {
	if err := s.writable(); err != nil {
		return err
	}
	s.put(s.entry(key), val)
	return nil
}

// PutKnown is Put for a caller that knows whether key is in the committed
// version (existed: an operator holding the committed keys it writes, as
// the join does): the store looks it up neither now nor at commit. A
// wrong existed miscounts the version's rows.
func (s *Store) PutKnown(key, val []byte, existed bool) error {
	if err := s.writable(); err != nil {
		return err
	}
	s.put(s.entryOf(key, presenceOf(existed)), val)
	return nil
}

func presenceOf(existed bool) int {
	if existed {
		return presenceExisted
	}
	return presenceMissing
}

func (s *Store) put(e *pendingEntry, val []byte) {
	if e.known {
		s.pendingDelta -= e.contrib()
	}
	s.pendingBytes += int64(len(val) - len(e.val))
	if cap(e.val) >= len(val) {
		e.val = append(e.val[:0], val...)
	} else {
		e.val = s.alloc.bytes(int(e.part), val)
	}
	e.del = false
	if e.known {
		s.pendingDelta += e.contrib()
	}
}

// Delete removes key in the pending batch; deleting a missing key is a no-op.
func (s *Store) Delete(key []byte) error {
	if err := s.writable(); err != nil {
		return err
	}
	s.del(s.entry(key))
	return nil
}

// DeleteKnown is Delete for a caller that knows whether key is in the
// committed version (PutKnown).
func (s *Store) DeleteKnown(key []byte, existed bool) error {
	if err := s.writable(); err != nil {
		return err
	}
	s.del(s.entryOf(key, presenceOf(existed)))
	return nil
}

func (s *Store) del(e *pendingEntry) {
	if e.known {
		s.pendingDelta -= e.contrib()
	}
	s.pendingBytes -= int64(len(e.val))
	e.val = nil
	e.del = true
	if e.known {
		if !e.existed {
			// Net nothing: forget the key.
			s.forget(e)
			return
		}
		s.pendingDelta += e.contrib()
	}
}

// forget drops e, a deleted key known missing from the committed version,
// from the pending batch.
func (s *Store) forget(e *pendingEntry) {
	e.gone, e.del, e.val = true, true, nil
	s.ptab.live--
	s.pendingBytes -= int64(len(e.key)) + 80
}

// resolve looks up, partition by partition in key order, whether each
// pending entry of unknown existence is in the committed version.
func (s *Store) resolve() error {
	if s.unknown == 0 {
		return nil
	}
	cs, _ := s.pendingGrouped(func(e *pendingEntry) bool { return !e.known && !e.gone })
	return s.resolveSorted(cs)
}

// resolveSorted resolves the unknown entries among cs, sorted by (partition,
// key), with one iterator per partition seeking forward.
func (s *Store) resolveSorted(cs []change) error {
	for i := 0; i < len(cs) && s.unknown > 0; {
		p := cs[i].part
		j := i
		anyUnknown := false
		for ; j < len(cs) && cs[j].part == p; j++ {
			anyUnknown = anyUnknown || !cs[j].e.known
		}
		group := cs[i:j]
		i = j
		if !anyUnknown {
			continue
		}
		d, err := s.parts.db(p)
		if err != nil {
			return err
		}
		it, err := d.NewIter(nil)
		if err != nil {
			return fmt.Errorf("read state partition %d: %w", p, err)
		}
		for _, c := range group {
			e := c.e
			if e.known {
				continue
			}
			kb := []byte(c.key)
			found := it.SeekGE(kb) && bytes.Equal(it.Key(), kb)
			e.known, e.existed = true, found
			s.unknown--
			if e.del && !found {
				s.forget(e)
				continue
			}
			s.pendingDelta += e.contrib()
		}
		if err := it.Close(); err != nil {
			return fmt.Errorf("read state partition %d: %w", p, err)
		}
	}
	return nil
}

// NumKeys returns the number of keys as of the pending batch (exact). It may
// read the committed version to resolve blind writes; a read error panics
// (the cache is broken and nothing sensible can be counted).
func (s *Store) NumKeys() int64 {
	if err := s.resolve(); err != nil {
		panic(fmt.Sprintf("state: count keys: %v", err))
	}
	return s.rows + s.pendingDelta
}

// Abort drops the pending batch.
func (s *Store) Abort() {
	s.prep = nil
	s.ptab.reset()
	s.pendingDelta, s.pendingBytes, s.unknown, s.pendingRecord = 0, 0, 0, nil
	s.lastGet = s.lastGet[:0]
	s.alloc = pendingAlloc{}
}

// pendingAlloc carves the pending batch's entries, keys and values out of
// chunks: a backfill batch has millions of pending keys, and three small
// allocations per key (entry, key string, value) cost malloc time and GC
// work. The chunks live as long as any entry of theirs: Abort (and Commit,
// which calls it) drops the allocator with the map. Chunks grow from small
// (live batches of a few keys) to a cap per batch.
//
// Each partition has chunks of its own: a commit reads the batch partition
// by partition in key order (its sort, its data file), and a partition's
// entries, keys and values then lie together in a few hundred KB instead
// of across the whole batch (a cache miss a read).
type pendingAlloc struct {
	parts []partAlloc
}

// partAlloc is one partition's chunks.
type partAlloc struct {
	entries []pendingEntry
	// full is the partition's earlier entry chunks: with entries, every
	// entry it handed out in order (pendingGrouped).
	full [][]pendingEntry
	buf  []byte
}

func (a *pendingAlloc) part(p int) *partAlloc {
	if p >= len(a.parts) {
		a.parts = append(a.parts, make([]partAlloc, p+1-len(a.parts))...)
	}
	return &a.parts[p]
}

func (a *pendingAlloc) entry(p int) *pendingEntry {
	pa := a.part(p)
	if len(pa.entries) == cap(pa.entries) {
		if len(pa.entries) > 0 {
			pa.full = append(pa.full, pa.entries)
		}
		pa.entries = make([]pendingEntry, 0, min(max(2*cap(pa.entries), 8), 128))
	}
	pa.entries = pa.entries[:len(pa.entries)+1]
	return &pa.entries[len(pa.entries)-1]
}

// bytes returns a copy of b in partition p's chunks with no spare capacity
// (appending to it reallocates instead of overwriting a neighbour).
func (a *pendingAlloc) bytes(p int, b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	pa := a.part(p)
	if cap(pa.buf)-len(pa.buf) < len(b) {
		pa.buf = make([]byte, 0, max(min(max(2*cap(pa.buf), 256), 8<<10), len(b)))
	}
	start := len(pa.buf)
	pa.buf = append(pa.buf, b...)
	return pa.buf[start:len(pa.buf):len(pa.buf)]
}

// str returns b as a string backed by partition p's chunk (never written
// again).
func (a *pendingAlloc) str(p int, b []byte) string {
	c := a.bytes(p, b)
	if len(c) == 0 {
		return ""
	}
	return unsafe.String(&c[0], len(c))
}

// keyBytes returns a read-only view of a pending key's bytes without copying
// (a commit passes millions of keys to writers that copy them anyway: the
// data file's chunk buffer and Pebble's batch). Never write through it.
func keyBytes(k string) []byte { return unsafe.Slice(unsafe.StringData(k), len(k)) }
