package dedup

// The absence filter: a set of the 64-bit hashes of every key in the
// operator's state, pending batch included, so that a key whose hash it
// does not hold is put without a lookup. A backfill's keys are nearly all
// new, and proving one absent through the store cost a Pebble Get (47% of
// BenchmarkDedupNewKeys's CPU at 1M keys, before any filter).
//
// Why a set of hashes and not a Bloom filter: the store's cache is lazy
// (state.Options.LazyCache, set in Open): a backfill that never reads the
// committed version never writes its 200 Pebble instances, whose memtable
// inserts, flushes and compactions were a third of the seed dedup shape's
// CPU, and the first lookup that reaches the committed version builds the
// whole cache from the checkpoint. A Bloom filter's false positives (0.02-
// 0.5% at 12 bits a key) were such lookups in every batch. Two distinct
// keys of equal 64-bit hash are the set's only false positive: about
// n^2/2^65 over a backfill of n new keys (2e-5 at the seed's 26M), and
// such a lookup is answered right, by the cache it builds.
//
// Why it is sound: between Open and Close the operator is its store's only
// writer, and it adds every key it puts; keys leave state only (eviction,
// Abort, a repartition of an older version), which leaves stale hashes
// that cost a lookup, never a wrong answer. So the set covers the state if
// it started on an empty store or was built by a scan of the whole state
// since Open. It lives in memory only (its hash is seeded per process), so
// no checkpoint format changes.

import (
	"hash/maphash"

	"github.com/ethstream/ethstream/state"
)

// initialKeys is the keys a set built from a store's keys has room for at
// least, and the stale hashes a set may hold beyond twice the state's keys
// before it is built again (a variable: tests shrink it).
var initialKeys int64 = 1 << 16

// scanPerGet is how many keys a build may scan per store lookup the
// missing set has cost since Open: a Get of a new key costs several
// microseconds, a scanned key a fraction of one, so a restarted operator
// builds the set once its lookups would have paid for the scan, and a
// live query of a few keys a batch never scans a large state for it.
const scanPerGet = 8

// The set is split by a hash's top shardBits bits into shards that grow
// one at a time (a doubling copies 1/256 of the set, not all of it). A
// shard is a table of buckets of 8 hashes (a cache line: one miss a probe
// mostly), probed linearly from the bucket the hash's next bits name, and
// doubled once 7/8 full; a zero slot is empty (a zero hash is stored as 1).
// 9-18 bytes a key: 256 MB at the seed shape's 26M keys.
const (
	shardBits   = 8
	bucketSlots = 8
)

type fpShard struct {
	buckets [][bucketSlots]uint64 // a power of two of them
	bits    uint                  // log2(len(buckets))
	n       int                   // hashes held
}

// absentFilter is the set, or invalid (nothing ruled out) until built.
type absentFilter struct {
	seed   maphash.Seed
	shards []fpShard
	// n is the hashes held; limit the n past which due checks for stale
	// hashes again.
	n, limit int64
	valid    bool
	// debt counts store lookups made while the set was invalid.
	debt int64
}

// reset starts the set for a store just opened: empty and valid on an
// empty store, invalid (to be built by a scan) otherwise.
func (f *absentFilter) reset(empty bool) {
	*f = absentFilter{seed: maphash.MakeSeed()}
	if empty {
		f.alloc(0)
		f.valid = true
	}
}

// alloc empties the set, with room for about keys hashes.
func (f *absentFilter) alloc(keys int64) {
	per := keys >> shardBits * 8 / 7 / bucketSlots // buckets a shard needs
	var bits uint
	for int64(1)<<bits < per {
		bits++
	}
	f.shards = make([]fpShard, 1<<shardBits)
	for i := range f.shards {
		f.shards[i] = fpShard{buckets: make([][bucketSlots]uint64, 1<<bits), bits: bits}
	}
	f.n = 0
	f.limit = 2*keys + initialKeys
}

func (f *absentFilter) hash(key []byte) uint64 {
	if h := maphash.Bytes(f.seed, key); h != 0 {
		return h
	}
	return 1
}

