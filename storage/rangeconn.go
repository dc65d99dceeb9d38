package storage

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/ethstream/ethstream/storage/internal/rawsock"
)

// rangeConns sends rangeGetter's GETs as HTTP/1.1 exchanges on connections
// of its own, each request written and its answer read by the goroutine
// that asks. net/http's Transport hands every request to a connection's
// write goroutine and every answer back from its read goroutine, and
// parses every header into a fresh map: 67-75 allocations and ~50 us of
// client CPU a ranged GET from the bench's endpoint, against 22-24 and
// ~30 us here (BenchmarkGetRangeEndpoint, TestRangeGetterAllocs). It
// speaks the same protocol to the same endpoint: the request line and
// headers net/http would send (the signed ones as the signer set them),
// over TCP or TLS dialled with the SDK client's own dialer (its connect
// timeout) and TLS settings (ALPN http/1.1 alone), within its
// TLSHandshakeTimeout, kept alive and bounded as its Transport keeps them
// (MaxIdleConnsPerHost, MaxIdleConns, MaxConnsPerHost, IdleConnTimeout).
// It serves only what it can judge: a proxied endpoint,
// a client that is not the SDK's BuildableClient or one with a timeout or
// without keep-alive gets none
// (newRangeConns returns nil), and an answer without a Content-Length, a
// chunked, a 1xx or a redirect the SDK's client follows (307, 308) is sent
// again through net/http (errFallback); after leaveAfter such 2xx answers
// in a row, the endpoint's GETs go to net/http alone. Safe for concurrent
// use.
type rangeConns struct {
	addr       string // host:port to dial
	dial       func(ctx context.Context, network, addr string) (net.Conn, error)
	tls        *tls.Config   // nil: plain HTTP
	tlsTimeout time.Duration // TLSHandshakeTimeout (0: none)
	maxIdle    int           // idle connections kept (MaxIdleConnsPerHost, capped by MaxIdleConns)
	maxConns   int           // connections open at once (MaxConnsPerHost; 0: no limit)
	idleFor    time.Duration // an idle connection older than this is closed, not reused
	now        func() time.Time

	// unlengthed counts the 2xx answers in a row that came without a
	// Content-Length (chunked, or to the connection's end): each was sent
	// twice, here then through net/http. At leaveAfter the endpoint is
	// taken to always answer so, and its GETs go to net/http directly.
	unlengthed atomic.Int32

	mu   sync.Mutex
	idle []*rangeConn // most recently used last
	open int          // dialling, in use or idle
	// freed is closed (and dropped) when a connection goes idle or is
	// closed: the wake-up of requests waiting at maxConns; nil when none
	// waits.
	freed chan struct{}
}

// leaveAfter is how many 2xx answers in a row without a Content-Length
// send an endpoint's GETs to net/http for good. S3 gives every ranged
// answer a length; a server that does not is not this client's to read.
const leaveAfter = 4

// rangeConn is one kept-alive connection.
type rangeConn struct {
	c    net.Conn
	br   *bufio.Reader
	wbuf []byte
	used time.Time // when it went idle
}

