package storage

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/durable"
	"github.com/ethstream/ethstream/storage/s3test"
)

// TestLyingPutRefused: a store that answers a PUT 200 but holds an empty
// or a half object fails the write with STORAGE_WRITE_LOST naming the
// object and both sizes, for a put-if-absent and a replacing PUT alike;
// the lying object is removed, so once the store heals the same name is
// published (a batch redone finds no damaged file).
func TestLyingPutRefused(t *testing.T) {
	s3test.Run(t, func(t *testing.T, s s3test.Server) {
		plain, _ := openFS(t, s, "lie")
		for _, c := range []struct {
			name  string
			fault s3test.Fault
			held  string
		}{
			{"empty", s3test.Fault{EmptyPut: true}, "it holds 0 bytes (4096 were written)"},
			{"truncated", s3test.Fault{Truncate: true}, "it holds 2048 bytes (4096 were written)"},
		} {
			for _, mode := range []durable.Mode{durable.NoOverwrite, durable.Replace} {
				t.Run(c.name+"/"+mode.String(), func(t *testing.T) {
					sw := s3test.NewSwitch(s3test.Matching(1, c.fault, "PUT", "/obj"))
					faulty, _ := s.Faulty(t, sw.Schedule())
					fs, root := openFS(t, faulty, "lie")
					dir := root + "/" + c.name + "-" + mode.String()
					data := bytes.Repeat([]byte("abcdefgh"), 512)
					_, err := durable.Bytes(durable.For(fs), dir, "obj", durable.Options{Mode: mode}, data)
					if errcode.Code(err) != errcode.StorageWriteLost {
						t.Fatalf("lying PUT: %v, want %s", err, errcode.StorageWriteLost)
					}
					for _, want := range []string{dir + "/obj", c.held, faulty.Endpoint, "removed", "To fix"} {
						if !strings.Contains(err.Error(), want) {
							t.Errorf("%q does not say %q", err, want)
						}
					}
					if _, err := plain.Stat(dir + "/obj"); !errors.Is(err, os.ErrNotExist) {
						t.Fatalf("the lying object is still there: %v", err)
					}
					sw.Set(nil)
					if _, err := durable.Bytes(durable.For(fs), dir, "obj", durable.Options{Mode: mode}, data); err != nil {
						t.Fatalf("after the store healed: %v", err)
					}
					if got := readAllFS(t, plain, dir+"/obj"); !bytes.Equal(got, data) {
						t.Fatalf("read back %d bytes, want %d", len(got), len(data))
					}
				})
			}
		}
	})
}

// TestCorruptBodyRefusedByServer: a PUT whose body is damaged on the way
// (its checksum headers as sent) is refused by the server itself (400
// BadDigest: the embedded endpoint checks Content-MD5, Versity the
// checksums), retried, and stored intact; a path that damages every body
// ends in STORAGE_UNAVAILABLE naming the server's refusal, and nothing is
// stored.
func TestCorruptBodyRefusedByServer(t *testing.T) {
	s3test.Run(t, func(t *testing.T, s s3test.Server) {
		plain, root := openFS(t, s, "corrupt")
		faulty, counts := s.Faulty(t, s3test.FirstN(2, s3test.Fault{Corrupt: true}, "PUT"))
		fs, _ := openFS(t, faulty, "corrupt")
		data := []byte("the payload that must arrive as it was sent")
		if _, err := durable.Bytes(durable.For(fs), root, "a", durable.Options{Mode: durable.NoOverwrite}, data); err != nil {
			t.Fatalf("publish through 2 damaged bodies: %v", err)
		}
		if got := readAllFS(t, plain, root+"/a"); !bytes.Equal(got, data) {
			t.Fatalf("stored %q", got)
		}
		if n := counts.Get("PUT"); n != 3 {
			t.Fatalf("%d PUTs, want 3 (two refused by the server, one stored)", n)
		}

		always, _ := s.Faulty(t, s3test.Always(s3test.Fault{Corrupt: true}))
		fs, _ = openFS(t, always, "corrupt")
		_, err := durable.Bytes(durable.For(fs), root, "b", durable.Options{Mode: durable.NoOverwrite}, data)
		if errcode.Code(err) != errcode.StorageUnavailable || !strings.Contains(err.Error(), "HTTP 400") {
			t.Fatalf("every body damaged: %v, want %s naming the server's 400", err, errcode.StorageUnavailable)
		}
		if _, err := plain.Stat(root + "/b"); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a damaged body was stored: %v", err)
		}
	})
}

