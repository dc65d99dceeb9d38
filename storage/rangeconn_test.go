package storage

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ethstream/ethstream/storage/s3test"
)

// cannedServer is a raw HTTP/1.1 server that answers every request on a
// connection with a 206 of body (the Range asked for is not read: the
// tests ask for the body's own range), counting the connections it
// accepts; with closeAfter it closes each connection after its first
// answer without saying so (as a server's idle timeout does between two
// requests). It allocates next to nothing per request, so that a test
// can count the client's allocations.
type cannedServer struct {
	ln         net.Listener
	conns      atomic.Int64
	closeAfter atomic.Bool
	// timeout408: after its first answer a connection gets a 408 and is
	// closed, as a server's idle timeout may say before it closes.
	timeout408 atomic.Bool
	answer     []byte
	wg         sync.WaitGroup
	mu         sync.Mutex
	open       []net.Conn // closed at the test's end: the client keeps its own
}

func newCannedServer(t testing.TB, body []byte, total int) *cannedServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &cannedServer{ln: ln}
	s.answer = fmt.Appendf(nil, "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-%d/%d\r\nContent-Length: %d\r\nEtag: \"x\"\r\n\r\n%s",
		len(body)-1, total, len(body), body)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			s.mu.Lock()
			s.open = append(s.open, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					// A request ends with its empty line.
					for {
						l, err := br.ReadSlice('\n')
						if err != nil {
							return
						}
						if len(l) <= 2 {
							break
						}
					}
					if _, err := c.Write(s.answer); err != nil || s.closeAfter.Load() {
						return
					}
					if s.timeout408.Load() {
						c.Write([]byte("HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.open {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *cannedServer) url() string { return "http://" + s.ln.Addr().String() }

// dropAll closes every connection accepted so far, as a restarted server
// would have.
func (s *cannedServer) dropAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.open {
		c.Close()
	}
}

// TestRangeConnsKeepAlive: the getter sends its GETs on connections of its
// own, keeps them alive from request to request, and sends a request again
// on a new connection when the kept one was closed by the server in the
// meantime (no answer read), as net/http does; the caller sees no error.
func TestRangeConnsKeepAlive(t *testing.T) {
	body := []byte("0123456789")
	s := newCannedServer(t, body, 100)
	lean, _ := objectsOf(t, s3test.Server{Name: "embedded", Bucket: "lake"}, s.url())
	if lean.ranged.conns == nil {
		t.Fatal("no connections of the getter's own for a plain-HTTP endpoint")
	}
	ctx := context.Background()
	read := func() {
		t.Helper()
		p := make([]byte, len(body))
		if err := lean.GetRangeInto(ctx, "k", 0, p); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(p, body) {
			t.Fatalf("read %q", p)
		}
	}
	for range 5 {
		read()
	}
	if n := s.conns.Load(); n != 1 {
		t.Fatalf("5 reads one after the other took %d connections, want 1", n)
	}
	s.closeAfter.Store(true)
	for range 5 {
		read()
	}
	if n := s.conns.Load(); n < 5 {
		t.Fatalf("the server closed each connection after an answer, yet 10 reads took %d connections", n)
	}
}

// TestRangeConnsStalePool: a server that dropped every kept-alive
// connection (a restart) costs the caller no attempt: each idle
// connection fails before an answer and the request goes on the next, then
// on a new one.
func TestRangeConnsStalePool(t *testing.T) {
	body := []byte("0123456789")
	s := newCannedServer(t, body, 100)
	lean, _ := objectsOf(t, s3test.Server{Name: "embedded", Bucket: "lake"}, s.url()) // one attempt
	ctx := context.Background()
	var cs []*rangeConn
	for range 3 {
		c, _, err := lean.ranged.conns.conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	for _, c := range cs {
		lean.ranged.conns.put(c)
	}
	for s.conns.Load() < 3 { // the server has them all
		time.Sleep(time.Millisecond)
	}
	s.dropAll()
	p := make([]byte, len(body))
	if err := lean.GetRangeInto(ctx, "k", 0, p); err != nil || !bytes.Equal(p, body) {
		t.Fatalf("a read after the server dropped 3 idle connections: %q, %v", p, err)
	}
	if n := s.conns.Load(); n != 4 {
		t.Fatalf("%d connections, want the 3 dropped and a new one", n)
	}
}

// TestRangeGetterAllocs: a ranged GET through the getter allocates a third
// of what one through net/http did (67 objects from this server, 22 now:
// the key's escaping, the attempt's context, the URL).
func TestRangeGetterAllocs(t *testing.T) {
	body := bytes.Repeat([]byte("abcdefgh"), 1024)
	s := newCannedServer(t, body, 1<<20)
	lean, _ := objectsOf(t, s3test.Server{Name: "embedded", Bucket: "lake"}, s.url())
	ctx := context.Background()
	p := make([]byte, len(body))
	n := testing.AllocsPerRun(200, func() {
		if err := lean.GetRangeInto(ctx, "date=2024-01-01/part-00000.parquet", 0, p); err != nil {
			t.Fatal(err)
		}
	})
	if n > 36 {
		t.Fatalf("%.0f allocations a ranged GET, want at most 36", n)
	}
}

// TestRangeConnsAnswerForms: answers this client does not read itself (a
// chunked body, no Content-Length, HTTP/1.0, Connection: close, an error
// with a chunked body) give the bytes, or the error, that the SDK's path
// gives.
func TestRangeConnsAnswerForms(t *testing.T) {
	obj := []byte("0123456789abcdefghijklmnopqrstuvwxyz")
	var mode atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		spec := strings.TrimPrefix(r.Header.Get("Range"), "bytes=")
		a, b, _ := strings.Cut(spec, "-")
		from, _ := strconv.Atoi(a)
		to, _ := strconv.Atoi(b)
		part := obj[from : to+1]
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, to, len(obj)))
		switch mode.Load().(string) {
		case "chunked":
			w.WriteHeader(http.StatusPartialContent)
			w.Write(part[:1])
			w.(http.Flusher).Flush()
			w.Write(part[1:])
		case "close":
			w.Header().Set("Connection", "close")
			w.Header().Set("Content-Length", strconv.Itoa(len(part)))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(part)
		case "error-chunked":
			w.Header().Set("Content-Type", "application/xml")
			w.Header().Set("X-Amz-Request-Id", "REQ1")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>`)
			w.(http.Flusher).Flush()
			io.WriteString(w, `<Message>Please reduce your request rate.</Message></Error>`)
		}
	}))
	defer srv.Close()
	lean, sdk := objectsOf(t, s3test.Server{Name: "embedded", Bucket: "lake"}, srv.URL)
	ctx := context.Background()
	for _, m := range []string{"chunked", "close"} {
		mode.Store(m)
		for range 3 {
			got := make([]byte, 7)
			if err := lean.GetRangeInto(ctx, "k", 5, got); err != nil {
				t.Fatalf("%s: %v", m, err)
			}
			if !bytes.Equal(got, obj[5:12]) {
				t.Fatalf("%s: read %q", m, got)
			}
		}
		// Neither a connection left to net/http nor one the server
		// closes after its answer is kept.
		lean.ranged.conns.mu.Lock()
		idle := len(lean.ranged.conns.idle)
		lean.ranged.conns.mu.Unlock()
		if idle != 0 {
			t.Fatalf("%s: %d connections kept", m, idle)
		}
	}
	mode.Store("error-chunked")
	errLean, errSDK := lean.GetRangeInto(ctx, "k", 0, make([]byte, 3)), sdk.GetRangeInto(ctx, "k", 0, make([]byte, 3))
	if errLean == nil || errSDK == nil || errLean.Error() != errSDK.Error() || Classify(errLean) != Classify(errSDK) {
		t.Fatalf("a chunked error:\n getter: %v\n    SDK: %v", errLean, errSDK)
	}
	// HTTP/1.0 without a length: the body runs to the connection's end.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					l, err := br.ReadSlice('\n')
					if err != nil || len(l) <= 2 {
						break
					}
				}
				fmt.Fprintf(c, "HTTP/1.0 206 Partial Content\r\nContent-Range: bytes 5-11/%d\r\n\r\n%s", len(obj), obj[5:12])
			}()
		}
	}()
	h10, _ := objectsOf(t, s3test.Server{Name: "embedded", Bucket: "lake"}, "http://"+ln.Addr().String())
	for range 2 {
		got := make([]byte, 7)
		if err := h10.GetRangeInto(ctx, "k", 5, got); err != nil || !bytes.Equal(got, obj[5:12]) {
			t.Fatalf("HTTP/1.0 without a length: %q, %v", got, err)
		}
	}
}

// TestRangeConnsTLS: over HTTPS the getter's connections are TLS with the
// SDK client's settings, speaking HTTP/1.1, and read the right bytes.
func TestRangeConnsTLS(t *testing.T) {
	obj := []byte("0123456789abcdefghijklmnopqrstuvwxyz")
	var plain, h11 atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			plain.Add(1)
		}
		if r.ProtoMajor == 1 && r.ProtoMinor == 1 {
			h11.Add(1)
		}
		http.ServeContent(w, r, "k", time.Time{}, bytes.NewReader(obj))
	}))
	defer srv.Close()
	lean, _ := objectsOf(t, s3test.Server{Name: "embedded", Bucket: "lake"}, srv.URL)
	if lean.ranged.conns == nil || lean.ranged.conns.tls == nil {
		t.Fatal("no TLS connections of the getter's own for an https endpoint")
	}
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	lean.ranged.conns.tls.RootCAs = roots
	ctx := context.Background()
	for off := int64(0); off < 30; off += 7 {
		got := make([]byte, 5)
		if err := lean.GetRangeInto(ctx, "k", off, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, obj[off:off+5]) {
			t.Fatalf("bytes %d+5: %q", off, got)
		}
	}
	if plain.Load() != 0 || h11.Load() != 5 {
		t.Fatalf("%d requests without TLS, %d of 5 over HTTP/1.1", plain.Load(), h11.Load())
	}
	// A certificate the settings do not trust is refused.
	lean.ranged.conns.tls.RootCAs = x509.NewCertPool()
	lean.ranged.conns.idle = nil
	if err := lean.GetRangeInto(ctx, "k", 0, make([]byte, 5)); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("an untrusted certificate: %v", err)
	}
}

// TestRangeConnsCancel: a GET whose context ends while the server stalls
// in the middle of its body returns with the context's error, and its
// connection is not used again.
func TestRangeConnsCancel(t *testing.T) {
	release, stalled := make(chan struct{}), make(chan struct{})
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Range") == "bytes=0-9" {
			w.Header().Set("Content-Range", "bytes 0-9/10")
			w.Header().Set("Content-Length", "10")
			w.WriteHeader(http.StatusPartialContent)
			w.Write([]byte("01234"))
			w.(http.Flusher).Flush()
			close(stalled)
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		http.ServeContent(w, r, "k", time.Time{}, strings.NewReader("0123456789"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	defer close(release)
	lean, _ := objectsOf(t, s3test.Server{Name: "embedded", Bucket: "lake"}, srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-stalled // the answer's first bytes are out
		cancel()
	}()
	err := lean.GetRangeInto(ctx, "k", 0, make([]byte, 10))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled read: %v", err)
	}
	got := make([]byte, 3)
	if err := lean.GetRangeInto(context.Background(), "k", 2, got); err != nil || string(got) != "234" {
		t.Fatalf("the next read: %q, %v", got, err)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections: the cancelled one must not be used again", n)
	}
}

// TestRangeConnsSignedHost: an endpoint that names its scheme's default
// port (http://host:80) is signed without it (the SDK's signer drops it
// from the Host, which net/http then sends), and the getter's connections
// send the Host that was signed: Versity Gateway, which verifies the Host
// as received, accepts the signature (the embedded endpoint re-signs as
// the SDK does, so it cannot tell), and a recording server sees the signed
// Host, or, unsigned, the endpoint's as net/http sends it.
func TestRangeConnsSignedHost(t *testing.T) {
	// The connections dial addr whatever the endpoint's port says.
	redirect := func(o *Objects, addr string) {
		o.ranged.conns.dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}
	}
	obj := []byte("0123456789")
	ctx := context.Background()
	t.Run("versity", func(t *testing.T) {
		s := s3test.Versity(t)
		if _, err := s.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String("k"), Body: bytes.NewReader(obj)}); err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(s.Endpoint)
		if err != nil {
			t.Fatal(err)
		}
		lean, _ := objectsOf(t, s, "http://"+u.Hostname()+":80")
		if lean.ranged.signer == nil {
			t.Fatal("a signed store's getter does not sign")
		}
		redirect(lean, u.Host)
		got := make([]byte, 5)
		if err := lean.GetRangeInto(ctx, "k", 3, got); err != nil || !bytes.Equal(got, obj[3:8]) {
			t.Fatalf("a signed read from an endpoint at :80: %q, %v", got, err)
		}
	})
	t.Run("recorded", func(t *testing.T) {
		var host atomic.Value
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			host.Store(r.Host)
			http.ServeContent(w, r, "k", time.Time{}, bytes.NewReader(obj))
		}))
		defer srv.Close()
		t.Setenv("AWS_ACCESS_KEY_ID", "AKID")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "SECRET")
		t.Setenv("AWS_REGION", "us-east-1")
		for _, c := range []struct{ name, want string }{{"signed", "127.0.0.1"}, {"embedded", "127.0.0.1:80"}} {
			lean, _ := objectsOf(t, s3test.Server{Name: c.name, Bucket: "lake"}, "http://127.0.0.1:80")
			if (lean.ranged.signer != nil) != (c.name == "signed") {
				t.Fatalf("%s: signer %v", c.name, lean.ranged.signer)
			}
			redirect(lean, srv.Listener.Addr().String())
			got := make([]byte, 5)
			if err := lean.GetRangeInto(ctx, "k", 3, got); err != nil || !bytes.Equal(got, obj[3:8]) {
				t.Fatalf("%s: %q, %v", c.name, got, err)
			}
			if h := host.Load(); h != c.want {
				t.Fatalf("%s: Host %q sent, want %q", c.name, h, c.want)
			}
		}
	})
}

// TestRangeConnsRedirect: a 307 or 308, which the SDK's client follows
// (S3's answer for a bucket whose DNS is not yet in place), reads the
// object where it points, through the getter as through the SDK.
func TestRangeConnsRedirect(t *testing.T) {
	obj := []byte("0123456789abcdefghij")
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/lake/moved" {
				http.ServeContent(w, r, "k", time.Time{}, bytes.NewReader(obj))
				return
			}
			body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>TemporaryRedirect</Code><Message>Please re-send this request to the specified temporary endpoint.</Message></Error>`
			w.Header().Set("Location", "/lake/moved")
			w.Header().Set("Content-Type", "application/xml")
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(status)
			io.WriteString(w, body)
		}))
		lean, sdk := objectsOf(t, s3test.Server{Name: "embedded", Bucket: "lake"}, srv.URL)
		got, want := make([]byte, 5), make([]byte, 5)
		errLean, errSDK := lean.GetRangeInto(context.Background(), "k", 4, got), sdk.GetRangeInto(context.Background(), "k", 4, want)
		srv.Close()
		if errLean != nil || errSDK != nil || !bytes.Equal(got, obj[4:9]) || !bytes.Equal(want, got) {
			t.Fatalf("HTTP %d: getter %q, %v; SDK %q, %v", status, got, errLean, want, errSDK)
		}
	}
}

