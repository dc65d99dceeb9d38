package s3archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
)

// fakeS3 is an S3 endpoint on loopback serving a directory (bucket = each
// top-level folder), with request accounting and injected throttling.
type fakeS3 struct {
	url       string
	requests  atomic.Int64
	gets      atomic.Int64
	respBytes atomic.Int64 // bytes of GetObject bodies served
	mu        sync.Mutex
	throttle  int // every throttle-th request answers 503 SlowDown; 0: never
	n         int
}

func (f *fakeS3) setThrottle(every int) {
	f.mu.Lock()
	f.throttle = every
	f.mu.Unlock()
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w countingWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.n.Add(int64(n))
	return n, err
}

func startFakeS3(t testing.TB, root string) *fakeS3 {
	t.Helper()
	backend := s3mem.New()
	faker := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog()))
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range entries {
		if !b.IsDir() {
			continue
		}
		if err := backend.CreateBucket(b.Name()); err != nil {
			t.Fatal(err)
		}
		err := filepath.WalkDir(filepath.Join(root, b.Name()), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(filepath.Join(root, b.Name()), p)
			_, err = backend.PutObject(b.Name(), filepath.ToSlash(rel), map[string]string{}, bytes.NewReader(data), int64(len(data)), nil)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	f := &fakeS3{}
	h := faker.Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		f.mu.Lock()
		f.n++
		throttle := f.throttle > 0 && f.n%f.throttle == 0
		f.mu.Unlock()
		if throttle {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
			return
		}
		if r.Method == http.MethodGet && r.Header.Get("Range") != "" {
			f.gets.Add(1)
			w = countingWriter{w, &f.respBytes}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
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
	var start engine.Offset
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
}

func TestS3Throttling(t *testing.T) {
	root := t.TempDir()
	want := writeDays(t, filepath.Join(root, "archive"), day0, 10, 30, "nanos")
	f := startFakeS3(t, root)
	f.setThrottle(3) // every third request answers 503 SlowDown
	o := s3Opts(f, "s3://archive/v1.0/eth/blocks")
	o.ListPageSize = 4
	o.Parallelism = 3
	s := openSource(t, o, testEnv(t, vfs.NewMem()))
	got, _ := drain(t, s)
	blocksEqual(t, got, want)
	m := s.Metrics()
	if m["throttles"] == "0" || m["retries"] != m["throttles"] {
		t.Fatalf("metrics %v: want throttles, each retried", m)
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
	two, twoSrc := read(engine.ColBlockTS, engine.ColMiner)
	seven, sevenSrc := read(engine.BlockColumns...)
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
	f.setThrottle(1)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		for f.requests.Load() < 5 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	err = s.ReadBatch(ctx, nil, end, func(*engine.Batch) error { return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}
