package state

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"
)

// partitions is the local Pebble cache: one Pebble instance per state
// partition in LocalDir/p-<i>, opened lazily (a partition that never held a
// key is never created), all sharing one block cache and one file cache. It
// is not safe for concurrent use.
//
// Pebble runs without a WAL: durability comes from the checkpoint files, and
// the cache is trusted at the next start only through the marker file that
// Close writes after flushing every dirty partition.
type partitions struct {
	fs       vfs.FS // the local file system (syncs are no-ops, see noSyncFS)
	gen      string // generation directory name under LocalDir
	dir      string // LocalDir/<gen>
	n        int
	dbs      []*pebble.DB
	dirty    []bool // written since the last flush
	cache    *pebble.Cache
	files    *pebble.FileCache
	memtable uint64
	logger   *slog.Logger
	opts     *pebble.Options // template; FS, caches and sizes set

	// trusted is set for a reused generation: each partition is checked
	// when first opened, and rebuilt by repair on damage (cacherepair.go).
	trusted []trustedPart
	repair  func(i int) error
	full    *spaceLatch // the first out-of-space error (diskfull.go)

	// build, when set, runs once before the generation's first partition
	// opens: it fills the generation from the checkpoint
	// (Options.deferRebuild), or, for a rebuild into memory, reads the
	// chain into fill.
	build func() error
	// fill, when set, holds the records each partition is filled with
	// when first opened (chainfill.go).
	fill *chainFill

	// inMem: the generation's files are in memory (memcache.go), memBytes
	// of them at the last commit.
	inMem    bool
	memBytes int64
}

// ensureBuilt runs the deferred build, if any.
func (p *partitions) ensureBuilt() error {
	if p.build == nil {
		return nil
	}
	b := p.build
	p.build = nil
	return b()
}

// Pebble tuning (the memory targets of docs/contracts.md with 200 partitions in one
// process): memtables are small and start at 256 KB (Pebble doubles them up to
// MemTableSize), one compaction per instance, one block cache and one file
// cache for all instances.
const (
	defaultCacheBytes    = 32 << 20
	memtableBudget       = 256 << 20 // split across partitions
	minMemtable          = 1 << 20
	maxMemtable          = 16 << 20
	fileCacheSize        = 2048 // open sstables across all partitions
	maxPartitions        = 10000
	partitionDirPrefix   = "p-"
	genDirPrefix         = "gen-"
	ingestDirName        = "ingest"
	markerName           = "MARKER"
	localMarkerMagicLine = "ethstream-state-cache v1"
)

// l0CompactionThreshold is Pebble's L0CompactionThreshold for the cache
// (Pebble's default is 4); see newPartitions.
const l0CompactionThreshold = 16

func memtableSize(n int) uint64 {
	m := uint64(memtableBudget / n)
	m = max(m, minMemtable)
	m = min(m, maxMemtable)
	return m
}

// newGen returns a fresh generation directory name.
func newGen() string { return genDirPrefix + uuid.NewString()[:8] }

