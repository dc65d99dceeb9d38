package state

// Opening a store: loading a committed version into the local cache,
// reusing a trusted cache or rebuilding it from the checkpoint files.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/google/uuid"
)

// Open loads the state committed at version (-1 = empty/new). A schema
// different from the recorded one is STATE_SCHEMA_MISMATCH naming both; a
// recorded partition count != opts.Partitions is an error (the engine
// repartitions explicitly). A damaged file is CHECKPOINT_CORRUPT with its path.
func Open(ctx context.Context, opts Options, version int64) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.SnapshotEvery <= 0 {
		opts.SnapshotEvery = 10
	}
	if opts.Retain <= 0 {
		opts.Retain = 100
	}
	if opts.FS == nil || opts.Dir == "" || opts.LocalDir == "" {
		return nil, errors.New("state: Options.FS, Dir and LocalDir are required")
	}
	if opts.Partitions < 1 || opts.Partitions > maxPartitions {
		return nil, errcode.New(errcode.InvalidArgument, opts.Dir, "use a count from 1 to 10000",
			"state partition count %d out of range", opts.Partitions)
	}
	if err := opts.Schema.validate(); err != nil {
		return nil, err
	}
	if version < -1 {
		return nil, fmt.Errorf("state: open at version %d", version)
	}
	if err := ensureDir(opts.FS, opts.Dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.LocalDir, 0o755); err != nil {
		return nil, fmt.Errorf("create state cache dir %s: %w", opts.LocalDir, err)
	}
	cat, err := listCatalog(opts.FS, opts.Dir)
	if err != nil {
		return nil, err
	}
	s := &Store{
		opts:        opts,
		schema:      opts.Schema,
		fs:          opts.FS,
		dir:         opts.Dir,
		logger:      opts.Logger,
		version:     -1,
		nextAttempt: map[int64]int{},
	}
	for v, a := range cat.maxAt {
		s.nextAttempt[v] = a + 1
		if v > version {
			s.abandoned = append(s.abandoned, v)
		}
	}
	// Temp files are left by a crashed writer; we hold the checkpoint.
	for _, t := range cat.tmps {
		if err := s.fs.Remove(s.fs.PathJoin(s.dir, t)); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.tmps = append(s.tmps, s.fs.PathJoin(s.dir, t))
		}
	}
	if err := s.load(ctx, cat, version); err != nil {
		return nil, err
	}
	return s, nil
}

// load makes the store hold version (the cache or a rebuild from the files).
func (s *Store) load(ctx context.Context, cat *catalog, version int64) error {
	s.stopMaintenance() // of another version
	s.gcQueue = nil     // computed for another version
	var chain []*versionMeta
	if version >= 0 {
		var err error
		chain, err = loadChain(s.fs, s.dir, cat, version)
		if err != nil {
			if _, ok := cat.metas[version]; !ok {
				return errcode.Wrap(err, errcode.CheckpointCorrupt, s.dir,
					"restore the state directory from a backup or move the checkpoint aside",
					"state version %d is committed in the checkpoint but missing from the state directory", version)
			}
			return err
		}
		// The checkpoint is the truth and the cache only a copy: a damaged
		// file is refused even when a trusted cache could carry on, before
		// the engine writes anything for the next batch.
		if err := checkChain(s.fs, s.dir, chain); err != nil {
			return err
		}
		head := chain[len(chain)-1].committed()
		s.setChain(chain)
		same := head.Schema.Equal(s.opts.Schema)
		if !same && s.opts.SpecCompatible != nil && s.opts.SpecCompatible(head.Schema.Spec) {
			layout := head.Schema
			layout.Spec = s.opts.Schema.Spec
			same = layout.Equal(s.opts.Schema)
		}
		if !same {
			return errcode.New(errcode.StateSchemaMismatch, s.dir,
				"restore the previous query definition, or start the changed query on a new checkpoint",
				"the state schema changed: checkpoint has %s, query has %s", head.Schema, s.opts.Schema)
		}
		if head.Partitions != s.opts.Partitions {
			return fmt.Errorf("state: version %d has %d partitions, Open asked for %d (repartition explicitly)",
				version, head.Partitions, s.opts.Partitions)
		}
		s.head = head
		s.storeID = head.StoreID
		s.partRows = slices.Clone(head.PartitionRows)
		s.rows = head.Rows
		s.bounds = slices.Clone(head.PartitionKeys)
		if s.bounds == nil {
			s.bounds = make([]*keyBounds, head.Partitions)
		}
	} else {
		s.chain, s.chainFloor, s.chainBase, s.chainBaseRecords = nil, -1, 0, 0
		s.storeID = uuid.NewString()
		s.partRows = make([]int64, s.opts.Partitions)
		s.bounds = make([]*keyBounds, s.opts.Partitions)
	}
	s.version = version
	s.n = s.opts.Partitions
	s.union = unionBounds{}
	if s.head != nil {
		if gen, ok := s.trustMarker(); ok {
			s.parts = newPartitions(s.opts.LocalFS, s.opts.LocalDir, gen, s.n, s.opts.CacheBytes, s.logger)
			s.trustPartitions(s.head)
			s.logger.Debug("state cache reused", "dir", s.opts.LocalDir, "version", version)
			if err := wipeLocal(vfs.Default, s.opts.LocalDir, gen); err != nil {
				return errors.Join(err, s.parts.close())
			}
			// Instances open lazily, on the first read or write of a key
			// of theirs: a restart (or a repartition right after it) pays
			// only for the partitions it touches.
			return nil
		}
	}
	if err := wipeLocal(vfs.Default, s.opts.LocalDir, ""); err != nil {
		return err
	}
	s.parts = s.newCache(newGen())
	build := func(ctx context.Context) error {
		if err := s.parts.openAll(func(i int) bool { return s.partRows[i] > 0 }); err != nil {
			return err
		}
		if err := s.rebuild(ctx, chain); err != nil {
			return err
		}
		return s.measureMemCache()
	}
	if s.opts.LazyCache {
		s.deferBuild(ctx)
		return nil
	}
	// A rebuild into memory waits for the first partition a read or write
	// needs, as OpenRecorded's does: a repartition right after the start
	// reads the checkpoint files and never builds it (the bench's shrink to
	// 8 partitions opened 200 instances in memory first: +60 ms of CPU,
	// +50 MB of memtable arenas). It then reads the chain and fills only
	// the partitions opened (chainfill.go). A cache on disk is rebuilt at
	// Open.
	if s.parts.inMem && len(chain) > 0 {
		parts, bctx := s.parts, context.WithoutCancel(ctx)
		parts.build = func() error {
			f, err := s.groupChain(bctx, chain)
			if err != nil {
				s.broken = err
				return err
			}
			f.fail = func(err error) { s.broken = err }
			parts.fill = f
			// The records wait in memory: past the budget (lowered since
			// Open), the cache moves to disk, every partition filled.
			if err := s.measureMemCache(); err != nil {
				s.broken = err
				return err
			}
			return nil
		}
		return nil
	}
	if s.opts.deferRebuild && len(chain) > 0 {
		parts, bctx := s.parts, context.WithoutCancel(ctx)
		parts.build = func() error {
			if err := build(bctx); err != nil {
				// Part of the cache is written: only a new Open mends it.
				s.broken = err
				return err
			}
			return nil
		}
		return nil
	}
	if err := build(ctx); err != nil {
		return errors.Join(err, s.parts.close())
	}
	return nil
}

