package s3serve

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/ethstream/ethstream/storage/internal/rawsock"
	"golang.org/x/sys/unix"
)

// connLoop reports whether the connection loop serves here: it needs
// openat2 and sendfile at an offset.
const connLoop = true

// serveFast answers req on c as serveObject would through net/http, if it
// would: served is false, with nothing written, for a request it leaves to
// net/http. keep is false when the connection must end (a failed write, a
// body cut short). buf is scratch memory, returned for the next call.
func (s *Server) serveFast(c *rawsock.Conn, req connRequest, buf []byte) (served, keep bool, _ []byte) {
	if c == nil {
		return false, true, buf
	}
	bucket, key, ok := strings.Cut(strings.TrimPrefix(req.path, "/"), "/")
	if !ok || key == "" || !filepath.IsLocal(filepath.FromSlash(bucket+"/"+key)) || !plainQuery(req.query) {
		return false, true, buf
	}
	rr, ok := plainRange(req.rng)
	if !ok {
		return false, true, buf
	}
	b := s.backend
	p, err := b.objectPath(bucket, key)
	if err != nil || b.rootDir == nil {
		return false, true, buf
	}
	rel, ok := strings.CutPrefix(p, b.root+string(filepath.Separator))
	if !ok {
		return false, true, buf
	}
	// A file of the root's local file system whose path the kernel
	// resolves from its caches alone is opened, stat'ed and closed with raw
	// system calls (rawsock's reason), and its body read so when its pages
	// are all cached (cachestat). Any other is read as before.
	var f file
	if b.localRoot {
		f, ok, buf = openCached(b.rootDir, rel, buf)
	}
	if !ok {
		if f.fd, ok = openBeneathFD(b.rootDir, rel); !ok {
			return false, true, buf // net/http's path confines it the slow way
		}
	}
	defer f.close()
	st, err := f.stat()
	if err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false, true, buf
	}
	size, mod := st.Size, time.Unix(st.Mtim.Unix())
	rng, err := rr.Range(size)
	if err != nil {
		return false, true, buf
	}
	start, n := int64(0), size
	if rng != nil {
		start, n = rng.Start, rng.Length
	}
	s.requests.Add(1)
	s.loopServed.Add(1)
	// net/http sniffs the Content-Type from the body's first 512 bytes
	// and sends them with the header: so does the loop.
	var sniff [sniffLen]byte
	k := 0
	if !req.head && n > 0 {
		f.raw = f.cached && f.pagesCached(start, n)
		k, err = f.pread(sniff[:min(n, sniffLen)], start)
		if err != nil {
			k = 0
		}
	}
	status := http.StatusOK
	if rng != nil {
		status = http.StatusPartialContent
	}
	w := append(buf[:0], "HTTP/1.1 "...)
	w = strconv.AppendInt(w, int64(status), 10)
	w = append(w, ' ')
	w = append(w, http.StatusText(status)...)
	w = append(w, "\r\nAccept-Ranges: bytes\r\nAccess-Control-Allow-Origin: *\r\nContent-Length: "...)
	w = strconv.AppendInt(w, n, 10)
	if rng != nil {
		w = append(w, "\r\nContent-Range: bytes "...)
		w = strconv.AppendInt(w, start, 10)
		w = append(w, '-')
		w = strconv.AppendInt(w, start+n-1, 10)
		w = append(w, '/')
		w = strconv.AppendInt(w, size, 10)
	}
	w = append(w, "\r\nEtag: \""...)
	w = appendETag(w, key, size, mod)
	w = append(w, "\"\r\nLast-Modified: "...)
	w = mod.UTC().AppendFormat(w, http.TimeFormat)
	// net/http's order: the handler's headers sorted, then the Date and
	// the sniffed Content-Type it adds.
	w = append(w, "\r\nServer: AmazonS3\r\nDate: "...)
	w = time.Now().UTC().AppendFormat(w, http.TimeFormat)
	if k > 0 {
		w = append(w, "\r\nContent-Type: "...)
		w = append(w, http.DetectContentType(sniff[:k])...)
	}
	w = append(w, "\r\n\r\n"...)
	w = append(w, sniff[:k]...)
	if _, err := c.Write(w); err != nil {
		return true, false, w
	}
	if req.head || n == 0 {
		return true, true, w
	}
	if int64(k) < min(n, sniffLen) {
		return true, false, w // the file shrank: a short body, as net/http's
	}
	return true, f.sendfile(c.RawConn(), start+int64(k), n-int64(k)), w
}

// sniffLen is net/http's Content-Type sniffing length.
const sniffLen = 512

// file is an object's descriptor as serveFast reads it.
type file struct {
	fd     int
	cached bool // opened by openCached: fstat and close are raw
	raw    bool // its pages to send are cached too: pread and sendfile are raw
}

