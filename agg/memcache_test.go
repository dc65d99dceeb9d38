package agg

import (
	"io/fs"
	"path/filepath"
	"slices"
	"testing"
)

// TestStateCacheInMemory: the state cache of a windowed count's open
// windows stays in memory (memCacheBytes): its batches, the Close of a
// restart and the reopen that rebuilds the cache from the checkpoint create
// no file under LocalDir, and the output is the same as without the
// restart.
func TestStateCacheInMemory(t *testing.T) {
	want, _, err := closedAtCommitRun(t, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	checks := 0
	noLocalFiles := func(h *harness, when string) {
		t.Helper()
		checks++
		err := filepath.WalkDir(h.localDir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				t.Errorf("%s: %s under LocalDir: the state cache is on disk", when, path)
				return filepath.SkipAll
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	got, _, err := closedAtCommitRun(t, func(h *harness) {
		noLocalFiles(h, "after batch 0")
		h.restart(false)
		noLocalFiles(h, "after the restart")
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	if checks != 2 {
		t.Fatalf("LocalDir checked %d times, want 2", checks)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("with a restart: %q, without: %q", got, want)
	}
}
