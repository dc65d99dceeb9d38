package state

// Hashed access: a caller that reads and writes many keys one at a time
// (the deduplication: a backfill's millions of new keys) hashes each key
// once and hands the hash over, and has the pending batch's index read
// ahead of the keys' use. The index is a table of millions of slots, and
// each key's probe is a cache miss (pendingTable.find was 7% of the
// deduplication's CPU at 12M keys, nearly all of it in loading the slot):
// misses taken one key at a time, between the rest of each key's work,
// are waited for one by one, while Prefetch's loads for a run of keys
// overlap.

// KeyHash returns the hash the store indexes key by: PartitionOf's FNV-1a
// 64 of the encoded key, before the modulo. The *Hashed methods take it;
// any other value files the key in the wrong partition.
func KeyHash(key []byte) uint64 { return keyHash(key) }

// KeyHashMore continues a KeyHash over more bytes: KeyHashMore(KeyHash(a),
// b) is KeyHash of a followed by b. A caller writing many keys of one
// prefix (the join: a join key's values at indexes 0, 1, ...) hashes the
// prefix once.
func KeyHashMore(h uint64, b []byte) uint64 { return fnvMore(h, b) }

// KeyHash4 returns the KeyHash of four keys. FNV-1a takes a key's bytes
// one after another, each a multiply that waits on the one before (3-4
// cycles a byte); four keys hashed side by side keep four multiplies in
// flight (KeyHash was 3% of the seed dedup shape's CPU, 68 bytes a key).
func KeyHash4(a, b, c, d []byte) (ha, hb, hc, hd uint64) {
	const offset = 14695981039346656037
	return KeyHashMore4(offset, a, b, c, d)
}

// KeyHashMore4 is KeyHashMore of four byte strings from one hash h (the
// join's keys of one side, continued from the side's prefix), side by
// side as KeyHash4.
func KeyHashMore4(h uint64, a, b, c, d []byte) (ha, hb, hc, hd uint64) {
	const prime = 1099511628211
	ha, hb, hc, hd = h, h, h, h
	n := min(len(a), len(b), len(c), len(d))
	a0, b0, c0, d0 := a[:n], b[:n], c[:n], d[:n]
	for i := range a0 {
		ha = (ha ^ uint64(a0[i])) * prime
		hb = (hb ^ uint64(b0[i])) * prime
		hc = (hc ^ uint64(c0[i])) * prime
		hd = (hd ^ uint64(d0[i])) * prime
	}
	return fnvMore(ha, a[n:]), fnvMore(hb, b[n:]), fnvMore(hc, c[n:]), fnvMore(hd, d[n:])
}

// Prefetch reads what a Get or Put of key (whose KeyHash is h) reads of
// the pending batch's index, so that the call finds it in the CPU's
// cache: a caller prefetches a run of keys, then uses them. It changes
// nothing.
func (s *Store) Prefetch(key []byte, h uint64) {
	e, slot := s.ptab.find(key, h)
	s.prefetched += uintptr(slot)
	if e != nil {
		s.prefetched += uintptr(len(e.val))
	}
}

// PutKnownHashedKey is PutKnownHashed returning the store's copy of key:
// its bytes are never written again and stay valid while the caller holds
// the string, past the batch. A caller keeping the key's bytes (the
// deduplication's output rows, which hold the key's one string column)
// then holds one copy of them, not two.
func (s *Store) PutKnownHashedKey(key, val []byte, existed bool, h uint64) (string, error) {
	if err := s.writable(); err != nil {
		return "", err
	}
	e := s.entryAt(key, h, presenceOf(existed))
	s.put(e, val)
	return e.key, nil
}

// PutFirstHashed is PutKnown, for a key whose KeyHash is h, that the
// pending batch has not changed and will not change again until Commit or Abort (the join's
// flush writes each state key at most once a batch): the store appends
// its entry without looking the key up (pendingTable.appendFirst). A
// later Get, Put or Delete of the key still finds it, at the cost of
// indexing every such entry once; a second PutFirstHashed or
// DeleteFirstHashed of it breaks that promise, and Commit (or Prepare)
// refuses the batch.
func (s *Store) PutFirstHashed(key, val []byte, existed bool, h uint64) error {
	if err := s.writable(); err != nil {
		return err
	}
	s.put(s.firstEntry(key, h, presenceOf(existed)), val)
	return nil
}

// DeleteFirstHashed is DeleteKnown, for a key whose KeyHash is h, that
// the pending batch has not changed and will not change again (PutFirstHashed).
func (s *Store) DeleteFirstHashed(key []byte, existed bool, h uint64) error {
	if err := s.writable(); err != nil {
		return err
	}
	s.del(s.firstEntry(key, h, presenceOf(existed)))
	return nil
}

// firstEntry is key's new entry, appended without a lookup.
func (s *Store) firstEntry(key []byte, h uint64, presence int) *pendingEntry {
	e := s.newEntry(key, h, presence)
	s.ptab.appendFirst(e)
	return e
}
