package state

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options configures Open.
type Options struct {
	Dir        string // durable dir: <ckpt>/state/<opId> (stream.OperatorEnv.StateDir)
	FS         vfs.FS // checkpoint FS (stream.OperatorEnv.FS)
	LocalDir   string // Pebble cache dir (stream.OperatorEnv.LocalDir); may be wiped between runs
	Partitions int    // stream.OperatorEnv.Partitions; 1..10,000
	Schema     Schema
	Logger     *slog.Logger

	// LocalFS is the file system of the Pebble instances under LocalDir
	// (nil = the local disk); tests inject faults through it.
	LocalFS vfs.FS

	// CacheBytes is the block cache shared by all partitions (default 32 MB).
	CacheBytes int64
	// MemCacheBytes, if positive, keeps a new cache in memory while its
	// files take at most this many bytes, then moves it to LocalDir
	// (memcache.go); 0 keeps it on LocalDir always.
	MemCacheBytes int64
	// SnapshotEvery starts a background snapshot of the committed version
	// once this many deltas follow the last snapshot (default 10; Spark's
	// minDeltasForSnapshot) and hold its bytes, or ten times as many
	// (maintain.go, chainDue). Commits write deltas only; a repartition
	// writes a snapshot.
	SnapshotEvery int
	// Retain keeps the files needed to load any of the last Retain versions
	// (default 100, spark.sql.streaming.minBatchesToRetain).
	Retain int
	// SpecCompatible, if set, accepts a recorded schema whose Spec text
	// differs from Schema.Spec while its operator, key and value fields are
	// the same (an operator's older Spec format); the versions written from
	// then on record Schema.
	SpecCompatible func(recorded string) bool
	// LazyCache leaves a cache that Open does not reuse unbuilt until a
	// read first needs the committed version (lazybuild.go): until then a
	// commit writes its checkpoint files only, and the first such read
	// rebuilds the cache from them as a restart would. For an operator
	// that keeps its state in memory and rarely reads the store (the join,
	// the session window in append mode).
	LazyCache bool

	// deferRebuild (OpenRecorded) leaves a cache that Open cannot reuse
	// empty until a partition is first needed (partitions.build): an
	// offline repartition reads the checkpoint files and never the old
	// partitions, and rebuilding them first cost it twice the time and
	// memory growing with the rows (461 MB for 4M keys at 200 partitions).
	deferRebuild bool

	// syncMaintenance (tests) runs the background snapshot inside the
	// commit that starts it, so that fault injection counts its file
	// operations deterministically.
	syncMaintenance bool
}

// Metrics describes one commit (the stateOperators[] figures of a progress
// event).
type Metrics struct {
	RowsTotal, RowsUpdated, RowsRemoved int64
	// MemoryUsedBytes is the memory floor of the state at its partition
	// count: one Pebble memtable arena per partition holding keys, whether
	// or not this process has opened it, plus the pending batch (empty after
	// a commit), plus the files of a cache held in memory
	// (Options.MemCacheBytes). Memtable growth and the block cache depend on
	// the process's history and are not counted (see partitions.memoryUsed).
	MemoryUsedBytes int64
	// CommitTimeMs is the time spent committing: in Prepare, if the
	// version was prepared, plus in Commit.
	CommitTimeMs int64
	// PrepareTimeMs is the part of CommitTimeMs spent in Prepare (0 when
	// Commit ran alone).
	PrepareTimeMs int64
	PartitionRows []int64 // rows per partition (skew)
	// Snapshot is true when this commit wrote a full snapshot (only a
	// repartition does; snapshots of committed versions are written in the
	// background and counted nowhere here).
	Snapshot bool
	// BytesWritten is the size of the version's data and metadata files.
	BytesWritten int64
}