// TestRangeConnsLeaveWhatTheyCannotHonour: a client whose settings these
// connections would not apply (a request timeout, a read timeout, no
// keep-alive, a proxy, a TLS dialler of its own) keeps its requests on
// net/http; the SDK's default client gets connections of the getter's own.
func TestRangeConnsLeaveWhatTheyCannotHonour(t *testing.T) {
	base := url.URL{Scheme: "https", Host: "bucket.s3.us-east-2.amazonaws.com"}
	t.Setenv("HTTPS_PROXY", "")
	t.Setenv("https_proxy", "")
	if newRangeConns(awshttp.NewBuildableClient(), base) == nil {
		t.Fatal("no connections of the getter's own for the SDK's default client")
	}
	for name, c := range map[string]*awshttp.BuildableClient{
		"timeout":      awshttp.NewBuildableClient().WithTimeout(time.Minute),
		"read-timeout": awshttp.NewBuildableClient().WithReadTimeout(time.Minute),
		"no-keepalive": awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) { tr.DisableKeepAlives = true }),
		"proxy": awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: "proxy:3128"})
		}),
		"own-tls": awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.DialTLSContext = func(context.Context, string, string) (net.Conn, error) { return nil, errors.New("unused") }
		}),
	} {
		if newRangeConns(c, base) != nil {
			t.Errorf("%s: connections of the getter's own", name)
		}
	}
}

