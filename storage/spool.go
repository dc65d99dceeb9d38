package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// spoolLimit is the most an object being written is held in memory: past it
// the bytes spill to a local temp file and the PUT streams from there, so a
// publish uses at most this much memory whatever the object's size (Delta
// data files, state files). A PUT needs its length up front and a signed
// request its payload hash, so the object is staged whole before the one
// conditional PUT; multipart upload is not used, since the embedded
// endpoint lacks it and put-if-absent stays a single If-None-Match PUT.
const spoolLimit = 4 << 20

// spills counts spools that went to disk (tests check the spill happens).
var spills atomic.Int64

// spool stages an object: in memory up to spoolLimit, then in an unlinked
// temp file in dir (os.TempDir() when empty). Not safe for concurrent use.
type spool struct {
	dir  string
	buf  []byte
	f    *os.File
	name string // the temp file's name while it could not be unlinked
	size int64
	off  int64 // sequential position for Write and Read
}

func (s *spool) spill() error {
	dir := s.dir
	if dir == "" {
		dir = os.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create upload spool dir %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".ethstream-upload-*.tmp")
	if err != nil {
		return fmt.Errorf("create upload spool file in %s: %w", dir, err)
	}
	// Unlinked at once: the open handle keeps the bytes, and a crash leaves
	// nothing behind. Where an open file cannot be unlinked, Close removes it.
	if os.Remove(f.Name()) != nil {
		s.name = f.Name()
	}
	if _, err := f.Write(s.buf); err != nil {
		f.Close()
		s.removeName()
		return fmt.Errorf("write upload spool file: %w", err)
	}
	s.f, s.buf = f, nil
	spills.Add(1)
	return nil
}

func (s *spool) Write(p []byte) (int, error) {
	n, err := s.WriteAt(p, s.off)
	s.off += int64(n)
	return n, err
}

func (s *spool) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("write at a negative offset")
	}
	end := off + int64(len(p))
	if s.f == nil && end > spoolLimit {
		if err := s.spill(); err != nil {
			return 0, err
		}
	}
	if s.f != nil {
		n, err := s.f.WriteAt(p, off)
		s.size = max(s.size, off+int64(n))
		if err != nil {
			return n, fmt.Errorf("write upload spool file: %w", err)
		}
		return n, nil
	}
	if end > int64(cap(s.buf)) {
		// Double, up to the limit: staging a spoolLimit object allocates
		// about twice the limit in all.
		nb := make([]byte, end, min(max(2*int64(cap(s.buf)), end, 4<<10), spoolLimit))
		copy(nb, s.buf)
		s.buf = nb
	} else if end > int64(len(s.buf)) {
		s.buf = s.buf[:end]
	}
	copy(s.buf[off:], p)
	s.size = max(s.size, end)
	return len(p), nil
}

func (s *spool) Read(p []byte) (int, error) {
	n, err := s.ReadAt(p, s.off)
	s.off += int64(n)
	return n, err
}

func (s *spool) ReadAt(p []byte, off int64) (int, error) {
	if off >= s.size {
		return 0, io.EOF
	}
	if s.f != nil {
		return io.NewSectionReader(s.f, 0, s.size).ReadAt(p, off)
	}
	n := copy(p, s.buf[off:s.size])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// body returns a fresh reader over the staged bytes (one per PUT attempt;
// seekable, so the SDK can hash and rewind it).
func (s *spool) body() io.ReadSeeker {
	if s.f != nil {
		return io.NewSectionReader(s.f, 0, s.size)
	}
	return bytes.NewReader(s.buf[:s.size])
}

func (s *spool) removeName() {
	if s.name != "" {
		_ = os.Remove(s.name)
		s.name = ""
	}
}

// Close releases the staged bytes.
func (s *spool) Close() error {
	s.buf = nil
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	s.removeName()
	return err
}

// createFile is an object being written (bucketFS.Create): its bytes are
// staged in a spool and PUT (replacing) on Sync or Close when they changed.
type createFile struct {
	fs    *bucketFS
	key   string
	sp    spool
	dirty bool
}

func (f *createFile) Write(p []byte) (int, error) {
	f.dirty = true
	return f.sp.Write(p)
}

func (f *createFile) WriteAt(p []byte, off int64) (int, error) {
	f.dirty = true
	return f.sp.WriteAt(p, off)
}

func (f *createFile) Read(p []byte) (int, error)              { return f.sp.Read(p) }
func (f *createFile) ReadAt(p []byte, off int64) (int, error) { return f.sp.ReadAt(p, off) }

func (f *createFile) Sync() error {
	if !f.dirty {
		return nil
	}
	if err := f.fs.checkLease(f.key); err != nil {
		return err
	}
	if err := f.fs.obj.Put(f.fs.ctx, f.key, f.sp.body, f.sp.size, false); err != nil {
		return err
	}
	f.dirty = false
	return nil
}

func (f *createFile) Close() error {
	err := f.Sync()
	return errors.Join(err, f.sp.Close())
}

func (f *createFile) Stat() (vfs.FileInfo, error) {
	return fileInfo{name: s3PathBase(f.fs.path(f.key)), size: f.sp.size, mod: time.Time{}}, nil
}

func (f *createFile) Preallocate(int64, int64) error { return nil }
func (f *createFile) SyncTo(int64) (bool, error)     { return true, f.Sync() }
func (f *createFile) SyncData() error                { return f.Sync() }
func (f *createFile) Prefetch(int64, int64) error    { return nil }
func (f *createFile) Fd() uintptr                    { return vfs.InvalidFd }
