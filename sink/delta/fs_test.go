package delta

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
)

// TestTableOnMemFS runs the sink, optimize, vacuum and a scan on an
// in-memory FS: every file operation of the table goes through the FS (the
// local disk is never touched), which is what lets fault loops reach the
// user-visible output.
func TestTableOnMemFS(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	const dir = "/ethstream-memfs-only/table"
	if _, err := os.Stat("/ethstream-memfs-only"); err == nil {
		t.Skip("the probe path exists on the local disk")
	}
	s, err := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: dir, FS: fs, TargetFileRows: 2, Logger: quietLog})
	closeAtEnd(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(ctx, stream.SinkEnv{QueryID: "q"}); err != nil {
		t.Fatal(err)
	}
	for b := int64(0); b < 12; b++ {
		rows := []refRow{row(int(b), "a", "m", b+1), row(0, "a", "m", b+100)}
		if _, err := s.AddBatch(ctx, b, mkBatch(rows)); err != nil {
			t.Fatal(err)
		}
	}
	// The sink's checkpoint and compaction run after its commits: let them end.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	tbl, err := OpenFS(ctx, fs, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Optimize(ctx, OptimizeOptions{TargetFileRows: 100}); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.vacuum(ctx, 0, false, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := snap.Rows(ctx, func(map[string]any) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 12 {
		t.Fatalf("table has %d rows, want 12", n)
	}
	names, _ := fs.List(dir + "/_delta_log")
	if !strings.Contains(strings.Join(names, " "), "00000000000000000010.checkpoint.parquet") {
		t.Fatalf("no checkpoint in the log: %v", names)
	}
	if _, err := os.Stat("/ethstream-memfs-only"); err == nil {
		t.Fatal("the table touched the local disk")
	}
}

// TestStaleTempsRemovedAfterGrace: the sink deletes temp files in the root
// and the log once they are older than tempGrace, and keeps younger ones
// (a publish of another writer may be in progress).
func TestStaleTempsRemovedAfterGrace(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	const dir = "/t"
	open := func(now time.Time) {
		s, err := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: dir, FS: fs, Logger: quietLog, Clock: func() time.Time { return now }})
		closeAtEnd(t, s)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Open(ctx, stream.SinkEnv{QueryID: "q"}); err != nil {
			t.Fatal(err)
		}
	}
	open(time.Now())
	for _, p := range []string{dir + "/.part-00000-x-c000.snappy.parquet.0123456789abcdef.tmp", dir + "/_delta_log/.00000000000000000001.json.0123456789abcdef.tmp"} {
		f, err := fs.Create(p, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("{")) // MemFS sets the modification time on write
		f.Close()
	}
	temps := func() int {
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
	open(time.Now())
	if got := temps(); got != 2 {
		t.Fatalf("young temps removed: %d left, want 2", got)
	}
	open(time.Now().Add(tempGrace + time.Minute))
	if got := temps(); got != 0 {
		t.Fatalf("%d stale temps left", got)
	}
}

// TestCommitVisibleButNotSyncedKeepsFiles: when the commit is linked into
// the log but the log directory fsync fails, the batch fails without
// deleting the data files the (visible) commit references; a restarted sink
// sees the commit, skips the batch, and the table reads back whole.
func TestCommitVisibleButNotSyncedKeepsFiles(t *testing.T) {
	ctx := context.Background()
	const dir = "/t"
	faults := streamtest.NewFaultFS(dir)
	fs := faults.FS()
	open := func() *MergeSink {
		s, err := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: dir, FS: fs, Logger: quietLog})
		closeAtEnd(t, s)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Open(ctx, stream.SinkEnv{QueryID: "q"}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	// The only write to the log directory itself, once the sink is open, is
	// its fsync after the commit is linked.
	if _, err := faults.Arm(`(ErrInjected (And Writes (PathMatch "_delta_log")))`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddBatch(ctx, 0, mkBatch([]refRow{row(0, "a", "m", 1)})); !errors.Is(err, errCommitUncertain) {
		t.Fatalf("AddBatch = %v, want errCommitUncertain", err)
	}
	if n := faults.Injected(); n != 1 {
		t.Fatalf("%d faults injected, want the one log directory fsync", n)
	}
	faults.Arm("off")
	s = open()
	prog, err := s.AddBatch(ctx, 0, mkBatch([]refRow{row(0, "a", "m", 1)}))
	if err != nil || prog.Metrics["skipped"] != "true" {
		t.Fatalf("re-run batch: %+v, %v; want skipped", prog, err)
	}
	tbl, err := OpenFS(ctx, fs, dir)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := snap.Rows(ctx, func(map[string]any) error { n++; return nil }); err != nil {
		t.Fatalf("the visible commit lost its data file: %v", err)
	}
	if n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
}