// TestRangeConnsIdleTimeout: a connection idle for longer than the
// client's IdleConnTimeout is closed, not used again (the server may have
// closed it, or a load balancer forgotten it), on the connections' clock;
// an expired one under a newer one is closed too, not left open.
func TestRangeConnsIdleTimeout(t *testing.T) {
	body := []byte("0123456789")
	s := newCannedServer(t, body, 100)
	lean, _ := objectsOf(t, s3test.Server{Name: "embedded", Bucket: "lake"}, s.url())
	rc := lean.ranged.conns
	if rc.idleFor <= 0 {
		t.Fatalf("IdleConnTimeout %v: the SDK's client sets one", rc.idleFor)
	}
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	rc.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	ctx := context.Background()
	read := func(what string) {
		t.Helper()
		p := make([]byte, len(body))
		if err := lean.GetRangeInto(ctx, "k", 0, p); err != nil || !bytes.Equal(p, body) {
			t.Fatalf("%s: %q, %v", what, p, err)
		}
	}
	read("the first read")
	advance(rc.idleFor) // idle for exactly the timeout: still kept
	read("a read at the timeout")
	advance(rc.idleFor + time.Nanosecond)
	read("a read past the timeout")
	if n := s.conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2: one for the first two reads, a new one after the idle timeout", n)
	}
	// Two idle connections, the older past the timeout by the time of the
	// next read, which takes the newer one.
	c1, _, err := rc.conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c2, _, err := rc.conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rc.put(c1)
	advance(rc.idleFor / 2)
	rc.put(c2)
	advance(rc.idleFor/2 + time.Second)
	read("a read with an expired connection under a live one")
	rc.mu.Lock()
	idle, open := len(rc.idle), rc.open
	rc.mu.Unlock()
	if idle != 1 || open != 1 || s.conns.Load() != 3 {
		t.Fatalf("%d idle, %d open, %d dialled: want the live one kept, the expired one closed", idle, open, s.conns.Load())
	}
}

