package checkpoint

import (
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
)

func errorsAs(err error, target **errcode.Error) bool { return errors.As(err, target) }

func entry(wm int64) *OffsetEntry {
	return &OffsetEntry{Version: OffsetsV1, Metadata: OffsetMetadata{BatchWatermarkMs: wm, Conf: map[string]string{}},
		Sources: []SourceOffset{{Key: "0", Offset: json.RawMessage(`{"logOffset":1}`)}}}
}

func TestWriterLifecycle(t *testing.T) {
	t.Run("mem", func(t *testing.T) { testWriterLifecycle(t, vfs.NewMem(), "/ck") })
	t.Run("disk", func(t *testing.T) { testWriterLifecycle(t, vfs.Default, t.TempDir()+"/ck") })
}

func testWriterLifecycle(t *testing.T, fs vfs.FS, dir string) {
	if _, ok, err := (Dir{FS: fs, Path: dir}).ReadMetadata(); ok || err != nil {
		t.Fatalf("metadata of a missing checkpoint: %v %v", ok, err)
	}
	w, err := Lock(fs, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Prepare(); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMetadata(Metadata{ID: "q"}); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMetadata(Metadata{ID: "other"}); !errors.Is(err, ErrExists) {
		t.Fatalf("second metadata write = %v, want ErrExists", err)
	}
	for i := int64(0); i < 5; i++ {
		if err := w.WriteOffsets(i, entry(i)); err != nil {
			t.Fatal(err)
		}
		if i < 4 {
			if err := w.WriteCommit(i, &CommitEntry{NextBatchWatermarkMs: i + 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.WriteOffsets(3, entry(99)); !errors.Is(err, ErrExists) {
		t.Fatalf("overwrite offsets = %v, want ErrExists", err)
	}
	if e, _ := w.ReadOffsets(3); e.Metadata.BatchWatermarkMs != 3 {
		t.Fatal("offsets/3 was overwritten")
	}
	s, err := w.ReadSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if s.LatestID != 4 || s.CommittedID != 3 || s.Prev.Metadata.BatchWatermarkMs != 3 || s.CommittedOffsets != s.Prev || s.Metadata.ID != "q" {
		t.Fatalf("snapshot = %+v", s)
	}
	// Retention: with 2 retained at batch 4, ids < 2 go.
	n, err := w.Purge(4, 2)
	if err != nil || n != 4 {
		t.Fatalf("purge = %d, %v", n, err)
	}
	offs, _ := w.ListOffsets()
	commits, _ := w.ListCommits()
	if len(offs) != 3 || offs[0] != 2 || len(commits) != 2 || commits[0] != 2 {
		t.Fatalf("after purge offsets %v commits %v", offs, commits)
	}
	// The next purges delete by name what fell out of the retention since.
	for i := int64(5); i < 9; i++ {
		if err := w.WriteCommit(i-1, &CommitEntry{NextBatchWatermarkMs: i}); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteOffsets(i, entry(i)); err != nil {
			t.Fatal(err)
		}
		if n, err := w.Purge(i, 2); err != nil || n != 2 {
			t.Fatalf("purge at %d = %d, %v", i, n, err)
		}
	}
	offs, _ = w.ListOffsets()
	commits, _ = w.ListCommits()
	if !slices.Equal(offs, []int64{6, 7, 8}) || !slices.Equal(commits, []int64{6, 7}) {
		t.Fatalf("after incremental purges offsets %v commits %v", offs, commits)
	}
	// A second writer is refused while the first holds the lock.
	if _, err := Lock(fs, dir); !errcode.Is(err, errcode.CheckpointLocked) {
		t.Fatalf("second lock = %v, want CHECKPOINT_LOCKED", err)
	}
	w.Close()
	w2, err := Lock(fs, dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	w2.Close()
}

func TestStaleTempRemovedAndIgnored(t *testing.T) {
	fs := vfs.NewMem()
	w, _ := Lock(fs, "/ck")
	defer w.Close()
	if err := w.Prepare(); err != nil {
		t.Fatal(err)
	}
	f, _ := fs.Create("/ck/offsets/.7.tmp", vfs.WriteCategoryUnspecified)
	f.Write([]byte("v1\n"))
	f.Close()
	f, _ = fs.Create("/ck/offsets/notes.txt", vfs.WriteCategoryUnspecified)
	f.Close()
	if ids, _ := w.ListOffsets(); len(ids) != 0 {
		t.Fatalf("temp file listed as a batch: %v", ids)
	}
	if err := w.Prepare(); err != nil {
		t.Fatal(err)
	}
	names, _ := fs.List("/ck/offsets")
	sort.Strings(names)
	if len(names) != 1 || names[0] != "notes.txt" {
		t.Fatalf("offsets dir = %v", names)
	}
}

// TestPublishSurvivesCrash: whatever was published is durable (file and
// directory entry fsynced); nothing half-written ever appears.
func TestPublishSurvivesCrash(t *testing.T) {
	fs := vfs.NewCrashableMem()
	w, _ := Lock(fs, "/ck")
	if err := w.Prepare(); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMetadata(Metadata{ID: "q"}); err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 3; i++ {
		if err := w.WriteOffsets(i, entry(i)); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteCommit(i, &CommitEntry{NextBatchWatermarkMs: i}); err != nil {
			t.Fatal(err)
		}
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	s, err := Dir{FS: crashed, Path: "/ck"}.ReadSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if s.LatestID != 2 || s.CommittedID != 2 || s.Metadata.ID != "q" {
		t.Fatalf("after crash: %+v", s)
	}
}

func TestSnapshotCorruption(t *testing.T) {
	fs := vfs.NewMem()
	w, _ := Lock(fs, "/ck")
	defer w.Close()
	_ = w.Prepare()
	_ = w.WriteMetadata(Metadata{ID: "q"})
	_ = w.WriteOffsets(0, entry(0))
	_ = w.WriteCommit(0, &CommitEntry{})
	// A commit beyond the offsets log.
	_ = w.WriteCommit(1, &CommitEntry{})
	if _, err := w.ReadSnapshot(); !errcode.Is(err, errcode.CheckpointCorrupt) {
		t.Fatalf("commit without offsets: %v", err)
	}
	_ = fs.Remove("/ck/commits/1")
	_ = fs.Remove("/ck/metadata")
	if _, err := w.ReadSnapshot(); !errcode.Is(err, errcode.CheckpointCorrupt) {
		t.Fatalf("missing metadata: %v", err)
	}
}

func TestAppendLine(t *testing.T) {
	fs := vfs.NewMem()
	for _, l := range []string{"a", "bc"} {
		if err := AppendLine(fs, "/p.jsonl", []byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := ReadFile(fs, "/p.jsonl")
	if string(b) != "a\nbc\n" {
		t.Fatalf("%q", b)
	}
}
