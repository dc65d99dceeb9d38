package pipeline

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
)

// prefixFullFS fails every write under prefix with ENOSPC once budget bytes
// were written there: a full file system holding that directory.
type prefixFullFS struct {
	vfs.FS
	prefix string
	budget *atomic.Int64
}

func (fs prefixFullFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	if err != nil || !strings.HasPrefix(name, fs.prefix) {
		return f, err
	}
	return budgetFile{f, fs.budget, name}, nil
}

type budgetFile struct {
	vfs.File
	budget *atomic.Int64
	name   string
}

func (f budgetFile) Write(p []byte) (int, error) {
	if left := f.budget.Add(-int64(len(p))); left < 0 {
		n := max(0, int(left)+len(p))
		f.budget.Store(0)
		m, _ := f.File.Write(p[:n])
		return m, &os.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
	}
	return f.File.Write(p)
}

// TestDiskFull fills the disk under the checkpoint, then under the table,
// at several points of a run: the run ends within seconds in DISK_FULL
// naming a path there and the bytes still needed, leaves no temp file and no
// partial visible file, and once space is back the query finishes with the
// exact counts. (The state cache: state.TestCacheDiskFull.)
func TestDiskFull(t *testing.T) {
	archive, err := damageArchive()
	if err != nil {
		t.Fatal(err)
	}
	want := recount(t, archive)
	for _, dir := range []string{"ck", "table"} {
		for _, budget := range []int64{0, 3_000, 40_000, 200_000} {
			t.Run(dir+"/"+itoa(budget), func(t *testing.T) {
				root := t.TempDir()
				b := &atomic.Int64{}
				b.Store(budget)
				fsys := prefixFullFS{FS: vfs.Default, prefix: filepath.Join(root, dir), budget: b}
				start := time.Now()
				err := damageRunFS(t, fsys, root, 0)
				if err == nil {
					if budget > 100_000 {
						t.Skip("the run fit in the budget")
					}
					t.Fatal("the run succeeded on a full disk")
				}
				if d := time.Since(start); d > 30*time.Second {
					t.Fatalf("DISK_FULL took %s", d)
				}
				ce := errcode.Resource(err)
				if ce == nil || ce.Code != errcode.DiskFull || !strings.HasPrefix(ce.Path, filepath.Join(root, dir)) {
					t.Fatalf("want DISK_FULL under %s, got %v", dir, err)
				}
				if !strings.Contains(ce.Error(), "more bytes are needed") {
					t.Fatalf("DISK_FULL without the bytes needed: %v", ce)
				}
				if tmps := listTemps(vfs.Default, root); len(tmps) > 0 {
					t.Fatalf("temp files left: %v", tmps)
				}
				b.Store(1 << 40)
				if err := damageRunFS(t, fsys, root, 0); err != nil {
					t.Fatalf("after freeing space: %v", err)
				}
				got, err := keyCounts(vfs.Default, filepath.Join(root, "table"))
				if err != nil {
					t.Fatal(err)
				}
				if d := diffCounts(want, got); d != "" {
					t.Fatal(d)
				}
			})
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
