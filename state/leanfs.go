package state

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// leanFS is the file system of the cache's Pebble instances: it leaves out
// the files Pebble creates that this cache never reads back, because each
// one is a file create, the costly step on the ext4 this runs on (issue 43:
// opening the 200 partitions of a seed backfill created 6 files each and
// opened its directory 9 times: 0.24-0.43 CPU-s of the run in profiles).
// What stays on disk is what a reopened instance needs: the MANIFEST and its
// marker, the format-version marker and the sstables. What it leaves out:
//
//   - the WAL (NNNNNN.log): Pebble creates one for every memtable even with
//     DisableWAL and writes nothing to it but a trailer; the cache never
//     replays one (Close flushes every written partition before the marker
//     vouches for it). Its writes go nowhere.
//   - the OPTIONS file (temporary.NNNNNN.dbtmp renamed to OPTIONS-NNNNNN):
//     Pebble reads it on open only to check it when present.
//   - the LOCK file: one process uses a generation (the marker of
//     LocalDir is removed by the one Open that trusts it, and Open deletes
//     every other generation, so another process never opens one in use);
//     within the process the lock is kept, in memory, so that opening one
//     partition twice still fails as it did with the file.
//   - directory handles: Pebble opens a directory only to fsync it, and the
//     cache's syncs are no-ops (noSyncFS).
//
// A cache written with these files (by earlier builds) opens as before:
// Pebble deletes their WALs as obsolete and checks their OPTIONS, and such a
// cache opened by an earlier build misses nothing it needs (both files are
// optional to Pebble).
type leanFS struct{ vfs.FS }

// leanCache is off in tests that write a cache as earlier builds did.
var leanCache = true

func (fs leanFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if b := fs.PathBase(name); isWALName(b) || isOptionsTempName(b) {
		return &voidFile{name: b}, nil
	}
	return fs.FS.Create(name, c)
}

// ReuseForWrite recycles a WAL: the old one was never on disk.
func (fs leanFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if isWALName(fs.PathBase(newname)) && isWALName(fs.PathBase(oldname)) {
		if err := fs.FS.Remove(oldname); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		return &voidFile{name: fs.PathBase(newname)}, nil
	}
	return fs.FS.ReuseForWrite(oldname, newname, c)
}

// Rename publishes the OPTIONS file: it was never written.
func (fs leanFS) Rename(oldname, newname string) error {
	if isOptionsTempName(fs.PathBase(oldname)) && strings.HasPrefix(fs.PathBase(newname), "OPTIONS-") {
		return nil
	}
	return fs.FS.Rename(oldname, newname)
}

func (fs leanFS) OpenDir(name string) (vfs.File, error) {
	return &voidFile{name: fs.PathBase(name), dir: true}, nil
}

// heldLocks are the LOCK paths of the instances open in this process.
var heldLocks = struct {
	sync.Mutex
	m map[string]bool
}{m: map[string]bool{}}

func (fs leanFS) Lock(name string) (io.Closer, error) {
	heldLocks.Lock()
	defer heldLocks.Unlock()
	if heldLocks.m[name] {
		return nil, errors.New("lock held by current process: " + name)
	}
	heldLocks.m[name] = true
	return memLock(name), nil
}

func (fs leanFS) Unwrap() vfs.FS { return fs.FS }

type memLock string

func (l memLock) Close() error {
	heldLocks.Lock()
	defer heldLocks.Unlock()
	if !heldLocks.m[string(l)] {
		return errors.New("lock not held: " + string(l))
	}
	delete(heldLocks.m, string(l))
	return nil
}

// isWALName reports whether b is a Pebble WAL file name (NNNNNN.log).
func isWALName(b string) bool {
	n, ok := strings.CutSuffix(b, ".log")
	return ok && isDigits(n)
}

// isOptionsTempName reports whether b is the temp name Pebble writes its
// OPTIONS file under (temporary.NNNNNN.dbtmp).
func isOptionsTempName(b string) bool {
	n, ok := strings.CutPrefix(b, "temporary.")
	if !ok {
		return false
	}
	n, ok = strings.CutSuffix(n, ".dbtmp")
	return ok && isDigits(n)
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// voidFile is a file that is not on disk: writes and syncs succeed and are
// dropped, reads find nothing.
type voidFile struct {
	name string
	dir  bool
	size int64
}

func (f *voidFile) Close() error                      { return nil }
func (f *voidFile) Read([]byte) (int, error)          { return 0, io.EOF }
func (f *voidFile) ReadAt([]byte, int64) (int, error) { return 0, io.EOF }
func (f *voidFile) Write(p []byte) (int, error) {
	f.size += int64(len(p))
	return len(p), nil
}
func (f *voidFile) WriteAt(p []byte, off int64) (int, error) {
	f.size = max(f.size, off+int64(len(p)))
	return len(p), nil
}
func (f *voidFile) Preallocate(int64, int64) error { return nil }
func (f *voidFile) Stat() (vfs.FileInfo, error)    { return voidInfo{f}, nil }
func (f *voidFile) Sync() error                    { return nil }
func (f *voidFile) SyncTo(int64) (bool, error)     { return true, nil }
func (f *voidFile) SyncData() error                { return nil }
func (f *voidFile) Prefetch(int64, int64) error    { return nil }
func (f *voidFile) Fd() uintptr                    { return vfs.InvalidFd }

type voidInfo struct{ f *voidFile }

func (i voidInfo) Name() string { return i.f.name }
func (i voidInfo) Size() int64  { return i.f.size }
func (i voidInfo) Mode() fs.FileMode {
	if i.f.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
func (i voidInfo) ModTime() time.Time     { return time.Time{} }
func (i voidInfo) IsDir() bool            { return i.f.dir }
func (i voidInfo) Sys() any               { return nil }
func (i voidInfo) DeviceID() vfs.DeviceID { return vfs.DeviceID{} }
