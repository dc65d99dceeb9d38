package state

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
)

// fullFS fails every write with ENOSPC once budget bytes were written, like
// a file system that fills up.
type fullFS struct {
	vfs.FS
	budget *atomic.Int64
}

func (fs fullFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	if err != nil {
		return nil, err
	}
	return fullFile{f, fs.budget, name}, nil
}

func (fs fullFS) ReuseForWrite(o, n string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(o, n, c)
	if err != nil {
		return nil, err
	}
	return fullFile{f, fs.budget, n}, nil
}

type fullFile struct {
	vfs.File
	budget *atomic.Int64
	name   string
}

func (f fullFile) Write(p []byte) (int, error) {
	if f.budget.Add(-int64(len(p))) < 0 {
		return 0, &os.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
	}
	return f.File.Write(p)
}

func (f fullFile) WriteAt(p []byte, off int64) (int, error) {
	if f.budget.Add(-int64(len(p))) < 0 {
		return 0, &os.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
	}
	return f.File.WriteAt(p, off)
}

// TestCacheDiskFull fills the disk under the local cache: the commit or the
// Close that needs space ends within seconds in DISK_FULL naming the cache
// directory (Pebble's flush retries forever on ENOSPC, and Close would wait
// for it), the log does not flood, and the next start with space rebuilds
// the cache from the checkpoint with exact contents.
func TestCacheDiskFull(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, vfs.NewMem())
	budget := &atomic.Int64{}
	budget.Store(1 << 40)
	var logs bytes.Buffer
	o := e.opts(2)
	o.LocalFS = fullFS{vfs.Default, budget}
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	s, err := Open(ctx, o, -1)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for k := range 2000 {
		if err := s.Put(testKey(k), testVal(int64(k))); err != nil {
			t.Fatal(err)
		}
		want[string(testKey(k))] = string(testVal(int64(k)))
	}
	if _, err := s.Commit(ctx, 0); err != nil {
		t.Fatal(err)
	}
	budget.Store(0) // the disk is full from now on
	done := make(chan error, 1)
	go func() {
		var err error
		for v := int64(1); v < 40 && err == nil; v++ {
			for k := range 2000 {
				_ = s.Put(testKey(k+int(v)*2000), testVal(v))
			}
			_, err = s.Commit(ctx, v)
		}
		done <- errorsJoin(err, s.Close())
	}()
	var got error
	select {
	case got = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("a full cache disk hangs the store")
	}
	if ce := errcode.Resource(got); ce == nil || ce.Code != errcode.DiskFull {
		t.Fatalf("want DISK_FULL, got %v", got)
	}
	var ce *errcode.Error
	if !errors.As(got, &ce) || !strings.HasPrefix(ce.Path, e.local) {
		t.Fatalf("DISK_FULL does not name the cache dir %s: %v", e.local, got)
	}
	if n := strings.Count(logs.String(), "\n"); n > 20 {
		t.Fatalf("%d log lines for one full disk", n)
	}
	// Space is back: a new start (a new process) rebuilds from the checkpoint.
	budget.Store(1 << 40)
	last, err := LatestVersion(e.fs, e.dir)
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= last; v++ {
		for k := range 2000 {
			want[string(testKey(k+int(v)*2000))] = string(testVal(v))
		}
	}
	s2 := e.open(2, last)
	diffMaps(t, "after the full disk", want, storeContents(t, s2))
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
}

func errorsJoin(a, b error) error {
	if a == nil {
		return b
	}
	return a
}
