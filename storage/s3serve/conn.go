package s3serve

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/ethstream/ethstream/storage/internal/rawsock"
)

// The endpoint's connections are read first by a loop of its own
// (serveConn), which answers a plain GET or HEAD of an object itself, the
// backfill's ~15,000 ranged GETs, and hands the connection to net/http at
// the first request it does not answer, that request's bytes unread. The
// loop's answer is net/http's answer to the same request through
// serveObject, byte for byte but for the Date (TestConnFastPathMatches):
// what it saves is net/http's per-request work, which was most of the
// endpoint's user CPU a GET (the request parsed into maps and a URL, the
// response writer, its header map canonicalised and sorted, the
// keep-alive's background read goroutine and its wake-ups), and the file's
// *os.File (fcntl, the cleanup, the seek: the body goes by sendfile at an
// explicit offset).
//
// It answers only what it parses with certainty: an HTTP/1.1 GET or HEAD
// whose head (at most connBufSize bytes) has a Host, token-named headers
// with printable values, no body (Content-Length, Transfer-Encoding), no
// Expect, Connection, Upgrade or conditional header, one Range at most, a
// target of printable ASCII; an endpoint verifying signatures or injecting
// faults answers everything through net/http. Anything else, and anything
// serveObject leaves to gofakes3, goes to net/http, which reads the same
// bytes and answers as it always did.

// connBufSize is the loop's read buffer: a request head longer than this
// is net/http's (the SDK's GETs are ~600 bytes).
const connBufSize = 4 << 10

// headTimeout is how long the rest of a request head may take once its
// first byte arrived (net/http's ReadHeaderTimeout, as Start sets it).
const headTimeout = 10 * time.Second

// connTracker is the loop's connections, closed by Server.Close, and the
// listener that hands connections to net/http.
type connTracker struct {
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	hand   *handoffListener
}

// add tracks c; false once the server is closing (c is then closed).
func (t *connTracker) add(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		c.Close()
		return false
	}
	if t.conns == nil {
		t.conns = make(map[net.Conn]struct{})
	}
	t.conns[c] = struct{}{}
	return true
}

func (t *connTracker) remove(c net.Conn) {
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
}

// closeAll closes the tracked connections and refuses new ones.
func (t *connTracker) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for c := range t.conns {
		c.Close()
	}
	clear(t.conns)
}

// handoffListener is the net.Listener net/http serves: the connections
// the loop hands over.
type handoffListener struct {
	addr net.Addr
	ch   chan net.Conn
	once sync.Once
	done chan struct{}
}

func newHandoffListener(addr net.Addr) *handoffListener {
	return &handoffListener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handoffListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *handoffListener) Addr() net.Addr { return l.addr }

// handOver gives c to net/http; false when the server is closing.
func (l *handoffListener) handOver(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

// handedConn is a connection handed to net/http with the bytes the loop
// read and did not answer still to be read.
type handedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *handedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// ReadFrom keeps net/http's sendfile: it looks for an io.ReaderFrom
// connection.
func (c *handedConn) ReadFrom(r io.Reader) (int64, error) { return io.Copy(c.Conn, r) }

// CloseWrite keeps net/http's graceful close (closeWriteAndWait).
func (c *handedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// acceptLoop accepts ln's connections into serveConn until ln is closed.
func (s *Server) acceptLoop(ln net.Listener) {
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// As net/http's Serve: a temporary failure (EMFILE) is retried
			// after a growing pause.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			time.Sleep(delay)
			continue
		}
		delay = 0
		if !s.conns.add(c) {
			continue
		}
		go s.serveConn(c)
	}
}

// serveConn answers c's requests while serveFast can, then hands c to
// net/http.
func (s *Server) serveConn(c net.Conn) {
	// The socket's reads and the answers' writes are raw system calls
	// where they can be (rawsock): serveFast needs them so, and net/http
	// gets them too once the loop hands the connection over.
	rs, _ := rawsock.New(c)
	conn := c
	if rs != nil {
		conn = rs
	}
	br := bufio.NewReaderSize(conn, connBufSize)
	var scratch []byte
	for {
		head, err := readHead(c, br)
		if err != nil {
			if errors.Is(err, errNotFast) {
				break
			}
			s.conns.remove(c)
			c.Close()
			return
		}
		req, ok := parseRequest(head)
		if !ok || s.faulty.Load() {
			break
		}
		served, keep, buf := s.serveFast(rs, req, scratch)
		scratch = buf
		if !served {
			break
		}
		if _, err := br.Discard(len(head)); err != nil || !keep {
			s.conns.remove(c)
			c.Close()
			return
		}
	}
	s.conns.remove(c)
	_ = c.SetReadDeadline(time.Time{})
	if !s.conns.hand.handOver(&handedConn{Conn: conn, r: br}) {
		c.Close()
	}
}

