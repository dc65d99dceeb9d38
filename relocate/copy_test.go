package relocate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/streamtest"
)

// source writes a small stopped query's checkpoint under /src/ck (metadata,
// two batches, a source log, state files, the .lock a run leaves) and a
// table under /src/table (data files, commits, a checkpoint and
// _last_checkpoint), as files of the formats a copy carries verbatim.
func source(t *testing.T, fs vfs.FS) {
	t.Helper()
	w, err := checkpoint.Lock(fs, "/src/ck")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Prepare(); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMetadata(checkpoint.Metadata{ID: "9f1c0d2e-0000-4000-8000-000000000001"}); err != nil {
		t.Fatal(err)
	}
	for id := int64(0); id < 2; id++ {
		e := &checkpoint.OffsetEntry{Version: checkpoint.OffsetsV1, Sources: []checkpoint.SourceOffset{{Key: "0", Offset: json.RawMessage(fmt.Sprintf(`{"logOffset":%d}`, id))}}}
		if err := w.WriteOffsets(id, e); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteCommit(id, &checkpoint.CommitEntry{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"/src/ck/sources/0/0":                                           "v1\n{\"path\":\"file:///a/1.parquet\",\"timestamp\":1,\"batchId\":0}",
		"/src/ck/sources/0/1":                                           "v1\n{\"path\":\"file:///a/2.parquet\",\"timestamp\":2,\"batchId\":1}",
		"/src/ck/state/0/1.delta":                                       strings.Repeat("state bytes ", 5000),
		"/src/ck/state/0/1.meta":                                        "meta",
		"/src/ck/state/0/.x.1.tmp":                                      "a temp file a crash left: not copied",
		"/src/table/part-0.parquet":                                     strings.Repeat("p0", 3000),
		"/src/table/part-1.parquet":                                     strings.Repeat("p1", 3000),
		"/src/table/_delta_log/00000000000000000000.json":               `{"metaData":{"id":"t"}}`,
		"/src/table/_delta_log/00000000000000000001.json":               `{"txn":{"appId":"q","version":1}}`,
		"/src/table/_delta_log/00000000000000000001.checkpoint.parquet": "ckpt",
		"/src/table/_delta_log/_last_checkpoint":                        `{"version":1}`,
	}
	for p, c := range files {
		if err := fs.MkdirAll(fs.PathDir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := fs.Create(p, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(f, c); err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(f.Sync(), f.Close()); err != nil {
			t.Fatal(err)
		}
	}
	// Every directory synced: the source is durable before a copy's crash.
	var dirs func(string)
	dirs = func(d string) {
		if err := syncDir(fs, d); err != nil {
			t.Fatal(err)
		}
		names, _ := fs.List(d)
		for _, n := range names {
			if st, err := fs.Stat(fs.PathJoin(d, n)); err == nil && st.IsDir() {
				dirs(fs.PathJoin(d, n))
			}
		}
	}
	dirs("/")
}

func syncDir(fs vfs.FS, d string) error {
	f, err := fs.OpenDir(d)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// tree renders every file under root (relative path and content hash),
// skipping the lock and temp files, which a copy does not carry.
func tree(fs vfs.FS, root string) string {
	var lines []string
	var walk func(dir, rel string)
	walk = func(dir, rel string) {
		names, err := fs.List(dir)
		if err != nil {
			return
		}
		for _, n := range names {
			p, r := fs.PathJoin(dir, n), rel+"/"+n
			st, err := fs.Stat(p)
			if err != nil {
				continue
			}
			if st.IsDir() {
				walk(p, r)
				continue
			}
			if n == checkpoint.LockFile || strings.HasSuffix(n, ".tmp") {
				continue
			}
			f, err := fs.Open(p)
			if err != nil {
				continue
			}
			b, _ := io.ReadAll(f)
			f.Close()
			h := sha256.Sum256(b)
			lines = append(lines, r+" "+hex.EncodeToString(h[:6]))
		}
	}
	walk(root, "")
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func opts(fs vfs.FS) Options {
	return Options{FS: fs, From: "/src/ck", To: "/dst/ck", TableFrom: "/src/table", TableTo: "/dst/table"}
}

func TestCopy(t *testing.T) {
	fs := vfs.NewMem()
	source(t, fs)
	res, err := Copy(context.Background(), opts(fs))
	if err != nil {
		t.Fatal(err)
	}
	if tree(fs, "/dst/ck") != tree(fs, "/src/ck") || tree(fs, "/dst/table") != tree(fs, "/src/table") {
		t.Fatalf("copy differs:\n%s\n%s\nwant\n%s\n%s", tree(fs, "/dst/ck"), tree(fs, "/dst/table"), tree(fs, "/src/ck"), tree(fs, "/src/table"))
	}
	if res.TableFiles != 6 || res.CheckpointFiles != 9 || res.Cleared {
		t.Fatalf("result %+v", res)
	}
	if _, err := (checkpoint.Dir{FS: fs, Path: "/dst/ck"}).ReadSnapshot(); err != nil {
		t.Fatal(err)
	}
	// Again onto the complete copy: refused, nothing written.
	before := tree(fs, "/dst")
	if _, err := Copy(context.Background(), opts(fs)); errcode.Code(err) != CodeDestinationNotEmpty {
		t.Fatalf("copy onto a copy: %v", err)
	}
	if tree(fs, "/dst") != before {
		t.Fatal("a refused copy wrote")
	}
}

// TestCopyRefusesWhileLocked: a running query holds the lock.
func TestCopyRefusesWhileLocked(t *testing.T) {
	fs := vfs.NewMem()
	source(t, fs)
	w, err := checkpoint.Lock(fs, "/src/ck")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := Copy(context.Background(), opts(fs)); errcode.Code(err) != errcode.CheckpointLocked {
		t.Fatalf("copy of a locked checkpoint: %v", err)
	}
	if _, err := fs.Stat("/dst"); err == nil {
		t.Fatal("a refused copy created its destination")
	}
}

// TestCopyRefusesOverlap: a destination inside its source.
func TestCopyRefusesOverlap(t *testing.T) {
	fs := vfs.NewMem()
	source(t, fs)
	o := opts(fs)
	o.To = "/src/ck/copy"
	if _, err := Copy(context.Background(), o); errcode.Code(err) != errcode.InvalidArgument {
		t.Fatalf("overlap: %v", err)
	}
}

// TestCopyFaultLoop fails the i-th file operation of a copy, for every i,
// then crashes (unsynced data and directory entries lost): the source is
// untouched, and the destination is absent (no file), complete (equal to
// the source), or refused by every reader with CHECKPOINT_COPY_INCOMPLETE;
// the same copy run again then completes it.
func TestCopyFaultLoop(t *testing.T) {
	ff := streamtest.NewFaultFS("/")
	source(t, ff.Mem())
	wantCk, wantTbl := tree(ff.Mem(), "/src/ck"), tree(ff.Mem(), "/src/table")
	// The operations of one clean copy bound the loop.
	clean := streamtest.NewFaultFS("/")
	source(t, clean.Mem())
	start := clean.Ops()
	if _, err := Copy(context.Background(), opts(clean.FS())); err != nil {
		t.Fatal(err)
	}
	n := clean.Ops() - start
	outcomes := map[string]int{}
	for i := 0; i < n; i++ {
		ff := streamtest.NewFaultFS("/")
		source(t, ff.Mem())
		if _, err := ff.Arm(fmt.Sprintf("(ErrInjected (OnIndex %d))", i)); err != nil {
			t.Fatal(err)
		}
		_, err := Copy(context.Background(), opts(ff.FS()))
		ff.Crash()
		mem := ff.Mem()
		if tree(mem, "/src/ck") != wantCk || tree(mem, "/src/table") != wantTbl {
			t.Fatalf("op %d: the source changed", i)
		}
		_, rerr := (checkpoint.Dir{FS: mem, Path: "/dst/ck"}).ReadSnapshot()
		switch {
		case tree(mem, "/dst") == "":
			outcomes["absent"]++
		case err == nil && tree(mem, "/dst/ck") == wantCk && tree(mem, "/dst/table") == wantTbl && rerr == nil:
			outcomes["complete"]++
		case errcode.Code(rerr) == errcode.CheckpointCopyIncomplete:
			outcomes["refused"]++
		default:
			t.Fatalf("op %d (copy error %v): the destination is neither absent, complete nor refused (read: %v):\n%s", i, err, rerr, tree(mem, "/dst"))
		}
		if _, err := Copy(context.Background(), opts(mem)); err != nil && errcode.Code(err) != CodeDestinationNotEmpty {
			t.Fatalf("op %d: the copy again: %v", i, err)
		}
		if tree(mem, "/dst/ck") != wantCk || tree(mem, "/dst/table") != wantTbl {
			t.Fatalf("op %d: the copy again did not complete the destination:\n%s", i, tree(mem, "/dst"))
		}
	}
	if outcomes["absent"] == 0 || outcomes["refused"] == 0 {
		t.Fatalf("outcomes %v over %d operations: the loop did not reach every phase", outcomes, n)
	}
	t.Logf("%d operations: %v", n, outcomes)
}