func newPartitions(base vfs.FS, root, gen string, n int, cacheBytes int64, logger *slog.Logger) *partitions {
	if cacheBytes <= 0 {
		cacheBytes = defaultCacheBytes
	}
	if base == nil {
		base = vfs.Default
	}
	latch := newSpaceLatch()
	fs := noSyncFS{spaceFS{FS: base, latch: latch}}
	p := &partitions{
		full:     latch,
		fs:       fs,
		gen:      gen,
		dir:      fs.PathJoin(root, gen),
		n:        n,
		dbs:      make([]*pebble.DB, n),
		dirty:    make([]bool, n),
		cache:    pebble.NewCache(cacheBytes),
		files:    pebble.NewFileCache(4, fileCacheSize),
		memtable: memtableSize(n),
		logger:   logger,
	}
	var pfs vfs.FS = p.fs
	if leanCache {
		pfs = leanFS{p.fs}
	}
	p.opts = &pebble.Options{
		FS:                          pfs,
		Cache:                       p.cache,
		FileCache:                   p.files,
		DisableWAL:                  true,
		MemTableSize:                p.memtable,
		MemTableStopWritesThreshold: 4,
		CompactionConcurrencyRange:  func() (int, int) { return 1, 1 },
		MaxConcurrentDownloads:      func() int { return 1 },
		MaxOpenFiles:                64,
		FormatMajorVersion:          pebble.FormatMinSupported,
		Logger:                      pebbleLogger{logger},
		NoSyncOnClose:               true,
		EventListener:               eventListener(logger, latch),
	}
	// A Bloom filter in every table (10 bits a key, ~1% false positives):
	// the aggregation's merge Gets every key of a batch, and a key a batch
	// creates is absent from every table. Without filters each such Get
	// read data blocks: with one key per block (`bench --keys-per-block`)
	// Pebble Gets were 71% of the run's CPU, 28% less with the filters.
	// Ingested snapshot tables get them too (MakeWriterOptions reads these
	// level options).
	//
	// No block compression: the cache is local and rebuilt from the
	// checkpoint, and its keys are mostly hashes, which Snappy cannot
	// shrink (Pebble then stores the block raw, after paying for the try):
	// Snappy was 6% of the CPU of a dedup backfill of 4M keys.
	for i := range p.opts.Levels {
		p.opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		p.opts.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
	}
	// L0 compacts into Lbase once it holds half l0CompactionThreshold
	// overlapping tables (Pebble scores L0 as 2 x sublevels / threshold). A
	// backfill's keys spread over each partition's whole key range, so
	// every L0 -> Lbase compaction rewrites the partition's entire Lbase:
	// with Pebble's 4, every second flush did; with 8, every fourth (at
	// 26M dedup keys, compactions were still a fifth of the CPU, and 16
	// took 11-13% off the whole). Gets pay one Bloom filter probe per L0
	// table for it, up to 8. Writes stall at 3 x the threshold, the
	// ratio of Pebble's defaults (12 and 4).
	p.opts.L0CompactionThreshold = l0CompactionThreshold
	p.opts.L0StopWritesThreshold = 3 * l0CompactionThreshold
	p.opts.EnsureDefaults()
	return p
}

// instanceOptions returns the options of one partition's instance: the
// template with a compaction scheduler of its own that has no periodic
// granter. Pebble's default scheduler runs a goroutine per instance that
// wakes every 100 ms to look for a rise in the instance's allowed
// compaction concurrency: 200 idle instances cost 35 ms of CPU a second
// (about 0.3 CPU-s of a seed backfill). The concurrency here is pinned to 1
// (CompactionConcurrencyRange), so it never rises: a compaction refused
// while another runs is granted by that one's completion, which the
// scheduler does without the ticker.
func (p *partitions) instanceOptions() *pebble.Options {
	o := p.opts.Clone()
	o.Experimental.CompactionScheduler = pebble.NewConcurrencyLimitSchedulerWithNoPeriodicGrantingForTest()
	return o
}

func (p *partitions) path(i int) string {
	return p.fs.PathJoin(p.dir, partitionDirPrefix+strconv.Itoa(i))
}

// db returns partition i's instance, opening (and creating) it if needed.
func (p *partitions) db(i int) (*pebble.DB, error) {
	if d := p.dbs[i]; d != nil {
		return d, nil
	}
	if err := p.ensureBuilt(); err != nil {
		return nil, err
	}
	if d := p.dbs[i]; d != nil {
		return d, nil
	}
	d, err := pebble.Open(p.path(i), p.instanceOptions())
	if err != nil {
		err = fmt.Errorf("open state partition %d at %s: %w", i, p.path(i), err)
	} else {
		p.dbs[i] = d
		if err = p.fillOne(i, d); err != nil {
			p.fill.fail(err)
		}
	}
	if err := p.settle(i, err); err != nil {
		return nil, err
	}
	return p.db(i)
}

// openAll opens the instances of every partition in want (true = needed)
// with a few goroutines: opening creates several files per instance, so a
// rebuild or a grown repartition at 200+ partitions waits on the file system
// more than on the CPU.
func (p *partitions) openAll(want func(i int) bool) error {
	if err := p.ensureBuilt(); err != nil {
		return err
	}
	idx := make(chan int)
	errs := make([]error, p.n)
	filled := make([]error, p.n)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				d, err := pebble.Open(p.path(i), p.instanceOptions())
				if err != nil {
					errs[i] = fmt.Errorf("open state partition %d at %s: %w", i, p.path(i), err)
					continue
				}
				p.dbs[i] = d
				filled[i] = p.fillOne(i, d)
			}
		}()
	}
	var opened []int
	for i := 0; i < p.n; i++ {
		if p.dbs[i] == nil && want(i) {
			opened = append(opened, i)
			idx <- i
		}
	}
	close(idx)
	wg.Wait()
	if err := errors.Join(filled...); err != nil {
		p.fill.fail(err)
		return errors.Join(err, errors.Join(errs...))
	}
	// The first-open checks of a reused generation run one at a time: a
	// repair writes through the store.
	for _, i := range opened {
		errs[i] = p.settle(i, errs[i])
	}
	return errors.Join(errs...)
}

