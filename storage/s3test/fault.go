package s3test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// Fault is how the fault proxy answers one request instead of the server.
// The zero Fault passes the request on. Delay combines with any other
// field; the others are exclusive (the first set, in field order, wins).
type Fault struct {
	// Status answers with this HTTP status and an S3 error document of
	// Code (e.g. 503 SlowDown, 500 InternalError, 403 AccessDenied).
	Status int
	Code   string
	// Reset closes the connection without an answer (a reset or a server
	// that died mid-request).
	Reset bool
	// EmptyPut (PUT only) stores an empty object under the key and answers
	// 200: a store that acknowledges a write it does not hold.
	EmptyPut bool
	// Truncate cuts a body in half. On a GET or LIST the proxy sends the server's
	// headers (its Content-Length too) and half the body, then closes the
	// connection. On a PUT it stores the first half of the body and
	// answers 200 (a store that keeps a short object).
	Truncate bool
	// Corrupt (PUT only) forwards the request with one byte of its body
	// changed and its headers (Content-MD5, x-amz-checksum-crc32c) as they
	// were: damage in transit, which a verifying server refuses.
	Corrupt bool
	// Delay holds the request this long before it is answered (a slow or
	// stalled server); a request whose client gives up first is dropped.
	Delay time.Duration
}

// Request is what a Schedule sees of one request.
type Request struct {
	N    int    // 0-based, counted by the proxy over every kind
	Kind string // "LIST", "HEAD", "GET", "PUT", "DELETE", "POST"
	Key  string // the object key ("" for a bucket request)
}

// Schedule decides the fault of each request the proxy receives. The proxy
// calls it under its lock, so a schedule may keep state without its own.
type Schedule func(r Request) Fault

// FirstN fails the first n requests of the given kinds (every kind when
// none is given) with f, and passes every other request on.
func FirstN(n int, f Fault, kinds ...string) Schedule {
	failed := 0
	return func(r Request) Fault {
		if failed < n && (len(kinds) == 0 || slices.Contains(kinds, r.Kind)) {
			failed++
			return f
		}
		return Fault{}
	}
}

// Matching fails the first n requests of kind whose key contains sub with
// f, and passes every other request on.
func Matching(n int, f Fault, kind, sub string) Schedule {
	failed := 0
	return func(r Request) Fault {
		if failed < n && r.Kind == kind && strings.Contains(r.Key, sub) {
			failed++
			return f
		}
		return Fault{}
	}
}

// Nth fails only the n-th (1-based) request of kind whose key contains sub
// with f: a fault in the middle of a run, after earlier writes of the same
// kind succeeded.
func Nth(n int, f Fault, kind, sub string) Schedule {
	seen := 0
	return func(r Request) Fault {
		if r.Kind == kind && strings.Contains(r.Key, sub) {
			seen++
			if seen == n {
				return f
			}
		}
		return Fault{}
	}
}

// Always answers every request with f.
func Always(f Fault) Schedule { return func(Request) Fault { return f } }

// Switch is a Schedule that can be replaced while the proxy runs (a
// faulty server that heals). Safe for concurrent use.
type Switch struct {
	mu    sync.Mutex
	sched Schedule
}

// NewSwitch returns a Switch starting with sched.
func NewSwitch(sched Schedule) *Switch { return &Switch{sched: sched} }

// Set replaces the schedule; nil passes every request on.
func (s *Switch) Set(sched Schedule) {
	s.mu.Lock()
	s.sched = sched
	s.mu.Unlock()
}

// Schedule returns the Schedule that follows the switch.
func (s *Switch) Schedule() Schedule {
	return func(r Request) Fault {
		s.mu.Lock()
		sched := s.sched
		s.mu.Unlock()
		if sched == nil {
			return Fault{}
		}
		return sched(r)
	}
}

// truncateKey marks a forwarded GET whose answer the proxy cuts short.
type truncateKey struct{}

// Faulty returns s behind a loopback proxy that answers each request as
// sched says, and forwards it to s otherwise: the transient, slow, lying
// and refusing servers of the storage and pipeline fault tests, in front
// of the embedded endpoint or Versity alike. The lying PUTs (EmptyPut,
// Truncate) are written by the proxy itself through s.Client, so they are
// signed for servers that verify signatures. The returned counter tells
// how many requests reached the proxy. The proxy stops when the test ends.
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
	proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Context().Value(truncateKey{}) != nil && resp.ContentLength > 1 {
			resp.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(io.LimitReader(resp.Body, resp.ContentLength/2), errReader{}), resp.Body}
		}
		return nil
	}
	proxy.ErrorLog = log.New(io.Discard, "", 0) // a cut body is the point, not news
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := kindOf(r)
		_, key := bucketKey(r.URL.Path)
		// Unlocked by defer: a schedule that panics (net/http recovers a
		// handler's panic) must not leave every later request waiting on mu,
		// which hung a CI run for the test's whole timeout.
		f := func() Fault {
			mu.Lock()
			defer mu.Unlock()
			seen++
			return sched(Request{N: seen - 1, Kind: k, Key: key})
		}()
		c.mu.Lock()
		c.n[k]++
		c.mu.Unlock()
		if f.Delay > 0 {
			select {
			case <-time.After(f.Delay):
			case <-r.Context().Done():
				return
			}
		}
		switch {
		case f.Status != 0:
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(f.Status)
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected by the fault proxy</Message><RequestId>fault</RequestId></Error>`, f.Code)
		case f.Reset:
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
		case (f.EmptyPut || f.Truncate) && k == "PUT":
			s.lyingPut(w, r, f.EmptyPut)
		case f.Corrupt && k == "PUT":
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			if len(body) > 0 {
				body[len(body)/2] ^= 0xff
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			proxy.ServeHTTP(w, r)
		case f.Truncate && r.Method == http.MethodGet: // a GET or a LIST
			proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), truncateKey{}, true)))
		default:
			proxy.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return s.at(srv.URL), c
}

// lyingPut stores an empty object (empty) or the first half of the body
// under the request's key and answers 200 as the server would have for the
// whole body. A put-if-absent stays one: a taken key is answered 412.
func (s Server) lyingPut(w http.ResponseWriter, r *http.Request, empty bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	keep := body[:len(body)/2]
	if empty {
		keep = nil
	}
	bucket, key := bucketKey(r.URL.Path)
	in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(keep), ContentLength: aws.Int64(int64(len(keep)))}
	if r.Header.Get("If-None-Match") == "*" {
		in.IfNoneMatch = aws.String("*")
	}
	if _, err := s.Client.PutObject(r.Context(), in); err != nil {
		var re interface{ HTTPStatusCode() int }
		var ae smithy.APIError
		status, code := http.StatusInternalServerError, "InternalError"
		if errors.As(err, &re) && re.HTTPStatusCode() > 0 {
			status = re.HTTPStatusCode()
		}
		if errors.As(err, &ae) {
			code = ae.ErrorCode()
		}
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message><RequestId>fault</RequestId></Error>`, code, ae)
		return
	}
	w.Header().Set("ETag", `"00000000000000000000000000000000"`)
	w.WriteHeader(http.StatusOK)
}

// bucketKey splits a path-style request path into its bucket and key.
func bucketKey(p string) (bucket, key string) {
	p = strings.TrimPrefix(p, "/")
	bucket, key, _ = strings.Cut(p, "/")
	return bucket, key
}

// errReader is the end of a body the proxy cut short.
type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }
