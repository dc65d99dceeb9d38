package s3archive

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/storage/s3serve"
	"github.com/ethstream/ethstream/stream"
)

// fakeS3 is chain's embedded S3 endpoint over a directory (bucket = each
// top-level folder), behind a loopback reverse proxy that counts the bytes of
// ranged GetObject bodies, so tests see what went over the wire.
type fakeS3 struct {
	srv       *s3serve.Server
	url       string // the proxy
	requests  atomic.Int64
	lists     atomic.Int64
	gets      atomic.Int64
	respBytes atomic.Int64
}

func (f *fakeS3) setFaults(throttle, errs float64) {
	f.srv.SetFaults(s3serve.Faults{ThrottleRate: throttle, ErrorRate: errs, Seed: 7})
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func startFakeS3(t testing.TB, root string) *fakeS3 {
	t.Helper()
	srv, err := s3serve.Start(context.Background(), s3serve.Options{Root: root, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	target, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeS3{srv: srv}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		if r.Request.Method == http.MethodGet && r.Request.Header.Get("Range") != "" && r.StatusCode/100 == 2 {
			f.gets.Add(1)
			r.Body = countingBody{r.Body, &f.respBytes}
		}
		return nil
	}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		if r.Method == http.MethodGet && r.URL.Query().Has("list-type") {
			f.lists.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	f.url = front.URL
	return f
}

func s3Opts(f *fakeS3, uri string) Options {
	o, err := ParseURI(uri + "?endpoint=" + f.url + "&anonymous=true&region=us-east-2")
	if err != nil {
		panic(err)
	}
	return o
}

// drain plans and reads batches until no new data; it returns the rows and
// the number of data batches.
func drain(t testing.TB, s *Source) ([]block, int) {
	t.Helper()
	var start stream.Offset
	var rows []block
	n := 0
	for {
		end, err := s.LatestOffset(context.Background(), start)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(end, start) {
			return rows, n
		}
		rows = append(rows, collect(t, s, start, end)...)
		start = end
		n++
	}
}

func TestS3ListingPaginationAndAdmission(t *testing.T) {
	root := t.TempDir()
	want := writeDays(t, filepath.Join(root, "archive"), day0, 60, 4, "modern")
	// A marker and a non-parquet object that must be ignored.
	os.WriteFile(filepath.Join(root, "archive/v1.0/eth/blocks/_SUCCESS"), nil, 0o644)
	os.WriteFile(filepath.Join(root, "archive/v1.0/eth/blocks/date=2026-08-01/notes.txt"), []byte("x"), 0o644)
	f := startFakeS3(t, root)
	o := s3Opts(f, "s3://archive/v1.0/eth/blocks")
	o.ListPageSize = 7
	o.MaxFilesPerTrigger = 5
	s := openSource(t, o, testEnv(t, vfs.NewMem()))
	got, batches := drain(t, s)
	if batches != 12 {
		t.Fatalf("%d batches, want 12", batches)
	}
	blocksEqual(t, got, want)
	m := s.Metrics()
	if m["filesListed"] != "60" || m["filesRead"] != "60" || m["retries"] != "0" {
		t.Fatalf("metrics %v", m)
	}
	// 13 listings (12 data batches + the empty one) of 62 keys in pages of 7.
	if got := f.lists.Load(); got != 13*9 {
		t.Fatalf("%d list requests, want %d: pagination not exercised", got, 13*9)
	}
}

func TestS3Throttling(t *testing.T) {
	root := t.TempDir()
	want := writeDays(t, filepath.Join(root, "archive"), day0, 10, 30, "nanos")
	f := startFakeS3(t, root)
	f.setFaults(0.25, 0.05) // 25% 503 SlowDown, 5% 500 InternalError
	o := s3Opts(f, "s3://archive/v1.0/eth/blocks")
	o.ListPageSize = 4
	o.Parallelism = 3
	s := openSource(t, o, testEnv(t, vfs.NewMem()))
	got, _ := drain(t, s)
	blocksEqual(t, got, want)
	m := s.Metrics()
	if m["throttles"] == "0" || m["retries"] <= m["throttles"] {
		t.Fatalf("metrics %v: want throttles and errors, each retried", m)
	}
}

// TestS3RangedReads: only the footer and the projected column chunks are
// downloaded, as counted by the server.
func TestS3RangedReads(t *testing.T) {
	root := t.TempDir()
	path := dayPath(filepath.Join(root, "archive"), day0, 0)
	bs := genBlocks(20_000_000, 3000, day0)
	writeEra(t, path, "modern", bs)
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	f := startFakeS3(t, root)
	read := func(cols ...string) (int64, int64) {
		before := f.respBytes.Load()
		s := openSource(t, s3Opts(f, "s3://archive/v1.0/eth/blocks"), testEnv(t, vfs.NewMem(), cols...))
		rows, _ := drain(t, s)
		if len(rows) != len(bs) {
			t.Fatalf("read %d rows", len(rows))
		}
		if s.m.uncached.Load() != 0 {
			t.Fatalf("%d reads were not served by the prefetched ranges", s.m.uncached.Load())
		}
		return f.respBytes.Load() - before, s.m.bytesRead.Load()
	}
	two, twoSrc := read(ethblock.ColBlockTS, ethblock.ColMiner)
	seven, sevenSrc := read(ethblock.Core...)
	if two != twoSrc || seven != sevenSrc {
		t.Fatalf("server sent %d/%d bytes, source counted %d/%d", two, seven, twoSrc, sevenSrc)
	}
	size := info.Size()
	t.Logf("file %d bytes; fetched %d (%.1f%%) for timestamp+miner, %d (%.1f%%) for seven columns",
		size, two, 100*float64(two)/float64(size), seven, 100*float64(seven)/float64(size))
	if !(two < seven && seven < size*6/10) {
		t.Fatalf("fetched %d and %d bytes of a %d-byte file: unprojected columns were downloaded", two, seven, size)
	}
}

func TestS3UnreadableBucket(t *testing.T) {
	f := startFakeS3(t, t.TempDir())
	s := openSource(t, s3Opts(f, "s3://missing/v1.0/eth/blocks"), testEnv(t, vfs.NewMem()))
	_, err := s.LatestOffset(t.Context(), nil)
	if !errcode.Is(err, ArchiveFileUnreadable) || !strings.Contains(err.Error(), "s3://missing/v1.0/eth/blocks/") {
		t.Fatalf("got %v, want %s naming the bucket", err, ArchiveFileUnreadable)
	}
}

// TestS3Cancel: a read stuck in throttling retries returns when the context
// is cancelled.
func TestS3Cancel(t *testing.T) {
	root := t.TempDir()
	writeDays(t, filepath.Join(root, "archive"), day0, 3, 10, "modern")
	f := startFakeS3(t, root)
	s := openSource(t, s3Opts(f, "s3://archive/v1.0/eth/blocks"), testEnv(t, vfs.NewMem()))
	end, err := s.LatestOffset(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	f.setFaults(1, 0)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		for f.requests.Load() < 5 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	err = s.ReadBatch(ctx, nil, end, func(*stream.Batch) error { return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// TestS3RerunAfterRestart: a restarted source re-runs a planned batch from
// the log alone (no listing; sizes come from HEAD requests) and reads the
// same rows.
func TestS3RerunAfterRestart(t *testing.T) {
	root := t.TempDir()
	want := writeDays(t, filepath.Join(root, "archive"), day0, 4, 25, "decimal")
	f := startFakeS3(t, root)
	fs := vfs.NewMem()
	o := s3Opts(f, "s3://archive/v1.0/eth/blocks")
	s := openSource(t, o, testEnv(t, fs))
	end, err := s.LatestOffset(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	lists := f.lists.Load()
	f.setFaults(0.2, 0)
	s2 := openSource(t, o, testEnv(t, fs))
	blocksEqual(t, collect(t, s2, nil, end), want)
	if f.lists.Load() != lists {
		t.Fatal("the re-run listed the bucket")
	}
	if m := s2.Metrics(); m["filesRead"] != "4" || m["requests"] == "0" {
		t.Fatalf("metrics %v", m)
	}
}