// get reads key from partition i; the value is appended to buf[:0].
func (p *partitions) get(i int, key, buf []byte) ([]byte, bool, error) {
	d, err := p.db(i)
	if err != nil {
		return nil, false, err
	}
	v, closer, err := d.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read state partition %d: %w", i, err)
	}
	buf = append(buf[:0], v...)
	return buf, true, closer.Close()
}

// sstLoader bulk-loads sorted records into partitions: for each partition it
// builds one sstable with Pebble's writer and ingests it. Records must arrive
// in (partition, key) strictly ascending order, the order of snapshot files.
type sstLoader struct {
	p    *partitions
	ctx  context.Context
	cur  int
	w    *sstable.Writer
	path string
}

func (p *partitions) loader(ctx context.Context) *sstLoader {
	return &sstLoader{p: p, ctx: ctx, cur: -1}
}

func (l *sstLoader) add(part int, k, v []byte) error {
	if part != l.cur || l.w == nil {
		if err := l.finish(); err != nil {
			return err
		}
		if err := l.start(part); err != nil {
			return err
		}
	}
	if err := l.w.Set(k, v); err != nil {
		l.abort()
		return fmt.Errorf("build sstable %s: %w", l.path, err)
	}
	return nil
}

func (l *sstLoader) start(part int) error {
	d, err := l.p.db(part)
	if err != nil {
		return err
	}
	idir := l.p.fs.PathJoin(l.p.dir, ingestDirName)
	if err := l.p.fs.MkdirAll(idir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", idir, err)
	}
	l.cur = part
	l.path = l.p.fs.PathJoin(idir, fmt.Sprintf("p-%d.sst", part))
	f, err := l.p.fs.Create(l.path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("create %s: %w", l.path, err)
	}
	l.w = sstable.NewWriter(objstorageprovider.NewFileWritable(f), l.p.opts.MakeWriterOptions(0, d.TableFormat()))
	return nil
}

func (l *sstLoader) abort() {
	if l.w != nil {
		_ = l.w.Close()
		l.w = nil
		_ = l.p.fs.Remove(l.path)
	}
}

// finish ingests the table being built, if any.
func (l *sstLoader) finish() error {
	if l.w == nil {
		return nil
	}
	w := l.w
	l.w = nil
	if err := w.Close(); err != nil {
		_ = l.p.fs.Remove(l.path)
		return fmt.Errorf("finish sstable %s: %w", l.path, err)
	}
	d := l.p.dbs[l.cur]
	if err := d.Ingest(l.ctx, []string{l.path}); err != nil {
		_ = l.p.fs.Remove(l.path)
		return fmt.Errorf("ingest into state partition %d: %w", l.cur, err)
	}
	// Ingest hard-links (or copies) the table; drop our name for it.
	if err := l.p.fs.Remove(l.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", l.path, err)
	}
	l.p.dirty[l.cur] = true
	return nil
}

// flush writes every dirty partition's memtable to sstables, so that the
// instances hold everything once closed (there is no WAL). The partitions
// flush on a few goroutines, as the applier's waves do: Close flushed the
// 200 partitions of a seed backfill one after another on one core (issue 43).
func (p *partitions) flush() error {
	var dirty []int
	for i, d := range p.dbs {
		if d != nil && p.dirty[i] {
			dirty = append(dirty, i)
		}
	}
	return inParallel(len(dirty), min(runtime.GOMAXPROCS(0), 4), func(k int) error {
		if err := p.flushOne(dirty[k]); err != nil {
			return err
		}
		p.dirty[dirty[k]] = false // each goroutine its own partitions
		return nil
	})
}

// flushOne writes partition i's memtables and queued batches to sstables
// and waits for it.
func (p *partitions) flushOne(i int) error {
	if err := p.full.diskFull(p.dir); err != nil {
		return err
	}
	// Not d.Flush: on a full disk Pebble retries the flush forever.
	done, err := p.dbs[i].AsyncFlush()
	if err != nil {
		return fmt.Errorf("flush state partition %d: %w", i, err)
	}
	select {
	case <-done:
	case <-p.full.done:
		return p.full.diskFull(p.dir)
	}
	return nil
}

// pebbleInitialMemtable is the arena Pebble allocates for a partition's
// first memtable when the partition is opened (pebble's initialMemTableSize,
// capped by MemTableSize). TestMemoryUsedIsStable pins it.
const pebbleInitialMemtable = 256 << 10

