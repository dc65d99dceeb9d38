package demo

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileKeepsOldContentOnFailure(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "verification.csv")
	if err := writeFile(p, func(w io.Writer) error { _, err := io.WriteString(w, "old"); return err }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := writeFile(p, func(w io.Writer) error {
		io.WriteString(w, "half")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Fatalf("content after a failed write: %q", b)
	}
	names, _ := os.ReadDir(dir)
	if len(names) != 1 {
		t.Fatalf("temp file left behind: %v", names)
	}
}
