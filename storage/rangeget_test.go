package storage

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ethstream/ethstream/internal/cputime"
	"github.com/ethstream/ethstream/internal/s3client"
	"github.com/ethstream/ethstream/storage/s3test"
)

// rangeKeys are keys whose escaping differs between schemes: a space, a
// plus, reserved and unreserved punctuation, a percent sign, non-ASCII
// letters and Spark's partition directories.
var rangeKeys = []string{
	"plain",
	"date=2024-01-01/part-00000-c000.snappy.parquet",
	"a b/c+d=e&f;g,h",
	"tilde~star*(paren)!'quote'",
	"per%2Fcent/%41",
	"ünïcødé/ファイル",
}

// objectsOf returns the store of s's bucket as the code under test builds
// it (anonymous where s is unsigned), and the same store with its reads on
// the SDK's path.
func objectsOf(t *testing.T, s s3test.Server, endpoint string) (lean, sdk *Objects) {
	t.Helper()
	mk := func() *Objects {
		o, err := NewObjects(context.Background(), ObjectsOptions{
			Conn:   s3client.Conn{Endpoint: endpoint, Anonymous: s.Name == "embedded", PathStyle: true},
			Bucket: s.Bucket, Retry: Retry{Attempts: 1}, Clock: func() Clock { return &manualClock{} }})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	lean, sdk = mk(), mk()
	if lean.ranged == nil {
		t.Fatalf("%s: no range getter for a path-style custom endpoint", s.Name)
	}
	sdk.ranged = nil
	return lean, sdk
}

// TestRangeGetterReadsWhatTheSDKReads: every key, every range, through the
// getter and through the SDK, from the embedded endpoint (unsigned and
// verifying SigV4) and Versity Gateway (verifying SigV4): the same bytes.
// A key escaped or signed differently from the SDK is refused (403) or
// names another object (404).
func TestRangeGetterReadsWhatTheSDKReads(t *testing.T) {
	servers := map[string]func(t *testing.T) s3test.Server{
		"embedded":        func(t *testing.T) s3test.Server { return s3test.Embedded(t) },
		"embedded-signed": s3test.EmbeddedSigned,
		"versity":         func(t *testing.T) s3test.Server { return s3test.Versity(t) },
		// HTTPS, the SDK trusting the proxy's certificate (AWS_CA_BUNDLE):
		// the getter's own connections are TLS with the client's settings.
		"embedded-tls": func(t *testing.T) s3test.Server {
			s, _ := s3test.Embedded(t).OverTLS(t)
			return s
		},
		"embedded-signed-tls": func(t *testing.T) s3test.Server {
			s, _ := s3test.EmbeddedSigned(t).OverTLS(t)
			return s
		},
		"versity-tls": func(t *testing.T) s3test.Server {
			s, _ := s3test.Versity(t).OverTLS(t)
			return s
		},
	}
	for name, start := range servers {
		t.Run(name, func(t *testing.T) {
			s := start(t)
			ctx := context.Background()
			lean, sdk := objectsOf(t, s, s.Endpoint)
			if name != "embedded" && name != "embedded-tls" && lean.ranged.signer == nil {
				t.Fatal("a signed store's getter does not sign")
			}
			if strings.HasSuffix(name, "-tls") && (lean.ranged.conns == nil || lean.ranged.conns.tls == nil) {
				t.Fatal("no TLS connections of the getter's own for an https endpoint")
			}
			for i, key := range rangeKeys {
				obj := make([]byte, 20_000+i)
				for j := range obj {
					obj[j] = byte(j*13 + i)
				}
				if _, err := s.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(key), Body: bytes.NewReader(obj)}); err != nil {
					t.Fatalf("put %q: %v", key, err)
				}
				for _, r := range []struct{ off, n int64 }{{0, 1}, {0, int64(len(obj))}, {7_777, 5_000}, {int64(len(obj)) - 3, 3}} {
					got, want := make([]byte, r.n), make([]byte, r.n)
					if err := lean.GetRangeInto(ctx, key, r.off, got); err != nil {
						t.Fatalf("%q bytes %d+%d through the getter: %v", key, r.off, r.n, err)
					}
					if err := sdk.GetRangeInto(ctx, key, r.off, want); err != nil {
						t.Fatalf("%q bytes %d+%d through the SDK: %v", key, r.off, r.n, err)
					}
					if !bytes.Equal(got, want) || !bytes.Equal(got, obj[r.off:r.off+r.n]) {
						t.Fatalf("%q bytes %d+%d: the getter and the SDK read different bytes", key, r.off, r.n)
					}
				}
			}
		})
	}
}

