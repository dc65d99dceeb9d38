package relocate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/storage"
	"github.com/ethstream/ethstream/storage/s3test"
)

// errKilled stands for a kill of `checkpoint copy` after a step.
var errKilled = errors.New("killed")

// killAfter returns an afterStep hook that kills the copy after its n-th
// step (a file published or removed; 1-based), and the count of steps.
func killAfter(n int) (func(string) error, *int) {
	steps := 0
	return func(string) error {
		steps++
		if steps == n {
			return errKilled
		}
		return nil
	}, &steps
}

// unfinishedCopy leaves at the destinations of o a copy killed after half
// of its steps: the marker, the table and part of the checkpoint.
func unfinishedCopy(t *testing.T, o Options) {
	t.Helper()
	o.afterStep, _ = killAfter(10)
	if _, err := Copy(context.Background(), o); !errors.Is(err, errKilled) {
		t.Fatalf("the first copy: %v, want it killed", err)
	}
}

// outcome classifies a destination after a kill: "absent" (no file at
// either destination), "complete" (both equal to the sources and readable)
// or "refused" (every reader refuses it with CHECKPOINT_COPY_INCOMPLETE);
// anything else fails the test.
func outcome(t *testing.T, fs vfs.FS, o Options, wantCk, wantTbl, at string) string {
	t.Helper()
	_, rerr := (checkpoint.Dir{FS: fs, Path: o.To}).ReadSnapshot()
	ck, tbl := tree(fs, o.To), tree(fs, o.TableTo)
	switch {
	case ck == "" && tbl == "":
		return "absent"
	case ck == wantCk && tbl == wantTbl && rerr == nil:
		return "complete"
	case errcode.Code(rerr) == errcode.CheckpointCopyIncomplete:
		// state dump reads the state without a snapshot: refused too.
		_, derr := state.Dump(context.Background(), state.DumpOptions{FS: fs, Checkpoint: o.To, Batch: -1, Format: "csv"}, io.Discard)
		if errcode.Code(derr) != errcode.CheckpointCopyIncomplete {
			t.Fatalf("%s: state dump of a refused destination: %v", at, derr)
		}
		return "refused"
	}
	t.Fatalf("%s: the destination is neither absent, complete nor refused (read: %v):\n%s\n%s", at, rerr, ck, tbl)
	return ""
}

// TestCopyClearFaultLoop fails the i-th file operation of a copy that
// re-runs over an unfinished one (its clear, then the copy), for every i,
// then crashes (unsynced data and directory entries lost): the destination
// is at every point absent, complete or refused, and the same copy run
// once more completes it. Before the clear kept its marker to the last,
// a kill in the clear left commits/ gone and no marker (issue 39): the
// destination then ran a query from empty state, and the copy refused it
// with COPY_DESTINATION_NOT_EMPTY.
func TestCopyClearFaultLoop(t *testing.T) {
	base := vfs.NewCrashableMem()
	source(t, base)
	wantCk, wantTbl := tree(base, "/src/ck"), tree(base, "/src/table")
	unfinishedCopy(t, opts(base))
	if tree(base, "/dst/ck") == "" || !strings.Contains(tree(base, "/dst/ck"), checkpoint.CopyMarkerFile) {
		t.Fatalf("the killed copy left no marked destination:\n%s", tree(base, "/dst"))
	}
	// The operations of one clean re-run bound the loop.
	clean := streamtest.NewFaultFSOver("/", base.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}))
	start := clean.Ops()
	res, err := Copy(context.Background(), opts(clean.FS()))
	if err != nil || !res.Cleared {
		t.Fatalf("the re-run: %+v %v", res, err)
	}
	n := clean.Ops() - start
	outcomes := map[string]int{}
	for i := 0; i < n; i++ {
		ff := streamtest.NewFaultFSOver("/", base.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}))
		if _, err := ff.Arm(fmt.Sprintf("(ErrInjected (OnIndex %d))", i)); err != nil {
			t.Fatal(err)
		}
		_, err := Copy(context.Background(), opts(ff.FS()))
		ff.Crash()
		mem := ff.Mem()
		if tree(mem, "/src/ck") != wantCk || tree(mem, "/src/table") != wantTbl {
			t.Fatalf("op %d: the source changed", i)
		}
		at := fmt.Sprintf("op %d (copy error %v)", i, err)
		got := outcome(t, mem, opts(mem), wantCk, wantTbl, at)
		outcomes[got]++
		_, err = Copy(context.Background(), opts(mem))
		if got == "complete" && errcode.Code(err) == CodeDestinationNotEmpty {
			continue
		}
		if err != nil {
			t.Fatalf("%s: the copy again over a %s destination: %v", at, got, err)
		}
		if tree(mem, "/dst/ck") != wantCk || tree(mem, "/dst/table") != wantTbl {
			t.Fatalf("%s: the copy again did not complete the destination:\n%s", at, tree(mem, "/dst"))
		}
	}
	if outcomes["refused"] == 0 || outcomes["complete"] == 0 {
		t.Fatalf("outcomes %v over %d operations: the loop did not reach every phase", outcomes, n)
	}
	t.Logf("%d operations: %v", n, outcomes)
}

