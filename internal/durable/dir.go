package durable

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

const tempSuffix = ".tmp"

// SyncDir fsyncs directory dir, making the names created in it durable.
func SyncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("open dir %s: %w", dir, err)
	}
	if err := d.Sync(); err != nil {
		return errors.Join(fmt.Errorf("sync dir %s: %w", dir, err), d.Close())
	}
	if err := d.Close(); err != nil {
		return fmt.Errorf("close dir %s: %w", dir, err)
	}
	return nil
}

// EnsureDir creates dir (and its missing parents) and makes each created
// entry durable by fsyncing its parent, so a crash cannot lose the directory
// with the files published in it. An existing dir costs one Stat.
func EnsureDir(fs vfs.FS, dir string) error {
	var created []string
	for d := dir; ; {
		if _, err := fs.Stat(d); err == nil {
			break
		}
		created = append(created, d)
		parent := fs.PathDir(d)
		if parent == d || parent == "" || parent == "." {
			break
		}
		d = parent
	}
	if len(created) == 0 {
		return nil
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create dir %s: %w", dir, err)
	}
	for _, d := range created {
		parent := fs.PathDir(d)
		if parent == "" {
			parent = "."
		}
		if err := SyncDir(fs, parent); err != nil {
			return err
		}
	}
	return nil
}

// Move renames src, a file already durable under its own name, to dst in a
// directory it creates if need be, and fsyncs dst's directory (and src's,
// when it differs) so the move survives a crash once Move returns. A crash
// inside it may leave the file under src, under dst, or (before src's
// directory is synced) under both: a caller re-runs the move, which renames
// the same file over itself, or removes src.
func Move(fs vfs.FS, src, dst string) error {
	if err := EnsureDir(fs, fs.PathDir(dst)); err != nil {
		return err
	}
	if err := fs.Rename(src, dst); err != nil {
		return fmt.Errorf("rename %s to %s: %w", src, dst, err)
	}
	if err := SyncDir(fs, fs.PathDir(dst)); err != nil {
		return err
	}
	if sd := fs.PathDir(src); sd != fs.PathDir(dst) {
		return SyncDir(fs, sd)
	}
	return nil
}

// IsTemp reports whether name is a temp file of Publish (".<name>.<hex>.tmp"),
// or of the writers before it (".<name>.tmp"): a hidden name ending in ".tmp".
func IsTemp(name string) bool {
	return len(name) > len(tempSuffix)+1 && strings.HasPrefix(name, ".") && strings.HasSuffix(name, tempSuffix)
}

// RemoveTemps deletes the temp files in dir (IsTemp) and returns their
// names. Only the owner of dir may call it (a checkpoint's lock holder, a
// generator at its start): another writer's publish in progress would fail.
// A missing dir has none.
func RemoveTemps(fs vfs.FS, dir string) ([]string, error) {
	names, err := fs.List(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var removed []string
	for _, n := range names {
		if !IsTemp(n) {
			continue
		}
		p := fs.PathJoin(dir, n)
		if err := fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, fmt.Errorf("remove stale temp file %s: %w", p, err)
		}
		removed = append(removed, n)
	}
	return removed, nil
}