// TestTruncatedAndSlowReadsRiddenOut: GET answers cut short (the server's
// Content-Length, half the body, then a closed connection) and answers
// slower than the request timeout are retried: a small object read whole,
// a ranged read, and a large object's streamed body, which resumes with a
// ranged GET where it broke off, all read back exactly what was written.
func TestTruncatedAndSlowReadsRiddenOut(t *testing.T) {
	s3test.Run(t, func(t *testing.T, s s3test.Server) {
		plain, root := openFS(t, s, "reads")
		small := []byte(strings.Repeat("0123456789", 100))
		large := make([]byte, memoryReadLimit+3<<20)
		r := rand.New(rand.NewPCG(1, 2))
		for i := range large {
			large[i] = byte(r.Uint32())
		}
		for name, data := range map[string][]byte{"small": small, "large": large} {
			if _, err := durable.Bytes(durable.For(plain), root, name, durable.Options{}, data); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			name  string
			fault s3test.Fault
		}{
			{"truncated", s3test.Fault{Truncate: true}},
			{"slow", s3test.Fault{Delay: time.Minute}},
		} {
			t.Run(c.name, func(t *testing.T) {
				sw := s3test.NewSwitch(s3test.FirstN(2, c.fault, "GET"))
				faulty, counts := s.Faulty(t, sw.Schedule())
				fs, _ := openFS(t, faulty, "reads")
				// A slow answer outlasts the attempt's timeout, not the test.
				fs.(*Mux).buckets[s.Bucket].obj.timeout = 300 * time.Millisecond
				for name, data := range map[string][]byte{"small": small, "large": large} {
					sw.Set(s3test.FirstN(2, c.fault, "GET"))
					counts.Reset()
					if got := readAllFS(t, fs, root+"/"+name); !bytes.Equal(got, data) {
						t.Fatalf("%s: read back %d bytes, want %d", name, len(got), len(data))
					}
					if n := counts.Get("GET"); n < 3 {
						t.Fatalf("%s: %d GETs, want at least 3 (2 faults ridden out)", name, n)
					}
				}
				sw.Set(s3test.FirstN(2, c.fault, "GET"))
				f, err := fs.Open(root + "/large")
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				sw.Set(s3test.FirstN(2, c.fault, "GET"))
				buf := make([]byte, 1000)
				if _, err := f.ReadAt(buf, 5<<20); err != nil || !bytes.Equal(buf, large[5<<20:5<<20+1000]) {
					t.Fatalf("ranged read: %v", err)
				}
			})
		}
	})
}

// TestStalledBodyReported: a store whose every answer breaks off is
// reported after the retry budget, not read forever.
func TestStalledBodyReported(t *testing.T) {
	s := s3test.Embedded(t)
	plain, root := openFS(t, s, "stall")
	large := make([]byte, memoryReadLimit+1<<20)
	if _, err := durable.Bytes(durable.For(plain), root, "large", durable.Options{}, large); err != nil {
		t.Fatal(err)
	}
	faulty, _ := s.Faulty(t, s3test.Always(s3test.Fault{Truncate: true}))
	fs, _ := openFS(t, faulty, "stall")
	f, err := fs.Open(root + "/large")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = readAll(context.Background(), f)
	if err == nil || !strings.Contains(err.Error(), root+"/large") {
		t.Fatalf("a body that always breaks off: %v, want an error naming the object", err)
	}
}

func readAll(_ context.Context, f interface{ Read([]byte) (int, error) }) ([]byte, error) {
	var out []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := f.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
	}
}

// TestSignedEmbedded: the checkpoint and table store works against the
// embedded endpoint verifying SigV4 (its checksum headers signed too, the
// lying-PUT proxy re-signing its own writes), and a wrong secret is
// STORAGE_CREDENTIALS, not a retried failure.
func TestSignedEmbedded(t *testing.T) {
	s := s3test.EmbeddedSigned(t)
	fs, root := openFS(t, s, "signed")
	data := []byte("signed payload")
	if _, err := durable.Bytes(durable.For(fs), root, "a", durable.Options{Mode: durable.NoOverwrite}, data); err != nil {
		t.Fatalf("signed publish: %v", err)
	}
	if got := readAllFS(t, fs, root+"/a"); !bytes.Equal(got, data) {
		t.Fatalf("read back %q", got)
	}
	if err := fs.(*Mux).Probe(context.Background()); err != nil {
		t.Fatalf("probe: %v", err)
	}
	lying, _ := s.Faulty(t, s3test.FirstN(1, s3test.Fault{EmptyPut: true}, "PUT"))
	lfs, _ := openFS(t, lying, "signed")
	if _, err := durable.Bytes(durable.For(lfs), root, "b", durable.Options{}, data); errcode.Code(err) != errcode.StorageWriteLost {
		t.Fatalf("lying PUT on a signed endpoint: %v, want %s", err, errcode.StorageWriteLost)
	}
	t.Setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
	wrong, _ := openFS(t, s, "signed")
	_, err := wrong.Stat(root + "/a")
	if errcode.Code(err) != errcode.StorageCredentials {
		t.Fatalf("a wrong secret: %v, want %s", err, errcode.StorageCredentials)
	}
}