// newRangeConns returns the connections for base as client would open
// them, or nil when client is not the SDK's buildable client or would go
// through a proxy for base (net/http then sends the requests).
func newRangeConns(client any, base url.URL) *rangeConns {
	bc, ok := client.(*awshttp.BuildableClient)
	if !ok {
		return nil
	}
	tr := bc.GetTransport()
	if tr.Proxy != nil {
		if p, err := tr.Proxy(&http.Request{Method: http.MethodGet, URL: &base}); err != nil || p != nil {
			return nil
		}
	}
	if tr.DialTLSContext != nil {
		return nil // a TLS of the client's own
	}
	// Settings net/http or the SDK's client apply that these connections
	// do not: a deadline on each request (WithTimeout), a read inactivity
	// timeout (WithReadTimeout, installed on the client's own transport
	// only), no keep-alive.
	if rt, ok := bc.GetReadTimeout(); bc.GetTimeout() > 0 || ok && rt > 0 || tr.DisableKeepAlives {
		return nil
	}
	port := base.Port()
	if port == "" {
		switch base.Scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		default:
			return nil
		}
	}
	rc := &rangeConns{addr: net.JoinHostPort(base.Hostname(), port), tlsTimeout: tr.TLSHandshakeTimeout,
		maxIdle: tr.MaxIdleConnsPerHost, maxConns: tr.MaxConnsPerHost, idleFor: tr.IdleConnTimeout, now: time.Now}
	// net/http's rules (Transport.maxIdleConnsPerHost, tryPutIdleConn): 0
	// per host is the default, a negative count keeps none, and the total
	// bound, this client's one host being all of it, caps the count.
	if rc.maxIdle == 0 {
		rc.maxIdle = http.DefaultMaxIdleConnsPerHost
	}
	if tr.MaxIdleConns > 0 && tr.MaxIdleConns < rc.maxIdle {
		rc.maxIdle = tr.MaxIdleConns
	}
	if tr.DialContext != nil {
		rc.dial = tr.DialContext
	} else {
		d := bc.GetDialer()
		rc.dial = d.DialContext
	}
	if base.Scheme == "https" {
		cfg := &tls.Config{}
		if tr.TLSClientConfig != nil {
			cfg = tr.TLSClientConfig.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = base.Hostname()
		}
		cfg.NextProtos = []string{"http/1.1"} // this client speaks HTTP/1.1 only
		rc.tls = cfg
	}
	return rc
}

// errFallback: the exchange cannot be judged here; nothing of it reached
// the caller, and net/http sends the request again.
var errFallback = errors.New("answer left to net/http")

// get sends a GET of u with the Host header host (the signed one: the
// SDK's signer drops a default port from it) and the headers hdr (each
// "Name: value\r\n"), and fills p from a 206 at off or a 200 from offset 0, judged as
// rangeGetter.get judges net/http's answer; errFallback asks the caller to
// send it through net/http instead.
func (rc *rangeConns) get(ctx context.Context, u *url.URL, host string, hdr []byte, off int64, p []byte) error {
	target := u.RequestURI()
	for {
		c, reused, err := rc.conn(ctx)
		if err != nil {
			// The context's end rather than the dial's or handshake's
			// error it caused, as net/http's getConn prefers it.
			if ctx.Err() != nil {
				err = context.Cause(ctx)
			}
			return &url.Error{Op: "Get", URL: u.String(), Err: err}
		}
		keep, started, err := rc.exchange(ctx, c, reused, target, host, hdr, off, p)
		if keep {
			rc.put(c)
		} else {
			rc.drop(c)
		}
		var sent *sendError
		if !errors.As(err, &sent) {
			return err
		}
		// A kept-alive connection the server closed meanwhile fails before
		// any answer (or with the 408 it sent as it closed): send again, as net/http does, on the next idle one or
		// a new one (each idle connection is tried once: a server restarted
		// under a full pool costs no attempt of the caller's).
		if reused && !started && ctx.Err() == nil {
			continue
		}
		// No answer judged: net/http's error of it (a *url.Error, a
		// net.Error that Classify deems transient), the context's end
		// kept first.
		ue := &url.Error{Op: "Get", URL: u.String(), Err: sent.err}
		if sent.ctx != nil {
			return fmt.Errorf("%w (%w)", sent.ctx, ue)
		}
		return ue
	}
}

// sendError is an exchange that failed before its answer was judged:
// writing the request or reading the status and headers. ctx is the
// context's cause when its end interrupted the exchange.
type sendError struct{ err, ctx error }

func (e *sendError) Error() string { return e.err.Error() }

