package state

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/google/uuid"
)

// Options configures Open.
type Options struct {
	Dir        string // durable dir: <ckpt>/state/<opId> (stream.OperatorEnv.StateDir)
	FS         vfs.FS // checkpoint FS (stream.OperatorEnv.FS)
	LocalDir   string // Pebble cache dir (stream.OperatorEnv.LocalDir); may be wiped between runs
	Partitions int    // stream.OperatorEnv.Partitions; 1..10,000
	Schema     Schema
	Logger     *slog.Logger

	// CacheBytes is the block cache shared by all partitions (default 32 MB).
	CacheBytes int64
	// SnapshotEvery writes a full snapshot once this many deltas follow the
	// last one (default 10). A repartition always writes a snapshot.
	SnapshotEvery int
	// Retain keeps the files needed to load any of the last Retain versions
	// (default 100, spark.sql.streaming.minBatchesToRetain).
	Retain int
}

// Metrics describes one commit (the stateOperators[] figures of a progress
// event).
type Metrics struct {
	RowsTotal, RowsUpdated, RowsRemoved int64
	MemoryUsedBytes                     int64 // Pebble memtables + block cache in use + the pending batch
	CommitTimeMs                        int64
	PartitionRows                       []int64 // rows per partition (skew)
	// Snapshot is true when this commit wrote a full snapshot.
	Snapshot bool
	// BytesWritten is the size of the version's data and metadata files.
	BytesWritten int64
}

// Codes of this package, spelled like those of docs/contracts.md, Errors.
const (
	// CodeStateNotFound: a reader asked for state that was never committed.
	CodeStateNotFound = "STATE_NOT_FOUND"
)

// pendingEntry is one key changed by the current batch.
type pendingEntry struct {
	val     []byte
	part    int32
	del     bool
	known   bool // existed has been looked up
	existed bool // the key is in the committed version (if known)
}

// Store is a partitioned, versioned key-value state store (package doc). It
// is not safe for concurrent use: the engine drives an operator from one
// goroutine.
type Store struct {
	opts   Options
	schema Schema
	fs     vfs.FS
	dir    string
	n      int
	parts  *partitions
	logger *slog.Logger

	storeID  string
	version  int64        // committed version the store holds; -1 = empty
	head     *versionMeta // its metadata; nil when version == -1
	partRows []int64      // committed rows per partition
	// bounds holds each partition's committed key range (nil: empty, or
	// unknown after a format-1 version): Scan skips a partition whose range
	// misses the scanned one without opening its Pebble instance.
	bounds []*keyBounds
	rows   int64

	pending      map[string]*pendingEntry
	pendingDelta int64 // NumKeys change of the pending batch's known entries
	unknown      int   // entries whose existence is not looked up yet
	pendingBytes int64

	nextAttempt map[int64]int // version -> first attempt number not yet used
	abandoned   []int64       // versions above the loaded one found at Open
	tmps        []string      // temp files a failed publish could not remove
	getBuf      []byte
	lastGet     []byte         // key of the last committed lookup, and its outcome:
	lastFound   bool           // agg reads a key, then writes it; the write reuses this
	broken      error          // the local cache no longer matches s.version
	bg          sync.WaitGroup // closes and removes a replaced cache generation
	closed      bool
	alloc       pendingAlloc // the pending batch's entries, keys and values

	// lastAbsent: lastGet is known not to be a pending key (Get missed it
	// in the pending batch, or a Scan visited it as a committed key only),
	// so the write that follows skips one map lookup. Any new pending entry
	// clears it.
	lastAbsent bool
}

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
		pending:     map[string]*pendingEntry{},
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
		head := chain[len(chain)-1]
		if !head.Schema.Equal(s.opts.Schema) {
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
		s.storeID = uuid.NewString()
		s.partRows = make([]int64, s.opts.Partitions)
		s.bounds = make([]*keyBounds, s.opts.Partitions)
	}
	s.version = version
	s.n = s.opts.Partitions
	if s.head != nil {
		if gen, ok := s.trustMarker(); ok {
			s.parts = newPartitions(s.opts.LocalDir, gen, s.n, s.opts.CacheBytes, s.logger)
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
	s.parts = newPartitions(s.opts.LocalDir, newGen(), s.n, s.opts.CacheBytes, s.logger)
	if err := s.parts.openAll(func(i int) bool { return s.partRows[i] > 0 }); err != nil {
		return errors.Join(err, s.parts.close())
	}
	if err := s.rebuild(ctx, chain); err != nil {
		return errors.Join(err, s.parts.close())
	}
	return nil
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
		ap := s.newApplier()
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

// applier writes records, in partition order, as one Pebble batch per
// partition.
type applier struct {
	s   *Store
	cur int
	b   *pebble.Batch
}

func (s *Store) newApplier() *applier { return &applier{s: s, cur: -1} }

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
	err := b.Commit(pebble.NoSync)
	if cerr := b.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write state partition %d: %w", a.cur, err)
	}
	a.s.parts.dirty[a.cur] = true
	a.s.parts.stale[a.cur] = true
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
func (s *Store) applyChanges(cs []change, rangeDel []bool) error {
	for i := 0; i < len(cs); {
		p := cs[i].part
		j := i
		for j < len(cs) && cs[j].part == p {
			j++
		}
		if err := s.applyPartition(p, cs[i:j], rangeDel[p]); err != nil {
			return err
		}
		i = j
	}
	return nil
}

func (s *Store) applyPartition(p int, cs []change, rangeDel bool) error {
	d, err := s.parts.db(p)
	if err != nil {
		return err
	}
	b := d.NewBatch()
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
	if err == nil {
		err = b.Commit(pebble.NoSync)
	}
	if cerr := b.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write state partition %d: %w", p, err)
	}
	s.parts.dirty[p] = true
	s.parts.stale[p] = true
	return nil
}

