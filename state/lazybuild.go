package state

// A cache built only when read (Options.LazyCache): the join keeps its rows
// in memory and, in a backfill, never reads the store, yet applying every
// commit to 200 Pebble instances cost it memtable inserts and flushes. A
// lazy store leaves its cache unbuilt: a commit publishes its files and
// skips the cache, and the first read of the committed version (a Get or
// Scan that its partition's rows and bounds do not answer, a write of a key
// of unknown presence, KeySuperset) rebuilds the cache from the checkpoint
// chain, once, as a restart would. The chain it reads is bounded by the background
// snapshots (maintain.go, chainDue). A repartition reads the checkpoint
// files anyway (spillVersion) and leaves a built cache.
//
// While unbuilt, a commit that deletes keys cannot read its partitions'
// surviving first and last keys: their bounds stay the committed ones
// widened by the puts, a range that still holds every key (reads and scans
// only use bounds to skip partitions), unless the bounds are unknown (a
// format-1 version), which builds the cache first.

import (
	"context"

	"github.com/ethstream/ethstream/errcode"
)

// lazyUnbuilt reports whether the cache is a lazy one not built yet: a
// commit then leaves it alone.
func (s *Store) lazyUnbuilt() bool { return s.opts.LazyCache && s.parts.build != nil }

// deferBuild makes the cache's build wait for its first read, then read the
// committed version's chain as of that read.
func (s *Store) deferBuild(ctx context.Context) {
	bctx := context.WithoutCancel(ctx)
	s.parts.build = func() error {
		if err := s.buildCommitted(bctx); err != nil {
			// Part of the cache is written: only a new Open mends it.
			s.broken = err
			return err
		}
		return nil
	}
}

// buildCommitted fills the empty cache with the committed version, read
// from the checkpoint files as Open reads them.
func (s *Store) buildCommitted(ctx context.Context) error {
	if s.head == nil {
		return nil
	}
	cat, err := listCatalog(s.fs, s.dir)
	if err != nil {
		return err
	}
	chain, err := loadChain(s.fs, s.dir, cat, s.version)
	if err != nil {
		return err
	}
	if last := chain[len(chain)-1]; last.Version != s.head.Version || last.Attempt != s.head.Attempt {
		// A bug, not a crash to recover from: the store breaks (deferBuild)
		// and the query's restart rebuilds the cache from what is committed.
		return errcode.New(errcode.Internal, s.dir, "report this as a bug; restarting the query rebuilds the state cache from the checkpoint",
			"the state cache's build found version %d attempt %d where the store holds version %d attempt %d",
			last.Version, last.Attempt, s.head.Version, s.head.Attempt)
	}
	if p := s.parts; p.inMem && s.chainBytes() > s.opts.MemCacheBytes {
		// Chosen when the chain was empty: rebuild on disk, not through memory.
		if err := p.toDisk(); err != nil {
			return err
		}
	}
	if err := s.parts.openAll(func(i int) bool { return s.partRows[i] > 0 }); err != nil {
		return err
	}
	if err := s.rebuild(ctx, chain); err != nil {
		return err
	}
	return s.measureMemCache()
}

// buildForBounds builds a lazy cache before a commit whose bounds need to
// read it (nextBounds): a partition with rows before and after cs whose
// bounds are unknown. It runs before the data file's write, which the
// build must not overlap (openTouched).
func (s *Store) buildForBounds(cs []change, newRows []int64) error {
	if !s.lazyUnbuilt() {
		return nil
	}
	for _, c := range cs {
		if p := c.part; s.partRows[p] > 0 && newRows[p] > 0 && s.bounds[p] == nil {
			return s.parts.ensureBuilt()
		}
	}
	return nil
}