// TestRangeConnsIdleTimeoutOnTheWallClock: an idle connection's age is
// taken on the wall clock, as net/http takes it: the monotonic clock stops
// while the machine is suspended, so a connection kept across a suspend
// longer than IdleConnTimeout would look young and be used again.
func TestRangeConnsIdleTimeoutOnTheWallClock(t *testing.T) {
	s := newCannedServer(t, []byte("0123456789"), 100)
	lean, _ := objectsOf(t, s3test.Server{Name: "embedded", Bucket: "lake"}, s.url())
	if err := lean.GetRangeInto(context.Background(), "k", 0, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	rc := lean.ranged.conns
	rc.mu.Lock()
	defer rc.mu.Unlock()
	// time.Time.String shows a monotonic reading as "m=±seconds"; the
	// age is a wall-clock difference when either time lacks one.
	if len(rc.idle) != 1 {
		t.Fatalf("%d idle connections after a read, want 1", len(rc.idle))
	}
	if used := rc.idle[0].used; strings.Contains(used.String(), " m=") {
		t.Fatalf("the kept connection went idle at %v, a monotonic reading: its age would not count a suspend", used)
	}
}

// TestRangeConnsIdle408: a server that answers 408 as it times a kept
// connection out costs the caller no attempt: the request goes again on
// a new connection, as net/http drops such a connection.
func TestRangeConnsIdle408(t *testing.T) {
	body := []byte("0123456789")
	s := newCannedServer(t, body, 100)
	s.timeout408.Store(true)
	lean, _ := objectsOf(t, s3test.Server{Name: "embedded", Bucket: "lake"}, s.url()) // one attempt
	ctx := context.Background()
	for i := range 4 {
		p := make([]byte, len(body))
		if err := lean.GetRangeInto(ctx, "k", 0, p); err != nil || !bytes.Equal(p, body) {
			t.Fatalf("read %d: %q, %v", i, p, err)
		}
		time.Sleep(5 * time.Millisecond) // the 408 reaches the client before the next request
	}
	if n := s.conns.Load(); n != 4 {
		t.Fatalf("%d connections for 4 reads, want 4 (each kept one timed out with a 408)", n)
	}
}

// getterOver returns a range getter of the bucket "lake" at endpoint
// through client, unsigned, on connections of its own (nil when
// newRangeConns leaves client to net/http).
func getterOver(t *testing.T, client *awshttp.BuildableClient, endpoint string) *rangeGetter {
	t.Helper()
	u, err := url.Parse(endpoint + "/lake")
	if err != nil {
		t.Fatal(err)
	}
	return &rangeGetter{client: client, base: *u, name: "s3", region: "us-east-1", conns: newRangeConns(client, *u)}
}

// TestRangeConnsTLSToAServerPreferringH2: a server that offers HTTP/2
// first (the embedded endpoint behind an HTTPS proxy whose certificate the
// SDK trusts through AWS_CA_BUNDLE) gets HTTP/1.1 on the getter's own
// connections, which speak nothing else, one connection kept for a run of
// reads, while net/http, the SDK's path, does negotiate h2 with it.
func TestRangeConnsTLSToAServerPreferringH2(t *testing.T) {
	s := s3test.Embedded(t)
	obj := bytes.Repeat([]byte("0123456789abcdef"), 64)
	ctx := context.Background()
	if _, err := s.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String("k"), Body: bytes.NewReader(obj)}); err != nil {
		t.Fatal(err)
	}
	ts, stats := s.OverTLS(t)
	lean, sdk := objectsOf(t, s, ts.Endpoint)
	for i := range 5 {
		got := make([]byte, 100)
		if err := lean.GetRangeInto(ctx, "k", int64(i*100), got); err != nil || !bytes.Equal(got, obj[i*100:i*100+100]) {
			t.Fatalf("read %d over TLS: %q, %v", i, got, err)
		}
	}
	if c, r := stats.Conns(), stats.Requests(); c["http/1.1"] != 1 || len(c) != 1 || r["HTTP/1.1"] != 5 || len(r) != 1 {
		t.Fatalf("the getter's 5 reads: connections by ALPN %v, requests by protocol %v; want one http/1.1 connection, 5 HTTP/1.1 requests", c, r)
	}
	got := make([]byte, 100)
	if err := sdk.GetRangeInto(ctx, "k", 0, got); err != nil || !bytes.Equal(got, obj[:100]) {
		t.Fatalf("the SDK's read: %q, %v", got, err)
	}
	if c := stats.Conns(); c["h2"] != 1 {
		t.Fatalf("connections by ALPN %v: the server does not prefer h2, the test proves nothing", c)
	}
}

