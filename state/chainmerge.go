package state

import (
	"bytes"
	"context"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// chainCursor is one data file of a delta chain in a k-way merge: its
// current record and its age (its index in the chain, higher = newer).
type chainCursor struct {
	f   *dataFile
	rec record
	age int
}

func chainLess(a, b *chainCursor) bool {
	if a.rec.Partition != b.rec.Partition {
		return a.rec.Partition < b.rec.Partition
	}
	if c := bytes.Compare(a.rec.Key, b.rec.Key); c != 0 {
		return c < 0
	}
	return a.age > b.age // the newest write of a key comes first
}

// eachCommitted passes every key and value of committed version v to fn in
// (partition, key) order, reading its checkpoint files without the local
// cache (mergeChain).
func (s *Store) eachCommitted(ctx context.Context, v int64, fn func(part int, k, v []byte) error) error {
	cat, err := listCatalog(s.fs, s.dir)
	if err != nil {
		return err
	}
	chain, err := loadChain(s.fs, s.dir, cat, v)
	if err != nil {
		return err
	}
	return mergeChain(ctx, s.fs, s.dir, chain, fn)
}

// mergeChain passes the state at the end of chain (oldest file first) to fn
// as puts in (partition, key) order: a streaming k-way merge of the
// snapshot and the deltas (each file is in that order already), in which
// the newest write of a key wins and a delete drops it. Memory is one read
// buffer per file of the chain, whatever the number of keys: folding the
// deltas into a map first would hold every key ten backfill batches
// changed. A repartition and a background snapshot both read through it.
func mergeChain(ctx context.Context, fs vfs.FS, dir string, chain []*versionMeta, fn func(part int, k, v []byte) error) error {
	h := mergeHeap[*chainCursor]{less: chainLess}
	defer func() {
		for _, c := range h.items {
			c.f.close()
		}
	}()
	for age, m := range chain {
		f, err := openDataFile(fs, dir, m)
		if err != nil {
			return err
		}
		c := &chainCursor{f: f, age: age}
		rec, ok, err := f.next()
		if err != nil || !ok {
			f.close()
			if err != nil {
				return err
			}
			continue
		}
		c.rec = rec
		h.push(c)
	}
	var cur []byte
	for n := 0; h.len() > 0; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		c := h.top()
		part := c.rec.Partition
		if c.rec.Kind == recPut {
			if err := fn(part, c.rec.Key, c.rec.Val); err != nil {
				return err
			}
		}
		cur = append(cur[:0], c.rec.Key...)
		// Skip the older writes of the key, then the key itself.
		for h.len() > 0 && h.top().rec.Partition == part && bytes.Equal(h.top().rec.Key, cur) {
			if err := advanceChain(&h); err != nil {
				return err
			}
		}
	}
	return nil
}

// advanceChain moves the top cursor to its next record, dropping it at the
// end of its file.
func advanceChain(h *mergeHeap[*chainCursor]) error {
	c := h.top()
	rec, ok, err := c.f.next()
	if err != nil {
		return err
	}
	if !ok {
		c.f.close()
		h.popTop()
		return nil
	}
	c.rec = rec
	h.fixTop()
	return nil
}
