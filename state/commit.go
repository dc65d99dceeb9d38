package state

// Committing a version: publishing its files, then applying it to the cache.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/ethstream/ethstream/internal/durable"
)

// prepared is a version whose data file is published and whose metadata
// file is not: Prepare's result, which Commit publishes and Abort drops.
type prepared struct {
	version          int64
	m                *versionMeta
	cs               []change
	rangeDel         []bool
	newRows          []int64
	bounds           []*keyBounds
	updated, removed int64
	dataSize         int64
	took             time.Duration // spent in Prepare
}

// Prepare does everything Commit(version) does before the version becomes
// visible: it opens the partitions the batch writes, computes the new
// bounds and counts, and publishes the version's data file, but not the
// metadata file that commits it. A version without metadata is never read:
// a crash or an Abort after Prepare leaves exactly what a crash inside
// Commit between the two files leaves (a data file collected as garbage;
// the next attempt of the version gets a new attempt number). Commit then
// only publishes the metadata and applies the batch to the cache, so a
// caller can run Prepare while something else that must happen first (the
// engine's sink write) is in flight, and Commit after it.
//
// Between Prepare and Commit or Abort the pending batch is frozen: Put and
// Delete fail, reads see it as before. On error nothing is prepared and the
// pending batch is kept: the caller may retry or Abort.
func (s *Store) Prepare(ctx context.Context, version int64) error {
	start := time.Now()
	if err := s.usable(); err != nil {
		return err
	}
	if s.prep != nil {
		return fmt.Errorf("state: prepare version %d, version %d is prepared already", version, s.prep.version)
	}
	if version <= s.version {
		return fmt.Errorf("state: commit version %d, store already holds version %d", version, s.version)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := s.prepare(version)
	if err != nil {
		return err
	}
	p.took = time.Since(start)
	s.prep = p
	return nil
}

// Prepared reports the version Prepare left ready for Commit, if any.
func (s *Store) Prepared() (int64, bool) {
	if s.prep == nil {
		return 0, false
	}
	return s.prep.version, true
}

// Commit makes version durable in Dir (data file, then metadata file, both
// published crash-safely), applies the batch to the local cache, and returns
// the batch's metrics. version must be above the loaded one. After
// Prepare(version) only the metadata file is left to publish. On error the
// pending batch is kept (and nothing stays prepared): the caller may retry
// Commit, which writes the version under a new attempt, or Abort.
func (s *Store) Commit(ctx context.Context, version int64) (Metrics, error) {
	start := time.Now()
	if err := s.usable(); err != nil {
		return Metrics{}, err
	}
	p := s.prep
	s.prep = nil
	if p != nil && p.version != version {
		return Metrics{}, fmt.Errorf("state: commit version %d, version %d is prepared", version, p.version)
	}
	if version <= s.version {
		return Metrics{}, fmt.Errorf("state: commit version %d, store already holds version %d", version, s.version)
	}
	if err := ctx.Err(); err != nil {
		return Metrics{}, err
	}
	var prepTime time.Duration
	if p == nil {
		var err error
		if p, err = s.prepare(version); err != nil {
			return Metrics{}, err
		}
	} else {
		prepTime = p.took
	}
	msize, err := s.publishMeta(p.m)
	if err != nil {
		return Metrics{}, err
	}
	// The version is durable; now the cache, unless it is a lazy one
	// never read (lazybuild.go).
	if !s.lazyUnbuilt() {
		if err := s.fitMemCache(p.cs); err != nil {
			s.broken = err
		} else if err := s.applyChanges(p.cs, p.rangeDel); err != nil {
			s.broken = err
		} else if err := s.measureMemCache(); err != nil {
			s.broken = err
		}
	}
	m := p.m
	if s.head == nil {
		s.chainFloor = version
	}
	s.chain = append(s.chain, chainLink{version, p.dataSize, p.m.DataRecords})
	s.version, s.head, s.partRows, s.rows, s.bounds = version, m, p.newRows, m.Rows, p.bounds
	s.union = unionBounds{}
	s.Abort()
	s.afterPublish(false)
	if s.broken == nil {
		s.maybeMaintain()
	}
	if s.broken != nil {
		return Metrics{}, fmt.Errorf("state: version %d is committed but the local cache failed, reopen the store: %w", version, s.broken)
	}
	return Metrics{
		RowsTotal:       s.rows,
		RowsUpdated:     p.updated,
		RowsRemoved:     p.removed,
		MemoryUsedBytes: s.memoryUsed(),
		CommitTimeMs:    (time.Since(start) + prepTime).Milliseconds(),
		PrepareTimeMs:   prepTime.Milliseconds(),
		PartitionRows:   slices.Clone(s.partRows),
		BytesWritten:    p.dataSize + msize,
	}, nil
}

// prepare computes version's metadata from the pending batch and publishes
// its data file (Prepare's work, and the first half of a Commit).
func (s *Store) prepare(version int64) (*prepared, error) {
	cs, err := s.changes()
	if err != nil {
		return nil, err
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
	if err := s.buildForBounds(cs, newRows); err != nil {
		return nil, err
	}
	if err := s.openTouched(cs); err != nil {
		return nil, err
	}
	// Always a delta: the snapshot that shortens the chain is written
	// later, off the commit path (maintain.go), so that a commit's bytes
	// follow the keys it changed. Its data file does not depend on the
	// key bounds, which only the metadata holds: a large one is written
	// on another goroutine while nextBounds reads the cache (they share
	// nothing: publishData touches the checkpoint's files and s.tmps,
	// nextBounds only the partitions openTouched opened). A failure of
	// either leaves at most a data file without metadata, as a crash
	// between the two files.
	m := s.newMeta(version, kindNameDelta, newRows, nil, s.pendingRecord)
	write := s.deltaWriter(m, cs)
	var n int64
	var perr error
	published := make(chan struct{})
	if len(cs) >= prepareOverlapMin {
		go func() {
			defer close(published)
			n, perr = s.publishData(m, write)
		}()
	} else {
		n, perr = s.publishData(m, write)
		close(published)
	}
	bounds, rangeDel, err := s.nextBounds(cs, newRows)
	<-published
	if err = errors.Join(perr, err); err != nil {
		return nil, err
	}
	m.PartitionKeys = bounds
	return &prepared{version: version, m: m, cs: cs, rangeDel: rangeDel, newRows: newRows, bounds: bounds,
		updated: updated, removed: removed, dataSize: n}, nil
}

// prepareOverlapMin is the changes from which a commit writes its data
// file alongside nextBounds (prepare): a live batch's few are not worth a
// goroutine. Tests lower it.
var prepareOverlapMin = 4096

// newMeta is the metadata of a new attempt of version: kind, the rows and
// key bounds of each partition (their count is the partition count) and
// the operator's record (nil: none), in the oldest format that holds them.
func (s *Store) newMeta(version int64, kind string, rows []int64, bounds []*keyBounds, record []byte) *versionMeta {
	attempt := s.nextAttempt[version]
	s.nextAttempt[version] = attempt + 1
	m := &versionMeta{
		FormatVersion: metaFormatVersion,
		StoreID:       s.storeID,
		Version:       version,
		Attempt:       attempt,
		Kind:          kind,
		Data:          dataFileName(version, attempt, kind),
		Partitions:    len(rows),
		PartitionRows: rows,
		PartitionKeys: bounds,
		Schema:        s.schema,
	}
	if len(record) > 0 {
		m.Operator, m.FormatVersion = record, metaFormatOperator
	}
	for _, r := range rows {
		m.Rows += r
	}
	return m
}

// openTouched opens the partitions the batch writes that are still
// closed, in parallel: after a restart a batch touches many of them for the
// first time, and opening one waits mostly on file creation. All of them,
// a lone one too: opening may build or repair the cache from the
// checkpoint, which must not run beside the data file's write (prepare).
func (s *Store) openTouched(cs []change) error {
	if s.lazyUnbuilt() {
		return nil // the commit will not write the cache
	}
	touched := make([]bool, s.n)
	closed, last := 0, -1
	for _, c := range cs {
		if !touched[c.part] && s.parts.dbs[c.part] == nil {
			closed, last = closed+1, c.part
		}
		touched[c.part] = true
	}
	switch {
	case closed > 1:
		return s.parts.openAll(func(i int) bool { return touched[i] })
	case closed == 1:
		_, err := s.parts.db(last)
		return err
	}
	return nil
}

// deltaWriter returns what writes version m's data file: the batch's
// changes, linked to the committed version in m.
func (s *Store) deltaWriter(m *versionMeta, cs []change) func(dw *dataWriter) error {
	m.ChainLength = len(s.chain) + 1
	if s.head != nil {
		ref := s.head.ref()
		m.Base = &ref
	}
	return func(dw *dataWriter) error {
		// cs is in key order, its entries in the order they were put: each
		// is a cache miss. A loop of loads alone reads a block of them
		// ahead, so that their misses overlap instead of each stalling
		// the copy of a record (a third of the data file's CPU in the
		// join's commit).
		var kind [gatherBlock]byte
		var val [gatherBlock][]byte
		for len(cs) > 0 {
			blk := cs[:min(len(cs), gatherBlock)]
			cs = cs[len(blk):]
			for i := range blk {
				e := blk[i].e
				kind[i], val[i] = recPut, e.val
				if e.del {
					kind[i] = recDelete
				}
			}
			for i := range blk {
				if err := dw.add(kind[i], blk[i].part, keyBytes(blk[i].key), val[i]); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

// gatherBlock is the changes whose entries deltaWriter reads ahead.
const gatherBlock = 64

// publishData writes m's data file with write and completes m with its
// size and record count. The version is not committed yet: publishMeta
// does that.
func (s *Store) publishData(m *versionMeta, write func(dw *dataWriter) error) (int64, error) {
	kindByte := byte(kindDelta)
	if m.Kind == kindNameSnapshot {
		kindByte = kindSnapshot
	}
	var records uint64
	size, tmp, err := publishFile(s.fs, s.dir, m.Data, durable.NoOverwrite, func(w io.Writer) error {
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
		for _, l := range s.chain {
			m.ChainBytes += l.bytes
		}
	}
	return size, nil
}

// publishMeta writes m's metadata file: the version is committed once it is
// published.
func (s *Store) publishMeta(m *versionMeta) (int64, error) {
	mb := encodeMeta(m)
	msize, tmp, err := publishFile(s.fs, s.dir, metaFileName(m.Version, m.Attempt), durable.NoOverwrite, func(w io.Writer) error {
		_, err := w.Write(mb)
		return err
	})
	if tmp != "" {
		s.tmps = append(s.tmps, tmp)
	}
	if err != nil {
		return 0, fmt.Errorf("state: commit version %d: %w", m.Version, err)
	}
	return msize, nil
}

// publishVersion writes m's data file with write, then m's metadata file
// (a repartition's snapshot, which nothing overlaps).
func (s *Store) publishVersion(m *versionMeta, write func(dw *dataWriter) error) (int64, error) {
	size, err := s.publishData(m, write)
	if err != nil {
		return 0, err
	}
	msize, err := s.publishMeta(m)
	if err != nil {
		return 0, err
	}
	return size + msize, nil
}

// afterPublish removes what a new version made garbage: temp files of failed
// attempts and versions above it (an abandoned history) at once; after a
// snapshot, the files no version within Retain needs, gcRemovesPerCommit
// per commit. Failures are logged, not returned: garbage never affects
// correctness.
func (s *Store) afterPublish(snapshot bool) {
	var keep []string
	for _, t := range s.tmps {
		if err := s.fs.Remove(t); err != nil && !errors.Is(err, os.ErrNotExist) {
			keep = append(keep, t)
		}
	}
	s.tmps = keep
	var err error
	switch {
	case len(s.abandoned) > 0:
		// An abandoned history goes at once: its versions are written anew.
		if err = s.gc(); err == nil {
			s.abandoned = nil
		}
	case snapshot:
		// A repartition: the chain starts anew at its snapshot. The rest
		// is spread over the commits that follow (gcRemovesPerCommit).
		s.chain, s.chainFloor, s.chainBase, s.chainBaseRecords = nil, s.version, s.head.DataSize, s.head.DataRecords
		if s.gcQueue, err = s.gcVictims(); err == nil {
			err = s.drainGC(gcRemovesPerCommit)
		}
	default:
		err = s.drainGC(gcRemovesPerCommit)
	}
	if err != nil {
		s.logger.Warn("state garbage collection failed; it is retried after the next snapshot", "dir", s.dir, "err", err)
	}
}
