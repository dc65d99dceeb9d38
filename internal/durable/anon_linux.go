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
// The anonymous file has no name until linkat(2) gives it its final one,
// after its bytes are fsynced: a crash before leaves nothing in any
// directory (the kernel frees the inode), so the path needs no temp name
// and no clean-up. linkat fails if the name exists, the put-if-absent of
// the named temp's link(2). It links through /proc/self/fd (AT_EMPTY_PATH
// would need CAP_DAC_READ_SEARCH).

// anonPoolSize is how many anonymous files are kept open per file system:
// more than a live batch publishes (six), so a batch never waits for one.
const anonPoolSize = 8

// anonPool holds open anonymous files by device. It is safe for concurrent
// use.
type anonPool struct {
	mu    sync.Mutex
	byDev map[uint64]*anonDev
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

// anonHook, if set (tests), runs at each step of an anonymous publish:
// "written", "synced", "linked", "closed".
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
// one in its own dir); a file system that refuses O_TMPFILE turns d off.
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
		f, err := openAnon(dir, dev)
		p.mu.Lock()
		if err != nil {
			d.filling = false
			if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL) {
				d.off = true
			}
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

// publishAnon streams write's bytes into f, an anonymous file of final's
// file system, fsyncs it, waits for waitErr, and links it to final (put-if-
// absent). f is closed. visible says final was linked.
func publishAnon(f *os.File, final string, write func(w io.Writer) error, waitErr <-chan error) (size int64, visible bool, err error) {
	step := func(s string) {
		if anonHook != nil {
			anonHook(s)
		}
	}
	bw := getBuffer(f)
	defer putBuffer(bw)
	werr := write(bw)
	if werr == nil {
		werr = bw.flush()
	}
	if werr != nil {
		werr = spaceError(final, bw, werr)
	} else {
		step("written")
		if werr = f.Sync(); werr != nil {
			werr = spaceError(final, bw, fmt.Errorf("sync: %w", werr))
		} else {
			step("synced")
		}
	}
	if err := errors.Join(werr, <-waitErr); err != nil {
		return 0, false, errors.Join(err, f.Close())
	}
	proc := "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
	if err := unix.Linkat(unix.AT_FDCWD, proc, unix.AT_FDCWD, final, unix.AT_SYMLINK_FOLLOW); err != nil {
		cerr := f.Close()
		if errors.Is(err, unix.EEXIST) {
			return 0, false, errors.Join(fmt.Errorf("publish %s: %w", final, ErrExists), cerr)
		}
		return 0, false, errors.Join(fmt.Errorf("publish %s: %w", final, &os.LinkError{Op: "link", Old: proc, New: final, Err: err}), cerr)
	}
	step("linked")
	if err := f.Close(); err != nil {
		// The bytes are fsynced and the name linked: published; only the
		// descriptor's release failed.
		return 0, true, fmt.Errorf("close %s: %w", final, err)
	}
	step("closed")
	return bw.n, true, nil
}
