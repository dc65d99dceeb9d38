package s3test

import (
	"crypto/tls"
	"encoding/pem"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TLSStats tells what reached an OverTLS proxy: the connections by the
// protocol their handshake chose (ALPN: "h2", "http/1.1", or "" when the
// client offered none) and the requests by protocol ("HTTP/1.1",
// "HTTP/2.0"). Safe for concurrent use.
type TLSStats struct {
	mu       sync.Mutex
	conns    map[string]string // remote address -> ALPN protocol
	requests map[string]int
}

// Conns returns the connections seen, counted by ALPN protocol.
func (st *TLSStats) Conns() map[string]int {
	st.mu.Lock()
	defer st.mu.Unlock()
	n := map[string]int{}
	for _, p := range st.conns {
		n[p]++
	}
	return n
}

// Requests returns the requests seen, counted by protocol.
func (st *TLSStats) Requests() map[string]int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return maps.Clone(st.requests)
}

// OverTLS returns s behind a loopback HTTPS reverse proxy with a
// self-signed certificate, offering HTTP/2 before HTTP/1.1 as a server
// that prefers HTTP/2 does. It sets AWS_CA_BUNDLE for the test to that
// certificate, so every SDK client built after it (the returned Client,
// the code under test's) trusts the proxy as it would a real endpoint's
// certificate. The proxy stops when the test ends.
func (s Server) OverTLS(t testing.TB) (Server, *TLSStats) {
	t.Helper()
	target, err := url.Parse(s.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	st := &TLSStats{conns: map[string]string{}, requests: map[string]int{}}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st.mu.Lock()
		st.conns[r.RemoteAddr] = r.TLS.NegotiatedProtocol
		st.requests[r.Proto]++
		st.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{NextProtos: []string{"h2", "http/1.1"}} // httptest's default with HTTP/2 is h2 alone
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)              // a client's refused handshake is some tests' point
	srv.StartTLS()
	t.Cleanup(srv.Close)
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CA_BUNDLE", bundle)
	out := s.at(srv.URL)
	if s.creds != nil {
		out.Client = client(t, srv.URL, s.creds)
	}
	return out, st
}