// usable says whether rc sends GETs: false for an endpoint that answers
// without a Content-Length (leaveAfter), whose GETs go to net/http.
func (rc *rangeConns) usable() bool {
	return rc != nil && rc.unlengthed.Load() < leaveAfter
}

// conn returns an idle connection, or dials one; at maxConns open it
// waits for one to go idle or closed, as net/http's Transport waits.
func (rc *rangeConns) conn(ctx context.Context) (*rangeConn, bool, error) {
	now := rc.now()
	rc.mu.Lock()
	for {
		if n := len(rc.idle); n > 0 {
			// The oldest first: past IdleConnTimeout it is closed, not
			// reused, as net/http's timer closes it (a server or load
			// balancer may have dropped it: S3 does after ~20 s), and not
			// left open under the newer ones either.
			if c := rc.idle[0]; rc.idleFor > 0 && now.Sub(c.used) > rc.idleFor {
				copy(rc.idle, rc.idle[1:])
				rc.idle[n-1] = nil
				rc.idle = rc.idle[:n-1]
				rc.mu.Unlock()
				rc.drop(c)
				rc.mu.Lock()
				continue
			}
			c := rc.idle[n-1]
			rc.idle = rc.idle[:n-1]
			rc.mu.Unlock()
			return c, true, nil
		}
		if rc.maxConns <= 0 || rc.open < rc.maxConns {
			break
		}
		if rc.freed == nil {
			rc.freed = make(chan struct{})
		}
		freed := rc.freed
		rc.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return nil, false, context.Cause(ctx)
		}
		now = rc.now()
		rc.mu.Lock()
	}
	rc.open++
	rc.mu.Unlock()
	nc, err := rc.dial(ctx, "tcp", rc.addr)
	if err != nil {
		rc.closed()
		return nil, false, err
	}
	// A TCP connection is read and written with raw system calls
	// (rawsock: ~8% of the client's CPU was the scheduler's bookkeeping of
	// them), under TLS too.
	if rs, ok := rawsock.New(nc); ok {
		nc = rs
	}
	if rc.tls != nil {
		tc := tls.Client(nc, rc.tls)
		if err := rc.handshake(ctx, tc); err != nil {
			nc.Close()
			rc.closed()
			return nil, false, err
		}
		nc = tc
	}
	return &rangeConn{c: nc, br: bufio.NewReaderSize(nc, 4<<10)}, false, nil
}

// handshake runs tc's handshake within rc.tlsTimeout, failing as
// net/http's Transport fails one that takes longer (a server that accepts
// and never answers would otherwise hold the request until its attempt's
// timeout, minutes).
func (rc *rangeConns) handshake(ctx context.Context, tc *tls.Conn) error {
	hctx := ctx
	if rc.tlsTimeout > 0 {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeoutCause(ctx, rc.tlsTimeout, errTLSHandshakeTimeout)
		defer cancel()
	}
	err := tc.HandshakeContext(hctx)
	if err != nil && ctx.Err() == nil && context.Cause(hctx) == errTLSHandshakeTimeout {
		return errTLSHandshakeTimeout
	}
	return err
}

// tlsHandshakeTimeoutError is net/http's error of a handshake past
// TLSHandshakeTimeout, word for word, and like it a timeout (Classify:
// transient).
type tlsHandshakeTimeoutError struct{}

func (tlsHandshakeTimeoutError) Timeout() bool   { return true }
func (tlsHandshakeTimeoutError) Temporary() bool { return true }
func (tlsHandshakeTimeoutError) Error() string   { return "net/http: TLS handshake timeout" }

var errTLSHandshakeTimeout error = tlsHandshakeTimeoutError{}