// TestRangeConnsTLSHandshakeTimeout: a server that accepts a connection
// and never answers the handshake fails the GET after the client's
// TLSHandshakeTimeout, with net/http's error (the same words, a transient
// timeout to Classify), not at the attempt's deadline.
func TestRangeConnsTLSHandshakeTimeout(t *testing.T) {
	client := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) { tr.TLSHandshakeTimeout = 100 * time.Millisecond })
	own := getterOver(t, client, "https://"+silentServer(t))
	if own.conns == nil || own.conns.tlsTimeout != 100*time.Millisecond {
		t.Fatalf("the client's TLSHandshakeTimeout not taken: %+v", own.conns)
	}
	viaHTTP := *own
	viaHTTP.conns = nil
	// Far past the handshake's timeout: without it, the GET would end at
	// this deadline, with the context's error.
	get := func(g *rangeGetter) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return g.get(ctx, "k", 0, "bytes=0-9", make([]byte, 10))
	}
	errOwn, errHTTP := get(own), get(&viaHTTP)
	if errOwn == nil || errHTTP == nil || errOwn.Error() != errHTTP.Error() || Classify(errOwn) != Classify(errHTTP) || Classify(errOwn) != ClassTransient {
		t.Fatalf("a stuck handshake:\n own: %v (class %v)\n net/http: %v (class %v)", errOwn, Classify(errOwn), errHTTP, Classify(errHTTP))
	}
	if own.conns.open != 0 {
		t.Fatalf("%d connections counted open after a failed handshake", own.conns.open)
	}
}

