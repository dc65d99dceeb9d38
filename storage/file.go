package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

var errReadOnly = errors.New("file opened for reading")

// readFile is an object opened for reading (bucketFS.Open).
type readFile struct {
	fs    *bucketFS
	key   string
	size  int64
	mod   time.Time
	whole bool   // data holds the whole object
	data  []byte // whole: the object; otherwise unused
	off   int64  // sequential read position

	body      io.ReadCloser // !whole: the GET body for sequential reads
	cancel    context.CancelFunc
	stalls    int   // consecutive resumes of the body without a byte read
	resumedAt int64 // off at the last resume
}

func (f *readFile) Read(p []byte) (int, error) {
	if f.whole {
		if f.off >= int64(len(f.data)) {
			return 0, io.EOF
		}
		n := copy(p, f.data[f.off:])
		f.off += int64(n)
		return n, nil
	}
	n, err := f.body.Read(p)
	f.off += int64(n)
	if err != nil && f.off < f.size && (err == io.EOF || Classify(err).Retryable()) {
		// The body broke off before its Content-Length (a reset, a
		// truncated answer): resume with a ranged GET from here.
		if rerr := f.resume(err); rerr != nil {
			return n, rerr
		}
		err = nil
	}
	return n, err
}

// resume replaces a body that broke off at f.off with a GET from there.
// A body that breaks off again without having delivered a byte counts
// against the store's retry budget, so a store that never completes an
// answer is reported, not read forever.
func (f *readFile) resume(cause error) error {
	if f.off > f.resumedAt {
		f.stalls = 0
	}
	f.stalls++
	f.resumedAt = f.off
	_ = f.body.Close()
	f.cancel()
	f.body, f.cancel = nil, func() {}
	if f.stalls >= f.fs.obj.retry.Attempts {
		return fmt.Errorf("read %s at byte %d of %d: %w", f.fs.path(f.key), f.off, f.size, cause)
	}
	body, cancel, err := f.fs.obj.GetFrom(f.fs.ctx, f.key, f.off)
	if err != nil {
		return err
	}
	f.body, f.cancel = body, cancel
	return nil
}

func (f *readFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read %s: negative offset", f.fs.path(f.key))
	}
	if off >= f.size {
		return 0, io.EOF
	}
	if f.whole {
		n := copy(p, f.data[off:])
		if n < len(p) {
			return n, io.EOF
		}
		return n, nil
	}
	end := off + int64(len(p))
	if end > f.size {
		end = f.size
	}
	n := int(end - off)
	if err := f.fs.obj.GetRangeInto(f.fs.ctx, f.key, off, p[:n]); err != nil {
		return 0, err
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *readFile) Close() error {
	if f.body == nil && f.cancel != nil {
		f.cancel()
	}
	if f.body != nil {
		err := f.body.Close()
		f.cancel()
		f.body = nil
		return err
	}
	return nil
}

func (f *readFile) Stat() (vfs.FileInfo, error) {
	return fileInfo{name: s3PathBase(f.fs.path(f.key)), size: f.size, mod: f.mod}, nil
}

func (f *readFile) Write([]byte) (int, error)          { return 0, errReadOnly }
func (f *readFile) WriteAt([]byte, int64) (int, error) { return 0, errReadOnly }
func (f *readFile) Preallocate(int64, int64) error     { return nil }
func (f *readFile) Sync() error                        { return nil }
func (f *readFile) SyncTo(int64) (bool, error)         { return true, nil }
func (f *readFile) SyncData() error                    { return nil }
func (f *readFile) Prefetch(int64, int64) error        { return nil }
func (f *readFile) Fd() uintptr                        { return vfs.InvalidFd }

// writeFile buffers an object in memory and PUTs it (replacing) on Sync or
// Close when it changed.
type writeFile struct {
	fs    *bucketFS
	key   string
	buf   []byte
	off   int64
	dirty bool
}

func (f *writeFile) Write(p []byte) (int, error) {
	n, err := f.WriteAt(p, f.off)
	f.off += int64(n)
	return n, err
}

func (f *writeFile) WriteAt(p []byte, off int64) (int, error) {
	if end := off + int64(len(p)); end > int64(len(f.buf)) {
		f.buf = append(f.buf, make([]byte, end-int64(len(f.buf)))...)
	}
	copy(f.buf[off:], p)
	f.dirty = true
	return len(p), nil
}

func (f *writeFile) Read(p []byte) (int, error) {
	if f.off >= int64(len(f.buf)) {
		return 0, io.EOF
	}
	n := copy(p, f.buf[f.off:])
	f.off += int64(n)
	return n, nil
}

func (f *writeFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(f.buf)) {
		return 0, io.EOF
	}
	n := copy(p, f.buf[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *writeFile) Sync() error {
	if !f.dirty {
		return nil
	}
	if err := f.fs.checkLease(f.key); err != nil {
		return err
	}
	if err := f.fs.put(f.key, f.buf, false); err != nil {
		return err
	}
	f.dirty = false
	return nil
}

func (f *writeFile) Close() error { return f.Sync() }

func (f *writeFile) Stat() (vfs.FileInfo, error) {
	return fileInfo{name: s3PathBase(f.fs.path(f.key)), size: int64(len(f.buf))}, nil
}

func (f *writeFile) Preallocate(int64, int64) error { return nil }
func (f *writeFile) SyncTo(int64) (bool, error)     { return true, f.Sync() }
func (f *writeFile) SyncData() error                { return f.Sync() }
func (f *writeFile) Prefetch(int64, int64) error    { return nil }
func (f *writeFile) Fd() uintptr                    { return vfs.InvalidFd }

// dirFile is a directory handle: an object store has nothing to fsync.
type dirFile struct{ name string }

func (d *dirFile) Read([]byte) (int, error)           { return 0, io.EOF }
func (d *dirFile) ReadAt([]byte, int64) (int, error)  { return 0, io.EOF }
func (d *dirFile) Write([]byte) (int, error)          { return 0, errReadOnly }
func (d *dirFile) WriteAt([]byte, int64) (int, error) { return 0, errReadOnly }
func (d *dirFile) Close() error                       { return nil }
func (d *dirFile) Stat() (vfs.FileInfo, error) {
	return fileInfo{name: s3PathBase(d.name), dir: true}, nil
}
func (d *dirFile) Preallocate(int64, int64) error { return nil }
func (d *dirFile) Sync() error                    { return nil }
func (d *dirFile) SyncTo(int64) (bool, error)     { return true, nil }
func (d *dirFile) SyncData() error                { return nil }
func (d *dirFile) Prefetch(int64, int64) error    { return nil }
func (d *dirFile) Fd() uintptr                    { return vfs.InvalidFd }
