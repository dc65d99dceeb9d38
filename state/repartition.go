package state

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// kvRef locates one key/value pair in a repartition arena.
type kvRef struct {
	pfx       uint64 // the key's first 8 bytes, big-endian: most comparisons stop here
	off       int
	klen, vln int32
}

func keyPrefix(k []byte) uint64 {
	var b [8]byte
	copy(b[:], k)
	return binary.BigEndian.Uint64(b[:])
}

// bucket collects the pairs routed to one new partition.
type bucket struct {
	arena []byte
	refs  []kvRef
}

func (b *bucket) key(r kvRef) []byte { return b.arena[r.off : r.off+int(r.klen)] }
func (b *bucket) val(r kvRef) []byte {
	return b.arena[r.off+int(r.klen) : r.off+int(r.klen)+int(r.vln)]
}

// Repartition reads the state committed at version base, routes every key
// with PartitionOf(key, n), and writes it as version `version` with n
// partitions: a full snapshot in the checkpoint (always), then a fresh local
// cache built by sstable ingestion. The store then has n partitions. The
// cost is a sequential read of the old partitions, one sort per new partition
// and one sstable per non-empty new partition: it grows with the state size,
// not the partition counts. Redoing it after a crash (Open at base, Repartition
// again) writes a new attempt of the same version with the same content.
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

	buckets, err := s.routeInto(ctx, base, n, &st)
	if err != nil {
		return st, err
	}
	rows, bounds, err := sortBuckets(buckets, base, &st)
	if err != nil {
		return st, err
	}

	m, err := s.publishRepartition(version, buckets, rows, bounds, &st)
	if err != nil {
		return st, err
	}

	// The new version is durable; replace the cache.
	s.version, s.head, s.partRows, s.rows, s.bounds = version, m, rows, m.Rows, bounds
	s.union = unionBounds{}
	s.n, s.opts.Partitions = n, n
	s.rebuildCache(ctx, buckets, rows)
	s.afterPublish(true)
	if s.broken != nil {
		return st, fmt.Errorf("state: repartitioned version %d is committed but the local cache failed, reopen the store: %w", version, s.broken)
	}
	s.logger.Info("state repartitioned", "dir", s.dir, "from", st.From, "to", st.To, "keys", st.KeysAfter,
		"version", version, "ms", time.Since(start).Milliseconds())
	return st, nil
}

