package s3test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// Counts tallies the S3 requests that went through a Counting server, by
// kind: "LIST" (ListObjectsV2), "HEAD", "GET", "PUT", "DELETE", "POST".
type Counts struct {
	mu sync.Mutex
	n  map[string]int
}

// Get returns the requests of kind so far.
func (c *Counts) Get(kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[kind]
}

// Total returns the requests of every kind so far.
func (c *Counts) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.n {
		n += v
	}
	return n
}

// Reset zeroes every count.
func (c *Counts) Reset() {
	c.mu.Lock()
	c.n = map[string]int{}
	c.mu.Unlock()
}

func kindOf(r *http.Request) string {
	if r.Method == http.MethodGet && r.URL.Query().Has("list-type") {
		return "LIST"
	}
	return strings.ToUpper(r.Method)
}

// Counting returns s behind a loopback reverse proxy that counts every
// request, for tests that bound how many requests an operation makes. The
// Host header is passed through unchanged, so signed requests still verify.
// The proxy stops when the test ends.
func (s Server) Counting(t testing.TB) (Server, *Counts) {
	t.Helper()
	target, err := url.Parse(s.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	c := &Counts{n: map[string]int{}}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := kindOf(r)
		c.mu.Lock()
		c.n[k]++
		c.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return s.at(srv.URL), c
}