// Partitions returns the partition count in force.
func (s *Store) Partitions() int { return s.n }

// Schema returns the store's schema.
func (s *Store) Schema() Schema { return s.schema }

// Version returns the committed version the store holds (-1 = none).
func (s *Store) Version() int64 { return s.version }

func (s *Store) usable() error {
	if s.closed {
		return errors.New("state: store is closed")
	}
	if s.broken != nil {
		return fmt.Errorf("state: local cache is inconsistent after a failed write, reopen the store: %w", s.broken)
	}
	return nil
}

// committedGet reads key from the committed version.
func (s *Store) committedGet(key []byte) ([]byte, bool, error) {
	p := PartitionOf(key, s.n)
	if s.partRows[p] == 0 {
		return nil, false, nil
	}
	if s.beyondBounds(p, key) {
		// Usually a key of a new window: known missing without opening
		// the partition (Commit opens the partitions it writes together).
		s.lastGet = append(s.lastGet[:0], key...)
		s.lastFound, s.lastAbsent = false, true
		return nil, false, nil
	}
	v, ok, err := s.parts.get(p, key, s.getBuf)
	if ok {
		s.getBuf = v
	}
	if err == nil {
		s.lastGet = append(s.lastGet[:0], key...)
		s.lastFound, s.lastAbsent = ok, true
	}
	return v, ok, err
}

// Get returns key's value as of the pending batch. val is valid until the
// next call on the store.
func (s *Store) Get(key []byte) (val []byte, ok bool, err error) {
	if err := s.usable(); err != nil {
		return nil, false, err
	}
	if e, found := s.pending[string(key)]; found {
		if e.del {
			return nil, false, nil
		}
		return e.val, true, nil
	}
	return s.committedGet(key)
}

// contrib is a known entry's share of NumKeys relative to the committed
// version.
func (e *pendingEntry) contrib() int64 {
	var c int64
	if !e.del {
		c++
	}
	if e.existed {
		c--
	}
	return c
}

