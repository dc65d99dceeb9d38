package s3serve

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOpenBeneath: openat2's RESOLVE_BENEATH vouches for a file and for
// relative links that stay under the directory, and for nothing else
// (a link leaving it, an absolute link, a missing file), which
// openConfined then checks the slow way.
func TestOpenBeneath(t *testing.T) {
	root, other := t.TempDir(), t.TempDir()
	writeTree(t, root, map[string]string{"b/f.txt": "f"})
	writeTree(t, other, map[string]string{"s.txt": "s"})
	for link, target := range map[string]string{
		"b/rel-in":  "f.txt",
		"b/dir-in":  ".",
		"b/abs-in":  filepath.Join(root, "b", "f.txt"),
		"b/rel-out": "../../" + filepath.Base(other) + "/s.txt",
		"b/abs-out": filepath.Join(other, "s.txt"),
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	dir, err := os.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	for rel, want := range map[string]bool{"b/f.txt": true, "b/rel-in": true, "b/dir-in/f.txt": true,
		"b/abs-in": false, "b/rel-out": false, "b/abs-out": false, "b/missing": false, "../" + filepath.Base(other) + "/s.txt": false} {
		f, ok := openBeneath(dir, rel)
		if ok != want {
			t.Errorf("openBeneath(%s) = %v, want %v", rel, ok, want)
		}
		// serveFast's cached open refuses the same (the tree just written
		// is in the kernel's caches, so it opens the rest).
		if cf, ok, _ := openCached(dir, rel, nil); ok != want {
			t.Errorf("openCached(%s) = %v, want %v", rel, ok, want)
		} else if ok {
			cf.close()
		}
		if ok {
			b := make([]byte, 8)
			if n, _ := f.Read(b); string(b[:n]) != "f" {
				t.Errorf("openBeneath(%s) read %q", rel, b[:n])
			}
			f.Close()
		}
	}
	dir.Close()
	if _, ok := openBeneath(dir, "b/f.txt"); ok {
		t.Error("openBeneath under a closed directory succeeded")
	}
}
