package delta

import (
	"context"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/stream"
)

// TestTempsRemovedWhenNoOtherWriter: a sink opened under the checkpoint's
// lock (SinkEnv.Locked) on a table only its query writes removes every
// temp file, however young; without the lock, or on a table another query
// also writes (its txn is in the log), the young ones stay (they may be a
// publish in progress).
func TestTempsRemovedWhenNoOtherWriter(t *testing.T) {
	ctx := context.Background()
	const dir = "/t"
	planted := []string{
		dir + "/.part-00000-x-c000.snappy.parquet.0123456789abcdef.tmp",
		dir + "/_delta_log/.00000000000000000009.json.0123456789abcdef.tmp",
		dir + "/_delta_log/.00000000000000000009.checkpoint.parquet.0123456789abcdef.tmp",
	}
	setup := func(t *testing.T, otherQuery bool) vfs.FS {
		fs := vfs.NewMem()
		s, err := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: dir, FS: fs, Logger: quietLog})
		closeAtEnd(t, s)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Open(ctx, stream.SinkEnv{QueryID: "q", Locked: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AddBatch(ctx, 0, mkBatch([]refRow{row(0, "a", "m", 1)})); err != nil {
			t.Fatal(err)
		}
		if otherQuery {
			o, err := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: dir, FS: fs, Logger: quietLog})
			closeAtEnd(t, o)
			if err != nil {
				t.Fatal(err)
			}
			if err := o.Open(ctx, stream.SinkEnv{QueryID: "other", Locked: true}); err != nil {
				t.Fatal(err)
			}
			if _, err := o.AddBatch(ctx, 0, mkBatch([]refRow{row(0, "b", "m", 1)})); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range planted {
			f, err := fs.Create(p, vfs.WriteCategoryUnspecified)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = f.Write([]byte("partial"))
			_ = f.Close()
		}
		return fs
	}
	left := func(fs vfs.FS) int {
		n := 0
		for _, d := range []string{dir, dir + "/_delta_log"} {
			names, _ := fs.List(d)
			for _, name := range names {
				if strings.HasSuffix(name, ".tmp") {
					n++
				}
			}
		}
		return n
	}
	for _, c := range []struct {
		name       string
		locked     bool
		otherQuery bool
		want       int
	}{
		{"locked, the only query", true, false, 0},
		{"not locked", false, false, len(planted)},
		{"locked, another query writes the table", true, true, len(planted)},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			fs := setup(t, c.otherQuery)
			s, err := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: dir, FS: fs, Logger: quietLog})
			closeAtEnd(t, s)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Open(ctx, stream.SinkEnv{QueryID: "q", Locked: c.locked}); err != nil {
				t.Fatal(err)
			}
			if got := left(fs); got != c.want {
				t.Fatalf("%d temp files left, want %d", got, c.want)
			}
		})
	}
}
