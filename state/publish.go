package state

import (
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/internal/durable"
)

// tmpSuffix ends every temp file name: durable's ".<name>.<hex>.tmp" and
// the "<name>.tmp" of earlier versions, both deleted by Open.
const tmpSuffix = ".tmp"

// publishFile writes dir/name crash-safely through durable (temp file,
// fsync, close, link or rename to name, fsync dir; on object storage a
// conditional PUT). Version files use durable.NoOverwrite: their names are
// never published before (attempt numbers), so a name that exists means
// another writer raced for the version (durable.ErrExists). On error the
// temp file is removed if possible; the caller remembers the temp path
// (returned) to retry the removal later. If only the directory fsync
// failed, the rename may or may not survive a crash: the caller treats the
// version as not committed and retries under a new attempt. It returns the
// published size.
func publishFile(fs vfs.FS, dir, name string, mode durable.Mode, write func(w io.Writer) error) (size int64, tmp string, err error) {
	res, err := durable.For(fs).Publish(dir, name, durable.Options{Mode: mode}, write)
	return res.Size, res.Temp, err
}

func syncDir(fs vfs.FS, dir string) error { return durable.SyncDir(fs, dir) }

// ensureDir creates dir and makes its entry durable: the parent of every
// directory that did not exist is fsynced, or a crash could lose the whole
// state directory with every version published in it.
func ensureDir(fs vfs.FS, dir string) error {
	if err := durable.EnsureDir(fs, dir); err != nil {
		return fmt.Errorf("create state dir %s: %w", dir, err)
	}
	return nil
}
