package state

// Range scans as of the pending batch: committed keys merged with pending ones.

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// Scan visits every key in [lower, upper) (nil = unbounded) as of the pending
// batch, partition by partition in index order, in key order within a
// partition. fn may Put or Delete the visited key; key and val are valid only
// during fn.
func (s *Store) Scan(lower, upper []byte, fn func(key, val []byte) error) error {
	if err := s.usable(); err != nil {
		return err
	}
	buckets := s.pendingByPartition(lower, upper)
	// Open the closed partitions the range needs in parallel (the first
	// eviction scans after a restart).
	need := func(p int) bool { return s.partRows[p] > 0 && !s.outside(p, lower, upper) }
	if err := s.openNeeded(need); err != nil {
		return err
	}
	for p := 0; p < s.n; p++ {
		var pend []*pendingEntry
		if buckets != nil {
			pend = buckets[p]
		}
		if err := s.scanPartition(p, lower, upper, pend, fn); err != nil {
			return err
		}
	}
	return nil
}

// pendingByPartition returns the pending entries within [lower, upper)
// grouped by partition (nil when none is), each group sorted by key.
func (s *Store) pendingByPartition(lower, upper []byte) [][]*pendingEntry {
	if s.ptab.live == 0 {
		return nil
	}
	buckets := make([][]*pendingEntry, s.n)
	for _, e := range s.ptab.ents {
		if e.gone || lower != nil && e.key < string(lower) || upper != nil && e.key >= string(upper) {
			continue
		}
		buckets[e.part] = append(buckets[e.part], e)
	}
	for _, b := range buckets {
		slices.SortFunc(b, func(x, y *pendingEntry) int { return strings.Compare(x.key, y.key) })
	}
	return buckets
}

// scanPartition merges partition p's committed keys with its pending
// entries pend (sorted by key). An entry is read when it is visited: fn may
// have changed it since pend was gathered (it changes only the key it is
// given).
func (s *Store) scanPartition(p int, lower, upper []byte, pend []*pendingEntry, fn func(key, val []byte) error) error {
	visitPending := func(e *pendingEntry) error {
		if e.gone || e.del {
			return nil
		}
		return fn(keyBytes(e.key), e.val)
	}
	if s.partRows[p] == 0 || s.outside(p, lower, upper) {
		for _, e := range pend {
			if err := visitPending(e); err != nil {
				return err
			}
		}
		return nil
	}
	d, err := s.parts.db(p)
	if err != nil {
		return err
	}
	it, err := d.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("scan state partition %d: %w", p, err)
	}
	i := 0
	for valid := it.First(); valid; valid = it.Next() {
		k := it.Key()
		for i < len(pend) && pend[i].key < string(k) {
			if err := visitPending(pend[i]); err != nil {
				return errors.Join(err, it.Close())
			}
			i++
		}
		// pend holds every pending key of the range (fn changes only the
		// key it visits), so a committed key not in it has no pending
		// entry: no lookup.
		if i < len(pend) && pend[i].key == string(k) {
			e := pend[i]
			i++
			if !e.gone {
				if e.del {
					continue
				}
				if err := fn(k, e.val); err != nil {
					return errors.Join(err, it.Close())
				}
				continue
			}
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return errors.Join(fmt.Errorf("scan state partition %d: %w", p, err), it.Close())
		}
		// k is a committed key: a Delete or Put of it by fn (eviction)
		// then knows it existed, instead of leaving it to resolve (a sort
		// and a seek per key).
		s.lastGet = append(s.lastGet[:0], k...)
		s.lastFound = true
		if err := fn(k, v); err != nil {
			return errors.Join(err, it.Close())
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("scan state partition %d: %w", p, err)
	}
	for ; i < len(pend); i++ {
		if err := visitPending(pend[i]); err != nil {
			return err
		}
	}
	return nil
}

// openNeeded opens the closed partitions need names in parallel when two
// or more are (a lone one opens on its first read).
func (s *Store) openNeeded(need func(p int) bool) error {
	closed := 0
	for p := 0; p < s.n && closed < 2; p++ {
		if need(p) && s.parts.dbs[p] == nil {
			closed++
		}
	}
	if closed > 1 {
		return s.parts.openAll(need)
	}
	return nil
}