// TestRangeGetterFailsAsTheSDKFails: a missing key, a refused signature,
// each injected S3 error and a dead endpoint give the same error through
// the getter as through the SDK, class and message alike (Classify and
// Reason drive the retries and the user's error).
func TestRangeGetterFailsAsTheSDKFails(t *testing.T) {
	ctx := context.Background()
	check := func(t *testing.T, what string, lean, sdk *Objects, key string) {
		t.Helper()
		p := make([]byte, 10)
		errLean, errSDK := lean.GetRangeInto(ctx, key, 0, p), sdk.GetRangeInto(ctx, key, 0, p)
		if errLean == nil || errSDK == nil {
			t.Fatalf("%s: getter %v, SDK %v: want two errors", what, errLean, errSDK)
		}
		if Classify(errLean) != Classify(errSDK) || errLean.Error() != errSDK.Error() {
			t.Fatalf("%s:\n getter: %v (class %v)\n    SDK: %v (class %v)", what, errLean, Classify(errLean), errSDK, Classify(errSDK))
		}
	}
	s3test.Run(t, func(t *testing.T, s s3test.Server) {
		lean, sdk := objectsOf(t, s, s.Endpoint)
		check(t, "a missing key", lean, sdk, "no/such/key")
		for _, f := range []s3test.Fault{
			{Status: 503, Code: "SlowDown"},
			{Status: 500, Code: "InternalError"},
			{Status: 403, Code: "AccessDenied"},
			{Status: 400, Code: "InvalidRequest"},
		} {
			faulty, _ := s.Faulty(t, s3test.Always(f))
			lean, sdk := objectsOf(t, s, faulty.Endpoint)
			check(t, fmt.Sprintf("an injected %d %s", f.Status, f.Code), lean, sdk, "k")
		}
	})
	t.Run("tls", func(t *testing.T) {
		s := s3test.Embedded(t)
		ts, _ := s.OverTLS(t)
		lean, sdk := objectsOf(t, s, ts.Endpoint)
		check(t, "a missing key over TLS", lean, sdk, "no/such/key")
		faulty, _ := s.Faulty(t, s3test.Always(s3test.Fault{Status: 503, Code: "SlowDown"}))
		ft, _ := faulty.OverTLS(t)
		lean, sdk = objectsOf(t, s, ft.Endpoint)
		check(t, "an injected 503 SlowDown over TLS", lean, sdk, "k")
	})
	t.Run("refused-signature", func(t *testing.T) {
		s := s3test.EmbeddedSigned(t)
		t.Setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
		lean, sdk := objectsOf(t, s, s.Endpoint)
		check(t, "a wrong secret", lean, sdk, "k")
	})
	t.Run("dead-endpoint", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead := "http://" + ln.Addr().String()
		ln.Close()
		lean, sdk := objectsOf(t, s3test.Server{Name: "embedded", Bucket: "lake"}, dead)
		check(t, "a closed port", lean, sdk, "k")
	})
}

// TestRangeGetterRefusesAMisplacedAnswer: a server that ignores Range (200
// and the whole object), answers another range, or holds fewer bytes than
// asked for is an error, never bytes from the wrong place; a 200 for a
// read from offset 0 is the object's first bytes.
func TestRangeGetterRefusesAMisplacedAnswer(t *testing.T) {
	obj := []byte("0123456789abcdefghij")
	var mode string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode {
		case "ignore-range":
			w.Header().Set("Content-Length", strconv.Itoa(len(obj)))
			w.Write(obj)
		case "other-range":
			w.Header().Set("Content-Range", fmt.Sprintf("bytes 0-4/%d", len(obj)))
			w.Header().Set("Content-Length", "5")
			w.WriteHeader(http.StatusPartialContent)
			w.Write(obj[:5])
		case "short":
			w.Header().Set("Content-Range", fmt.Sprintf("bytes 15-19/%d", len(obj)))
			w.Header().Set("Content-Length", "5")
			w.WriteHeader(http.StatusPartialContent)
			w.Write(obj[15:])
		}
	}))
	defer srv.Close()
	lean, _ := objectsOf(t, s3test.Server{Name: "embedded", Bucket: "lake"}, srv.URL)
	ctx := context.Background()
	for _, c := range []struct {
		mode    string
		off, n  int64
		wantErr bool
	}{
		{"ignore-range", 0, 5, false},
		{"ignore-range", 5, 5, true},
		{"other-range", 5, 5, true},
		{"short", 15, 10, true},
	} {
		mode = c.mode
		p := make([]byte, c.n)
		err := lean.GetRangeInto(ctx, "k", c.off, p)
		if (err != nil) != c.wantErr {
			t.Fatalf("%s, bytes %d+%d: err %v, want error %v", c.mode, c.off, c.n, err, c.wantErr)
		}
		if err == nil && !bytes.Equal(p, obj[c.off:c.off+c.n]) {
			t.Fatalf("%s, bytes %d+%d: read %q", c.mode, c.off, c.n, p)
		}
	}
}

