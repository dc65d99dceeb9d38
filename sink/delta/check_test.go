package delta

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ethstream/ethstream/errcode"
)

// TestSinkCheck: the start probe refuses what Open would fail on and creates
// nothing, while a new path under a directory is fine.
func TestSinkCheck(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ours := filepath.Join(dir, "ours")
	newSink(t, ours, 0).Close()
	foreign := copyTable(t, filepath.Join(goldenDir(t), "basic-with-inserts-merge"))
	for _, c := range []struct {
		path, code string
	}{
		{path: filepath.Join(dir, "new", "deeper")},
		{path: t.TempDir()},
		{path: ours},
		{path: file, code: CodeTablePathNotADirectory},
		{path: filepath.Join(file, "tbl"), code: CodeTablePathNotADirectory},
		{path: foreign, code: CodeSchemaMismatch},
	} {
		s, err := NewMergeSink(SinkOptions{Path: c.path, Logger: quietLog})
		closeAtEnd(t, s)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Check(ctx); errcode.Code(err) != c.code {
			t.Errorf("%s: Check = %v, want code %q", c.path, err, c.code)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); !os.IsNotExist(err) {
		t.Errorf("Check created a directory: %v", err)
	}
}
