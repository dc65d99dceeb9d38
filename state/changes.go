package state

// The pending batch's changes, sorted by (partition, key) for a commit.

import (
	"encoding/binary"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
// fewer comparisons and parallel.
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
	var wg sync.WaitGroup
	var cursor atomic.Int64
	for range min(runtime.GOMAXPROCS(0), 4) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				p := int(cursor.Add(1) - 1)
				if p >= np {
					return
				}
				slices.SortFunc(cs[start[p]:start[p+1]], cmpChange)
			}
		}()
	}
	wg.Wait()
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
