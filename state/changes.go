package state

// The pending batch's changes, sorted by (partition, key) for a commit.

import (
	"encoding/binary"
	"iter"
	"math/bits"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/ethstream/ethstream/errcode"
)

// change is one entry of the pending batch, with its sort key.
type change struct {
	pfx  uint64 // first 8 key bytes, set by sortedChanges for cmpChange only
	part int
	key  string
	e    *pendingEntry
}

// newChange is e's change. It does not read the key's bytes: a large
// batch's sort reads them partition by partition (sortKeys), a small one
// sets pfx (sortedChanges).
func newChange(e *pendingEntry) change {
	return change{part: int(e.part), key: e.key, e: e}
}

func cmpChange(a, b change) int {
	if a.part != b.part {
		return a.part - b.part
	}
	if a.pfx != b.pfx {
		if a.pfx < b.pfx {
			return -1
		}
		return 1
	}
	return strings.Compare(a.key, b.key)
}

// sortGroups sorts cs, grouped by partition (partition p's changes are
// cs[start[p]:start[p+1]]), by (partition, key): each group by sortKeys,
// on a few goroutines. It reports whether a key is there twice.
func sortGroups(cs []change, start []int) (dup bool) {
	// One word of scratch a change; each group sorts in its own range.
	words := make([]uint64, len(cs))
	var dups atomic.Bool
	_ = inParallel(len(start)-1, min(runtime.GOMAXPROCS(0), 4), func(p int) error {
		if sortKeys(cs[start[p]:start[p+1]], words[start[p]:start[p+1]], 0) {
			dups.Store(true)
		}
		return nil
	})
	return dups.Load()
}

// sortedChanges returns a change for each entry entries yields, sorted
// by (partition, key). A small set is sorted by cmpChange. A large one (a
// backfill batch has millions of changes) is grouped by partition as it is
// read (a counting sort: entries is read twice), then the groups are
// sorted by a few goroutines (sortGroups), which is both fewer comparisons
// and parallel. The pending batch yields each partition's entries in the
// order they were put, the order of their keys in memory (pendingAlloc),
// so that the sort's first read of each key goes forward through its
// partition's chunks. dup reports a key yielded twice, which a pending
// batch holds only if a caller broke PutFirstHashed's promise (the check
// costs the sort nothing: equal keys meet only where it compares whole
// keys).
func sortedChanges(entries iter.Seq[*pendingEntry]) (cs []change, dup bool) {
	// start[p+1] counts partition p's entries, then start[p] .. start[p+1]
	// is its group.
	var start []int
	n := 0
	for e := range entries {
		for int(e.part) >= len(start)-1 {
			start = append(start, 0)
		}
		start[e.part+1]++
		n++
	}
	if n < 1<<14 {
		cs := make([]change, 0, n)
		for e := range entries {
			c := newChange(e)
			c.pfx = wordAt(c.key, 0)
			cs = append(cs, c)
		}
		slices.SortFunc(cs, cmpChange)
		for i := 1; i < len(cs) && !dup; i++ {
			dup = cmpChange(cs[i-1], cs[i]) == 0
		}
		return cs, dup
	}
	for p := 1; p < len(start); p++ {
		start[p] += start[p-1]
	}
	cs = make([]change, n)
	next := slices.Clone(start[:len(start)-1])
	for e := range entries {
		cs[next[e.part]] = newChange(e)
		next[e.part]++
	}
	return cs, sortGroups(cs, start)
}

// pendingGrouped is sortedChanges of the pending batch's entries that
// keep admits. A large batch's are read partition by partition from the
// allocator's chunks (pendingAlloc), each partition's in the order they
// were put as sortedChanges groups them, but in one sequential pass
// instead of the counting sort's two passes over the table's order,
// each entry of which is a cache miss (the counting sort was 7% of the
// join leg's CPU).
func (s *Store) pendingGrouped(keep func(*pendingEntry) bool) (cs []change, dup bool) {
	if len(s.ptab.ents) < 1<<14 {
		return sortedChanges(s.pendingWhere(keep))
	}
	cs = make([]change, 0, len(s.ptab.ents))
	start := make([]int, 1, len(s.alloc.parts)+1)
	add := func(chunk []pendingEntry) {
		for i := range chunk {
			if e := &chunk[i]; keep(e) {
				cs = append(cs, newChange(e))
			}
		}
	}
	for p := range s.alloc.parts {
		pa := &s.alloc.parts[p]
		for _, chunk := range pa.full {
			add(chunk)
		}
		add(pa.entries)
		start = append(start, len(cs))
	}
	return cs, sortGroups(cs, start)
}

// pendingWhere yields the pending batch's entries that keep admits, in
// the table's order.
func (s *Store) pendingWhere(keep func(*pendingEntry) bool) iter.Seq[*pendingEntry] {
	return func(yield func(*pendingEntry) bool) {
		for _, e := range s.ptab.ents {
			if keep(e) && !yield(e) {
				return
			}
		}
	}
}

