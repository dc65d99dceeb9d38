package state

// The cache held in memory: a small state's Pebble instances on an
// in-memory file system, moved to disk once it outgrows its budget.

import (
	"errors"
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A cache generation starts in memory (Options.MemCacheBytes) when the
// checkpoint files its rebuild reads hold at most MemCacheBytes: its Pebble
// instances run on vfs.NewMem, so opening one, flushing its memtables and
// compacting its tables create no file. Creating files was the join
// shape's largest cost on ext4 (opening its 200 partitions, each a
// directory, a MANIFEST and two markers, and every flush's table: the
// openat(2) calls were 23% of the 30-day join's CPU). What changes:
//
//   - a small cache dies with the process: Close writes no marker, so the
//     next Open rebuilds it from the checkpoint (into memory again while
//     it fits, on the first read or write: recovery.go), as after a
//     crash; one whose files hold memCacheKeepBytes
//     or more is moved to disk first and trusted at the next Open, as
//     before (a join keeping 429,048 rows, 71 MB of files, rebuilt at its
//     restart peaked at 533 MB against 151 MB reusing it);
//   - after a commit the instances' files are measured, and past the
//     budget (or before a commit whose batch would pass it) flushed,
//     closed and copied to LocalDir (toDisk), where the cache carries on
//     as one that was always there;
//   - MemoryUsedBytes counts the files held in memory.
//
// A cache Open trusts (its marker) stays on disk, so does a repartition's
// new generation and any cache on Options.LocalFS (tests inject faults
// into the disk through it).

// newCache returns a new, empty generation gen of the cache: in memory if
// the options ask for it and the committed version's files fit the budget
// (chainBytes: what a rebuild reads, at least the state's size), else on
// LocalDir.
func (s *Store) newCache(gen string) *partitions {
	if s.opts.MemCacheBytes > 0 && s.opts.LocalFS == nil && s.chainBytes() <= s.opts.MemCacheBytes {
		p := newPartitions(vfs.NewMem(), s.opts.LocalDir, gen, s.n, s.opts.CacheBytes, s.logger)
		p.inMem = true
		return p
	}
	return newPartitions(s.opts.LocalFS, s.opts.LocalDir, gen, s.n, s.opts.CacheBytes, s.logger)
}

// chainBytes is the size of the data files the committed version's chain
// reads: its snapshot (or none) and the deltas after it.
func (s *Store) chainBytes() int64 {
	n := s.chainBase
	for _, l := range s.chain {
		n += l.bytes
	}
	return n
}

// fitMemCache moves an in-memory cache to disk before a commit applies cs
// to it if its files and cs's bytes would pass Options.MemCacheBytes: a
// backfill batch flushes hundreds of megabytes (applyChanges), which must
// not land in memory first.
func (s *Store) fitMemCache(cs []change) error {
	p := s.parts
	if !p.inMem || p.memBytes+p.fill.pending()+int64(batchSize(cs)) <= s.opts.MemCacheBytes {
		return nil
	}
	return s.moveMemCache(p.memBytes)
}

// measureMemCache records the size of an in-memory cache's files after a
// commit or a rebuild wrote them, and moves it to disk past the budget.
func (s *Store) measureMemCache() error {
	p := s.parts
	if !p.inMem {
		return nil
	}
	size, err := p.memSize()
	if err != nil {
		return err
	}
	p.memBytes = size
	// Records waiting for their partition's first open (chainfill.go)
	// land in memory too.
	if size+p.fill.pending() <= s.opts.MemCacheBytes {
		return nil
	}
	return s.moveMemCache(size)
}

func (s *Store) moveMemCache(size int64) error {
	p := s.parts
	if err := p.toDisk(); err != nil {
		return err
	}
	s.logger.Info("state cache moved to disk", "dir", s.opts.LocalDir, "bytes", size, "budget", s.opts.MemCacheBytes)
	return nil
}

// memCacheKeepBytes is the size of an in-memory cache's files from which
// Close moves it to disk (keepMemCache). Below it, rebuilding costs the
// next Open less than the files' creates cost this Close. Tests lower it.
var memCacheKeepBytes int64 = 16 << 20

// keepMemCache moves an in-memory cache of memCacheKeepBytes or more to
// disk at Close, so that the marker vouches for it. A failure only costs
// the next Open a rebuild: it is logged.
func (s *Store) keepMemCache() {
	p := s.parts
	if !p.inMem {
		return
	}
	// Partitions first opened since the last commit were filled from the
	// chain (chainfill.go) after its measure.
	size, err := p.memSize()
	if err == nil {
		p.memBytes = size
		if size+p.fill.pending() < memCacheKeepBytes {
			return
		}
		err = s.moveMemCache(size)
	}
	if err != nil {
		s.logger.Warn("state cache not kept; the next start rebuilds it", "dir", s.opts.LocalDir, "err", err)
	}
}

// memCacheDisk is the file system toDisk moves a cache to (the local
// disk: a cache in memory never has Options.LocalFS). Tests fill it.
var memCacheDisk vfs.FS = vfs.Default

// memSize returns the bytes of the files of an in-memory generation.
func (p *partitions) memSize() (int64, error) {
	var total int64
	var walk func(dir string) error
	walk = func(dir string) error {
		names, err := p.fs.List(dir)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		for _, n := range names {
			path := p.fs.PathJoin(dir, n)
			fi, err := p.fs.Stat(path)
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					continue // deleted by Pebble meanwhile
				}
				return err
			}
			if fi.IsDir() {
				if err := walk(path); err != nil {
					return err
				}
				continue
			}
			total += fi.Size()
		}
		return nil
	}
	if err := walk(p.dir); err != nil {
		return 0, fmt.Errorf("measure state cache in memory: %w", err)
	}
	return total, nil
}

// toDisk moves an in-memory generation to LocalDir: every partition a
// deferred rebuild has not filled yet filled (chainfill.go: the cache on
// disk must hold all of them), every written partition flushed (Pebble
// runs without a WAL: closing drops its memtables), every instance closed,
// the files copied, and the instances reopened on disk when next needed.
func (p *partitions) toDisk() error {
	if err := p.fillAll(); err != nil {
		return err
	}
	if err := p.flush(); err != nil {
		return err
	}
	for i, d := range p.dbs {
		if d == nil {
			continue
		}
		p.dbs[i] = nil
		if err := d.Close(); err != nil {
			return fmt.Errorf("close state partition %d: %w", i, err)
		}
	}
	// The copy bypasses the out-of-space latch: a copy that fails leaves
	// the generation in memory (its instances closed, never reopened: the
	// store is broken or closing), and a Close that only tried to keep it
	// (keepMemCache) must not then fail with DISK_FULL. The partial copy
	// is removed: it would hold space a full disk lacks until the next Open.
	if _, err := vfs.Clone(p.fs, noSyncFS{memCacheDisk}, p.dir, p.dir); err != nil {
		if rmErr := memCacheDisk.RemoveAll(p.dir); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			err = errors.Join(err, rmErr)
		}
		return fmt.Errorf("move state cache to %s: %w", p.dir, err)
	}
	disk := noSyncFS{spaceFS{FS: memCacheDisk, latch: p.full}}
	p.fs, p.inMem, p.memBytes = disk, false, 0
	p.opts.FS = p.fs
	if leanCache {
		p.opts.FS = leanFS{p.fs}
	}
	return nil
}
