package durable

import (
	"bytes"
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// fullDisk fails every write after the first limit bytes with ENOSPC, as a
// full file system does.
type fullDisk struct {
	vfs.FS
	limit int64
}

func (d *fullDisk) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := d.FS.Create(name, c)
	if err != nil {
		return nil, err
	}
	return &fullFile{File: f, d: d, name: name}, nil
}

type fullFile struct {
	vfs.File
	d    *fullDisk
	name string
}

func (f *fullFile) Write(p []byte) (int, error) {
	if int64(len(p)) > f.d.limit {
		n, _ := f.File.Write(p[:f.d.limit])
		f.d.limit = 0
		return n, &os.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
	}
	f.d.limit -= int64(len(p))
	return f.File.Write(p)
}

// TestPublishDiskFull: a publish on a full disk fails at once with a
// SpaceError that says how many bytes were not written and unwraps to
// ENOSPC; nothing is visible under the name and no temp file stays.
func TestPublishDiskFull(t *testing.T) {
	for _, mode := range []Mode{NoOverwrite, Replace} {
		mem := vfs.NewMem()
		if err := EnsureDir(mem, "/d"); err != nil {
			t.Fatal(err)
		}
		fs := &fullDisk{FS: mem, limit: 100_000}
		data := bytes.Repeat([]byte("x"), 1_000_000)
		_, err := Bytes(Local{FS: fs}, "/d", "f", Options{Mode: mode}, data)
		var se *SpaceError
		if !errors.As(err, &se) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("%s: want a SpaceError, got %v", mode, err)
		}
		if se.Needed <= 0 || se.Written+se.Needed > int64(len(data)) {
			t.Fatalf("%s: needed %d written %d of %d", mode, se.Needed, se.Written, len(data))
		}
		names, _ := mem.List("/d")
		if len(names) != 0 {
			t.Fatalf("%s: a full disk left %v", mode, names)
		}
	}
	// An injected fault that is not ENOSPC stays what it is.
	mem := vfs.NewMem()
	fs := errorfs.Wrap(mem, errorfs.ErrInjected)
	_, err := Bytes(Local{FS: fs}, "", "f", Options{}, []byte("abc"))
	var se *SpaceError
	if err == nil || errors.As(err, &se) {
		t.Fatalf("injected EIO: %v", err)
	}
}