// TestRangeConnsContextEndsAConnect: a GET whose context ends while its
// connection is being made (a TLS handshake the server never answers, no
// TLSHandshakeTimeout) fails with the context's cause, the error net/http
// prefers to the dial's or handshake's one that the end caused.
func TestRangeConnsContextEndsAConnect(t *testing.T) {
	client := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) { tr.TLSHandshakeTimeout = 0 })
	own := getterOver(t, client, "https://"+silentServer(t))
	viaHTTP := *own
	viaHTTP.conns = nil
	errStop := errors.New("the query stopped")
	get := func(g *rangeGetter) error {
		// The server never answers: the context's end is what ends the GET.
		ctx, cancel := context.WithTimeoutCause(context.Background(), 100*time.Millisecond, errStop)
		defer cancel()
		return g.get(ctx, "k", 0, "bytes=0-9", make([]byte, 10))
	}
	errOwn, errHTTP := get(own), get(&viaHTTP)
	if !errors.Is(errOwn, errStop) || errHTTP == nil || errOwn.Error() != errHTTP.Error() {
		t.Fatalf("a GET whose context ended during its handshake:\n own: %v\n net/http: %v", errOwn, errHTTP)
	}
	if own.conns.open != 0 {
		t.Fatalf("%d connections counted open after a handshake given up", own.conns.open)
	}
}

// silentServer returns the address of a loopback server that accepts
// connections and never writes to them (a TLS handshake with it hangs),
// closed when the test ends.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held sync.WaitGroup
	done := make(chan struct{})
	t.Cleanup(func() { close(done); ln.Close(); held.Wait() })
	held.Add(1)
	go func() {
		defer held.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held.Add(1)
			go func() { defer held.Done(); <-done; c.Close() }() // held, never answered
		}
	}()
	return ln.Addr().String()
}

