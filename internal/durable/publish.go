package durable

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrExists is returned by a NoOverwrite publish whose name is taken.
var ErrExists = errors.New("file already exists")

// Mode says how the published name is made visible (package doc).
type Mode uint8

const (
	// NoOverwrite publishes a name that must not exist (put-if-absent).
	NoOverwrite Mode = iota
	// Replace publishes a name, atomically replacing any file of that name.
	Replace
)

func (m Mode) String() string {
	if m == Replace {
		return "replace"
	}
	return "no-overwrite"
}

// Options configure one Publish.
type Options struct {
	Mode Mode
	// NoDirSync leaves the fsync of dir to the caller (SyncDir), for a
	// writer that publishes several files into one directory and syncs it
	// once before anything refers to them.
	NoDirSync bool
	// Wait, if not nil, runs while the temp file is written and fsynced; the
	// name is published only if it returns nil (a commit waits for the data
	// files it references this way, the two fsyncs overlapping).
	Wait func() error
}

// Result describes a Publish.
type Result struct {
	// Size is the number of bytes published (0 on error).
	Size int64
	// Temp is the path of a temp file this call could not remove, "" if
	// none. The caller may retry the removal; RemoveTemps finds it anyway.
	Temp string
	// Visible is true once the name was published (linked or renamed),
	// even when Publish then failed to fsync the directory: readers may
	// already see the file, so a caller must not undo what it depends on
	// (it is only not known to survive a crash).
	Visible bool
}

// Publisher publishes whole files crash-safely (package doc). Local is the
// implementation on a vfs.FS.
type Publisher interface {
	// Publish writes the bytes write produces to dir/name with the
	// guarantees of o.Mode. write must not retain w.
	Publish(dir, name string, o Options, write func(w io.Writer) error) (Result, error)
}

// Local publishes through a pebble vfs.FS (vfs.Default for the local disk,
// vfs.NewMem or errorfs in tests).
type Local struct {
	FS vfs.FS
}

var _ Publisher = Local{}

// For returns the Publisher for files of fs: fs itself when it implements
// Publisher (a store that publishes natively, such as an object store's
// conditional PUT), else Local{FS: fs}. Every writer gets its Publisher
// here, so a new kind of store changes no writer.
func For(fs vfs.FS) Publisher {
	if p, ok := fs.(Publisher); ok {
		return p
	}
	return Local{FS: fs}
}

// Bytes publishes data as dir/name through p.
func Bytes(p Publisher, dir, name string, o Options, data []byte) (Result, error) {
	return p.Publish(dir, name, o, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// tempName returns a fresh temp file name for name (package doc).
func tempName(name string) string {
	var b [8]byte
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return "." + name + "." + hex.EncodeToString(b[:]) + tempSuffix
}

// Publish implements Publisher.
func (l Local) Publish(dir, name string, o Options, write func(w io.Writer) error) (res Result, err error) {
	fs := l.FS
	final := fs.PathJoin(dir, name)
	if o.Mode == NoOverwrite {
		if _, err := fs.Stat(final); err == nil {
			return res, fmt.Errorf("publish %s: %w", final, ErrExists)
		} else if !errors.Is(err, os.ErrNotExist) {
			// Not knowing is not "absent": a failed stat must not lead to a write.
			return res, fmt.Errorf("stat %s: %w", final, err)
		}
	}
	waitErr := make(chan error, 1)
	if o.Wait != nil {
		go func() { waitErr <- o.Wait() }()
	} else {
		waitErr <- nil
	}
	tmp := fs.PathJoin(dir, tempName(name))
	// fail removes the temp file and reports it if it stays.
	fail := func(err error) (Result, error) {
		r := Result{}
		if rmErr := fs.Remove(tmp); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			r.Temp = tmp
		}
		return r, err
	}
	var size int64
	var werr error
	anon := anonFor(fs, dir)
	if anon != nil {
		size, werr = writeAnon(anon, tmp, write)
	} else {
		size, werr = writeTemp(fs, tmp, write)
	}
	if err := errors.Join(werr, <-waitErr); err != nil {
		return fail(err)
	}
	switch o.Mode {
	case Replace:
		if err := fs.Rename(tmp, final); err != nil {
			return fail(fmt.Errorf("rename %s to %s: %w", tmp, final, err))
		}
		res.Visible = true
		if anon != nil {
			anonStep("published")
		}
	default:
		if err := fs.Link(tmp, final); err != nil {
			if errors.Is(err, os.ErrExist) {
				return fail(fmt.Errorf("publish %s: %w", final, ErrExists))
			}
			return fail(fmt.Errorf("publish %s: %w", final, err))
		}
		res.Visible = true
		if anon != nil {
			anonStep("published")
		}
		// The name is published: a temp name that stays is garbage for
		// RemoveTemps, not a failure.
		if rmErr := fs.Remove(tmp); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			res.Temp = tmp
		}
	}
	res.Size = size
	res, err = syncPublished(fs, dir, o, res)
	if anon != nil && err == nil {
		anonStep("done")
	}
	return res, err
}