// put keeps c for the next request, or closes it when enough are kept.
func (rc *rangeConns) put(c *rangeConn) {
	// On the wall clock alone (Round(0) drops the monotonic reading), as
	// net/http judges an idle connection: the monotonic clock stops while a
	// VM or laptop is suspended, and the server's idle timeout does not.
	c.used = rc.now().Round(0)
	rc.mu.Lock()
	if len(rc.idle) < rc.maxIdle {
		rc.idle = append(rc.idle, c)
		rc.wakeLocked()
		rc.mu.Unlock()
		return
	}
	rc.mu.Unlock()
	rc.drop(c)
}

// drop closes c, which no longer counts against maxConns.
func (rc *rangeConns) drop(c *rangeConn) {
	c.c.Close()
	rc.closed()
}

// closed counts a connection closed (or a dial failed).
func (rc *rangeConns) closed() {
	rc.mu.Lock()
	rc.open--
	rc.wakeLocked()
	rc.mu.Unlock()
}

// wakeLocked wakes the requests waiting for a connection.
func (rc *rangeConns) wakeLocked() {
	if rc.freed != nil {
		close(rc.freed)
		rc.freed = nil
	}
}

// aLongTimeAgo is a deadline in the past: it unblocks the connection's
// reads and writes at once.
var aLongTimeAgo = time.Unix(1, 0)

// exchange writes the request on c and reads its answer. keep says
// whether c may carry another request; started whether any byte of an
// answer to this request was read (a request that failed before may be
// sent again). reused says c carried a request before.
func (rc *rangeConns) exchange(ctx context.Context, c *rangeConn, reused bool, target, host string, hdr []byte, off int64, p []byte) (keep, started bool, err error) {
	// The context's end (the attempt's timeout or the query's cancel)
	// unblocks the exchange; a connection it interrupted is not reused.
	stop := context.AfterFunc(ctx, func() { _ = c.c.SetDeadline(aLongTimeAgo) })
	defer func() {
		if !stop() {
			keep = false
			var sent *sendError
			if errors.As(err, &sent) {
				sent.ctx = context.Cause(ctx)
			} else if err != nil {
				err = fmt.Errorf("%w (%w)", context.Cause(ctx), err)
			}
		}
	}()
	w := append(c.wbuf[:0], "GET "...)
	w = append(w, target...)
	w = append(w, " HTTP/1.1\r\nHost: "...)
	w = append(w, host...)
	w = append(w, "\r\nUser-Agent: Go-http-client/1.1\r\n"...)
	w = append(w, hdr...)
	w = append(w, "\r\n"...)
	c.wbuf = w
	if _, err := c.c.Write(w); err != nil {
		return false, false, &sendError{err: err}
	}
	a, err := readAnswer(c.br)
	if err != nil {
		return false, a.started, &sendError{err: err}
	}
	// A server may answer 408 as it times an idle connection out, before
	// this request reached it; net/http drops such a connection unread
	// (readLoopPeekFailLocked), and so does this client.
	if reused && a.status == http.StatusRequestTimeout {
		return false, false, &sendError{err: errors.New("the server timed out the idle connection (HTTP 408)")}
	}
	// A 307 or 308 the SDK's client follows (its limitedRedirect), which
	// this one does not.
	if a.status/100 == 1 || a.status == http.StatusTemporaryRedirect || a.status == http.StatusPermanentRedirect || a.chunked || a.length < 0 {
		if a.status/100 == 2 {
			rc.unlengthed.Add(1)
		}
		return false, true, errFallback
	}
	if a.status/100 == 2 && rc.unlengthed.Load() != 0 {
		rc.unlengthed.Store(0)
	}
	n := int64(len(p))
	if err := judgeRange(a.status, a.contentRange, a.length, off, n); err != nil {
		if err == errNotOK {
			return false, true, responseError(a.response(c.br))
		}
		return false, true, err
	}
	if _, err := io.ReadFull(c.br, p); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return false, true, bodyError(off, n, err)
	}
	// A 200's body runs past the range: the connection ends with it.
	return a.length == n && !a.close, true, nil
}