// TestRangeConnsLeaveAnEndpointThatAnswersUnlengthed: an endpoint whose
// answers never carry a Content-Length (chunked) gets each of the first
// leaveAfter GETs twice (on the getter's connection, then through
// net/http), and every later one once, through net/http alone.
func TestRangeConnsLeaveAnEndpointThatAnswersUnlengthed(t *testing.T) {
	obj := []byte("0123456789abcdefghijklmnopqrstuvwxyz")
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Range", fmt.Sprintf("bytes 5-11/%d", len(obj)))
		w.WriteHeader(http.StatusPartialContent)
		w.Write(obj[5:6])
		w.(http.Flusher).Flush() // chunked from here on
		w.Write(obj[6:12])
	}))
	defer srv.Close()
	lean, _ := objectsOf(t, s3test.Server{Name: "embedded", Bucket: "lake"}, srv.URL)
	const reads = 10
	for i := range reads {
		got := make([]byte, 7)
		if err := lean.GetRangeInto(context.Background(), "k", 5, got); err != nil || !bytes.Equal(got, obj[5:12]) {
			t.Fatalf("read %d: %q, %v", i, got, err)
		}
	}
	if n := requests.Load(); n != reads+leaveAfter {
		t.Fatalf("%d reads of a chunked endpoint sent %d requests, want %d", reads, n, reads+leaveAfter)
	}
}

// TestRangeConnsUnlengthedInARow: only answers without a Content-Length
// in a row send an endpoint to net/http; one with a length between them
// starts the count again, so an endpoint that answers some objects chunked
// and others not keeps the getter's connections (each chunked answer
// costing two requests).
func TestRangeConnsUnlengthedInARow(t *testing.T) {
	obj := []byte("0123456789abcdefghijklmnopqrstuvwxyz")
	var chunked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Range", fmt.Sprintf("bytes 5-11/%d", len(obj)))
		if r.URL.Path == "/lake/chunked" {
			chunked.Add(1)
		} else {
			w.Header().Set("Content-Length", "7")
		}
		w.WriteHeader(http.StatusPartialContent)
		w.Write(obj[5:6])
		w.(http.Flusher).Flush() // chunked from here on, without a length
		w.Write(obj[6:12])
	}))
	defer srv.Close()
	lean, _ := objectsOf(t, s3test.Server{Name: "embedded", Bucket: "lake"}, srv.URL)
	reads := 0
	for range 3 {
		for _, key := range []string{"chunked", "chunked", "chunked", "lengthed"} {
			if key == "chunked" {
				reads++
			}
			got := make([]byte, 7)
			if err := lean.GetRangeInto(context.Background(), key, 5, got); err != nil || !bytes.Equal(got, obj[5:12]) {
				t.Fatalf("read of %s: %q, %v", key, got, err)
			}
		}
	}
	if n := chunked.Load(); n != int64(2*reads) || !lean.ranged.conns.usable() {
		t.Fatalf("%d reads answered chunked, never more than %d in a row: %d requests, want %d; the getter's connections still used: %v",
			reads, leaveAfter-1, n, 2*reads, lean.ranged.conns.usable())
	}
}