// entry returns key's pending entry, creating it if needed. Whether the key
// exists in the committed version is taken from the last Get if it read this
// key, and otherwise looked up later, in key order, by resolve: blind writes
// of many keys then cost a sequential pass instead of a random read each.
func (s *Store) entry(key []byte) *pendingEntry {
	if !s.lastAbsent || string(s.lastGet) != string(key) {
		if e, found := s.pending[string(key)]; found {
			return e
		}
	}
	p := PartitionOf(key, s.n)
	e := s.alloc.entry()
	e.part = int32(p)
	switch {
	case s.partRows[p] == 0 || s.beyondBounds(p, key):
		e.known = true
	case s.lastGet != nil && string(s.lastGet) == string(key):
		e.known, e.existed = true, s.lastFound
	default:
		s.unknown++
	}
	e.del = !e.existed // unchanged so far (an unknown entry is set right away)
	s.pending[s.alloc.str(key)] = e
	s.lastAbsent = false
	s.pendingBytes += int64(len(key)) + 80
	return e
}

// Put sets key to val in the pending batch (both are copied).
func (s *Store) Put(key, val []byte) error {
	if err := s.usable(); err != nil {
		return err
	}
	e := s.entry(key)
	if e.known {
		s.pendingDelta -= e.contrib()
	}
	s.pendingBytes += int64(len(val) - len(e.val))
	if cap(e.val) >= len(val) {
		e.val = append(e.val[:0], val...)
	} else {
		e.val = s.alloc.bytes(val)
	}
	e.del = false
	if e.known {
		s.pendingDelta += e.contrib()
	}
	return nil
}

// Delete removes key in the pending batch; deleting a missing key is a no-op.
func (s *Store) Delete(key []byte) error {
	if err := s.usable(); err != nil {
		return err
	}
	e := s.entry(key)
	if e.known {
		s.pendingDelta -= e.contrib()
	}
	s.pendingBytes -= int64(len(e.val))
	e.val = nil
	e.del = true
	if e.known {
		if !e.existed {
			// Net nothing: forget the key.
			s.forget(key)
			return nil
		}
		s.pendingDelta += e.contrib()
	}
	return nil
}

func (s *Store) forget(key []byte) {
	delete(s.pending, string(key))
	s.pendingBytes -= int64(len(key)) + 80
}

// resolve looks up, partition by partition in key order, whether each
// pending entry of unknown existence is in the committed version.
func (s *Store) resolve() error {
	if s.unknown == 0 {
		return nil
	}
	cs := make([]change, 0, s.unknown)
	for k, e := range s.pending {
		if !e.known {
			cs = append(cs, newChange(k, e))
		}
	}
	sortChanges(cs)
	return s.resolveSorted(cs)
}

// resolveSorted resolves the unknown entries among cs, sorted by (partition,
// key), with one iterator per partition seeking forward.
func (s *Store) resolveSorted(cs []change) error {
	for i := 0; i < len(cs) && s.unknown > 0; {
		p := cs[i].part
		j := i
		anyUnknown := false
		for ; j < len(cs) && cs[j].part == p; j++ {
			anyUnknown = anyUnknown || !cs[j].e.known
		}
		group := cs[i:j]
		i = j
		if !anyUnknown {
			continue
		}
		d, err := s.parts.db(p)
		if err != nil {
			return err
		}
		it, err := d.NewIter(nil)
		if err != nil {
			return fmt.Errorf("read state partition %d: %w", p, err)
		}
		for _, c := range group {
			e := c.e
			if e.known {
				continue
			}
			kb := []byte(c.key)
			found := it.SeekGE(kb) && bytes.Equal(it.Key(), kb)
			e.known, e.existed = true, found
			s.unknown--
			if e.del && !found {
				s.forget(kb)
				continue
			}
			s.pendingDelta += e.contrib()
		}
		if err := it.Close(); err != nil {
			return fmt.Errorf("read state partition %d: %w", p, err)
		}
	}
	return nil
}

