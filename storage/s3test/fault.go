package s3test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Fault is how the fault proxy answers one request instead of the server.
// The zero Fault passes the request on.
type Fault struct {
	// Status answers with this HTTP status and an S3 error document of
	// Code (e.g. 503 SlowDown, 500 InternalError, 403 AccessDenied).
	Status int
	Code   string
	// Reset closes the connection without an answer (a reset or a server
	// that died mid-request).
	Reset bool
}

// Schedule decides the fault of the n-th request (0-based, counted by the
// proxy) of kind ("LIST", "HEAD", "GET", "PUT", "DELETE", "POST").
type Schedule func(n int, kind string) Fault

// FirstN fails the first n requests of the given kinds (every kind when
// none is given) with f, and passes every other request on.
func FirstN(n int, f Fault, kinds ...string) Schedule {
	failed := 0 // the proxy calls a schedule under its lock
	return func(_ int, kind string) Fault {
		if failed < n && (len(kinds) == 0 || slices.Contains(kinds, kind)) {
			failed++
			return f
		}
		return Fault{}
	}
}

// Faulty returns s behind a loopback proxy that answers each request as
// sched says, and forwards it to s otherwise: the transient and refusing
// servers of the storage and pipeline fault tests, in front of the
// embedded endpoint or Versity alike. The returned counter tells how many
// requests reached the proxy. The proxy stops when the test ends.
func (s Server) Faulty(t testing.TB, sched Schedule) (Server, *Counts) {
	t.Helper()
	target, err := url.Parse(s.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	c := &Counts{n: map[string]int{}}
	var mu sync.Mutex
	seen := 0
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := kindOf(r)
		mu.Lock()
		f := sched(seen, k)
		seen++
		mu.Unlock()
		c.mu.Lock()
		c.n[k]++
		c.mu.Unlock()
		switch {
		case f.Reset:
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
		case f.Status != 0:
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(f.Status)
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected by the fault proxy</Message><RequestId>fault</RequestId></Error>`, f.Code)
		default:
			proxy.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	out := s
	out.Endpoint = srv.URL
	out.Query = strings.Replace(s.Query, "endpoint="+url.QueryEscape(s.Endpoint), "endpoint="+url.QueryEscape(srv.URL), 1)
	return out, c
}
