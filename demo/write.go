package demo

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/internal/durable"
)

// writeFile publishes path through package durable (Replace: a temp file
// that is fsynced, renamed over path, and the directory fsynced), so a
// failed or interrupted run never leaves a half-written result and a
// finished one survives a crash.
func writeFile(path string, write func(io.Writer) error) error {
	_, err := durable.For(vfs.Default).Publish(filepath.Dir(path), filepath.Base(path),
		durable.Options{Mode: durable.Replace}, write)
	return err
}

// prepareResults creates the results directory and deletes the temp files
// an interrupted run left there: durable's and the "<name>.tmp" of earlier
// versions (the demo owns its results directory).
func prepareResults(dir string) error {
	if err := durable.EnsureDir(vfs.Default, dir); err != nil {
		return err
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	for _, e := range names {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".tmp") {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("remove stale temp file: %w", err)
			}
		}
	}
	return nil
}