// NumKeys returns the number of keys as of the pending batch (exact). It may
// read the committed version to resolve blind writes; a read error panics
// (the cache is broken and nothing sensible can be counted).
func (s *Store) NumKeys() int64 {
	if err := s.resolve(); err != nil {
		panic(fmt.Sprintf("state: count keys: %v", err))
	}
	return s.rows + s.pendingDelta
}

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

// beyondBounds reports whether key is known not to be a committed key of
// partition p because it lies outside p's key bounds.
func (s *Store) beyondBounds(p int, key []byte) bool {
	b := s.bounds[p]
	return b != nil && (bytes.Compare(key, b.Min) < 0 || bytes.Compare(key, b.Max) > 0)
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
	for i := 0; i < len(cs); {
		p := cs[i].part
		j := i
		firstPut, lastPut := -1, -1 // indexes in cs
		var dels []string
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
		case old != nil && len(dels) == 0:
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

// Abort drops the pending batch.
func (s *Store) Abort() {
	if len(s.pending) > 4096 {
		// A cleared map keeps its buckets; let a backfill-sized one go.
		s.pending = map[string]*pendingEntry{}
	} else {
		clear(s.pending)
	}
	s.pendingDelta, s.pendingBytes, s.unknown = 0, 0, 0
	s.lastGet = s.lastGet[:0]
	s.lastAbsent = false
	s.alloc = pendingAlloc{}
}

// pendingAlloc carves the pending batch's entries, keys and values out of
// chunks: a backfill batch has millions of pending keys, and three small
// allocations per key (entry, key string, value) cost malloc time and GC
// work. The chunks live as long as any entry of theirs: Abort (and Commit,
// which calls it) drops the allocator with the map. Chunks grow from small
// (live batches of a few keys) to a cap per batch.
type pendingAlloc struct {
	entries []pendingEntry
	buf     []byte
}

func (a *pendingAlloc) entry() *pendingEntry {
	if len(a.entries) == cap(a.entries) {
		a.entries = make([]pendingEntry, 0, min(max(2*cap(a.entries), 32), 4096))
	}
	a.entries = a.entries[:len(a.entries)+1]
	return &a.entries[len(a.entries)-1]
}

// bytes returns a copy of b with no spare capacity (appending to it
// reallocates instead of overwriting a neighbour).
func (a *pendingAlloc) bytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	if cap(a.buf)-len(a.buf) < len(b) {
		a.buf = make([]byte, 0, max(min(max(2*cap(a.buf), 1<<10), 256<<10), len(b)))
	}
	start := len(a.buf)
	a.buf = append(a.buf, b...)
	return a.buf[start:len(a.buf):len(a.buf)]
}

// str returns b as a string backed by the chunk (never written again).
func (a *pendingAlloc) str(b []byte) string {
	c := a.bytes(b)
	if len(c) == 0 {
		return ""
	}
	return unsafe.String(&c[0], len(c))
}

// keyBytes returns a read-only view of a pending key's bytes without copying
// (a commit passes millions of keys to writers that copy them anyway: the
// data file's chunk buffer and Pebble's batch). Never write through it.
func keyBytes(k string) []byte { return unsafe.Slice(unsafe.StringData(k), len(k)) }

// change is one entry of the pending batch, with its sort key.
type change struct {
	pfx  uint64 // first 8 key bytes: most comparisons stop here
	part int
	key  string
	e    *pendingEntry
}

func newChange(k string, e *pendingEntry) change {
	var b [8]byte
	copy(b[:], k)
	return change{pfx: binary.BigEndian.Uint64(b[:]), part: int(e.part), key: k, e: e}
}

func cmpChange(a, b change) int {
	if a.part != b.part {
		return a.part - b.part
	}
	if a.pfx != b.pfx {
		if a.pfx < b.pfx {
			return -1
		}
		return 1
	}
	return strings.Compare(a.key, b.key)
}

// sortChanges sorts cs by (partition, key). A backfill batch has millions of
// changes: they are first grouped by partition in place (a counting sort,
// linear), then the groups are sorted by a few goroutines, which is both
// fewer comparisons and parallel.
func sortChanges(cs []change) {
	if len(cs) < 1<<14 {
		slices.SortFunc(cs, cmpChange)
		return
	}
	np := 0
	for i := range cs {
		np = max(np, cs[i].part+1)
	}
	// start[p] .. start[p+1] is partition p's group once grouped.
	start := make([]int, np+1)
	for i := range cs {
		start[cs[i].part+1]++
	}
	for p := 1; p <= np; p++ {
		start[p] += start[p-1]
	}
	// Cycle-leader permutation: next[p] is the first slot of group p not
	// yet holding one of p's changes.
	next := slices.Clone(start[:np])
	for p := 0; p < np; p++ {
		for next[p] < start[p+1] {
			c := cs[next[p]]
			for c.part != p {
				d := next[c.part]
				next[c.part]++
				cs[d], c = c, cs[d]
			}
			cs[next[p]] = c
			next[p]++
		}
	}
	var wg sync.WaitGroup
	var cursor atomic.Int64
	for range min(runtime.GOMAXPROCS(0), 4) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				p := int(cursor.Add(1) - 1)
				if p >= np {
					return
				}
				slices.SortFunc(cs[start[p]:start[p+1]], cmpChange)
			}
		}()
	}
	wg.Wait()
}