// publishRepartition writes the repartitioned state as a full snapshot of
// version (a new attempt of it when redone), the buckets in partition and
// key order.
func (s *Store) publishRepartition(version int64, buckets []bucket, rows []int64, bounds []*keyBounds, st *stream.RepartitionStats) (*versionMeta, error) {
	// The closed rows stay closed by the same next watermark.
	// A control batch reads no input: its commit carries the watermark the
	// base version recorded.
	var wm *int64
	if s.head != nil && s.head.NextWatermarkMs != nil {
		w := *s.head.NextWatermarkMs
		wm = &w
	}
	m := s.newMeta(version, kindNameSnapshot, rows, bounds, s.ClosedRows(), wm)
	written, err := s.publishVersion(m, func(dw *dataWriter) error {
		for t := range buckets {
			b := &buckets[t]
			for _, r := range b.refs {
				if err := dw.add(recPut, t, b.key(r), b.val(r)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	st.BytesWritten = written
	return m, nil
}

// routeInto reads every key of version base into the bucket of its new
// partition (of n), counting what it read into st.
func (s *Store) routeInto(ctx context.Context, base int64, n int, st *stream.RepartitionStats) ([]bucket, error) {
	// Route every key of version base into its new partition: from the
	// checkpoint files when some old partition is not open (the usual case
	// right after a restart: opening 200 Pebble instances only to read 3,300
	// keys costs far more than reading the snapshot and its deltas), else
	// from the open instances.
	buckets := make([]bucket, n)
	for t := range buckets {
		buckets[t].refs = make([]kvRef, 0, s.rows/int64(n)+s.rows/int64(4*n)+16)
	}
	route := func(k, v []byte) {
		b := &buckets[PartitionOf(k, n)]
		b.refs = append(b.refs, kvRef{pfx: keyPrefix(k), off: len(b.arena), klen: int32(len(k)), vln: int32(len(v))})
		b.arena = append(b.arena, k...)
		b.arena = append(b.arena, v...)
		st.KeysBefore++
		st.BytesRead += int64(len(k) + len(v))
	}
	var err error
	if s.allNonEmptyOpen() {
		err = s.routeFromCache(ctx, route)
	} else {
		err = s.routeFromFiles(ctx, base, route)
	}
	if err != nil {
		return nil, err
	}
	if st.KeysBefore != s.rows {
		return nil, errcode.Corrupt(s.opts.LocalDir, nil,
			"state version %d reads as %d keys, its metadata says %d; delete the cache directory and retry", base, st.KeysBefore, s.rows)
	}
	return buckets, nil
}

// sortBuckets sorts each bucket by key, refuses a key found twice, and
// returns each new partition's rows and key bounds.
func sortBuckets(buckets []bucket, base int64, st *stream.RepartitionStats) ([]int64, []*keyBounds, error) {
	n := len(buckets)
	rows := make([]int64, n)
	bounds := make([]*keyBounds, n)
	for t := range buckets {
		b := &buckets[t]
		slices.SortFunc(b.refs, func(x, y kvRef) int {
			if x.pfx != y.pfx {
				if x.pfx < y.pfx {
					return -1
				}
				return 1
			}
			return bytes.Compare(b.key(x), b.key(y))
		})
		for i := 1; i < len(b.refs); i++ {
			if bytes.Equal(b.key(b.refs[i-1]), b.key(b.refs[i])) {
				return nil, nil, fmt.Errorf("state: key %x found in two partitions of version %d", b.key(b.refs[i]), base)
			}
		}
		rows[t] = int64(len(b.refs))
		if len(b.refs) > 0 {
			bounds[t] = &keyBounds{Min: bytes.Clone(b.key(b.refs[0])), Max: bytes.Clone(b.key(b.refs[len(b.refs)-1]))}
		}
		st.KeysAfter += rows[t]
	}
	return rows, bounds, nil
}

// rebuildCache replaces the local cache by the repartitioned buckets
// (sstable ingestion), letting each bucket's arena go once loaded; a
// failure marks the store broken (the version itself is committed).
func (s *Store) rebuildCache(ctx context.Context, buckets []bucket, rows []int64) {
	if err := s.resetCache(); err != nil {
		s.broken = err
	} else {
		if err := s.parts.openAll(func(i int) bool { return rows[i] > 0 }); err != nil {
			s.broken = err
		}
		ld := s.parts.loader(ctx)
		for t := range buckets {
			if s.broken != nil {
				break
			}
			b := &buckets[t]
			for _, r := range b.refs {
				if err := ld.add(t, b.key(r), b.val(r)); err != nil {
					s.broken = err
					break
				}
			}
			buckets[t] = bucket{} // let the arena go
			if s.broken != nil {
				break
			}
		}
		if s.broken == nil {
			if err := ld.finish(); err != nil {
				s.broken = err
			}
		} else {
			ld.abort()
		}
	}
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

// routeFromCache passes every committed key and value to fn, reading the
// open Pebble instances partition by partition.
func (s *Store) routeFromCache(ctx context.Context, fn func(k, v []byte)) error {
	for p := 0; p < s.n; p++ {
		if s.partRows[p] == 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		d := s.parts.dbs[p]
		it, err := d.NewIter(&pebble.IterOptions{})
		if err != nil {
			return fmt.Errorf("read state partition %d: %w", p, err)
		}
		for valid := it.First(); valid; valid = it.Next() {
			v, err := it.ValueAndErr()
			if err != nil {
				return errors.Join(fmt.Errorf("read state partition %d: %w", p, err), it.Close())
			}
			fn(it.Key(), v)
		}
		if err := it.Close(); err != nil {
			return fmt.Errorf("read state partition %d: %w", p, err)
		}
	}
	return nil
}

// routeFromFiles passes every key and value of committed version v to fn,
// reading its checkpoint files sequentially without the local cache: the
// deltas of v's chain are folded into one map of overrides (the last write
// of a key wins, nil = deleted), then the snapshot is streamed, each key
// replaced by its override if it has one, and the overrides' remaining puts
// follow. Memory beyond the output is the deltas' keys, not the state.
func (s *Store) routeFromFiles(ctx context.Context, v int64, fn func(k, v []byte)) error {
	snap, over, err := s.foldChain(ctx, v)
	if err != nil {
		return err
	}
	if snap != nil {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := readDataFile(s.fs, s.dir, snap, func(r record) error {
			if _, ok := over[string(r.Key)]; !ok {
				fn(r.Key, r.Val)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for k, o := range over {
		if !o.del {
			fn([]byte(k), o.val)
		}
	}
	return nil
}

// fileOverride is the last write of one key in a chain of delta files.
type fileOverride struct {
	part int
	val  []byte
	del  bool
}

// overrides maps an encoded key to its last write.
type overrides map[string]*fileOverride

func (over overrides) set(k string, part int, val []byte, del bool) {
	o := over[k]
	if o == nil {
		o = &fileOverride{part: part}
		over[k] = o
	}
	o.del = del
	o.val = append(o.val[:0], val...)
}

// foldChain loads committed version v's chain from the checkpoint files and
// folds its deltas into overrides (the last write of a key wins). It returns
// the snapshot the chain starts from, nil if it starts from the empty state;
// the caller streams it, replacing keys that have an override.
func (s *Store) foldChain(ctx context.Context, v int64) (*versionMeta, overrides, error) {
	cat, err := listCatalog(s.fs, s.dir)
	if err != nil {
		return nil, nil, err
	}
	chain, err := loadChain(s.fs, s.dir, cat, v)
	if err != nil {
		return nil, nil, err
	}
	var snap *versionMeta
	deltas := chain
	if chain[0].Kind == kindNameSnapshot {
		snap, deltas = chain[0], chain[1:]
	}
	over := overrides{}
	for _, m := range deltas {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		err := readDataFile(s.fs, s.dir, m, func(r record) error {
			over.set(string(r.Key), r.Partition, r.Val, r.Kind == recDelete)
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	return snap, over, nil
}

// resetCache starts an empty cache generation with s.n partitions. The old
// generation's instances are closed and its directory removed in the
// background: closing 200 instances and deleting their files is the one part
// of a repartition whose cost follows the old partition count, and nothing
// waits for it except Close.
func (s *Store) resetCache() error {
	old := s.parts
	s.parts = newPartitions(s.opts.LocalFS, s.opts.LocalDir, newGen(), s.n, s.opts.CacheBytes, s.logger)
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		err := old.close()
		if rmErr := old.fs.RemoveAll(old.dir); rmErr != nil {
			err = errors.Join(err, rmErr)
		}
		if err != nil {
			s.logger.Warn("remove replaced state cache", "dir", old.dir, "err", err)
		}
	}()
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
