package state

// Background snapshots: the maintenance step that writes the full state of
// an already-committed version off the commit path (doc.go, "Background
// snapshots"), as Spark's state stores upload snapshots from a maintenance
// task while each commit writes only its changes.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/durable"
)

// chainLink is one delta of the committed version's chain after the
// snapshot (or empty base) that starts it.
type chainLink struct {
	version        int64
	bytes, records int64
}

// maintenance is one background snapshot in flight. The goroutine that
// runs it owns err, size and tmp until done is closed; the store's
// goroutine owns everything else.
type maintenance struct {
	target *versionMeta // the committed version it snapshots (its own metadata)
	floor  int64        // first version of target's chain: garbage collection keeps it
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	size   int64
	tmps   []string // temp files its publishes could not remove
}

// maybeMaintain collects a finished maintenance and starts one for the
// committed version when the chain since its last snapshot is due one
// (chainDue) and none is running. It never waits: a commit pays
// only for this check. The snapshot reads the immutable checkpoint files,
// never the Pebble instances the next batch writes, so nothing is shared
// with the commit path but the file system.
func (s *Store) maybeMaintain() {
	s.collectMaintenance(false)
	if s.maint != nil || s.closed || s.head == nil || !s.chainDue() {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	mt := &maintenance{target: s.head, floor: s.chainFloor, cancel: cancel, done: make(chan struct{})}
	s.maint = mt
	fs, dir := s.fs, s.dir
	run := func() {
		defer close(mt.done)
		mt.size, mt.tmps, mt.err = writeBackgroundSnapshot(ctx, fs, dir, mt.target)
	}
	if s.opts.syncMaintenance {
		run()
		s.collectMaintenance(true)
		return
	}
	go run()
}

// snapshotChainCap is how many times SnapshotEvery deltas a chain reaches
// before a snapshot whatever their bytes (chainDue).
const snapshotChainCap = 10

// chainDue reports whether the committed version's chain is due a
// background snapshot: it holds SnapshotEvery deltas, they hold as many
// bytes as the snapshot that starts it, and the chain's files hold more
// records than the state has keys (a key written twice or deleted); or it
// holds snapshotChainCap x SnapshotEvery deltas. By bytes, because a snapshot
// rewrites the whole state: every SnapshotEvery deltas, a backfill of
// equal batches rewrote it batches/SnapshotEvery times, its cost growing
// as the square of the state (a fifth of BenchmarkDedupNewKeys's CPU at
// 12M keys), and a live query rewrote a large state for a few keys
// changed. By records, because a chain of keys only ever added (a
// deduplication's) holds no record a snapshot would drop: loading it
// reads what loading the snapshot would, and the seed dedup shape's
// snapshot of 21.7M keys was 8% of its CPU for nothing. So snapshots come
// at least doubling the state's bytes in a backfill, and loading a
// version reads at most twice its snapshot's bytes, or the snapshot's
// own records (or the capped count of small deltas).
func (s *Store) chainDue() bool {
	n := len(s.chain)
	if n < s.opts.SnapshotEvery {
		return false
	}
	if n >= snapshotChainCap*s.opts.SnapshotEvery {
		return true
	}
	var b, r int64
	for _, l := range s.chain {
		b += l.bytes
		r += l.records
	}
	return b >= s.chainBase && s.chainBaseRecords+r > s.rows
}

// collectMaintenance takes the result of the maintenance in flight once it
// is done (waiting for it if wait is set). A snapshot of a version still
// in the store's chain shortens the chain to the deltas after it and
// recomputes the garbage (the deltas below the new floor may go); an error
// is logged, and the next commit starts the maintenance again.
func (s *Store) collectMaintenance(wait bool) {
	mt := s.maint
	if mt == nil {
		return
	}
	if wait {
		<-mt.done
	} else {
		select {
		case <-mt.done:
		default:
			return
		}
	}
	s.maint = nil
	mt.cancel()
	s.tmps = append(s.tmps, mt.tmps...)
	if mt.err != nil {
		if !errors.Is(mt.err, context.Canceled) {
			s.logger.Warn("state background snapshot failed; it is retried after the next commit",
				"dir", s.dir, "version", mt.target.Version, "err", mt.err)
		}
		return
	}
	for i, l := range s.chain {
		if l.version == mt.target.Version {
			s.chain = s.chain[i+1:]
			s.chainFloor, s.chainBase, s.chainBaseRecords = l.version, mt.size, mt.target.Rows
			break
		}
	}
	s.logger.Debug("state background snapshot written", "dir", s.dir, "version", mt.target.Version, "bytes", mt.size)
	var err error
	if s.gcQueue, err = s.gcVictims(); err != nil {
		s.logger.Warn("state garbage collection failed; it is retried after the next snapshot", "dir", s.dir, "err", err)
	}
}

// stopMaintenance cancels the maintenance in flight and waits for it.
func (s *Store) stopMaintenance() {
	if s.maint != nil {
		s.maint.cancel()
		s.collectMaintenance(true)
	}
}

// writeBackgroundSnapshot writes the .snap and then the .snapmeta of
// committed version m (doc.go): the full state at m, merged from the
// files of m's chain. It returns the bytes written. A version whose chain
// already starts with its own snapshot needs nothing. A .snap of m left by
// an earlier failed try (no .snapmeta) is replaced. It also returns the
// temp files it could not remove.
func writeBackgroundSnapshot(ctx context.Context, fs vfs.FS, dir string, m *versionMeta) (int64, []string, error) {
	cat, err := listCatalog(fs, dir)
	if err != nil {
		return 0, nil, err
	}
	chain, err := loadChain(fs, dir, cat, m.Version)
	if err != nil {
		return 0, nil, err
	}
	if head := chain[len(chain)-1].committed(); head.ref() != m.ref() {
		return 0, nil, fmt.Errorf("state: snapshot version %d attempt %d: attempt %d is the committed one", m.Version, m.Attempt, head.Attempt)
	}
	if chain[len(chain)-1].Kind == kindNameSnapshot {
		return 0, nil, nil
	}
	name := dataFileName(m.Version, m.Attempt, kindNameSnapshot)
	if err := fs.Remove(fs.PathJoin(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, nil, fmt.Errorf("remove unfinished state snapshot %s: %w", fs.PathJoin(dir, name), err)
	}
	var records uint64
	size, tmp, err := publishFile(fs, dir, name, durable.NoOverwrite, func(w io.Writer) error {
		dw, err := newDataWriter(w, kindSnapshot, m.Version, m.Attempt, m.Partitions)
		if err != nil {
			return err
		}
		if err := mergeChain(ctx, fs, dir, chain, func(part int, k, v []byte) error { return dw.add(recPut, part, k, v) }); err != nil {
			return err
		}
		if records = dw.count; records != uint64(m.Rows) {
			return errcode.Corrupt(fs.PathJoin(dir, metaFileName(m.Version, m.Attempt)), nil,
				"the chain of state version %d gives %d keys, its metadata says %d", m.Version, records, m.Rows)
		}
		return dw.finish()
	})
	var tmps []string
	if tmp != "" {
		tmps = append(tmps, tmp)
	}
	if err != nil {
		return 0, tmps, fmt.Errorf("state: snapshot version %d: %w", m.Version, err)
	}
	sm := encodeSnapMeta(&snapMeta{
		FormatVersion: snapMetaFormatVersion, StoreID: m.StoreID, Version: m.Version, Attempt: m.Attempt,
		Data: name, DataSize: size, DataRecords: int64(records), Partitions: m.Partitions, Rows: m.Rows,
	})
	msize, tmp, err := publishFile(fs, dir, snapMetaFileName(m.Version, m.Attempt), durable.NoOverwrite, func(w io.Writer) error {
		_, err := w.Write(sm)
		return err
	})
	if tmp != "" {
		tmps = append(tmps, tmp)
	}
	if err != nil {
		return size, tmps, fmt.Errorf("state: snapshot version %d: %w", m.Version, err)
	}
	return size + msize, tmps, nil
}