// answer is the status and the headers of a response that this client
// reads (all of them kept only for an error's sake).
type answer struct {
	started      bool // a byte of it was read
	proto        string
	status       int
	statusLine   string
	length       int64 // Content-Length; -1 without one
	contentRange string
	chunked      bool
	close        bool // Connection: close, or HTTP/1.0 without keep-alive
	header       http.Header
}

// maxHeaderBytes bounds an answer's status line and headers, as net/http's
// Transport does by default (MaxResponseHeaderBytes).
const maxHeaderBytes = 10 << 20

// readAnswer reads a response's status line and headers from br.
func readAnswer(br *bufio.Reader) (answer, error) {
	a := answer{length: -1}
	total := 0
	line := func() ([]byte, error) {
		l, err := br.ReadSlice('\n')
		if len(l) > 0 {
			a.started = true
		}
		if err == bufio.ErrBufferFull {
			// A header longer than the buffer: gather it.
			buf := append([]byte(nil), l...)
			for err == bufio.ErrBufferFull && total+len(buf) <= maxHeaderBytes {
				l, err = br.ReadSlice('\n')
				buf = append(buf, l...)
			}
			l = buf
		}
		if err != nil {
			if err == io.EOF && a.started {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		total += len(l)
		if total > maxHeaderBytes {
			return nil, errors.New("server response headers exceeded the limit")
		}
		return bytes.TrimRight(l, "\r\n"), nil
	}
	l, err := line()
	if err != nil {
		return a, err
	}
	proto, rest, ok := bytes.Cut(l, []byte(" "))
	code, _, _ := bytes.Cut(rest, []byte(" "))
	st, cerr := strconv.Atoi(string(code))
	if !ok || cerr != nil || len(code) != 3 || st < 0 || !bytes.HasPrefix(proto, []byte("HTTP/1.")) {
		return a, fmt.Errorf("malformed HTTP response %q", l)
	}
	a.status = st
	// proto is the reader's buffer, which the next line overwrites.
	http10 := string(proto) == "HTTP/1.0"
	a.close = http10
	if st/100 != 2 {
		// Kept for the error (responseError) only.
		a.proto, a.statusLine, a.header = string(proto), string(rest), http.Header{}
	}
	for {
		l, err := line()
		if err != nil {
			return a, err
		}
		if len(l) == 0 {
			return a, nil
		}
		k, v, ok := bytes.Cut(l, []byte(":"))
		if !ok {
			return a, fmt.Errorf("malformed HTTP response header %q", l)
		}
		v = bytes.TrimSpace(v)
		switch {
		case asciiEqualFold(k, "Content-Length"):
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil || n < 0 || a.length >= 0 && a.length != n {
				return a, fmt.Errorf("bad Content-Length %q", v)
			}
			a.length = n
		case asciiEqualFold(k, "Content-Range"):
			a.contentRange = string(v)
		case asciiEqualFold(k, "Transfer-Encoding"):
			a.chunked = true // any coding: net/http's to judge
		case asciiEqualFold(k, "Connection"):
			for _, t := range strings.Split(string(v), ",") {
				switch strings.ToLower(strings.TrimSpace(t)) {
				case "close":
					a.close = true
				case "keep-alive":
					if http10 {
						a.close = false
					}
				}
			}
		}
		if a.status/100 != 2 {
			a.header.Add(string(k), string(v))
		}
	}
}

// response is a as net/http would return it, its body of a.length bytes
// read from br (exchange leaves a chunked answer or one without a length
// to net/http), for responseError.
func (a answer) response(br *bufio.Reader) *http.Response {
	return &http.Response{Status: a.statusLine, StatusCode: a.status, Proto: a.proto, Header: a.header,
		Body: io.NopCloser(io.LimitReader(br, a.length)), ContentLength: a.length}
}

// asciiEqualFold reports whether b is name, ASCII case aside.
func asciiEqualFold(b []byte, name string) bool {
	if len(b) != len(name) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], name[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
