//go:build linux

package durable

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// On the local disk a NoOverwrite publish writes into an anonymous file,
// opened ahead of time, instead of creating its temp file (package doc,
// Anonymous temp files). Why: creating a file is the costly step of a small
// publish on the ext4 this runs on (no journal: the inode allocator skips
// every inode freed in the last seconds, 230-900 µs of kernel CPU a create,
// issue 43), and a live batch publishes six small files one after another.
// An anonymous file (open(2) with O_TMPFILE) costs the same to create, but a
// background goroutine creates it between publishes, off the batch's path.
//
// Once written, the anonymous file is linked (linkat(2)) to the temp name
// the created file would have had, and the publish goes on as with a
// created one: fsync, link or rename to the final name, directory fsync. A
// crash before that link leaves nothing in any directory (the kernel frees
// the inode). It links through /proc/self/fd (AT_EMPTY_PATH would need
// CAP_DAC_READ_SEARCH).

// anonPoolSize is how many anonymous files are kept open per file system:
// more than a live batch publishes (six), so a batch never waits for one.
const anonPoolSize = 8

// anonPool holds open anonymous files by device. It is safe for concurrent
// use.
type anonPool struct {
	mu    sync.Mutex
	byDev map[uint64]*anonDev
	// fillHook, if set (a test's own pool), runs before a fill opens a
	// file in dir.
	fillHook func(dir string)
}

// anonDev is one file system's pool.
type anonDev struct {
	files   []*os.File
	dir     string // where the next fill opens its files: the last dir published to
	filling bool
	off     bool // O_TMPFILE or its link is not supported here: never again
}

// anonFiles is the local disk's pool; tests turn anonEnabled off to run the
// named temp file path on the real disk.
var (
	anonFiles   = &anonPool{byDev: map[uint64]*anonDev{}}
	anonEnabled = procFDLinkable()
)

// anonHook, if set (tests), runs at each step of a publish through an
// anonymous file: "written", "named" (the temp name), "synced",
// "published" (the final name), "done".
var anonHook func(step string)

// procFDLinkable reports whether /proc/self/fd names the open files, which
// linkat needs.
func procFDLinkable() bool {
	_, err := os.Stat("/proc/self/fd")
	return err == nil
}

// take returns an open anonymous file on dir's file system, or nil (the
// caller creates a named temp file): the first publish to a file system
// finds none, and each take starts a refill.
func (p *anonPool) take(dir string) *os.File {
	if !anonEnabled {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return nil
	}
	dev := uint64(st.Dev)
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.byDev[dev]
	if d == nil {
		d = &anonDev{}
		p.byDev[dev] = d
	}
	if d.off {
		return nil
	}
	d.dir = dir
	var f *os.File
	if n := len(d.files); n > 0 {
		f, d.files = d.files[n-1], d.files[:n-1]
	}
	if !d.filling && len(d.files) < anonPoolSize {
		d.filling = true
		go p.fill(dev, d)
	}
	return f
}

// fill opens anonymous files in d's last dir until d is full. A dir that
// is gone or on another device by now ends the fill (the next take starts
// one in its own dir), unless a take named another dir meanwhile: the fill
// goes on there, since that take started none (d was filling), and the
// pool would otherwise stay short until a later take (a test priming the
// pool for its dir, while the fill for the previous test's removed dir was
// opening, waited 30 s for it in CI). A file system that refuses O_TMPFILE
// turns d off.
func (p *anonPool) fill(dev uint64, d *anonDev) {
	for {
		p.mu.Lock()
		if len(d.files) >= anonPoolSize {
			d.filling = false
			p.mu.Unlock()
			return
		}
		dir := d.dir
		p.mu.Unlock()
		if p.fillHook != nil {
			p.fillHook(dir)
		}
		f, err := openAnon(dir, dev)
		p.mu.Lock()
		if err != nil {
			if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL) {
				d.off = true
			} else if d.dir != dir {
				p.mu.Unlock()
				continue
			}
			d.filling = false
			p.mu.Unlock()
			return
		}
		d.files = append(d.files, f)
		p.mu.Unlock()
	}
}

// errOtherDevice ends a fill whose dir moved to another file system.
var errOtherDevice = errors.New("directory is on another device")

// openAnon opens an anonymous file in dir, which must be on device dev.
func openAnon(dir string, dev uint64) (*os.File, error) {
	fd, err := unix.Open(dir, unix.O_RDWR|unix.O_TMPFILE|unix.O_CLOEXEC, 0o666)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || uint64(st.Dev) != dev {
		_ = unix.Close(fd)
		if err == nil {
			err = errOtherDevice
		}
		return nil, err
	}
	return os.NewFile(uintptr(fd), dir), nil
}

// writeAnon streams write's bytes into f, an anonymous file of tmp's file
// system, links it to the temp name tmp, fsyncs it and closes it: what
// writeTemp does with a file it creates. The name comes before the fsync so
// that the fsync writes the inode with its link (a journal-less ext4 syncs
// no inode but the file's own: linked after, the file could come back from
// a power loss as an entry to an inode of no links).
func writeAnon(f *os.File, tmp string, write func(w io.Writer) error) (int64, error) {
	bw := getBuffer(f)
	defer putBuffer(bw)
	if err := write(bw); err != nil {
		return 0, errors.Join(spaceError(tmp, bw, err), f.Close())
	}
	if err := bw.flush(); err != nil {
		return 0, errors.Join(spaceError(tmp, bw, err), f.Close())
	}
	anonStep("written")
	proc := "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
	if err := unix.Linkat(unix.AT_FDCWD, proc, unix.AT_FDCWD, tmp, unix.AT_SYMLINK_FOLLOW); err != nil {
		return 0, errors.Join(&os.LinkError{Op: "link", Old: proc, New: tmp, Err: err}, f.Close())
	}
	anonStep("named")
	if err := f.Sync(); err != nil {
		return 0, errors.Join(spaceError(tmp, bw, fmt.Errorf("sync: %w", err)), f.Close())
	}
	anonStep("synced")
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("close %s: %w", tmp, err)
	}
	return bw.n, nil
}

// anonStep runs anonHook, if set.
func anonStep(s string) {
	if anonHook != nil {
		anonHook(s)
	}
}
