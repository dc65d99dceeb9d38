package state

// A rebuild into memory partition by partition: the checkpoint chain is
// read once, its records grouped by partition, and each partition's
// instance is filled when it is first opened.

import (
	"context"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// A cache rebuilt into memory (memcache.go) after a restart used to open
// every partition holding rows and apply the whole chain to them on the
// first read or write: a live batch of 20 blocks touching a few keys paid
// for 200 in-memory pebble.Open calls (~60 ms of the seed bench's restart
// to the first committed batch). A cache in memory has a chain of at most
// Options.MemCacheBytes of data files, so its records can wait in memory
// instead: chainFill holds them, and partitions.db (or openAll) applies
// partition i's records to its instance right after opening it, as one
// Pebble batch in chain order (the snapshot's puts, then each delta's puts
// and deletes, the order rebuild applies them in; a later record of a key
// wins within a batch as across batches), then frees them. Every path to a
// partition's instance opens it through db or openAll, so no read or write
// sees it unfilled. Moving the cache to disk (toDisk) fills the partitions
// not yet filled first: the marker of a cache on disk vouches for all of
// them. A cache on disk, or a chain over the budget, is rebuilt whole.

// chainFill holds the records of a committed chain not yet written to
// their partitions. Each partition's slice is only touched by the one
// opening it (openAll fills distinct partitions concurrently).
type chainFill struct {
	// recs[i]: partition i's records in chain order, encoded as in a data
	// file (appendRecord); nil once applied or when it has none.
	recs [][]byte
	// fail breaks the store: a partition half filled is only mended by a
	// new Open.
	fail func(error)
}

// groupChain reads the data files of chain, in order, into a chainFill of
// n partitions.
func (s *Store) groupChain(ctx context.Context, chain []*versionMeta) (*chainFill, error) {
	start := time.Now()
	f := &chainFill{recs: make([][]byte, s.n)}
	for _, m := range chain {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		err := readDataFile(s.fs, s.dir, m, func(r record) error {
			f.recs[r.Partition] = appendRecord(f.recs[r.Partition], r.Kind, r.Partition, r.Key, r.Val)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	s.logger.Info("state cache rebuilt from checkpoint into memory, partitions filled when opened", "dir", s.dir,
		"version", s.version, "files", len(chain), "rows", s.rows, "bytes", f.pending(), "ms", time.Since(start).Milliseconds())
	return f, nil
}

// pending returns the bytes of records not yet applied.
func (f *chainFill) pending() int64 {
	if f == nil {
		return 0
	}
	var n int64
	for _, r := range f.recs {
		n += int64(len(r))
	}
	return n
}

// fillOne writes partition i's records to its instance d, just opened, and
// frees them. Calls for distinct partitions may run concurrently.
func (p *partitions) fillOne(i int, d *pebble.DB) error {
	f := p.fill
	if f == nil || f.recs[i] == nil {
		return nil
	}
	recs := f.recs[i]
	f.recs[i] = nil
	b := d.NewBatchWithSize(len(recs))
	var err error
	for len(recs) > 0 && err == nil {
		var r record
		if r, recs, err = decodeRecord(recs); err != nil {
			panic(fmt.Sprintf("state: undecodable record grouped for partition %d: %v", i, err))
		}
		if r.Kind == recPut {
			err = b.Set(r.Key, r.Val, nil)
		} else {
			err = b.Delete(r.Key, nil)
		}
	}
	if err := commitBatch(b, err); err != nil {
		return fmt.Errorf("rebuild state partition %d: %w", i, err)
	}
	p.dirty[i] = true
	return nil
}

// fillAll opens and fills every partition whose records wait, then drops
// the chainFill.
func (p *partitions) fillAll() error {
	if err := p.ensureBuilt(); err != nil {
		return err
	}
	if p.fill == nil {
		return nil
	}
	if err := p.openAll(func(i int) bool { return p.fill.recs[i] != nil }); err != nil {
		return err
	}
	p.fill = nil
	return nil
}
