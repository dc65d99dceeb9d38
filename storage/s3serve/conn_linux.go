package s3serve

import (
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// connLoop reports whether the connection loop serves here: it needs
// openat2 and sendfile at an offset.
const connLoop = true

// serveFast answers req on c as serveObject would through net/http, if it
// would: served is false, with nothing written, for a request it leaves to
// net/http. keep is false when the connection must end (a failed write, a
// body cut short). buf is scratch memory, returned for the next call.
func (s *Server) serveFast(c net.Conn, req connRequest, buf []byte) (served, keep bool, _ []byte) {
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
	fd, ok := openBeneathFD(b.rootDir, rel)
	if !ok {
		return false, true, buf // net/http's path confines it the slow way
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
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
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return false, true, buf
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return false, true, buf
	}
	s.requests.Add(1)
	s.loopServed.Add(1)
	// net/http sniffs the Content-Type from the body's first 512 bytes
	// and sends them with the header: so does the loop.
	var sniff [sniffLen]byte
	k := 0
	if !req.head && n > 0 {
		k, err = unix.Pread(fd, sniff[:min(n, sniffLen)], start)
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
	return true, sendfileAt(rc, fd, start+int64(k), n-int64(k)), w
}

// sniffLen is net/http's Content-Type sniffing length.
const sniffLen = 512

// sendfileAt sends n bytes of fd from off to the socket of rc, waiting
// for room as net/http's sendfile does; false when they did not all go.
func sendfileAt(rc syscall.RawConn, fd int, off, n int64) bool {
	var serr error
	err := rc.Write(func(sock uintptr) bool {
		for n > 0 {
			m, err := unix.Sendfile(int(sock), fd, &off, int(min(n, 1<<30)))
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