// TestCopyKillLoopOnS3 kills `checkpoint copy` after each of its writes
// to S3 (a PUT or DELETE: each is durable once answered, so a process
// killed there leaves exactly the writes before it; the fault proxy
// answers every later request with an error, as a dead process sends
// none), on the embedded endpoint and on Versity, for a first copy and for
// a re-run that clears an unfinished one (killLoop). The source is local,
// the destination on S3 (a move to a bucket). On the clear of main at
// 27801e4 (RemoveAll, keys in listing order: commits/ before the marker)
// this fails: a kill between them left commits/ gone and no marker.
func TestCopyKillLoopOnS3(t *testing.T) {
	s3test.Run(t, func(t *testing.T, s s3test.Server) {
		sw := s3test.NewSwitch(nil)
		faulty, _ := s.Faulty(t, sw.Schedule())
		killLoop(t, []bool{false, true}, func(t *testing.T, prefix string) (vfs.FS, Options, func(int) Options) {
			mem := vfs.NewMem()
			source(t, mem)
			fs, o := s3Options(t, s, mem, prefix)
			_, ko := s3Options(t, faulty, mem, prefix)
			return fs, o, func(k int) Options {
				if k == 0 {
					sw.Set(nil)
					return o
				}
				sw.Set(killAfterWrites(k))
				return ko
			}
		})
	})
}

// TestCopyKillLoopOnDisk is TestCopyKillLoopOnS3's re-run over an
// unfinished copy on the local disk: the copy is killed after its k-th
// step (a file published or removed, each durable before the next
// begins). A first copy's kills are TestCopyFaultLoop's, at every file
// operation.
func TestCopyKillLoopOnDisk(t *testing.T) {
	killLoop(t, []bool{true}, func(t *testing.T, prefix string) (vfs.FS, Options, func(int) Options) {
		root := t.TempDir()
		mem := vfs.NewMem()
		source(t, mem)
		for _, d := range []string{"/src/ck", "/src/table"} {
			files, _, err := Options{FS: mem}.walkAll(d)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				if err := copyOut(mem, f.src, root+f.src); err != nil {
					t.Fatal(err)
				}
			}
		}
		o := Options{FS: vfs.Default, From: root + "/src/ck", To: root + "/dst/ck", TableFrom: root + "/src/table", TableTo: root + "/dst/table"}
		return vfs.Default, o, func(k int) Options {
			ko := o
			if k > 0 {
				ko.afterStep, _ = killAfter(k)
			}
			return ko
		}
	})
}

// copyOut copies the file src of mem to dst on the local disk.
func copyOut(mem vfs.FS, src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := mem.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	b, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// killLoop kills a copy after its k-th write, k = 1, 2, ... until one
// completes, for a first copy (rerun false) and for a re-run that clears
// an unfinished one (true), as reruns lists: the destination is after every kill absent, complete or refused
// (outcome), and the copy run again completes it. env gives, for a fresh
// pair of locations under prefix, the FS to read them, the copy's options
// and, for k, the options of a copy killed after write k (k = 0: disarm).
func killLoop(t *testing.T, reruns []bool, env func(t *testing.T, prefix string) (vfs.FS, Options, func(k int) Options)) {
	for _, rerun := range reruns {
		name := "first-copy"
		if rerun {
			name = "clear-and-copy"
		}
		t.Run(name, func(t *testing.T) {
			outcomes := map[string]int{}
			for k := 1; ; k++ {
				fs, o, killed := env(t, fmt.Sprintf("%s/k%d", name, k))
				wantCk, wantTbl := tree(fs, o.From), tree(fs, o.TableFrom)
				if rerun {
					unfinishedCopy(t, o)
				}
				_, err := Copy(context.Background(), killed(k))
				killed(0)
				if err == nil {
					if got := outcome(t, fs, o, wantCk, wantTbl, name); got != "complete" {
						t.Fatalf("a copy that returned nil left a %s destination", got)
					}
					if k < 3 {
						t.Fatalf("the copy ended after %d writes: the loop killed nothing", k)
					}
					break
				}
				outcomes[outcome(t, fs, o, wantCk, wantTbl, fmt.Sprintf("killed after write %d (%v)", k, err))]++
				if _, err := Copy(context.Background(), o); err != nil {
					t.Fatalf("write %d: the copy again: %v", k, err)
				}
				if outcome(t, fs, o, wantCk, wantTbl, "the copy again") != "complete" {
					t.Fatalf("write %d: the copy again did not complete the destination", k)
				}
			}
			if outcomes["refused"] == 0 {
				t.Fatalf("outcomes %v: no kill left a refused destination", outcomes)
			}
			t.Logf("%v", outcomes)
		})
	}
}

// killAfterWrites passes requests on until the k-th PUT or DELETE has
// been, then answers every request with an error: a process killed after
// its k-th write.
func killAfterWrites(k int) s3test.Schedule {
	writes := 0
	return func(r s3test.Request) s3test.Fault {
		if writes >= k {
			return s3test.Fault{Status: 403, Code: "AccessDenied"}
		}
		if r.Kind == "PUT" || r.Kind == "DELETE" {
			writes++
		}
		return s3test.Fault{}
	}
}

// s3Options are opts with both destinations under prefix on s, the
// sources on the local mem.
func s3Options(t *testing.T, s s3test.Server, mem vfs.FS, prefix string) (vfs.FS, Options) {
	t.Helper()
	var locs []storage.Location
	var paths []string
	for _, d := range []string{"ck", "table"} {
		l, err := storage.Parse("checkpoint", s.Location(prefix+"/"+d))
		if err != nil {
			t.Fatal(err)
		}
		locs, paths = append(locs, l), append(paths, l.Path)
	}
	fs, err := storage.NewFS(context.Background(), mem, locs...)
	if err != nil {
		t.Fatal(err)
	}
	return fs, Options{FS: fs, From: "/src/ck", To: paths[0], TableFrom: "/src/table", TableTo: paths[1]}
}