// Codes of this package, spelled like those of docs/contracts.md, Errors.
const (
	// CodeStateNotFound: a reader asked for state that was never committed.
	CodeStateNotFound = "STATE_NOT_FOUND"
)

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
	// unknown after a format-1 version; wider than its keys after a lazy
	// cache's deletes, lazybuild.go): Scan skips a partition whose range
	// misses the scanned one without opening its Pebble instance.
	bounds []*keyBounds
	union  unionBounds // of bounds, for outsideCommitted
	rows   int64

	// chain lists the deltas of the committed version's chain after the
	// snapshot (or empty base) that starts it at chainFloor: the length
	// that starts a background snapshot (maintain.go).
	chain            []chainLink
	chainFloor       int64
	chainBase        int64        // bytes of the snapshot at chainFloor; 0: the chain starts on the empty state
	chainBaseRecords int64        // records of that snapshot (its keys)
	maint            *maintenance // the background snapshot in flight, if any

	// pendingRecord is the pending batch's SetOperatorRecord value.
	pendingRecord []byte
	// prep is the version Prepare published the data file of; nil when
	// none. While set, the pending batch is frozen.
	prep *prepared

	ptab         pendingTable // the pending batch
	pendingDelta int64        // NumKeys change of the pending batch's known entries
	unknown      int          // entries whose existence is not looked up yet
	pendingBytes int64

	nextAttempt map[int64]int // version -> first attempt number not yet used
	abandoned   []int64       // versions above the loaded one found at Open
	tmps        []string      // temp files a failed publish could not remove
	gcQueue     []gcVictim    // garbage still to delete, in order (gc.go)
	getBuf      []byte
	lastGet     []byte         // key of the last committed lookup, and its outcome:
	lastFound   bool           // agg reads a key, then writes it; the write reuses this
	broken      error          // the local cache no longer matches s.version
	bg          sync.WaitGroup // closes and removes a replaced cache generation
	closed      bool
	alloc       pendingAlloc // the pending batch's entries, keys and values
	prefetched  uintptr      // Prefetch's loads, kept so that they are not dropped

}

// Partitions returns the partition count in force.
func (s *Store) Partitions() int { return s.n }

// Schema returns the store's schema.
func (s *Store) Schema() Schema { return s.schema }

// Version returns the committed version the store holds (-1 = none).
func (s *Store) Version() int64 { return s.version }

// OperatorRecord returns the operator's record of the committed version
// (SetOperatorRecord; doc.go, Operator record), nil when it has none. The
// caller must not modify it.
func (s *Store) OperatorRecord() []byte {
	if s.head == nil {
		return nil
	}
	return s.head.operatorRecord()
}

// SetOperatorRecord sets the operator's record of the version the next
// Commit (or Prepare) writes: bytes the store keeps in that version's
// metadata without reading them, at most 64 KB (larger is a bug: panics),
// and carries through a repartition. The operator owns their format and
// its versions. Abort forgets it; a version written without one has none.
func (s *Store) SetOperatorRecord(b []byte) {
	if len(b) > maxOperatorRecord {
		panic(fmt.Sprintf("state: operator record of %d bytes (at most %d)", len(b), maxOperatorRecord))
	}
	s.pendingRecord = bytes.Clone(b)
}

func (s *Store) usable() error {
	if s.closed {
		return errors.New("state: store is closed")
	}
	if s.broken != nil {
		return fmt.Errorf("state: local cache is inconsistent after a failed write, reopen the store: %w", s.broken)
	}
	return nil
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
	s.stopMaintenance()
	s.bg.Wait()
	if err := s.drainGC(len(s.gcQueue)); err != nil {
		s.logger.Warn("state garbage collection failed; it is retried after the next snapshot", "dir", s.dir, "err", err)
	}
	if s.broken == nil && s.head != nil && s.parts.build == nil {
		s.keepMemCache()
	}
	// A cache never built holds nothing, one in memory dies with the
	// process: no marker may vouch for either.
	trusted := s.broken == nil && s.head != nil && s.parts.build == nil && !s.parts.inMem
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
	return s.parts.memoryUsed(func(p int) bool { return s.partRows[p] > 0 }) + s.pendingBytes
}
