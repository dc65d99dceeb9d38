package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/smithy-go"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/durable"
	"github.com/ethstream/ethstream/storage/s3test"
)

// manualClock is a retry clock that never sleeps: each wait is recorded and
// moves its time on at once.
type manualClock struct {
	mu     sync.Mutex
	t      time.Time
	sleeps []time.Duration
}

func (c *manualClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *manualClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	c.t = c.t.Add(d)
	c.mu.Unlock()
	return nil
}

func (c *manualClock) waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// useClock makes every S3 store of fs retry on c.
func useClock(fs vfs.FS, c Clock) {
	if m, ok := fs.(*Mux); ok {
		for _, b := range m.buckets {
			b.obj.clock = func() Clock { return c }
		}
	}
}

type statusErr int

func (e statusErr) Error() string       { return fmt.Sprintf("status %d", int(e)) }
func (e statusErr) HTTPStatusCode() int { return int(e) }

// TestClassify is the one classification's table: every S3 failure the
// archive source, the checkpoint and the table meet, and what it means.
// (The first eight rows are the archive source's former classify test.)
func TestClassify(t *testing.T) {
	api := func(code string) error { return &smithy.GenericAPIError{Code: code, Message: "m"} }
	for _, c := range []struct {
		err  error
		want Class
	}{
		{statusErr(503), ClassThrottled},
		{statusErr(429), ClassThrottled},
		{statusErr(500), ClassTransient},
		{statusErr(404), ClassNotFound},
		{statusErr(403), ClassAccessDenied},
		{fmt.Errorf("get: %w", context.Canceled), ClassOther},
		{fmt.Errorf("read body: %w", errors.New("read tcp: connection reset by peer")), ClassTransient},
		{errors.New("no credentials"), ClassOther},
		{statusErr(412), ClassPrecondition},
		{statusErr(409), ClassTransient},
		{statusErr(401), ClassCredentials},
		{statusErr(400), ClassOther},
		{api("NoSuchKey"), ClassNotFound},
		{api("NoSuchBucket"), ClassOther},
		{api("SlowDown"), ClassThrottled},
		{api("InternalError"), ClassTransient},
		{api("InvalidAccessKeyId"), ClassCredentials},
		{api("SignatureDoesNotMatch"), ClassCredentials},
		{api("AccessDenied"), ClassAccessDenied},
		{fmt.Errorf("op: %w", &v4.SigningError{Err: errors.New("failed to refresh cached credentials")}), ClassCredentials},
		{fmt.Errorf("attempt: %w", context.DeadlineExceeded), ClassTransient},
		{fmt.Errorf("body: %w", io.ErrUnexpectedEOF), ClassTransient},
		{&net.OpError{Op: "dial", Err: errors.New("connect: connection refused")}, ClassTransient},
	} {
		if got := Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %v, want %v", c.err, got, c.want)
		}
		if retry := Classify(c.err).Retryable(); retry != (c.want == ClassTransient || c.want == ClassThrottled) {
			t.Errorf("Classify(%v).Retryable() = %v", c.err, retry)
		}
	}
}

// TestBackoffBounds: the i-th wait lies in [d/2, d], d = min(Limit, Base·2^(i-1)).
func TestBackoffBounds(t *testing.T) {
	r := DefaultRetry
	for i := 1; i <= r.Attempts; i++ {
		d := min(r.Limit, r.Base<<(i-1))
		for range 50 {
			if w := r.backoff(i); w < d/2 || w > d {
				t.Fatalf("backoff(%d) = %s, want in [%s, %s]", i, w, d/2, d)
			}
		}
	}
}

var transientFaults = []struct {
	name  string
	fault s3test.Fault
	last  string // what the exhausted error names as the last answer (a HEAD's has no body)
}{
	{"503 SlowDown", s3test.Fault{Status: 503, Code: "SlowDown"}, "HTTP 503"},
	{"500 InternalError", s3test.Fault{Status: 500, Code: "InternalError"}, "HTTP 500"},
	{"reset", s3test.Fault{Reset: true}, "endpoint does not answer"},
}

// TestRetryRidesThrough: a server that fails the first requests (503, 500
// or a reset connection) is ridden out by the retries, on the injected
// clock (the test never sleeps), with full-jitter exponential waits; the
// publish and the read that follow see the server's real state.
func TestRetryRidesThrough(t *testing.T) {
	s3test.Run(t, func(t *testing.T, s s3test.Server) {
		for _, f := range transientFaults {
			t.Run(f.name, func(t *testing.T) {
				const n = 4
				faulty, counts := s.Faulty(t, s3test.FirstN(n, f.fault, "PUT", "GET"))
				fs, root := openFS(t, faulty, "ride/"+strings.ReplaceAll(f.name, " ", "_"))
				clk := &manualClock{}
				useClock(fs, clk)
				if _, err := durable.Bytes(durable.For(fs), root, "a", durable.Options{}, []byte("payload")); err != nil {
					t.Fatalf("publish through %d faults: %v", n, err)
				}
				if got := readAllFS(t, fs, fs.PathJoin(root, "a")); string(got) != "payload" {
					t.Fatalf("read back %q", got)
				}
				waits := clk.waits()
				if len(waits) != n {
					t.Fatalf("%d waits, want %d (one per fault): %v", len(waits), n, waits)
				}
				for i, w := range waits {
					d := min(DefaultRetry.Limit, DefaultRetry.Base<<i)
					if w < d/2 || w > d {
						t.Errorf("wait %d = %s, want in [%s, %s]", i+1, w, d/2, d)
					}
				}
				if counts.Get("PUT") == 0 {
					t.Fatal("no PUT reached the proxy")
				}
			})
		}
	})
}

