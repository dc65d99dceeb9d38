package state

// The pending batch's changes, sorted by (partition, key) for a commit.

import (
	"cmp"
	"encoding/binary"
	"runtime"
	"slices"
	"strings"
)

// change is one entry of the pending batch, with its sort key.
type change struct {
	pfx  uint64 // first 8 key bytes: most comparisons stop here
	part int
	key  string
	e    *pendingEntry
}

func newChange(e *pendingEntry) change {
	var b [8]byte
	copy(b[:], e.key)
	return change{pfx: binary.BigEndian.Uint64(b[:]), part: int(e.part), key: e.key, e: e}
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

// sortChanges sorts cs by (partition, key). A backfill batch has millions of
// changes: they are first grouped by partition in place (a counting sort,
// linear), then the groups are sorted by a few goroutines, which is both
// fewer comparisons and parallel. Each group is sorted by sortKeys.
func sortChanges(cs []change) {
	if len(cs) < 1<<14 {
		slices.SortFunc(cs, cmpChange)
		return
	}
	np := 0
	for i := range cs {
		np = max(np, cs[i].part+1)
	}
	// start[p] .. start[p+1] is partition p's group once grouped.
	start := make([]int, np+1)
	for i := range cs {
		start[cs[i].part+1]++
	}
	for p := 1; p <= np; p++ {
		start[p] += start[p-1]
	}
	// Cycle-leader permutation: next[p] is the first slot of group p not
	// yet holding one of p's changes.
	next := slices.Clone(start[:np])
	for p := 0; p < np; p++ {
		for next[p] < start[p+1] {
			c := cs[next[p]]
			for c.part != p {
				d := next[c.part]
				next[c.part]++
				cs[d], c = c, cs[d]
			}
			cs[next[p]] = c
			next[p]++
		}
	}
	_ = inParallel(np, min(runtime.GOMAXPROCS(0), 4), func(p int) error {
		sortKeys(cs[start[p]:start[p+1]], 0)
		return nil
	})
}

// sortKeys sorts cs (distinct keys, sharing their first off bytes) by
// key, most significant word first: by the 8 bytes after the keys' common
// prefix as a number, then each run equal in them the same way from the
// next byte on. A key's bytes are read once a level instead of at every
// comparison, and comparisons skip the bytes all keys share (a join's
// keys start with its side's and store's names, which every whole-key
// comparison crossed). It leaves pfx holding the last word compared:
// cmpChange needs newChange's again.
func sortKeys(cs []change, off int) {
	if len(cs) < 2 {
		return
	}
	off += commonPrefix(cs, off)
	for i := range cs {
		cs[i].pfx = wordAt(cs[i].key, off)
	}
	slices.SortFunc(cs, func(a, b change) int { return cmp.Compare(a.pfx, b.pfx) })
	for i := 0; i < len(cs); {
		j := i + 1
		short := len(cs[i].key) < off+8
		for j < len(cs) && cs[j].pfx == cs[i].pfx {
			short = short || len(cs[j].key) < off+8
			j++
		}
		switch {
		case j-i < 2:
		case short:
			// A key ending within the word reads as zero bytes there: the
			// run is told apart by the keys themselves.
			slices.SortFunc(cs[i:j], func(a, b change) int { return strings.Compare(a.key[off:], b.key[off:]) })
		default:
			sortKeys(cs[i:j], off+8)
		}
		i = j
	}
}

// commonPrefix is the length of the bytes every key of cs has in common
// after its first off (which they share).
func commonPrefix(cs []change, off int) int {
	first := cs[0].key[off:]
	n := len(first)
	for i := 1; i < len(cs) && n > 0; i++ {
		k := cs[i].key[off:]
		n = min(n, len(k))
		for j := 0; j < n; j++ {
			if k[j] != first[j] {
				n = j
				break
			}
		}
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
	cs := make([]change, 0, s.ptab.live)
	for _, e := range s.ptab.ents {
		if !e.gone {
			cs = append(cs, newChange(e))
		}
	}
	sortChanges(cs)
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