// changes returns the pending batch's effective changes sorted by
// (partition, key): puts, and deletes of keys that existed. It resolves
// unknown entries on the way (one sort for both).
func (s *Store) changes() ([]change, error) {
	cs := make([]change, 0, len(s.pending))
	for k, e := range s.pending {
		cs = append(cs, newChange(k, e))
	}
	sortChanges(cs)
	if err := s.resolveSorted(cs); err != nil {
		return nil, err
	}
	out := cs[:0]
	for _, c := range cs {
		if c.e.del && !c.e.existed {
			continue
		}
		out = append(out, c)
	}
	return out, nil
}

// Commit makes version durable in Dir (data file, then metadata file, both
// published crash-safely), applies the batch to the local cache, and returns
// the batch's metrics. version must be above the loaded one. On error the
// pending batch is kept: the caller may retry Commit or Abort.
func (s *Store) Commit(ctx context.Context, version int64) (Metrics, error) {
	start := time.Now()
	if err := s.usable(); err != nil {
		return Metrics{}, err
	}
	if version <= s.version {
		return Metrics{}, fmt.Errorf("state: commit version %d, store already holds version %d", version, s.version)
	}
	if err := ctx.Err(); err != nil {
		return Metrics{}, err
	}
	cs, err := s.changes()
	if err != nil {
		return Metrics{}, err
	}
	var updated, removed int64
	newRows := slices.Clone(s.partRows)
	for _, c := range cs {
		switch {
		case c.e.del:
			removed++
			newRows[c.part]--
		default:
			updated++
			if !c.e.existed {
				newRows[c.part]++
			}
		}
	}
	// Open the partitions the batch writes that are still closed, in
	// parallel: after a restart a batch touches many of them for the first
	// time, and opening one waits mostly on file creation.
	touched := make([]bool, s.n)
	closed := 0
	for _, c := range cs {
		if !touched[c.part] && s.parts.dbs[c.part] == nil {
			closed++
		}
		touched[c.part] = true
	}
	if closed > 1 {
		if err := s.parts.openAll(func(i int) bool { return touched[i] }); err != nil {
			return Metrics{}, err
		}
	}
	bounds, rangeDel, err := s.nextBounds(cs, newRows)
	if err != nil {
		return Metrics{}, err
	}
	snapshot := s.head == nil || s.head.ChainLength+1 >= s.opts.SnapshotEvery
	kind := kindNameDelta
	if snapshot {
		kind = kindNameSnapshot
	}
	attempt := s.nextAttempt[version]
	s.nextAttempt[version] = attempt + 1
	m := &versionMeta{
		FormatVersion: metaFormatVersion,
		StoreID:       s.storeID,
		Version:       version,
		Attempt:       attempt,
		Kind:          kind,
		Data:          dataFileName(version, attempt, kind),
		Partitions:    s.n,
		PartitionRows: newRows,
		PartitionKeys: bounds,
		Schema:        s.schema,
	}
	for _, r := range newRows {
		m.Rows += r
	}
	write := func(dw *dataWriter) error {
		for _, c := range cs {
			if c.e.del {
				if err := dw.add(recDelete, c.part, keyBytes(c.key), nil); err != nil {
					return err
				}
			} else if err := dw.add(recPut, c.part, keyBytes(c.key), c.e.val); err != nil {
				return err
			}
		}
		return nil
	}
	if snapshot && s.head != nil && !s.allNonEmptyOpen() {
		// Opening every closed partition only to copy it would cost more
		// than the rest of the batch: rewrite the files instead.
		write = func(dw *dataWriter) error { return s.writeSnapshotFromFiles(dw, cs, m.Rows) }
	} else if snapshot {
		write = func(dw *dataWriter) error {
			rest := cs
			for p := 0; p < s.n; p++ {
				var pend []string
				for ; len(rest) > 0 && rest[0].part == p; rest = rest[1:] {
					pend = append(pend, rest[0].key)
				}
				err := s.scanPartition(p, nil, nil, pend, func(k, v []byte) error { return dw.add(recPut, p, k, v) })
				if err != nil {
					return err
				}
			}
			return nil
		}
	} else if s.head != nil {
		ref := s.head.ref()
		m.Base = &ref
		m.ChainLength = s.head.ChainLength + 1
	}
	n, err := s.publishVersion(m, write)
	if err != nil {
		return Metrics{}, err
	}
	// The version is durable; now the cache.
	if err := s.applyChanges(cs, rangeDel); err != nil {
		s.broken = err
	}
	s.version, s.head, s.partRows, s.rows, s.bounds = version, m, newRows, m.Rows, bounds
	s.Abort()
	s.afterPublish(snapshot)
	if s.broken != nil {
		return Metrics{}, fmt.Errorf("state: version %d is committed but the local cache failed, reopen the store: %w", version, s.broken)
	}
	return Metrics{
		RowsTotal:       s.rows,
		RowsUpdated:     updated,
		RowsRemoved:     removed,
		MemoryUsedBytes: s.memoryUsed(),
		CommitTimeMs:    time.Since(start).Milliseconds(),
		PartitionRows:   slices.Clone(s.partRows),
		Snapshot:        snapshot,
		BytesWritten:    n,
	}, nil
}

