package streamtest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// FaultFS is a vfs.FS over a crashable in-memory FS, with faults armed as
// text in pebble's errorfs DSL (errorfs.ParseDSL), for instance
//
//	(ErrInjected (And Writes (PathMatch "offsets/*")))
//	(ErrInjected (And (PathMatch "state/0/*") (OnIndex 2)))
//
// PathMatch patterns match the operation's path relative to Root (shell
// patterns, where * does not cross a /), so scripts name files as the
// checkpoint layout does. Crash replaces the FS by what a machine crash would
// leave (vfs.MemFS.CrashClone: unsynced data and unsynced directory entries
// are lost) and disarms the fault. The methods are safe for concurrent use;
// the vfs.FS it returns is the one to hand the code under test, and stays
// valid across Crash.
type FaultFS struct {
	// Root is the directory paths are made relative to for PathMatch.
	Root string

	mu       sync.Mutex
	mem      *vfs.MemFS
	inj      errorfs.Injector
	text     string
	injected int
	ops      int
	fs       vfs.FS
}

// NewFaultFS returns an empty fault FS whose scripts name paths under root.
func NewFaultFS(root string) *FaultFS { return NewFaultFSOver(root, vfs.NewCrashableMem()) }

// NewFaultFSOver returns a fault FS over mem, a crashable MemFS the test
// has already filled: a fault loop then starts each attempt from the same
// synced state (a CrashClone of it).
func NewFaultFSOver(root string, mem *vfs.MemFS) *FaultFS {
	f := &FaultFS{Root: root, mem: mem}
	f.fs = errorfs.Wrap(&memSwitch{f: f}, f)
	return f
}

// FS is the file system for the code under test.
func (f *FaultFS) FS() vfs.FS { return f.fs }

// Mem is the current in-memory FS beneath, without faults: for a test's
// own reads and writes.
func (f *FaultFS) Mem() *vfs.MemFS {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mem
}

// Arm parses dsl and injects its faults from now on; "" or "off" disarms.
// It returns the injector as errorfs prints it.
func (f *FaultFS) Arm(dsl string) (string, error) {
	var inj errorfs.Injector
	if dsl = strings.TrimSpace(dsl); dsl != "" && dsl != "off" {
		var err error
		if inj, err = errorfs.ParseDSL(dsl); err != nil {
			return "", fmt.Errorf("fault %q: %w", dsl, err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inj, f.injected = inj, 0
	if inj == nil {
		return "off", nil
	}
	f.text = inj.String()
	return f.text, nil
}

// Injected returns the number of faults injected since the last Arm.
func (f *FaultFS) Injected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected
}

// Ops returns the number of file operations so far (faulted or not): a
// fault loop's bound for OnIndex.
func (f *FaultFS) Ops() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ops
}

// Crash replaces the FS by a crash clone of it and disarms the fault.
func (f *FaultFS) Crash() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mem = f.mem.CrashClone(vfs.CrashCloneCfg{})
	f.inj = nil
}

// MaybeError implements errorfs.Injector with the armed fault.
func (f *FaultFS) MaybeError(op errorfs.Op) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops++
	if f.inj == nil {
		return nil
	}
	if rel, ok := strings.CutPrefix(op.Path, strings.TrimSuffix(f.Root, "/")+"/"); ok {
		op.Path = rel
	}
	err := f.inj.MaybeError(op)
	if err != nil {
		f.injected++
	}
	return err
}

// String renders the armed fault.
func (f *FaultFS) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inj == nil {
		return "off"
	}
	return f.text
}

// memSwitch forwards to the FaultFS's current MemFS, so that the FS handed
// out survives Crash.
type memSwitch struct{ f *FaultFS }

var _ vfs.FS = (*memSwitch)(nil)

func (m *memSwitch) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return m.f.Mem().Create(name, c)
}
func (m *memSwitch) Link(oldname, newname string) error { return m.f.Mem().Link(oldname, newname) }
func (m *memSwitch) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return m.f.Mem().Open(name, opts...)
}
func (m *memSwitch) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return m.f.Mem().OpenReadWrite(name, c, opts...)
}
func (m *memSwitch) OpenDir(name string) (vfs.File, error) { return m.f.Mem().OpenDir(name) }
func (m *memSwitch) Remove(name string) error              { return m.f.Mem().Remove(name) }
func (m *memSwitch) RemoveAll(name string) error           { return m.f.Mem().RemoveAll(name) }
func (m *memSwitch) Rename(oldname, newname string) error  { return m.f.Mem().Rename(oldname, newname) }
func (m *memSwitch) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return m.f.Mem().ReuseForWrite(oldname, newname, c)
}
func (m *memSwitch) MkdirAll(dir string, perm os.FileMode) error {
	return m.f.Mem().MkdirAll(dir, perm)
}
func (m *memSwitch) Lock(name string) (io.Closer, error)    { return m.f.Mem().Lock(name) }
func (m *memSwitch) List(dir string) ([]string, error)      { return m.f.Mem().List(dir) }
func (m *memSwitch) Stat(name string) (vfs.FileInfo, error) { return m.f.Mem().Stat(name) }
func (m *memSwitch) PathBase(path string) string            { return m.f.Mem().PathBase(path) }
func (m *memSwitch) PathJoin(elem ...string) string         { return m.f.Mem().PathJoin(elem...) }
func (m *memSwitch) PathDir(path string) string             { return m.f.Mem().PathDir(path) }
func (m *memSwitch) GetDiskUsage(path string) (vfs.DiskUsage, error) {
	return m.f.Mem().GetDiskUsage(path)
}
func (m *memSwitch) Unwrap() vfs.FS { return nil }

// MkdirAllDurable creates dir and its parents and syncs each of them and
// the root, as the engine makes a checkpoint directory durable before a
// layer writes into it: a test that sets up a layer's directory itself uses
// it so that a Crash does not lose the directory the layer assumed durable.
func MkdirAllDurable(fs vfs.FS, dir string) error {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for d := dir; ; d = fs.PathDir(d) {
		f, err := fs.OpenDir(d)
		if err != nil {
			return err
		}
		if err := errors.Join(f.Sync(), f.Close()); err != nil {
			return fmt.Errorf("sync %s: %w", d, err)
		}
		if p := fs.PathDir(d); p == d {
			return nil
		}
	}
}
