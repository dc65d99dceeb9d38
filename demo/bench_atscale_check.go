package demo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"

	"github.com/cespare/xxhash/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/state"
)

// The at-scale run's proof that a repartition kept every row (not only
// their count), and its offline leg (`ethstream checkpoint repartition`).

// stateDigest is the rows of every operator's state at version v in the
// checkpoint ckpt, and an order-free digest of them: the sum of a hash of
// each (operator, key, value). A repartition moves rows between
// partitions and files, so the same rows give the same digest at the
// versions before and after it whatever their order.
type stateDigest struct {
	Rows int64  `json:"rows"`
	Sum  uint64 `json:"sum"`
}

func digestState(ctx context.Context, ckpt string, v int64) (stateDigest, error) {
	var d stateDigest
	for op := 0; ; op++ {
		dir := filepath.Join(ckpt, "state", strconv.Itoa(op))
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			if op == 0 {
				return d, fmt.Errorf("digest the state of %s: no operator state", ckpt)
			}
			return d, nil
		}
		h := xxhash.New()
		var lens [20]byte
		err := state.EachRow(ctx, vfs.Default, dir, v, func(_ int, k, val []byte) error {
			h.Reset()
			b := strconv.AppendInt(lens[:0], int64(op), 10)
			b = append(b, ':')
			b = strconv.AppendInt(b, int64(len(k)), 10)
			_, _ = h.Write(append(b, ':'))
			_, _ = h.Write(k)
			_, _ = h.Write(val)
			d.Sum += h.Sum64()
			d.Rows++
			return nil
		})
		if err != nil {
			return d, fmt.Errorf("digest the state of operator %d at version %d: %w", op, v, err)
		}
	}
}

// linkTree recreates the tree src at dst with hard links to its files: a
// checkpoint's files are never written again once published (every write
// is a new file, renamed into place), so the copy costs no disk and a
// repartition of it leaves src as it was.
func linkTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		return os.Link(p, to)
	})
}

// offlineResult is the offline repartition of a copy of the backfill's
// checkpoint: its duration and peak RSS, the keys it read and wrote, and
// the control batch it committed.
type offlineResult struct {
	ms, before, after, rss int64
	batch                  int64
}

// repartitionOffline repartitions a hard-linked copy of ckpt to n
// partitions as `ethstream checkpoint repartition COPY --partitions n`
// does, with a local cache of its own under dir; it returns the copy's
// path (the caller digests its state, then removes dir).
func repartitionOffline(ctx context.Context, ckpt, dir string, n int) (*offlineResult, string, error) {
	cp := filepath.Join(dir, "checkpoint")
	if err := os.RemoveAll(dir); err != nil {
		return nil, "", err
	}
	if err := linkTree(ckpt, cp); err != nil {
		return nil, "", fmt.Errorf("copy the checkpoint for the offline repartition: %w", err)
	}
	o := engine.Options{CheckpointDir: cp, FS: vfs.Default, LocalDir: filepath.Join(dir, "state-cache"), Logger: slog.New(slog.DiscardHandler)}
	// The leg's own peak: the heap the backfill before it freed is
	// returned to the OS first, else it counts in this leg's RSS.
	debug.FreeOSMemory()
	resetPeakRSS()
	res, err := engine.RepartitionOffline(ctx, o, state.Recorded{}, n)
	if err != nil {
		return nil, "", fmt.Errorf("offline repartition to %d partitions: %w", n, err)
	}
	return &offlineResult{ms: res.DurationMs, before: res.Stats.KeysBefore, after: res.Stats.KeysAfter, rss: peakRSS(), batch: res.BatchID}, cp, nil
}

// rowsLost judges a repartition by the digests of the state before and
// after it: 0 when they are equal, else the rows missing (at least one: a
// row changed, or the repartition did not run).
func rowsLost(before, after stateDigest) float64 {
	if before == after {
		return 0
	}
	return float64(max(before.Rows-after.Rows, 1))
}
