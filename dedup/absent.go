package dedup

// The absence filter: a Bloom filter over every key in the operator's
// state, pending batch included, so that a key it rules out is put without
// a lookup. A backfill's keys are nearly all new, and proving one absent
// through the store cost a Pebble Get: a seek in every memtable and a
// filter block read per level (47% of BenchmarkDedupNewKeys's CPU at 1M
// keys; at the seed preset's 26M keys the tables' filter blocks outgrow
// the shared block cache and each Get reads them again).
//
// Why it is sound: between Open and Close the operator is its store's only
// writer, and it adds every key it puts; keys leave state only (eviction,
// Abort, a repartition of an older version), which leaves stale bits that
// cost a lookup, never a wrong answer. So the filter covers the state if it
// started on an empty store or was built by a Scan of the whole state
// since Open. The filter lives in memory only (its hash is seeded per
// process), so no checkpoint format changes.

import (
	"hash/maphash"

	"github.com/ethstream/ethstream/state"
)

// Sizing: bitsPerKey bits of filter per key of capacity; a build sizes it
// for capacityFor the keys it read, and a filter whose keys outgrow its
// capacity is built again. 12 bits a key when full give 0.5% false
// positives, fewer than 0.02% at half full; a false positive costs the Get
// every key cost before, 15 µs once the state outgrows the block cache (at
// 8 bits a key they were 4% of a 2.6M-key backfill's CPU).
const bitsPerKey = 12

// Growth: each build scans the whole state (a Pebble iteration over every
// level, 0.15-0.2 µs a key). Doubling, the seed dedup shape's 26M keys
// cost builds at 4.2M, 8.4M and 16.7M keys (33M keys scanned, 7.6% of its
// CPU), and a filter between half and full made its false positives' Gets
// 2.6%. A build now sizes for 8 times its keys up to bigCapacity (100 MB
// of filter), twice them beyond: the seed's builds stop at 4.2M keys (5M
// keys scanned), and its filter ends 50 MB. The filter takes at most
// max(100 MB, 24 bits a key).
const (
	smallGrowth = 8
	bigCapacity = 1 << 26
)

// capacityFor returns the keys a build holding keys sizes the filter for.
func capacityFor(keys int64) int64 {
	return max(2*keys, min(smallGrowth*keys, bigCapacity), initialKeys)
}

// initialKeys is the capacity of a filter on an empty store (a variable:
// tests shrink it to make the filter grow).
var initialKeys int64 = 1 << 16

// scanPerGet is how many keys a build may scan per store lookup the
// missing filter has cost since Open: a Get of a new key costs several
// microseconds, a scanned key a fraction of one, so a restarted operator
// builds the filter once its lookups would have paid for the scan, and a
// live query of a few keys a batch never scans a large state for it.
const scanPerGet = 8

// absentFilter is a split-block Bloom filter (Parquet's: 256-bit blocks,
// one bit in each of eight 32-bit words): one cache line per query.
type absentFilter struct {
	seed   maphash.Seed
	blocks [][8]uint32
	// keys added since the build, and the keys it was sized for.
	n, capacity int64
	valid       bool
	// debt counts store lookups made while the filter was invalid.
	debt int64
}

// salt is Parquet's split-block Bloom filter's, one odd multiplier a word.
var salt = [8]uint32{0x47b6137b, 0x44974d91, 0x8824ad5b, 0xa2b7289d, 0x705495c7, 0x2df1424b, 0x9efc4947, 0x5c6bfb31}

// reset starts the filter for a store just opened: empty and valid on an
// empty store, invalid (to be built by a Scan) otherwise.
func (f *absentFilter) reset(empty bool) {
	*f = absentFilter{seed: maphash.MakeSeed()}
	if empty {
		f.alloc(initialKeys)
		f.valid = true
	}
}

func (f *absentFilter) alloc(capacity int64) {
	f.capacity = max(capacity, 1)
	f.blocks = make([][8]uint32, max((f.capacity*bitsPerKey+255)/256, 1))
	f.n = 0
}

func (f *absentFilter) hash(key []byte) uint64 { return maphash.Bytes(f.seed, key) }

func (f *absentFilter) block(h uint64) *[8]uint32 {
	return &f.blocks[(h>>32)*uint64(len(f.blocks))>>32]
}

// absent reports whether the key of hash h is certainly not in state.
func (f *absentFilter) absent(h uint64) bool {
	if !f.valid {
		return false
	}
	b, x := f.block(h), uint32(h)
	for i, s := range salt {
		if b[i]&(1<<((x*s)>>27)) == 0 {
			return true
		}
	}
	return false
}

// add records the key of hash h, put into state.
func (f *absentFilter) add(h uint64) {
	if !f.valid {
		return
	}
	b, x := f.block(h), uint32(h)
	for i, s := range salt {
		b[i] |= 1 << ((x * s) >> 27)
	}
	f.n++
}

// looked counts a store lookup of a key the filter did not rule out.
func (f *absentFilter) looked() {
	if !f.valid {
		f.debt++
	}
}

// due reports whether the filter should be built now from the store's
// keys: it outgrew its capacity, or its absence has cost enough lookups.
func (f *absentFilter) due(s *state.Store) bool {
	if f.valid {
		return f.n > f.capacity
	}
	return f.debt > 0 && f.debt*scanPerGet >= s.NumKeys()
}

// build sizes the filter for capacityFor the store's keys (as of its pending
// batch) and adds every one of them, and perhaps keys no longer in state
// (state.Store.KeySuperset: a stale bit costs a lookup, never a wrong
// answer; a Scan, in key order, cost a build of 2.6M pending keys 0.4 µs
// a key, 21% of the batch's CPU).
func (f *absentFilter) build(s *state.Store) error {
	f.valid = false
	keys := s.NumKeys()
	f.alloc(capacityFor(keys))
	f.valid = true
	// The keys' hashes are added a run at a time, in a loop of their own:
	// each add is a cache miss (the filter outgrows the caches), and
	// between one key's scan and the next only one is in flight (the adds
	// were half of a build's CPU at 12M keys).
	hs := make([]uint64, 0, 256)
	err := s.KeySuperset(func(key []byte) error {
		if hs = append(hs, f.hash(key)); len(hs) == cap(hs) {
			f.addAll(hs)
			hs = hs[:0]
		}
		return nil
	})
	f.addAll(hs)
	// The keys in state, not the keys visited (some twice, some gone):
	// the next build is due when the state outgrows the capacity.
	f.n = keys
	if err != nil {
		f.valid, f.blocks = false, nil
	}
	return err
}

func (f *absentFilter) addAll(hs []uint64) {
	for _, h := range hs {
		f.add(h)
	}
}

// touch loads the block of hash h (to be probed soon) and returns a word of
// it, for the caller to keep so that the load is not dropped.
func (f *absentFilter) touch(h uint64) uint32 {
	if !f.valid {
		return 0
	}
	return f.block(h)[0]
}