// anonFor returns an anonymous file to publish to dir through (package doc,
// Anonymous temp files): on the local disk, when its pool has one.
func anonFor(fs vfs.FS, dir string) *os.File {
	if fs != vfs.Default {
		return nil
	}
	return anonFiles.take(dir)
}

// syncPublished fsyncs dir, where res's name was just published, unless
// o.NoDirSync.
func syncPublished(fs vfs.FS, dir string, o Options, res Result) (Result, error) {
	if !o.NoDirSync {
		if err := SyncDir(fs, dir); err != nil {
			// The name may or may not survive a crash: not durable.
			return Result{Temp: res.Temp, Visible: true}, err
		}
	}
	return res, nil
}

// writeTemp creates tmp and streams write's bytes into it, fsyncs and closes it.
func writeTemp(fs vfs.FS, tmp string, write func(w io.Writer) error) (int64, error) {
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return 0, fmt.Errorf("create %s: %w", tmp, err)
	}
	bw := getBuffer(f)
	defer putBuffer(bw)
	if err := write(bw); err != nil {
		return 0, errors.Join(spaceError(tmp, bw, err), f.Close())
	}
	if err := bw.flush(); err != nil {
		return 0, errors.Join(spaceError(tmp, bw, err), f.Close())
	}
	if err := f.Sync(); err != nil {
		return 0, errors.Join(spaceError(tmp, bw, fmt.Errorf("sync: %w", err)), f.Close())
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("close %s: %w", tmp, err)
	}
	return bw.n, nil
}

// SpaceError is a write that failed for want of space (ENOSPC, EDQUOT): it
// says how many bytes the file still had to write when it failed, a lower
// bound of the space to free.
type SpaceError struct {
	Path    string
	Written int64 // bytes the file system accepted
	Needed  int64 // bytes buffered but not accepted
	Err     error
}

func (e *SpaceError) Error() string {
	return fmt.Sprintf("write %s: %d bytes written, at least %d more needed: %v", e.Path, e.Written, e.Needed, e.Err)
}

// Unwrap returns the cause.
func (e *SpaceError) Unwrap() error { return e.Err }

// NeededBytes is the lower bound of the space to free.
func (e *SpaceError) NeededBytes() int64 { return e.Needed }

// spaceError wraps a failed write of tmp: a SpaceError when the file system
// is full, else the error with the path.
func spaceError(tmp string, bw *buffer, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return &SpaceError{Path: tmp, Written: bw.n, Needed: bw.failed, Err: err}
	}
	return fmt.Errorf("write %s: %w", tmp, err)
}

// bufferSize is the write buffer of a publish: large enough that a big state
// file is written in few calls, small enough to pool.
const bufferSize = 256 << 10

// buffer is a write buffer that always copies: unlike bufio.Writer it never
// hands the caller's slice to the file (a vfs.File may modify what it is
// given).
type buffer struct {
	f      io.Writer
	buf    []byte
	n      int64 // bytes written to f
	failed int64 // bytes of the write that failed, not accepted by f
	err    error
}

func (b *buffer) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		if b.err != nil {
			return written, b.err
		}
		if len(b.buf) == cap(b.buf) {
			if err := b.flush(); err != nil {
				return written, err
			}
		}
		c := copy(b.buf[len(b.buf):cap(b.buf)], p)
		b.buf = b.buf[:len(b.buf)+c]
		p = p[c:]
		written += c
	}
	return written, nil
}

func (b *buffer) flush() error {
	if b.err != nil {
		return b.err
	}
	if len(b.buf) == 0 {
		return nil
	}
	n, err := b.f.Write(b.buf)
	b.n += int64(n)
	if err != nil {
		b.failed = int64(len(b.buf) - n)
	}
	if err == nil && n < len(b.buf) {
		err = io.ErrShortWrite
	}
	b.buf = b.buf[:0]
	b.err = err
	return err
}

var bufferPool = sync.Pool{New: func() any { return &buffer{buf: make([]byte, 0, bufferSize)} }}

func getBuffer(f io.Writer) *buffer {
	b := bufferPool.Get().(*buffer)
	b.f, b.buf, b.n, b.failed, b.err = f, b.buf[:0], 0, 0, nil
	return b
}

func putBuffer(b *buffer) {
	b.f = nil
	bufferPool.Put(b)
}