// TestRetryExhausted: a server that keeps failing is reported after the
// bounded budget as STORAGE_UNAVAILABLE naming the endpoint, the object and
// the last answer, for a write and a read alike; nothing is written.
func TestRetryExhausted(t *testing.T) {
	s3test.Run(t, func(t *testing.T, s s3test.Server) {
		plain, root := openFS(t, s, "dead")
		for _, f := range transientFaults {
			t.Run(f.name, func(t *testing.T) {
				faulty, counts := s.Faulty(t, s3test.FirstN(1<<30, f.fault))
				fs, _ := openFS(t, faulty, "dead")
				clk := &manualClock{}
				useClock(fs, clk)
				_, err := durable.Bytes(durable.For(fs), root, "a", durable.Options{}, []byte("x"))
				checkUnavailable(t, err, faulty.Endpoint, root+"/a", f.last)
				if got := counts.Get("PUT"); got != DefaultRetry.Attempts {
					t.Errorf("%d PUTs, want %d (the budget)", got, DefaultRetry.Attempts)
				}
				if len(clk.waits()) != DefaultRetry.Attempts-1 {
					t.Errorf("%d waits, want %d", len(clk.waits()), DefaultRetry.Attempts-1)
				}
				var total time.Duration
				for _, w := range clk.waits() {
					total += w
				}
				if total > 12*time.Second {
					t.Errorf("waited %s in all: the budget is unbounded", total)
				}
				_, err = fs.Stat(fs.PathJoin(root, "a"))
				checkUnavailable(t, err, faulty.Endpoint, root+"/a", f.last)
				if _, err := plain.Stat(plain.PathJoin(root, "a")); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("the object exists after a failed publish: %v", err)
				}
			})
		}
	})
}

func checkUnavailable(t *testing.T, err error, endpoint, path, last string) {
	t.Helper()
	var ce *errcode.Error
	if !errors.As(err, &ce) || ce.Code != errcode.StorageUnavailable {
		t.Fatalf("got %v, want %s", err, errcode.StorageUnavailable)
	}
	msg := err.Error()
	for _, want := range []string{endpoint, path, "last error", last, "To fix"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not name %q", msg, want)
		}
	}
	if r := errcode.Resource(fmt.Errorf("cannot read the table location: %w", err)); r == nil || r.Code != errcode.StorageUnavailable {
		t.Errorf("wrapped in another error, the boundary shows %v, want %s", r, errcode.StorageUnavailable)
	}
}

// TestCredentials: without credentials (and anonymous=false) against a
// named endpoint the first request fails at once with STORAGE_CREDENTIALS
// and its remedy, no SDK chain in the message, and the EC2
// instance-metadata service is never asked (its address is pointed at a
// loopback listener that counts connections). Refused credentials are the
// same code; an access denied on a write is READ_ONLY_STORAGE.
func TestCredentials(t *testing.T) {
	s := s3test.Embedded(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var imdsHits atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			imdsHits.Add(1)
			c.Close()
		}
	}()
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent/config")
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://"+ln.Addr().String())

	signed := s
	signed.Query = strings.Replace(s.Query, "&anonymous=true", "", 1)
	fs, root := openFS(t, signed, "nocreds")
	_, err = fs.Stat(fs.PathJoin(root, "a"))
	checkCredentials(t, err)
	if n := imdsHits.Load(); n != 0 {
		t.Fatalf("the instance-metadata endpoint was contacted %d times", n)
	}

	refused, counts := s.Faulty(t, func(s3test.Request) s3test.Fault { return s3test.Fault{Status: 403, Code: "InvalidAccessKeyId"} })
	fs, root = openFS(t, refused, "refused")
	_, err = fs.Stat(fs.PathJoin(root, "a"))
	checkCredentials(t, err)
	if counts.Get("HEAD") != 1 {
		t.Fatalf("%d HEADs: refused credentials were retried", counts.Get("HEAD"))
	}

	denied, _ := s.Faulty(t, func(s3test.Request) s3test.Fault { return s3test.Fault{Status: 403, Code: "AccessDenied"} })
	fs, root = openFS(t, denied, "denied")
	_, err = durable.Bytes(durable.For(fs), root, "a", durable.Options{}, []byte("x"))
	if errcode.Code(err) != errcode.ReadOnlyStorage || !strings.Contains(err.Error(), root+"/a") {
		t.Fatalf("denied write: got %v, want %s naming the object", err, errcode.ReadOnlyStorage)
	}
	_, err = fs.Open(fs.PathJoin(root, "a"))
	checkCredentials(t, err)
}

func checkCredentials(t *testing.T, err error) {
	t.Helper()
	if errcode.Code(err) != errcode.StorageCredentials {
		t.Fatalf("got %v, want %s", err, errcode.StorageCredentials)
	}
	msg := err.Error()
	if !strings.Contains(msg, "To fix: add anonymous=true") || !strings.Contains(msg, "AWS_ACCESS_KEY_ID") {
		t.Errorf("remedy missing: %q", msg)
	}
	for _, sdk := range []string{"operation error", "failed to refresh cached credentials", "https response error", "RequestID", "api error"} {
		if strings.Contains(msg, sdk) {
			t.Errorf("the message carries the SDK's text %q: %q", sdk, msg)
		}
	}
}
