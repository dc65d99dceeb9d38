package state

// Partition key bounds: each partition's committed key range, kept per
// version so that reads and scans skip partitions they cannot hit.

import (
	"bytes"
	"fmt"
	"slices"
)

// beyondBounds reports whether key is known not to be a committed key of
// partition p because it lies outside p's key bounds.
func (s *Store) beyondBounds(p int, key []byte) bool {
	b := s.bounds[p]
	return b != nil && (bytes.Compare(key, b.Min) < 0 || bytes.Compare(key, b.Max) > 0)
}

// outsideCommitted reports whether key is known to lie outside the range
// of every committed partition (two comparisons, no partition hash). The
// union of the bounds is computed once per committed version.
func (s *Store) outsideCommitted(key []byte) bool {
	if !s.union.valid {
		s.union = unionBounds{valid: true, known: true}
		for p, b := range s.bounds {
			if s.partRows[p] == 0 {
				continue
			}
			if b == nil {
				s.union.known = false
				break
			}
			if s.union.min == nil || bytes.Compare(b.Min, s.union.min) < 0 {
				s.union.min = b.Min
			}
			if s.union.max == nil || bytes.Compare(b.Max, s.union.max) > 0 {
				s.union.max = b.Max
			}
		}
	}
	u := &s.union
	if !u.known {
		return false
	}
	return u.min == nil || bytes.Compare(key, u.min) < 0 || bytes.Compare(key, u.max) > 0
}

// unionBounds caches the union of the committed partitions' key bounds
// (outsideCommitted); whatever replaces Store.bounds resets it.
type unionBounds struct {
	valid    bool
	known    bool   // every non-empty partition's bounds are known
	min, max []byte // nil: no committed key
}

// outside reports whether partition p's committed keys are known to lie
// outside [lower, upper).
func (s *Store) outside(p int, lower, upper []byte) bool {
	b := s.bounds[p]
	return b != nil && (upper != nil && bytes.Compare(b.Min, upper) >= 0 || lower != nil && bytes.Compare(b.Max, lower) < 0)
}

// nextBounds returns the partitions' key bounds after the sorted changes cs
// (newRows: the rows per partition after them). A partition with only puts
// widens its known range; one with deletes, or with unknown bounds, reads
// its first and last surviving committed keys (its instance is open, or is
// opened anyway to apply the changes).
func (s *Store) nextBounds(cs []change, newRows []int64) (_ []*keyBounds, rangeDel []bool, _ error) {
	out := slices.Clone(s.bounds)
	rangeDel = make([]bool, s.n)
	var dels []string // one partition's, its array reused by the next
	for i := 0; i < len(cs); {
		p := cs[i].part
		j := i
		firstPut, lastPut := -1, -1 // indexes in cs
		dels = dels[:0]
		for ; j < len(cs) && cs[j].part == p; j++ {
			if cs[j].e.del {
				dels = append(dels, cs[j].key)
				continue
			}
			if firstPut < 0 {
				firstPut = j
			}
			lastPut = j
		}
		i = j
		if newRows[p] == 0 {
			// Every committed key is deleted: one range.
			out[p], rangeDel[p] = nil, len(dels) > 0
			continue
		}
		old := s.bounds[p]
		var lo, hi []byte
		switch {
		case s.partRows[p] == 0:
			// Nothing committed: the puts are all.
		case old != nil && (len(dels) == 0 || s.lazyUnbuilt()):
			// Deleted keys may leave a lazy cache's bounds wider than
			// its keys (lazybuild.go).
			lo, hi = old.Min, old.Max
		default:
			var err error
			lo, hi, rangeDel[p], err = s.survivingBounds(p, dels)
			if err != nil {
				return nil, nil, err
			}
		}
		hasLo, hasHi := lo != nil, hi != nil
		if firstPut >= 0 && (!hasLo || cs[firstPut].key < string(lo)) {
			lo, hasLo = []byte(cs[firstPut].key), true
		}
		if lastPut >= 0 && (!hasHi || cs[lastPut].key > string(hi)) {
			hi, hasHi = []byte(cs[lastPut].key), true
		}
		if !hasLo || !hasHi {
			return nil, nil, fmt.Errorf("state: partition %d has %d rows but no key", p, newRows[p])
		}
		out[p] = &keyBounds{Min: bytes.Clone(lo), Max: bytes.Clone(hi)}
	}
	return out, rangeDel, nil
}

// survivingBounds returns partition p's smallest and largest committed keys
// not in dels (sorted), nil if none survives. prefix reports that dels are
// exactly the committed keys below lo (an eviction of the oldest windows), so
// that the cache may delete them as one range.
func (s *Store) survivingBounds(p int, dels []string) (lo, hi []byte, prefix bool, err error) {
	d, err := s.parts.db(p)
	if err != nil {
		return nil, nil, false, err
	}
	it, err := d.NewIter(nil)
	if err != nil {
		return nil, nil, false, fmt.Errorf("read state partition %d: %w", p, err)
	}
	di, matched := 0, 0
	for valid := it.First(); valid; valid = it.Next() {
		k := it.Key()
		for di < len(dels) && dels[di] < string(k) {
			di++
		}
		if di < len(dels) && dels[di] == string(k) {
			matched++
			continue
		}
		lo = bytes.Clone(k)
		break
	}
	prefix = matched == len(dels)
	if lo != nil {
		di = len(dels) - 1
		for valid := it.Last(); valid; valid = it.Prev() {
			k := it.Key()
			for di >= 0 && dels[di] > string(k) {
				di--
			}
			if di >= 0 && dels[di] == string(k) {
				continue
			}
			hi = bytes.Clone(k)
			break
		}
	}
	if err := it.Close(); err != nil {
		return nil, nil, false, fmt.Errorf("read state partition %d: %w", p, err)
	}
	return lo, hi, prefix, nil
}
