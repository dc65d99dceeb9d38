package state

// A full disk under the local cache: Pebble retries a failed flush forever
// (and a DB with a failing flush never closes), so the cache watches its own
// writes. The first ENOSPC (or EDQUOT) trips a latch: flushes and closes stop
// waiting for Pebble and return DISK_FULL naming the cache directory, new
// cache files fail at once (throttled, so Pebble's retry loop neither spins
// nor floods the log), and commits stop writing to the cache.

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
)

// spaceLatch records the first out-of-space error of the cache.
type spaceLatch struct {
	mu   sync.Mutex
	err  error
	done chan struct{} // closed when tripped
}

func newSpaceLatch() *spaceLatch { return &spaceLatch{done: make(chan struct{})} }

func (l *spaceLatch) check(err error) error {
	if err != nil && (errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)) {
		l.mu.Lock()
		if l.err == nil {
			l.err = err
			close(l.done)
		}
		l.mu.Unlock()
	}
	return err
}

func (l *spaceLatch) get() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// diskFull is the error of a tripped latch for the cache at dir.
func (l *spaceLatch) diskFull(dir string) error {
	err := l.get()
	if err == nil {
		return nil
	}
	e := errcode.Resource(err)
	if e == nil {
		return err
	}
	e.Path = dir
	e.Msg = "the state cache ran out of space: " + e.Msg
	return e
}

// retryPause slows Pebble's flush retries once the disk is known full.
const retryPause = 50 * time.Millisecond

// spaceFS reports the out-of-space errors of its files to a latch.
type spaceFS struct {
	vfs.FS
	latch *spaceLatch
}

func (fs spaceFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, fs.latch.check(err)
	}
	return spaceFile{File: f, latch: fs.latch}, nil
}

func (fs spaceFS) full() error {
	if err := fs.latch.get(); err != nil {
		time.Sleep(retryPause)
		return fmt.Errorf("state cache: %w", err)
	}
	return nil
}

func (fs spaceFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if err := fs.full(); err != nil {
		return nil, err
	}
	return fs.wrap(fs.FS.Create(name, c))
}

func (fs spaceFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, o ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.OpenReadWrite(name, c, o...))
}

func (fs spaceFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if err := fs.full(); err != nil {
		return nil, err
	}
	return fs.wrap(fs.FS.ReuseForWrite(oldname, newname, c))
}

func (fs spaceFS) Unwrap() vfs.FS { return fs.FS }

type spaceFile struct {
	vfs.File
	latch *spaceLatch
}

func (f spaceFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	return n, f.latch.check(err)
}

func (f spaceFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	return n, f.latch.check(err)
}

func (f spaceFile) Sync() error { return f.latch.check(f.File.Sync()) }

func (f spaceFile) Preallocate(off, n int64) error {
	return f.latch.check(f.File.Preallocate(off, n))
}