// TestRangeConnsLimits: the client's MaxConnsPerHost bounds the getter's
// connections open at once (readers beyond it wait for one, as net/http's
// do), and MaxIdleConnsPerHost how many stay open between reads; each
// read gets its bytes.
func TestRangeConnsLimits(t *testing.T) {
	obj := bytes.Repeat([]byte("abcdefgh"), 512)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(2 * time.Millisecond) // readers overlap
		http.ServeContent(w, r, "k", time.Time{}, bytes.NewReader(obj))
	}))
	defer srv.Close()
	// Counted as the client opens and closes them: the server learns of a
	// close only when it next reads, possibly after the client dialled the
	// connection that replaces it.
	var mu sync.Mutex
	open, peak := 0, 0
	client := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.MaxConnsPerHost = 2
		tr.MaxIdleConnsPerHost = 1
		dial := tr.DialContext
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			mu.Lock()
			open++
			peak = max(peak, open)
			mu.Unlock()
			return &closeCounted{Conn: c, closed: func() { mu.Lock(); open--; mu.Unlock() }}, nil
		}
	})
	g := getterOver(t, client, srv.URL)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for r := range 8 {
		wg.Go(func() {
			for i := range 5 {
				off := int64((r*5 + i) * 7)
				got := make([]byte, 100)
				if err := g.get(context.Background(), "k", off, fmt.Sprintf("bytes=%d-%d", off, off+99), got); err != nil || !bytes.Equal(got, obj[off:off+100]) {
					errs <- fmt.Errorf("reader %d, read %d: %q, %v", r, i, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if peak > 2 {
		t.Fatalf("%d connections open at once, MaxConnsPerHost 2", peak)
	}
	g.conns.mu.Lock()
	defer g.conns.mu.Unlock()
	if len(g.conns.idle) != 1 || g.conns.open != 1 {
		t.Fatalf("%d idle of %d open after the reads, MaxIdleConnsPerHost 1", len(g.conns.idle), g.conns.open)
	}
	// A failed dial frees its place: with room for one connection, a
	// second GET to a closed port fails as the first did, not waiting
	// for a place that never frees.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	one := getterOver(t, awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) { tr.MaxConnsPerHost = 1 }), "http://"+ln.Addr().String())
	for i := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := one.get(ctx, "k", 0, "bytes=0-9", make([]byte, 10))
		cancel()
		if err == nil || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("GET %d to a closed port with MaxConnsPerHost 1: %v, want the refused connection", i, err)
		}
	}
	// net/http's rules for the idle count: 0 is its default, a negative
	// count keeps none, MaxIdleConns caps it.
	for _, c := range []struct{ perHost, total, want int }{{0, 0, http.DefaultMaxIdleConnsPerHost}, {-1, 0, -1}, {64, 10, 10}, {64, 0, 64}} {
		client := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.MaxIdleConnsPerHost, tr.MaxIdleConns = c.perHost, c.total
		})
		if got := getterOver(t, client, srv.URL).conns.maxIdle; got != c.want {
			t.Errorf("MaxIdleConnsPerHost %d, MaxIdleConns %d: %d kept, want %d", c.perHost, c.total, got, c.want)
		}
	}
}

// TestRangeConnsWaitForAConnection: at MaxConnsPerHost a GET waits; a
// connection going idle wakes it and it takes that one, a connection
// closed wakes it and it dials, and the end of its context ends the wait
// with net/http's error, nothing left counted open.
func TestRangeConnsWaitForAConnection(t *testing.T) {
	s := newCannedServer(t, []byte("0123456789"), 100)
	g := getterOver(t, awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) { tr.MaxConnsPerHost = 1 }), s.url())
	rc := g.conns
	ctx := context.Background()
	type taken struct {
		c      *rangeConn
		reused bool
		err    error
	}
	// take asks for a connection and returns once the request waits.
	take := func() <-chan taken {
		ch := make(chan taken, 1)
		go func() {
			c, reused, err := rc.conn(ctx)
			ch <- taken{c, reused, err}
		}()
		waitForWaiter(rc)
		return ch
	}
	held, _, err := rc.conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ch := take()
	rc.put(held)
	if got := wakeOf(t, ch); got.err != nil || got.c != held || !got.reused {
		t.Fatalf("a connection gone idle: %+v, want the waiting GET to take it", got)
	}
	ch = take()
	rc.drop(held)
	got := wakeOf(t, ch)
	if got.err != nil || got.reused || got.c == held {
		t.Fatalf("a connection closed: %+v; want the waiting GET to dial another", got)
	}
	// The place is taken (got.c); a GET whose context ends while it waits
	// fails as it would through net/http.
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- g.get(cctx, "k", 0, "bytes=0-9", make([]byte, 10)) }()
	waitForWaiter(rc)
	cancel()
	errOwn := wakeOf(t, errc)
	viaHTTP := *g
	viaHTTP.conns = nil
	errHTTP := viaHTTP.get(cctx, "k", 0, "bytes=0-9", make([]byte, 10))
	if !errors.Is(errOwn, context.Canceled) || errHTTP == nil || errOwn.Error() != errHTTP.Error() {
		t.Fatalf("a GET cancelled while waiting for a connection:\n own: %v\n net/http: %v", errOwn, errHTTP)
	}
	rc.drop(got.c)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.open != 0 {
		t.Fatalf("%d connections counted open after the last one closed", rc.open)
	}
}

// waitForWaiter returns once a request of rc waits for a connection.
func waitForWaiter(rc *rangeConns) {
	for {
		rc.mu.Lock()
		waits := rc.freed != nil
		rc.mu.Unlock()
		if waits {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// wakeOf is what a waiting request got; a wake-up lost fails the test
// (after a minute: the wake-up itself takes microseconds).
func wakeOf[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatal("a request waiting for a connection was not woken")
		panic("unreachable")
	}
}

// closeCounted is a connection that calls closed at its first Close.
type closeCounted struct {
	net.Conn
	once   sync.Once
	closed func()
}

func (c *closeCounted) Close() error {
	c.once.Do(c.closed)
	return c.Conn.Close()
}