// memoryUsed is the memory floor of the state resident at its partition
// count: the memtable arena Pebble allocates for every partition instance it
// opens, counted for each partition that holds keys. It is a function of the
// committed state alone: what this process happened to open (partitions are
// opened lazily after a restart), how far memtables have grown with flushes
// (each new memtable doubles, up to MemTableSize, so the arena depends on
// how many batches this process ran) and the block cache (it warms up with
// reads) are left out, so the same state reports the same figure in every
// batch and every process. A generation held in memory (memcache.go) adds
// its files as measured at the last commit or rebuild: they follow the
// process's flushes and compactions, so that figure is not stable, and it
// drops when the generation moves to disk.
func (p *partitions) memoryUsed(holds func(int) bool) int64 {
	arena := min(int64(pebbleInitialMemtable), int64(p.memtable))
	total := p.memBytes + p.fill.pending()
	for i := range p.n {
		if holds(i) {
			total += arena
		}
	}
	return total
}

// close closes every instance and releases the shared caches.
func (p *partitions) close() error {
	if err := p.full.diskFull(p.dir); err != nil {
		// A DB whose flush keeps failing never finishes closing: leave the
		// instances to the process's exit (the cache is not trusted, its
		// marker is not rewritten) rather than hang.
		for i := range p.dbs {
			p.dbs[i] = nil
		}
		return err
	}
	var errs []error
	for i, d := range p.dbs {
		if d != nil {
			if err := d.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close state partition %d: %w", i, err))
			}
			p.dbs[i] = nil
		}
	}
	if p.cache != nil {
		p.files.Unref()
		p.cache.Unref()
		p.cache, p.files = nil, nil
	}
	return errors.Join(errs...)
}

// discard closes every instance and deletes the generation's directory:
// a replaced generation, or one a failed repartition built.
func (p *partitions) discard() error {
	err := p.close()
	if rmErr := p.fs.RemoveAll(p.dir); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
		err = errors.Join(err, rmErr)
	}
	return err
}

// wipeLocal removes every cache generation under root except keep (the
// caller has closed their instances), and keep's spill directory, which a
// repartition that could not remove it leaves (spill.go). Other files are
// left alone.
func wipeLocal(fs vfs.FS, root, keep string) error {
	if keep != "" {
		if err := fs.RemoveAll(fs.PathJoin(root, keep, spillDirName)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove state cache %s: %w", fs.PathJoin(root, keep, spillDirName), err)
		}
	}
	names, err := fs.List(root)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("list state cache %s: %w", root, err)
	}
	for _, n := range names {
		if n != keep && (strings.HasPrefix(n, genDirPrefix) || strings.HasPrefix(n, partitionDirPrefix) || n == ingestDirName) {
			if err := fs.RemoveAll(fs.PathJoin(root, n)); err != nil {
				return fmt.Errorf("remove state cache %s: %w", fs.PathJoin(root, n), err)
			}
		}
	}
	return nil
}

// pebbleLogger sends Pebble's errors to slog and drops its chatter.
type pebbleLogger struct{ l *slog.Logger }

func (l pebbleLogger) Infof(string, ...any) {}
func (l pebbleLogger) Errorf(format string, args ...any) {
	l.l.Error("pebble", "msg", fmt.Sprintf(format, args...))
}
func (l pebbleLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble fatal: "+format, args...))
}

// noSyncFS turns fsyncs into no-ops for the Pebble cache: a crash loses the
// cache's trust anyway (the marker is removed before the first write and
// rewritten only after a flush, followed by one global sync), so per-file
// syncs would only slow down 200 instances.
type noSyncFS struct{ vfs.FS }

func (fs noSyncFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return wrapNoSync(f, err)
}

func (fs noSyncFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, o ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, o...)
	return wrapNoSync(f, err)
}

func (fs noSyncFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return wrapNoSync(f, err)
}

func (fs noSyncFS) OpenDir(name string) (vfs.File, error) {
	f, err := fs.FS.OpenDir(name)
	return wrapNoSync(f, err)
}

func (fs noSyncFS) Unwrap() vfs.FS { return fs.FS }

func wrapNoSync(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

type noSyncFile struct{ vfs.File }

func (noSyncFile) Sync() error                      { return nil }
func (noSyncFile) SyncData() error                  { return nil }
func (noSyncFile) SyncTo(int64) (bool, error)       { return true, nil }
func (f noSyncFile) Preallocate(off, n int64) error { return f.File.Preallocate(off, n) }
