package delta

import (
	"context"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/internal/durable"
	"github.com/ethstream/ethstream/storage"
	"github.com/ethstream/ethstream/storage/s3test"
	"github.com/ethstream/ethstream/stream"
)

// TestVacuumOnS3 vacuums a table on each S3 server: it deletes exactly the
// tombstoned file and the orphan, keeps every live file, and takes each
// object's size and time from the LIST responses: no HEAD at all, and a
// fixed number of LISTs however many files the table holds.
func TestVacuumOnS3(t *testing.T) {
	s3test.Run(t, func(t *testing.T, srv s3test.Server) {
		ctx := context.Background()
		srv, counts := srv.Counting(t)
		loc, err := storage.Parse("--table", srv.Location("lake/table"))
		if err != nil {
			t.Fatal(err)
		}
		fs, err := storage.NewFS(ctx, vfs.NewMem(), loc)
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: loc.Path, FS: fs, Logger: quietLog, AutoCompactMinFiles: -1})
		closeAtEnd(t, s)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Open(ctx, stream.SinkEnv{QueryID: "query-1"}); err != nil {
			t.Fatal(err)
		}
		for i := range 12 {
			if _, err := s.AddBatch(ctx, int64(i), mkBatch([]refRow{row(i, "a", "m", 1)})); err != nil {
				t.Fatal(err)
			}
		}
		before := map[string]bool{}
		for _, f := range s.snap.Files() {
			before[f.Path] = true
		}
		// Window 0 again: its file is rewritten, the old one tombstoned.
		if _, err := s.AddBatch(ctx, 12, mkBatch([]refRow{row(0, "a", "m", 2)})); err != nil {
			t.Fatal(err)
		}
		var live, tombstoned []string
		for _, f := range s.snap.Files() {
			live = append(live, f.Path)
			delete(before, f.Path)
		}
		for p := range before {
			tombstoned = append(tombstoned, p)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if len(live) != 12 || len(tombstoned) != 1 {
			t.Fatalf("%d live files, %d tombstoned", len(live), len(tombstoned))
		}
		orphan := "part-00000-orphan-c000.snappy.parquet"
		if _, err := durable.Bytes(durable.For(fs), loc.Path, orphan, durable.Options{}, []byte("x")); err != nil {
			t.Fatal(err)
		}
		tbl, err := OpenFS(ctx, fs, loc.Path)
		if err != nil {
			t.Fatal(err)
		}
		counts.Reset()
		later := time.Now().Add(8 * 24 * time.Hour)
		got, err := tbl.vacuum(ctx, 168*time.Hour, true, later)
		if err != nil {
			t.Fatal(err)
		}
		want := append([]string{orphan}, tombstoned...)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("dry run = %v, want %v", got, want)
		}
		// The snapshot lists the log once; the walk lists the root; the
		// temp sweep lists the root and the log.
		if h, l := counts.Get("HEAD"), counts.Get("LIST"); h != 0 || l > 4 {
			t.Fatalf("vacuum of %d files made %d HEADs and %d LISTs", len(live)+2, h, l)
		}
		if got, err = tbl.vacuum(ctx, 168*time.Hour, false, later); err != nil || !slices.Equal(got, want) {
			t.Fatalf("vacuum = %v, %v", got, err)
		}
		keys := map[string]bool{}
		for _, k := range srv.Keys(t, "lake/table/") {
			if !strings.Contains(k, "/_delta_log/") {
				keys[path.Base(k)] = true
			}
		}
		for _, p := range want {
			if keys[p] {
				t.Fatalf("%s survived the vacuum", p)
			}
		}
		for _, p := range live {
			if !keys[p] {
				t.Fatalf("live file %s was deleted", p)
			}
		}
	})
}