// TestRangeGetterEndpoints: the getter addresses a bucket as the SDK's
// endpoint rules do (virtual host on AWS, path style for a name that is no
// host label or on request, a custom endpoint's path), and leaves to the
// SDK a bucket whose rules ask for another signature (S3 Express).
func TestRangeGetterEndpoints(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		conn   s3client.Conn
		bucket string
		want   string // "" = no getter
	}{
		{s3client.Conn{Region: "us-east-2", Anonymous: true}, "aws-public-blockchain", "https://aws-public-blockchain.s3.us-east-2.amazonaws.com"},
		{s3client.Conn{Region: "us-east-2", Anonymous: true}, "my.dotted.bucket", "https://s3.us-east-2.amazonaws.com/my.dotted.bucket"},
		{s3client.Conn{Region: "eu-west-1", Anonymous: true, PathStyle: true}, "lake", "https://s3.eu-west-1.amazonaws.com/lake"},
		{s3client.Conn{Endpoint: "http://127.0.0.1:9000", Anonymous: true, PathStyle: true}, "lake", "http://127.0.0.1:9000/lake"},
		{s3client.Conn{Region: "us-west-2", Anonymous: true}, "mybucket--usw2-az1--x-s3", ""},
	} {
		o, err := NewObjects(ctx, ObjectsOptions{Conn: c.conn, Bucket: c.bucket})
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if o.ranged != nil {
			got = o.ranged.base.String()
		}
		if got != c.want {
			t.Errorf("bucket %s, %+v: getter at %q, want %q", c.bucket, c.conn, got, c.want)
		}
	}
}

// BenchmarkGetRangeInto reads 8 KiB ranges of one object from the embedded
// endpoint through the getter and through the SDK, four readers at a time
// (a decode's concurrent chunk reads). cpu-us/op is this process's CPU, the
// endpoint's included, per range: the cost rangeGetter exists to cut.
func BenchmarkGetRangeInto(b *testing.B) {
	s := s3test.Embedded(b)
	ctx := context.Background()
	obj := make([]byte, 2<<20)
	for i := range obj {
		obj[i] = byte(i * 7)
	}
	if _, err := s.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String("k"), Body: bytes.NewReader(obj)}); err != nil {
		b.Fatal(err)
	}
	for _, via := range []string{"getter", "sdk"} {
		b.Run(via, func(b *testing.B) {
			o, err := NewObjects(ctx, ObjectsOptions{Conn: s3client.Conn{Endpoint: s.Endpoint, Anonymous: true, PathStyle: true}, Bucket: s.Bucket})
			if err != nil {
				b.Fatal(err)
			}
			if via == "sdk" {
				o.ranged = nil
			}
			b.SetParallelism(2) // 4 goroutines on the reference machine's 2 cores
			c0 := cputime.Self()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				p := make([]byte, 8<<10)
				for i := int64(0); pb.Next(); i++ {
					if err := o.GetRangeInto(ctx, "k", (i*100_003)%(int64(len(obj))-int64(len(p))), p); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64((cputime.Self()-c0).Microseconds())/float64(b.N), "cpu-us/op")
		})
	}
}

// BenchmarkGetRangeEndpoint reads a seed backfill's ranges of an archive
// file (the 128 KiB tail, a 7 KiB head, a 95 KiB middle) from the S3
// endpoint at $ETHSTREAM_BENCH_S3_ENDPOINT (e.g. `ethstream serve-s3 --root
// WORKDIR/s3`, bucket aws-public-blockchain; skipped when unset), eight
// readers at a time, through the getter's connections and through
// net/http. cpu-us/op is this process's CPU a range: the client's alone,
// the endpoint's being its own process's.
func BenchmarkGetRangeEndpoint(b *testing.B) {
	ep := os.Getenv("ETHSTREAM_BENCH_S3_ENDPOINT")
	if ep == "" {
		b.Skip("ETHSTREAM_BENCH_S3_ENDPOINT not set")
	}
	ctx := context.Background()
	for _, via := range []string{"conns", "net-http"} {
		b.Run(via, func(b *testing.B) {
			o, err := NewObjects(ctx, ObjectsOptions{Conn: s3client.Conn{Endpoint: ep, Anonymous: true, PathStyle: true}, Bucket: "aws-public-blockchain"})
			if err != nil {
				b.Fatal(err)
			}
			if via == "net-http" {
				o.ranged.conns = nil
			}
			var key string
			var size int64
			if err := o.List(ctx, "v1.0/eth/blocks/", "", 100, 100, func(infos []ObjectInfo) error {
				for _, in := range infos {
					if key == "" && strings.HasSuffix(in.Key, ".parquet") && in.Size >= 1<<20 {
						key, size = in.Key, in.Size
					}
				}
				return nil
			}); err != nil || key == "" {
				b.Fatalf("no archive file of 1 MiB or more at %s: %v", ep, err)
			}
			b.SetParallelism(4) // 8 readers on 2 cores
			b.ReportAllocs()
			c0 := cputime.Self()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				tail, head, mid := make([]byte, 128<<10), make([]byte, 7<<10), make([]byte, 95<<10)
				for i := 0; pb.Next(); i++ {
					var err error
					switch i % 3 {
					case 0:
						err = o.GetRangeInto(ctx, key, size-int64(len(tail)), tail)
					case 1:
						err = o.GetRangeInto(ctx, key, 0, head)
					case 2:
						err = o.GetRangeInto(ctx, key, size/2, mid)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64((cputime.Self()-c0).Microseconds())/float64(b.N), "cpu-us/op")
		})
	}
}
