package state

// Repairing a damaged cache: a partition of a reused cache generation is
// checked when first opened (every key read, so Pebble verifies each block's
// checksum, and counted against the trusted version's figures); a partition
// that fails is discarded and rebuilt from the checkpoint files alone, with
// a warning. The cache is a copy: damage to it costs a rebuild, never a
// wrong answer or a crash.

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
)

// checkRows reads every key of d and compares the count with want. Pebble
// reports a damaged block as an error here (the corruption listener of
// newPartitions does not abort the process).
func checkRows(d *pebble.DB, want int64) error {
	it, err := d.NewIter(nil)
	if err != nil {
		return err
	}
	var n int64
	for valid := it.First(); valid; valid = it.Next() {
		if _, err := it.ValueAndErr(); err != nil {
			_ = it.Close()
			return err
		}
		n++
	}
	if err := it.Close(); err != nil {
		return err
	}
	if n != want {
		return fmt.Errorf("holds %d keys, the trusted version has %d", n, want)
	}
	return nil
}

// settle checks partition i the first time it is opened from a reused
// generation; openErr is the error of opening it (a damaged MANIFEST or
// OPTIONS file). On damage the partition is removed and rebuilt through
// p.repair. It reports whether the instance is usable.
func (p *partitions) settle(i int, openErr error) error {
	if p.trusted == nil || !p.trusted[i].pending {
		return openErr
	}
	p.trusted[i].pending = false
	damage := openErr
	if damage == nil {
		damage = checkRows(p.dbs[i], p.trusted[i].rows)
	}
	if damage == nil {
		return nil
	}
	p.logger.Warn("state cache partition damaged: rebuilding it from the checkpoint",
		"partition", i, "dir", p.path(i), "err", damage)
	if d := p.dbs[i]; d != nil {
		_ = d.Close() // the instance is discarded whole
		p.dbs[i] = nil
	}
	if err := p.fs.RemoveAll(p.path(i)); err != nil {
		return fmt.Errorf("remove damaged state cache partition %s: %w", p.path(i), err)
	}
	if p.repair == nil {
		return fmt.Errorf("state cache partition %s is damaged: %w", p.path(i), damage)
	}
	return p.repair(i)
}

// trustPartitions arms the first-open check of every partition of a reused
// generation holding version head.
func (s *Store) trustPartitions(head *versionMeta) {
	t := make([]trustedPart, s.n)
	for i := range t {
		t[i] = trustedPart{pending: true, rows: head.PartitionRows[i]}
	}
	s.parts.trusted = t
	s.parts.repair = s.rebuildPartition
}

// trustedPart is what a partition of a reused generation must hold.
type trustedPart struct {
	pending bool  // not yet checked
	rows    int64 // keys of the trusted version
}

// rebuildPartition fills partition i, just emptied, with its keys of the
// committed version, read from the chain files. A partition not yet opened
// since Open is unchanged since the trusted version, so the committed
// version's chain gives exactly its content.
func (s *Store) rebuildPartition(i int) error {
	// The full listing: a background snapshot may start the chain, and the
	// deltas below it may be collected already.
	cat, err := listCatalog(s.fs, s.dir)
	if err != nil {
		return err
	}
	chain, err := loadChain(s.fs, s.dir, cat, s.head.Version)
	if err != nil {
		return err
	}
	if _, err := s.parts.db(i); err != nil {
		return err
	}
	ctx := context.Background()
	for _, m := range chain {
		if m.Kind == kindNameSnapshot {
			ld := s.parts.loader(ctx)
			err := readDataFile(s.fs, s.dir, m, func(r record) error {
				if r.Partition != i {
					return nil
				}
				return ld.add(r.Partition, r.Key, r.Val)
			})
			if err != nil {
				ld.abort()
				return err
			}
			if err := ld.finish(); err != nil {
				return err
			}
			continue
		}
		ap := s.newApplier()
		err := readDataFile(s.fs, s.dir, m, func(r record) error {
			if r.Partition != i {
				return nil
			}
			return ap.add(r)
		})
		if err != nil {
			ap.close()
			return err
		}
		if err := ap.commit(); err != nil {
			return err
		}
	}
	s.logger.Warn("state cache partition rebuilt from the checkpoint", "dir", s.dir,
		"partition", i, "version", s.version)
	return nil
}

// eventListener keeps Pebble from aborting the process on damage it finds
// (its default calls Fatalf): the read returns the error instead, and the
// store repairs or reports it. Background errors are logged, except the
// retries of a flush on a disk known to be full (once is enough).
func eventListener(logger *slog.Logger, full *spaceLatch) *pebble.EventListener {
	return &pebble.EventListener{
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			logger.Warn("state cache: on-disk corruption", "path", info.Path, "err", info.Details)
		},
		BackgroundError: func(err error) {
			wasFull := full.get() != nil
			_ = full.check(err)
			if !wasFull {
				logger.Error("state cache: background error", "err", err)
			}
		},
	}
}
