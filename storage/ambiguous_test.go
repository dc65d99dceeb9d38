package storage

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ethstream/ethstream/internal/durable"
	"github.com/ethstream/ethstream/storage/s3test"
)

// unanswered puts s behind a loopback proxy that forwards every request but,
// for a PUT, breaks the connection instead of passing on the server's answer
// when drop says so (asked with status 0 before forwarding, then with the
// server's status): the client sees what a server that refuses a taken name
// mid-body and closes the connection looks like (no status at all).
func unanswered(t *testing.T, s s3test.Server, drop func(status int) bool) s3test.Server {
	t.Helper()
	target, err := url.Parse(s.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	hangUp := func(w http.ResponseWriter) {
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && drop(0) {
			hangUp(w)
			return
		}
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.URL.Scheme, out.URL.Host = target.Scheme, target.Host
		out.Host = r.Host
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		if r.Method == http.MethodPut && drop(resp.StatusCode) {
			hangUp(w)
			return
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(srv.Close)
	out := s
	out.Endpoint = srv.URL
	out.Query = strings.Replace(s.Query, "endpoint="+url.QueryEscape(s.Endpoint), "endpoint="+url.QueryEscape(srv.URL), 1)
	return out
}

// TestPutIfAbsentWithoutAnswer: a put-if-absent that gets no answer is
// settled by whether the key exists, and an existing key always counts as
// lost. A refused 412 that arrives as a broken connection is ErrExists (not
// an I/O error), the first content stays; a PUT that landed but whose 200
// was lost also counts as lost (its retry meets its own object), so no
// writer ever believes it won a name another may hold; and a PUT to a new
// name whose answers are all lost is an error, not a win or ErrExists.
func TestPutIfAbsentWithoutAnswer(t *testing.T) {
	s3test.Run(t, func(t *testing.T, s s3test.Server) {
		plainFS, root := openFS(t, s, "q1/ck")
		if _, err := durable.Bytes(durable.For(plainFS), root, "a", durable.Options{}, []byte("first")); err != nil {
			t.Fatal(err)
		}

		fs412, _ := openFS(t, unanswered(t, s, func(st int) bool { return st == http.StatusPreconditionFailed }), "q1/ck")
		if _, err := durable.Bytes(durable.For(fs412), root, "a", durable.Options{}, []byte("second")); !errors.Is(err, durable.ErrExists) {
			t.Fatalf("put-if-absent of a taken name without an answer = %v, want ErrExists", err)
		}
		if got := readAllFS(t, plainFS, plainFS.PathJoin(root, "a")); !bytes.Equal(got, []byte("first")) {
			t.Fatalf("the taken name now holds %q", got)
		}

		var dropped atomic.Int32
		fsLost200, _ := openFS(t, unanswered(t, s, func(st int) bool { return st == http.StatusOK && dropped.Add(1) == 1 }), "q1/ck")
		if _, err := durable.Bytes(durable.For(fsLost200), root, "b", durable.Options{}, []byte("mine")); !errors.Is(err, durable.ErrExists) {
			t.Fatalf("put-if-absent whose 200 was lost = %v, want ErrExists (an unseen win counts as lost)", err)
		}
		if got := readAllFS(t, plainFS, plainFS.PathJoin(root, "b")); !bytes.Equal(got, []byte("mine")) {
			t.Fatalf("b holds %q", got)
		}

		fsDead, _ := openFS(t, unanswered(t, s, func(st int) bool { return st == 0 }), "q1/ck")
		if _, err := durable.Bytes(durable.For(fsDead), root, "c", durable.Options{}, []byte("never")); err == nil || errors.Is(err, durable.ErrExists) {
			t.Fatalf("put-if-absent that never reached the server = %v, want an I/O error", err)
		}
		if _, err := plainFS.Stat(plainFS.PathJoin(root, "c")); err == nil {
			t.Fatal("c exists though no PUT reached the server")
		}
	})
}
