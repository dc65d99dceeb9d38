package state

// The cache applier: writing records and sorted changes to the Pebble
// partitions of the local cache.

import (
	"fmt"
	"runtime"

	"github.com/cockroachdb/pebble/v2"
)

// applier writes records, in partition order, as one Pebble batch per
// partition. Like applyChanges it waits for the flush of the partitions it
// wrote once their batches pass applyFlushBudget: a rebuild applies every
// delta of a chain, and without the bound the memtables and flushable
// batches of 200 instances held the state's rows (rebuilding 4M keys and
// repartitioning them peaked at 461 MB, 328 MB with the wait).
type applier struct {
	s         *Store
	cur       int
	b         *pebble.Batch
	unflushed int    // bytes committed since the last wait
	written   []int  // partitions written since the last wait
	marked    []bool // marked[p]: p is in written
}

func (s *Store) newApplier() *applier { return &applier{s: s, cur: -1, marked: make([]bool, s.n)} }

func (a *applier) add(r record) error {
	if r.Partition != a.cur || a.b == nil {
		if err := a.commit(); err != nil {
			return err
		}
		d, err := a.s.parts.db(r.Partition)
		if err != nil {
			return err
		}
		a.cur = r.Partition
		a.b = d.NewBatch()
	}
	var err error
	if r.Kind == recPut {
		err = a.b.Set(r.Key, r.Val, nil)
	} else {
		err = a.b.Delete(r.Key, nil)
	}
	return err
}

func (a *applier) commit() error {
	if a.b == nil {
		return nil
	}
	b := a.b
	a.b = nil
	if err := a.s.parts.full.diskFull(a.s.parts.dir); err != nil {
		_ = b.Close()
		return err
	}
	size := len(b.Repr())
	if err := commitBatch(b, nil); err != nil {
		return fmt.Errorf("write state partition %d: %w", a.cur, err)
	}
	a.s.parts.dirty[a.cur] = true
	a.unflushed += size
	if !a.marked[a.cur] {
		a.marked[a.cur] = true
		a.written = append(a.written, a.cur)
	}
	if a.unflushed <= applyFlushBudget {
		return nil
	}
	for _, q := range a.written {
		if err := a.s.parts.flushOne(q); err != nil {
			return err
		}
		a.marked[q] = false
	}
	a.unflushed, a.written = 0, a.written[:0]
	return nil
}

func (a *applier) close() {
	if a.b != nil {
		_ = a.b.Close()
		a.b = nil
	}
}

// applyChanges writes the sorted changes cs to the local cache, one Pebble
// batch per partition. For a partition in rangeDel (its deletes are exactly
// its committed keys from the first deleted one to the last: an eviction),
// the deletes are one range deletion instead of a tombstone per key: Pebble
// then drops the covered files whole instead of compacting a backfill
// batch's million tombstones with the keys they delete. The range deletion
// comes first in the batch, so a put of a new key inside the range (a later
// sequence number) survives it.
//
// A commit's unflushed bytes are bounded by applyFlushBudget: a Pebble batch
// larger than half a memtable is queued whole as a flushable batch, and
// its memory is held until Pebble flushes it, so a backfill batch writing
// 550 MB to 200 partitions held 440 MB of Pebble batches beside its own
// pending writes (the join at scale peaked at 1.43 GB on 214,524 blocks a
// side). Past the budget the partitions written since the last wait are
// flushed, which Pebble was about to do anyway; a live batch's commit,
// kilobytes, never waits.
func (s *Store) applyChanges(cs []change, rangeDel []bool) error {
	var spans []applySpan
	for i := 0; i < len(cs); {
		p := cs[i].part
		j := i
		for j < len(cs) && cs[j].part == p {
			j++
		}
		spans = append(spans, applySpan{p: p, cs: cs[i:j], size: batchSize(cs[i:j])})
		i = j
	}
	// Waves: the partitions up to the one whose batch passes the budget,
	// then their flush; the same flushes as one partition after another.
	for len(spans) > 0 {
		unflushed, n := 0, 0
		for n < len(spans) && unflushed <= applyFlushBudget {
			unflushed += spans[n].size
			n++
		}
		wave := spans[:n]
		spans = spans[n:]
		workers := 1
		if unflushed >= applyParallelMin {
			workers = min(runtime.GOMAXPROCS(0), 4)
			// Opening an instance is not safe for concurrent use.
			for _, sp := range wave {
				if _, err := s.parts.db(sp.p); err != nil {
					return err
				}
			}
		}
		err := inParallel(len(wave), workers, func(i int) error {
			return s.applyPartition(wave[i], rangeDel[wave[i].p])
		})
		if err == nil && unflushed > applyFlushBudget {
			err = inParallel(len(wave), workers, func(i int) error { return s.parts.flushOne(wave[i].p) })
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// applySpan is one partition's changes in a commit and its batch's size.
type applySpan struct {
	p    int
	cs   []change
	size int
}

// applyParallelMin is the bytes of Pebble batches from which a commit
// writes and flushes its partitions with up to GOMAXPROCS goroutines (at
// most 4, as changes sorts), each partition a Pebble instance of its own:
// a backfill's commit, whose batches and the flushes it waits for were
// about 12% of the join shape's CPU, all on the batch's critical path. A
// live batch's kilobytes are not worth a goroutine. Tests lower it.
var applyParallelMin = 1 << 20

// batchSize is the size a partition's Pebble batch of cs is allocated
// with: growing a batch of thousands of records by doubling copies it
// several times (about 2 bytes allocated per byte written).
func batchSize(cs []change) int {
	size := 0
	for i := range cs {
		size += len(cs[i].key) + len(cs[i].e.val) + 16 // kind, varint lengths, headroom
	}
	return size
}

// applyFlushBudget is the bytes of Pebble batches a commit leaves
// unflushed before it waits for their flush (applyChanges); tests lower it.
var applyFlushBudget = 64 << 20

// applyPartition writes partition sp.p's changes as one Pebble batch. Calls
// for distinct partitions whose instances are open may run concurrently
// (applyChanges).
func (s *Store) applyPartition(sp applySpan, rangeDel bool) error {
	p, cs := sp.p, sp.cs
	// A full disk stalls Pebble's writes once its memtables are queued.
	if err := s.parts.full.diskFull(s.parts.dir); err != nil {
		return err
	}
	d, err := s.parts.db(p)
	if err != nil {
		return err
	}
	b := d.NewBatchWithSize(sp.size)
	if rangeDel {
		first, last := -1, -1
		for i := range cs {
			if cs[i].e.del {
				if first < 0 {
					first = i
				}
				last = i
			}
		}
		if first >= 0 {
			end := append([]byte(cs[last].key), 0) // the smallest key after the last
			err = b.DeleteRange(keyBytes(cs[first].key), end, nil)
		}
	}
	for _, c := range cs {
		if err != nil {
			break
		}
		switch {
		case !c.e.del:
			err = b.Set(keyBytes(c.key), c.e.val, nil)
		case !rangeDel:
			err = b.Delete(keyBytes(c.key), nil)
		}
	}
	if err := commitBatch(b, err); err != nil {
		return fmt.Errorf("write state partition %d: %w", p, err)
	}
	s.parts.dirty[p] = true
	return nil
}

// commitBatch commits b (unless err, the error of building it, is set)
// and closes it either way, returning the first error.
func commitBatch(b *pebble.Batch, err error) error {
	if err == nil {
		err = b.Commit(pebble.NoSync)
	}
	if cerr := b.Close(); err == nil {
		err = cerr
	}
	return err
}