// localFS reports whether dir lies on a file system whose open, fstat and
// reads of cached pages do not wait on a network or a user-space server
// (not NFS, SMB, FUSE, Ceph, 9P, AFS, ...): openCached's raw calls are
// for it alone.
func localFS(dir *os.File) bool {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(dir.Fd()), &st); err != nil {
		return false
	}
	switch uint32(st.Type) {
	case unix.NFS_SUPER_MAGIC, unix.SMB_SUPER_MAGIC, unix.SMB2_SUPER_MAGIC, unix.CIFS_SUPER_MAGIC,
		unix.FUSE_SUPER_MAGIC, unix.CEPH_SUPER_MAGIC, unix.V9FS_MAGIC, unix.AFS_SUPER_MAGIC,
		unix.AFS_FS_MAGIC, unix.CODA_SUPER_MAGIC, unix.NCP_SUPER_MAGIC, unix.OCFS2_SUPER_MAGIC:
		return false
	}
	return true
}

// resolveCached is openat2's RESOLVE_CACHED (Linux 5.12; an older kernel
// refuses it, and every file is opened the other way).
const resolveCached = 0x20

// openCached opens rel beneath dir as openBeneathFD does, with
// RESOLVE_CACHED and RESOLVE_NO_XDEV: ok is false, without blocking, where a
// component of the path is not in the kernel's caches, or the path leaves
// dir's file system (a mount beneath it), or for anything openBeneathFD
// would refuse. buf is scratch memory for the path, returned for the next
// use.
func openCached(dir *os.File, rel string, buf []byte) (f file, ok bool, _ []byte) {
	f.fd = -1
	if strings.IndexByte(rel, 0) >= 0 {
		return f, false, buf
	}
	p := append(append(buf[:0], rel...), 0)
	buf = p[:0]
	rc, err := dir.SyscallConn()
	if err != nil {
		return f, false, buf
	}
	// O_NONBLOCK: a FIFO planted under the root opens at once (and is
	// then refused, not being a regular file) instead of holding the P
	// until a writer comes; a regular file's reads ignore it.
	how := beneathHow
	how.Flags |= unix.O_NONBLOCK
	how.Resolve |= unix.RESOLVE_NO_XDEV | resolveCached
	var errno syscall.Errno
	if err := rc.Control(func(dirfd uintptr) {
		var r uintptr
		r, _, errno = unix.RawSyscall6(unix.SYS_OPENAT2, dirfd, uintptr(unsafe.Pointer(&p[0])),
			uintptr(unsafe.Pointer(&how)), unsafe.Sizeof(how), 0, 0)
		f.fd = int(r)
	}); err != nil || errno != 0 {
		return file{fd: -1}, false, buf
	}
	f.cached = true
	return f, true, buf
}

func (f *file) stat() (st unix.Stat_t, err error) {
	if !f.cached {
		err = unix.Fstat(f.fd, &st)
		return st, err
	}
	if _, _, e := unix.RawSyscall(unix.SYS_FSTAT, uintptr(f.fd), uintptr(unsafe.Pointer(&st)), 0); e != 0 {
		return st, e
	}
	return st, nil
}

func (f *file) close() {
	if f.cached {
		unix.RawSyscall(unix.SYS_CLOSE, uintptr(f.fd), 0, 0)
		return
	}
	unix.Close(f.fd)
}

// pagesCached reports whether the n bytes at off are all in the page cache
// (cachestat(2); false before Linux 6.5), so that reading them cannot
// wait for the disk.
func (f *file) pagesCached(off, n int64) bool {
	page := int64(os.Getpagesize())
	first, end := off/page, (off+n+page-1)/page
	r := unix.CachestatRange{Off: uint64(first * page), Len: uint64((end - first) * page)}
	var cs unix.Cachestat_t
	_, _, e := unix.RawSyscall6(unix.SYS_CACHESTAT, uintptr(f.fd), uintptr(unsafe.Pointer(&r)), uintptr(unsafe.Pointer(&cs)), 0, 0, 0)
	return e == 0 && int64(cs.Cache) >= end-first
}

func (f *file) pread(p []byte, off int64) (int, error) {
	if !f.raw {
		return unix.Pread(f.fd, p, off)
	}
	for {
		n, _, e := unix.RawSyscall6(unix.SYS_PREAD64, uintptr(f.fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), uintptr(off), 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(n), nil
	}
}

// sendfile sends n bytes of f from off to the socket of rc, waiting for
// room as net/http's sendfile does; false when they did not all go.
func (f *file) sendfile(rc syscall.RawConn, off, n int64) bool {
	var serr error
	err := rc.Write(func(sock uintptr) bool {
		for n > 0 {
			var m int
			var err error
			if f.raw {
				r, _, e := unix.RawSyscall6(unix.SYS_SENDFILE, sock, uintptr(f.fd), uintptr(unsafe.Pointer(&off)), uintptr(min(n, 1<<30)), 0, 0)
				if e != 0 {
					err = e
				} else {
					m = int(r)
				}
			} else {
				m, err = unix.Sendfile(int(sock), f.fd, &off, int(min(n, 1<<30)))
			}
			if m > 0 {
				n -= int64(m)
			}
			switch {
			case errors.Is(err, unix.EAGAIN):
				return false // wait for room
			case errors.Is(err, unix.EINTR):
				continue
			case err != nil:
				serr = err
				return true
			case m == 0:
				serr = errors.New("sendfile: the file ended early")
				return true
			}
		}
		return true
	})
	return err == nil && serr == nil && n == 0
}
