package state

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// Repartition reads the state committed at version base, routes every key
// with PartitionOf(key, n), and writes it as version `version` with n
// partitions: a full snapshot in the checkpoint (always) and a fresh local
// cache built by sstable ingestion. The store then has n partitions. The
// keys go through sorted run files on the local disk (spill.go), so that
// memory does not grow with the number of keys; the cost is a sequential
// read of the old partitions, a write and a read of the runs, and one
// sstable per non-empty new partition. A failure leaves the committed
// version and the cache as they were. Redoing it after a crash (Open at
// base, Repartition again) writes a new attempt of the same version with
// the same content.
func (s *Store) Repartition(ctx context.Context, base, version int64, n int) (stream.RepartitionStats, error) {
	start := time.Now()
	var st stream.RepartitionStats
	if err := s.usable(); err != nil {
		return st, err
	}
	if n < 1 || n > maxPartitions {
		return st, errcode.New(errcode.InvalidArgument, s.dir, "use a count from 1 to 10000",
			"state partition count %d out of range", n)
	}
	if version <= base {
		return st, fmt.Errorf("state: repartition into version %d from base %d", version, base)
	}
	if s.ptab.live > 0 {
		return st, errors.New("state: repartition with an uncommitted batch pending")
	}
	if s.version != base {
		if err := s.reloadAt(ctx, base); err != nil {
			return st, err
		}
	}
	st.From, st.To = s.n, n
	s.lastGet = s.lastGet[:0]

	// The new cache generation is built beside the old one, which stays in
	// use until the new version is published.
	np := newPartitions(s.opts.LocalFS, s.opts.LocalDir, newGen(), n, s.opts.CacheBytes, s.logger)
	m, err := s.repartitionInto(ctx, base, version, np, &st)
	if err != nil {
		if rmErr := np.discard(); rmErr != nil {
			s.logger.Warn("remove abandoned state cache", "dir", np.dir, "err", rmErr)
		}
		return st, err
	}
	s.version, s.head, s.partRows, s.rows, s.bounds = version, m, m.PartitionRows, m.Rows, m.PartitionKeys
	s.union = unionBounds{}
	s.n, s.opts.Partitions = n, n
	s.replaceCache(np)
	s.afterPublish(true)
	s.logger.Info("state repartitioned", "dir", s.dir, "from", st.From, "to", st.To, "keys", st.KeysAfter,
		"version", version, "ms", time.Since(start).Milliseconds())
	return st, nil
}

// repartitionInto spills version base into runs of n = np.n new
// partitions, then publishes version `version` while it merges each new
// partition's runs into both the snapshot and np's sstables.
func (s *Store) repartitionInto(ctx context.Context, base, version int64, np *partitions, st *stream.RepartitionStats) (*versionMeta, error) {
	// 128 bytes a key is generous (an aggregation key and count take ~60);
	// it sizes the buffers of a small state down.
	sp := newSpiller(np.fs, np.fs.PathJoin(np.dir, spillDirName), np.n, s.rows*128)
	m, err := s.spillAndPublish(ctx, base, version, np, sp, st)
	if rmErr := sp.remove(); rmErr != nil {
		if err == nil {
			// The version is published; only disk space is at stake, and
			// the generation's next Open sweeps the directory.
			s.logger.Warn("remove state repartition runs", "dir", sp.dir, "err", rmErr)
		} else {
			err = errors.Join(err, rmErr)
		}
	}
	return m, err
}

