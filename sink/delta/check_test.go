package delta

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
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
		s, err := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: c.path, Logger: quietLog})
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

// TestSinkHasNoDefaultSchema: a sink given no output schema (neither
// SinkOptions.Schema nor SinkEnv.Schema) refuses to open,
// DELTA_SINK_SCHEMA_REQUIRED, and creates nothing; it had created the
// reference query's table. Its Check, which runs before the schema is
// known, still refuses nothing of a table it can write.
func TestSinkHasNoDefaultSchema(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "table")
	s, err := NewMergeSink(SinkOptions{Path: dir, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx); err != nil {
		t.Fatalf("check of a new table: %v", err)
	}
	if err := s.Open(ctx, stream.SinkEnv{QueryID: "q"}); errcode.Code(err) != CodeNoOutputSchema {
		t.Fatalf("open without a schema: %v, want %s", err, CodeNoOutputSchema)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the refused open created %s (%v)", dir, err)
	}
	w, err := NewMergeSink(SinkOptions{Path: dir, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Open(ctx, stream.SinkEnv{QueryID: "q", Schema: ReferenceSchema()}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := s.Check(ctx); err != nil {
		t.Fatalf("check of a table it can write, before the schema is known: %v", err)
	}
}