// writeSnapshotFromFiles writes the full state after the sorted changes cs
// as snapshot records, from the committed version's checkpoint files
// instead of the local cache: the deltas since the last snapshot and cs are
// folded into overrides (the last write wins), and the last snapshot is
// merged with the overrides' puts in (partition, key) order. Memory beyond
// the streaming is the overrides, not the state.
func (s *Store) writeSnapshotFromFiles(dw *dataWriter, cs []change, rows int64) error {
	snap, over, err := s.foldChain(context.Background(), s.version)
	if err != nil {
		return err
	}
	for _, c := range cs {
		over.set(c.key, c.part, c.e.val, c.e.del)
	}
	type put struct {
		part int
		key  string
		val  []byte
	}
	puts := make([]put, 0, len(over))
	for k, o := range over {
		if !o.del {
			puts = append(puts, put{o.part, k, o.val})
		}
	}
	slices.SortFunc(puts, func(a, b put) int {
		if a.part != b.part {
			return a.part - b.part
		}
		return strings.Compare(a.key, b.key)
	})
	i := 0
	if snap != nil {
		err := readDataFile(s.fs, s.dir, snap, func(r record) error {
			for ; i < len(puts) && (puts[i].part < r.Partition || puts[i].part == r.Partition && puts[i].key < string(r.Key)); i++ {
				if err := dw.add(recPut, puts[i].part, []byte(puts[i].key), puts[i].val); err != nil {
					return err
				}
			}
			if _, ok := over[string(r.Key)]; ok {
				return nil
			}
			return dw.add(recPut, r.Partition, r.Key, r.Val)
		})
		if err != nil {
			return err
		}
	}
	for ; i < len(puts); i++ {
		if err := dw.add(recPut, puts[i].part, []byte(puts[i].key), puts[i].val); err != nil {
			return err
		}
	}
	if dw.count != uint64(rows) {
		return errcode.Corrupt(s.dir, nil, "state version %d and its changes give %d keys, the partition counts say %d", s.version, dw.count, rows)
	}
	return nil
}