// shard returns the shard of hash h.
func (f *absentFilter) shard(h uint64) *fpShard { return &f.shards[h>>(64-shardBits)] }

// home returns the bucket h's probe starts at.
func (s *fpShard) home(h uint64) uint64 { return h << shardBits >> (64 - s.bits) } // a shift by 64 is 0

// slot returns the slot holding h and true, or the first empty slot of
// h's probe and false. The shard has an empty slot (add grows it before it
// is full).
func (s *fpShard) slot(h uint64) (*uint64, bool) {
	i := s.home(h)
	mask := uint64(len(s.buckets) - 1)
	for {
		b := &s.buckets[i]
		for j, v := range b {
			if v == h || v == 0 {
				return &b[j], v == h
			}
		}
		i = (i + 1) & mask
	}
}

// absent reports whether the key of hash h is certainly not in state.
func (f *absentFilter) absent(h uint64) bool {
	if !f.valid {
		return false
	}
	_, held := f.shard(h).slot(h)
	return !held
}

// add records the key of hash h, put into state.
func (f *absentFilter) add(h uint64) {
	if !f.valid {
		return
	}
	s := f.shard(h)
	if s.insert(h) {
		f.n++
		if (s.n+1)*8 > len(s.buckets)*bucketSlots*7 {
			s.grow()
		}
	}
}

// insert adds h unless the shard holds it, and reports whether it did.
func (s *fpShard) insert(h uint64) bool {
	p, held := s.slot(h)
	if held {
		return false
	}
	*p = h
	s.n++
	return true
}

// grow doubles the shard's buckets.
func (s *fpShard) grow() {
	old := s.buckets
	*s = fpShard{buckets: make([][bucketSlots]uint64, 2*len(old)), bits: s.bits + 1}
	for i := range old {
		for _, v := range old[i] {
			if v != 0 {
				s.insert(v)
			}
		}
	}
}

// looked counts a store lookup of a key the set did not rule out.
func (f *absentFilter) looked() {
	if !f.valid {
		f.debt++
	}
}

// due reports whether the set should be built now from the store's keys:
// it holds more stale hashes than keys in state (a watermark's evictions),
// or its absence has cost enough lookups.
func (f *absentFilter) due(s *state.Store) bool {
	if !f.valid {
		return f.debt > 0 && f.debt*scanPerGet >= s.NumKeys()
	}
	if f.n <= f.limit {
		return false
	}
	keys := s.NumKeys()
	if f.n > 2*keys+initialKeys {
		return true
	}
	f.limit = 2*keys + initialKeys
	return false
}

// build empties the set and adds the hash of every key in the store (as of
// its pending batch), and perhaps of keys no longer in state
// (state.Store.KeySuperset: a stale hash costs a lookup, never a wrong
// answer).
func (f *absentFilter) build(s *state.Store) error {
	f.valid = false
	keys := s.NumKeys()
	f.alloc(keys)
	f.valid = true
	// The hashes are added a run at a time, in a loop of their own: each
	// add is a cache miss (the set outgrows the caches), and between one
	// key's scan and the next only one is in flight.
	hs := make([]uint64, 0, 256)
	err := s.KeySuperset(func(key []byte) error {
		if hs = append(hs, f.hash(key)); len(hs) == cap(hs) {
			f.addAll(hs)
			hs = hs[:0]
		}
		return nil
	})
	f.addAll(hs)
	f.limit = max(f.limit, 2*f.n+initialKeys)
	if err != nil {
		f.valid, f.shards = false, nil
	}
	return err
}

func (f *absentFilter) addAll(hs []uint64) {
	for _, h := range hs {
		f.add(h)
	}
}

// touch loads the bucket of hash h (to be probed soon) and returns a word
// of it, for the caller to keep so that the load is not dropped.
func (f *absentFilter) touch(h uint64) uint32 {
	if !f.valid {
		return 0
	}
	s := f.shard(h)
	return uint32(s.buckets[s.home(h)][0])
}