func (s *Store) spillAndPublish(ctx context.Context, base, version int64, np *partitions, sp *spiller, st *stream.RepartitionStats) (*versionMeta, error) {
	if err := s.spillVersion(ctx, base, sp); err != nil {
		return nil, errors.Join(err, sp.finish())
	}
	if err := sp.finish(); err != nil {
		return nil, err
	}
	st.KeysBefore, st.BytesRead = sp.keys, sp.bytes
	if sp.keys != s.rows {
		return nil, errcode.Corrupt(s.opts.LocalDir, nil,
			"state version %d reads as %d keys, its metadata says %d; delete the cache directory and retry", base, sp.keys, s.rows)
	}
	rows, bounds := sp.rowsAndBounds()
	if err := np.openAll(func(i int) bool { return rows[i] > 0 }); err != nil {
		return nil, err
	}
	// A control batch reads no input: the operator's record of the base
	// version holds for the new one.
	m := s.newMeta(version, kindNameSnapshot, rows, bounds, s.OperatorRecord())
	ld := np.loader(ctx)
	written, err := s.publishVersion(m, func(dw *dataWriter) error {
		for t, r := range sp.runs {
			if r == nil {
				continue
			}
			err := r.merge(np.fs, func(k, v []byte) error {
				if err := dw.add(recPut, t, k, v); err != nil {
					return err
				}
				return ld.add(t, k, v)
			})
			var dup errDuplicateKey
			if errors.As(err, &dup) {
				return fmt.Errorf("state: key %x found in two partitions of version %d", dup.key, base)
			}
			if err != nil {
				return err
			}
			// Free the disk as we go: the runs are as large as the state.
			if r.path != "" {
				_ = np.fs.Remove(r.path)
			}
			r.mem = nil
		}
		return ld.finish()
	})
	if err != nil {
		ld.abort()
		return nil, err
	}
	for _, r := range rows {
		st.KeysAfter += r
	}
	st.BytesWritten = written
	return m, nil
}

// spillVersion passes every key of version base to sp, old partition by
// old partition in key order: from the checkpoint files when some old
// partition holding keys is not open (the usual case right after a
// restart: opening 200 Pebble instances only to read 3,300 keys costs far
// more than reading the snapshot and its deltas), else from the open
// instances.
func (s *Store) spillVersion(ctx context.Context, base int64, sp *spiller) error {
	if s.allNonEmptyOpen() {
		return s.eachCached(ctx, sp.add)
	}
	return s.eachCommitted(ctx, base, sp.add)
}

// replaceCache makes np the local cache. The old generation's instances
// are closed and its directory removed in the background: closing 200
// instances and deleting their files is the one part of a repartition
// whose cost follows the old partition count, and nothing waits for it
// except Close.
func (s *Store) replaceCache(np *partitions) {
	old := s.parts
	s.parts = np
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		if err := old.discard(); err != nil {
			s.logger.Warn("remove replaced state cache", "dir", old.dir, "err", err)
		}
	}()
}

// allNonEmptyOpen reports whether every partition holding keys has its
// Pebble instance open.
func (s *Store) allNonEmptyOpen() bool {
	for p := 0; p < s.n; p++ {
		if s.partRows[p] > 0 && s.parts.dbs[p] == nil {
			return false
		}
	}
	return true
}

// eachCached passes every committed key and value to fn in (partition,
// key) order, reading the open Pebble instances partition by partition.
func (s *Store) eachCached(ctx context.Context, fn func(part int, k, v []byte) error) error {
	for p := 0; p < s.n; p++ {
		if s.partRows[p] == 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		it, err := s.parts.dbs[p].NewIter(&pebble.IterOptions{})
		if err != nil {
			return fmt.Errorf("read state partition %d: %w", p, err)
		}
		for valid := it.First(); valid; valid = it.Next() {
			v, err := it.ValueAndErr()
			if err != nil {
				return errors.Join(fmt.Errorf("read state partition %d: %w", p, err), it.Close())
			}
			if err := fn(p, it.Key(), v); err != nil {
				return errors.Join(err, it.Close())
			}
		}
		if err := it.Close(); err != nil {
			return fmt.Errorf("read state partition %d: %w", p, err)
		}
	}
	return nil
}

// reloadAt makes the store hold committed version v (with the partition count
// recorded for it), from the cache or the checkpoint files.
func (s *Store) reloadAt(ctx context.Context, v int64) error {
	cat, err := listCatalog(s.fs, s.dir)
	if err != nil {
		return err
	}
	a, ok := cat.latestAttempt(v)
	if !ok {
		return errcode.Corrupt(s.dir, nil, "state version %d has no metadata file", v)
	}
	m, err := readMeta(s.fs, s.dir, v, a)
	if err != nil {
		return err
	}
	s.bg.Wait()
	if err := s.parts.close(); err != nil {
		return err
	}
	s.opts.Partitions = m.Partitions
	s.head, s.version, s.broken = nil, -1, nil
	s.partRows = slices.Clone(m.PartitionRows)
	return s.load(ctx, cat, v)
}