// setChain records the deltas of a loaded chain after its first file.
func (s *Store) setChain(chain []*versionMeta) {
	s.chain, s.chainFloor, s.chainBase, s.chainBaseRecords = nil, chain[0].Version, 0, 0
	if chain[0].Kind == kindNameSnapshot {
		s.chainBase, s.chainBaseRecords = chain[0].DataSize, chain[0].DataRecords
	}
	for i, m := range chain {
		if i > 0 || m.Kind == kindNameDelta {
			s.chain = append(s.chain, chainLink{m.Version, m.DataSize, m.DataRecords})
		}
	}
}

// trustMarker reports whether the local cache holds exactly s.head, and
// removes the marker: from now on the cache changes and is trusted again only
// after Close rewrites the marker.
func (s *Store) trustMarker() (gen string, ok bool) {
	path := vfs.Default.PathJoin(s.opts.LocalDir, markerName)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	m, err := decodeMarker(b)
	if err := errors.Join(err, os.Remove(path)); err != nil {
		return "", false
	}
	if err := syncDir(vfs.Default, s.opts.LocalDir); err != nil {
		return "", false
	}
	ok = m.StoreID == s.storeID && m.Version == s.head.Version && m.Attempt == s.head.Attempt &&
		m.Partitions == s.n && slices.Equal(m.PartitionRows, s.head.PartitionRows) &&
		strings.HasPrefix(m.Gen, genDirPrefix) && !strings.ContainsAny(m.Gen, `/\.`)
	return m.Gen, ok
}

// rebuild fills the empty cache from a metadata chain: the snapshot by
// sstable ingestion, then each delta as Pebble batches.
func (s *Store) rebuild(ctx context.Context, chain []*versionMeta) error {
	start := time.Now()
	// One applier for every delta, so that its flush budget spans the chain.
	ap := s.newApplier()
	for i, m := range chain {
		if err := ctx.Err(); err != nil {
			return err
		}
		if m.Kind == kindNameSnapshot {
			if i != 0 {
				panic("state: snapshot inside a delta chain")
			}
			ld := s.parts.loader(ctx)
			if err := readDataFile(s.fs, s.dir, m, func(r record) error { return ld.add(r.Partition, r.Key, r.Val) }); err != nil {
				ld.abort()
				return err
			}
			if err := ld.finish(); err != nil {
				return err
			}
			continue
		}
		if err := readDataFile(s.fs, s.dir, m, ap.add); err != nil {
			ap.close()
			return err
		}
		if err := ap.commit(); err != nil {
			return err
		}
	}
	if len(chain) > 0 {
		s.logger.Info("state cache rebuilt from checkpoint", "dir", s.dir, "version", s.version,
			"files", len(chain), "rows", s.rows, "ms", time.Since(start).Milliseconds())
	}
	return nil
}