// errNotFast: the connection's next request is net/http's to read.
var errNotFast = errors.New("request left to net/http")

// readHead returns the next request head buffered in br (through its
// blank line), unread: errNotFast when it does not fit in br, an error
// when the connection ends or stalls mid-head.
func readHead(c net.Conn, br *bufio.Reader) ([]byte, error) {
	// Idle between requests: no deadline, as net/http without an
	// IdleTimeout.
	if _, err := br.Peek(1); err != nil {
		return nil, err
	}
	deadline := false
	for {
		b, _ := br.Peek(br.Buffered())
		if i := bytes.Index(b, []byte("\r\n\r\n")); i >= 0 {
			if deadline {
				_ = c.SetReadDeadline(time.Time{})
			}
			return b[:i+4], nil
		}
		if len(b) == br.Size() {
			return nil, errNotFast
		}
		if !deadline {
			deadline = true
			_ = c.SetReadDeadline(time.Now().Add(headTimeout))
		}
		// A head stalled past the deadline ends the connection, as
		// net/http ends it.
		if _, err := br.Peek(len(b) + 1); err != nil {
			return nil, err
		}
	}
}

// connRequest is a request the loop may answer.
type connRequest struct {
	head  bool   // HEAD, else GET
	path  string // the target's path, unescaped
	query string // the target's raw query
	rng   string // the Range header ("": none)
}

// parseRequest parses a request head (through its blank line) that the
// loop answers if serveFast can; ok is false for any other.
func parseRequest(h []byte) (r connRequest, ok bool) {
	line, rest, _ := bytes.Cut(h, []byte("\r\n"))
	method, line, _ := bytes.Cut(line, []byte(" "))
	target, proto, found := bytes.Cut(line, []byte(" "))
	if !found || string(proto) != "HTTP/1.1" || len(target) == 0 || target[0] != '/' {
		return r, false
	}
	switch string(method) {
	case "GET":
	case "HEAD":
		r.head = true
	default:
		return r, false
	}
	for _, b := range target {
		if b <= ' ' || b >= 0x7f || b == '#' {
			return r, false
		}
	}
	p, q, _ := bytes.Cut(target, []byte("?"))
	if len(p) > 1 && p[1] == '/' {
		return r, false // "//x": net/http's URL is not "/x"
	}
	r.query = string(q)
	if bytes.IndexByte(p, '%') >= 0 {
		u, err := url.ParseRequestURI(string(target))
		if err != nil {
			return r, false
		}
		r.path = u.Path
	} else {
		r.path = string(p)
	}
	hosts, ranges := 0, 0
	for {
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		if len(line) == 0 {
			break
		}
		name, value, found := bytes.Cut(line, []byte(":"))
		if !found || !token(name) {
			return r, false
		}
		value = bytes.Trim(value, " \t")
		for _, b := range value {
			if b < ' ' && b != '\t' || b == 0x7f {
				return r, false
			}
		}
		// The name lower-cased in place of strings.ToLower, which
		// allocated for each of a request's ~8 headers.
		var lower [32]byte
		switch string(lowerASCII(lower[:0], name)) {
		case "host":
			hosts++
			if !hostValue(value) {
				return r, false
			}
		case "range":
			ranges++
			r.rng = string(value)
		case "content-length", "transfer-encoding", "expect", "connection", "upgrade", "trailer", "te",
			"if-match", "if-none-match", "if-modified-since", "if-unmodified-since", "if-range":
			return r, false
		}
	}
	return r, hosts == 1 && ranges <= 1
}

// lowerASCII appends b to dst with its ASCII letters lower-cased.
func lowerASCII(dst, b []byte) []byte {
	for _, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// token reports whether b is an HTTP token (a header name).
func token(b []byte) bool { return alnumOr(b, "!#$%&'*+-.^_`|~") }

// hostValue reports whether a Host header is one the loop accepts: a
// host name or address and port, nothing net/http might refuse.
func hostValue(b []byte) bool { return alnumOr(b, ".-:[]_") }

// alnumOr reports whether b is not empty and holds only ASCII letters,
// digits and bytes of extra.
func alnumOr(b []byte, extra string) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte(extra, c) >= 0:
		default:
			return false
		}
	}
	return true
}
