package state

// Range scans as of the pending batch: committed keys merged with pending ones.

import (
	"errors"
	"fmt"
	"sort"

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
	closed := 0
	for p := 0; p < s.n && closed < 2; p++ {
		if need(p) && s.parts.dbs[p] == nil {
			closed++
		}
	}
	if closed > 1 {
		if err := s.parts.openAll(need); err != nil {
			return err
		}
	}
	for p := 0; p < s.n; p++ {
		if err := s.scanPartition(p, lower, upper, buckets[p], fn); err != nil {
			return err
		}
	}
	return nil
}

// pendingByPartition returns the pending keys within [lower, upper) grouped
// by partition, each group sorted.
func (s *Store) pendingByPartition(lower, upper []byte) map[int][]string {
	buckets := map[int][]string{}
	for k, e := range s.pending {
		if lower != nil && k < string(lower) {
			continue
		}
		if upper != nil && k >= string(upper) {
			continue
		}
		buckets[int(e.part)] = append(buckets[int(e.part)], k)
	}
	for _, b := range buckets {
		sort.Strings(b)
	}
	return buckets
}

// scanPartition merges partition p's committed keys with its pending ones.
func (s *Store) scanPartition(p int, lower, upper []byte, pend []string, fn func(key, val []byte) error) error {
	visitPending := func(k string) error {
		e, ok := s.pending[k]
		if !ok || e.del {
			return nil
		}
		return fn([]byte(k), e.val)
	}
	if s.partRows[p] == 0 || s.outside(p, lower, upper) {
		for _, k := range pend {
			if err := visitPending(k); err != nil {
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
		for i < len(pend) && pend[i] < string(k) {
			if err := visitPending(pend[i]); err != nil {
				return errors.Join(err, it.Close())
			}
			i++
		}
		// pend holds every pending key of the range (fn changes only the
		// key it visits), so a committed key not in it has no pending
		// entry: no map lookup.
		if i < len(pend) && pend[i] == string(k) {
			i++
			if e, ok := s.pending[string(k)]; ok {
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
		s.lastFound, s.lastAbsent = true, true
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