// sortKeys sorts cs (distinct keys, sharing their first off bytes) by
// key, a few bytes at a time: it skips the bytes all keys share (a join's
// keys start with its side's and store's names), sorts by the next bytes
// after them, then sorts each run equal in those bytes the same way from
// the byte after. The sort is of words (scratch, one per change): each
// word holds the key's next bytes in its high bits and the change's index
// in its low bits, so it is an ordered sort of integers, without a
// comparison function or the moves of 40-byte changes, and the changes are
// then moved once into their order (permute). The index takes the bits of
// len(cs)-1, the bytes the rest: 6 bytes a level for up to 65,536 keys (a
// join batch's partition holds about 700). pfx is left as it was. It
// reports whether a key is there twice (sortedChanges).
func sortKeys(cs []change, scratch []uint64, off int) (dup bool) {
	n := len(cs)
	if n < 2 {
		return false
	}
	off += commonPrefix(cs, off)
	width := (64 - bits.Len(uint(n-1))) / 8 // key bytes a word holds
	keyMask := ^uint64(0) << (64 - 8*width)
	w := scratch[:n]
	for i := range cs {
		w[i] = wordAt(cs[i].key, off)&keyMask | uint64(i)
	}
	slices.Sort(w)
	permute(cs, w, ^keyMask)
	for i := 0; i < n; {
		j := i + 1
		short := len(cs[i].key) < off+width
		for j < n && w[j]&keyMask == w[i]&keyMask {
			short = short || len(cs[j].key) < off+width
			j++
		}
		switch {
		case j-i < 2:
		case short:
			// A key ending within the word reads as zero bytes there: the
			// run is told apart by the keys themselves.
			slices.SortFunc(cs[i:j], func(a, b change) int { return strings.Compare(a.key[off:], b.key[off:]) })
			for k := i + 1; k < j && !dup; k++ {
				dup = cs[k-1].key == cs[k].key
			}
		default:
			dup = sortKeys(cs[i:j], w[i:j], off+width) || dup
		}
		i = j
	}
	return dup
}

// permute puts cs in the order of w: position k gets the change at index
// w[k]&idxMask. It follows each cycle of the permutation, moving every
// change once, and marks a placed position by setting its index to itself.
func permute(cs []change, w []uint64, idxMask uint64) {
	for k := range cs {
		if int(w[k]&idxMask) == k {
			continue
		}
		c := cs[k]
		j := k
		for {
			src := int(w[j] & idxMask)
			w[j] = w[j]&^idxMask | uint64(j)
			if src == k {
				cs[j] = c
				break
			}
			cs[j] = cs[src]
			j = src
		}
	}
}

// commonPrefix is the length of the bytes every key of cs has in common
// after its first off (which they share), compared a word at a time.
func commonPrefix(cs []change, off int) int {
	first := cs[0].key
	n := len(first) - off
	for i := 1; i < len(cs) && n > 0; i++ {
		k := cs[i].key
		n = min(n, len(k)-off)
		j := 0
		for j < n {
			if x := wordAt(k, off+j) ^ wordAt(first, off+j); x != 0 {
				j += bits.LeadingZeros64(x) / 8
				break
			}
			j += 8
		}
		n = min(n, j)
	}
	return n
}

// wordAt is key's 8 bytes from off, big-endian, missing ones zero.
func wordAt(key string, off int) uint64 {
	if len(key)-off >= 8 {
		k := key[off : off+8]
		return uint64(k[0])<<56 | uint64(k[1])<<48 | uint64(k[2])<<40 | uint64(k[3])<<32 |
			uint64(k[4])<<24 | uint64(k[5])<<16 | uint64(k[6])<<8 | uint64(k[7])
	}
	var b [8]byte
	if off < len(key) {
		copy(b[:], key[off:])
	}
	return binary.BigEndian.Uint64(b[:])
}

// changes returns the pending batch's effective changes sorted by
// (partition, key): puts, and deletes of keys that existed. It resolves
// unknown entries on the way (one sort for both).
func (s *Store) changes() ([]change, error) {
	cs, dup := s.pendingGrouped(func(e *pendingEntry) bool { return !e.gone })
	if dup {
		// A bug in the operator, not in the input: nothing of the batch is
		// written, and a restart re-runs it from the checkpoint.
		return nil, errcode.New(errcode.Internal, s.dir, "report this as a bug; nothing of the batch was committed, and restarting the query re-runs it from the checkpoint",
			"the state store's pending batch holds a key twice (PutFirstHashed or DeleteFirstHashed of a key the batch had already changed)")
	}
	if err := s.resolveSorted(cs); err != nil {
		return nil, err
	}
	out := cs[:0]
	for _, c := range cs {
		if c.e.del && !c.e.existed {
			continue
		}
		out = append(out, c)
	}
	return out, nil
}