// publishVersion writes m's data file with write, then m's metadata file.
// The version is committed once the metadata file is published.
func (s *Store) publishVersion(m *versionMeta, write func(dw *dataWriter) error) (int64, error) {
	kindByte := byte(kindDelta)
	if m.Kind == kindNameSnapshot {
		kindByte = kindSnapshot
	}
	var records uint64
	size, tmp, err := publishFile(s.fs, s.dir, m.Data, func(w io.Writer) error {
		dw, err := newDataWriter(w, kindByte, m.Version, m.Attempt, m.Partitions)
		if err != nil {
			return err
		}
		if err := write(dw); err != nil {
			return err
		}
		records = dw.count
		return dw.finish()
	})
	if tmp != "" {
		s.tmps = append(s.tmps, tmp)
	}
	if err != nil {
		return 0, fmt.Errorf("state: commit version %d: %w", m.Version, err)
	}
	m.DataSize = size
	m.DataRecords = int64(records)
	if m.Kind == kindNameDelta {
		m.ChainBytes = size
		if s.head != nil && m.Base != nil {
			m.ChainBytes += s.head.ChainBytes
		}
	}
	mb := encodeMeta(m)
	msize, tmp, err := publishFile(s.fs, s.dir, metaFileName(m.Version, m.Attempt), func(w io.Writer) error {
		_, err := w.Write(mb)
		return err
	})
	if tmp != "" {
		s.tmps = append(s.tmps, tmp)
	}
	if err != nil {
		return 0, fmt.Errorf("state: commit version %d: %w", m.Version, err)
	}
	return size + msize, nil
}

// afterPublish removes what a new version made garbage: temp files of failed
// attempts, versions above it (an abandoned history), and, after a snapshot,
// files no version within Retain needs. Failures are logged, not returned:
// garbage never affects correctness.
func (s *Store) afterPublish(snapshot bool) {
	var keep []string
	for _, t := range s.tmps {
		if err := s.fs.Remove(t); err != nil && !errors.Is(err, os.ErrNotExist) {
			keep = append(keep, t)
		}
	}
	s.tmps = keep
	if len(s.abandoned) == 0 && !snapshot {
		return
	}
	if err := s.gc(); err != nil {
		s.logger.Warn("state garbage collection failed; it is retried after the next snapshot", "dir", s.dir, "err", err)
		return
	}
	s.abandoned = nil
}

// Close flushes the local cache, writes its marker (so the next Open of the
// same version skips the rebuild) and releases Pebble. Uncommitted changes are
// discarded.
func (s *Store) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.Abort()
	s.bg.Wait()
	trusted := s.broken == nil && s.head != nil
	var err error
	if trusted {
		err = s.parts.flush()
	}
	err = errors.Join(err, s.parts.close())
	if err != nil || !trusted {
		return err
	}
	return s.writeMarker()
}

func (s *Store) memoryUsed() int64 {
	return s.parts.memoryUsed() + s.pendingBytes
}
