package pipeline

import (
	"crypto/sha256"
	"fmt"
	"os"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/ethstream/ethstream/errcode"
)

// readOnly answers every write under prefix (a lock included: flock(2)
// opens its file for writing) with EROFS, as a read-only mount does. Tests
// run as root, whom chmod does not stop, so the refusal is injected.
type readOnly struct{ prefix string }

func (r readOnly) String() string { return "read-only " + r.prefix }

func (r readOnly) MaybeError(op errorfs.Op) error {
	if !strings.HasPrefix(op.Path, r.prefix) {
		return nil
	}
	if op.Kind.ReadOrWrite() == errorfs.OpIsWrite || op.Kind == errorfs.OpLock {
		return &os.PathError{Op: "write", Path: op.Path, Err: syscall.EROFS}
	}
	return nil
}

// checkReadOnly: err is READ_ONLY_STORAGE naming a path under prefix with
// its remedy, as the CLI prints it (errcode.Resource is the boundary's
// choice of code), and says nothing of a lock held by another query.
func checkReadOnly(t *testing.T, what string, err error, prefix string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: the run succeeded on read-only storage", what)
	}
	e := errcode.Resource(err)
	if e == nil || e.Code != errcode.ReadOnlyStorage {
		t.Fatalf("%s: %v, want %s", what, err, errcode.ReadOnlyStorage)
	}
	if !strings.HasPrefix(e.Path, prefix) || !strings.Contains(e.Error(), "To fix: make the location writable") {
		t.Fatalf("%s: %q does not name a path under %s and the remedy", what, e.Error(), prefix)
	}
	if errcode.Is(err, errcode.CheckpointLocked) || strings.Contains(err.Error(), "another running query") {
		t.Fatalf("%s: a read-only checkpoint reported as locked: %v", what, err)
	}
}

// TestReadOnlyStorage: a read-only checkpoint (new or existing) and a
// read-only table each fail with READ_ONLY_STORAGE naming the path, not
// CHECKPOINT_LOCKED or an uncoded error; an existing checkpoint is left
// byte-identical and the query resumes once the storage is writable.
func TestReadOnlyStorage(t *testing.T) {
	mem := vfs.NewMem()
	local := t.TempDir()
	err := runQuery(t, errorfs.Wrap(mem, readOnly{flCheckpoint}), local, time.Now)
	checkReadOnly(t, "new checkpoint", err, flCheckpoint)
	if _, err := mem.Stat(flCheckpoint); err == nil {
		t.Fatal("a refused start created the checkpoint")
	}

	// A checkpoint and table written once, then mounted read-only.
	if err := runQuery(t, mem, local, time.Now); err != nil {
		t.Fatal(err)
	}
	before := listTree(t, mem, flCheckpoint)
	err = runQuery(t, errorfs.Wrap(mem, readOnly{flCheckpoint}), local, time.Now)
	checkReadOnly(t, "existing checkpoint", err, flCheckpoint)
	if after := listTree(t, mem, flCheckpoint); after != before {
		t.Fatalf("the read-only checkpoint changed:\n%s\nwant\n%s", after, before)
	}

	fresh := vfs.NewMem()
	err = runQuery(t, errorfs.Wrap(fresh, readOnly{flTable}), t.TempDir(), time.Now)
	checkReadOnly(t, "read-only table", err, flTable)
	if err := runQuery(t, fresh, t.TempDir(), time.Now); err != nil {
		t.Fatalf("the query did not resume once the table was writable: %v", err)
	}
}

// listTree renders every file under dir with its size and content hash.
func listTree(t *testing.T, fs vfs.FS, dir string) string {
	t.Helper()
	var b strings.Builder
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	for _, n := range names {
		p := fs.PathJoin(dir, n)
		st, err := fs.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.IsDir() {
			b.WriteString(listTree(t, fs, p))
			continue
		}
		f, err := fs.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, st.Size())
		_, err = f.ReadAt(data, 0)
		f.Close()
		if err != nil && st.Size() > 0 {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %d %x\n", p, len(data), sha256.Sum256(data))
	}
	return b.String()
}
