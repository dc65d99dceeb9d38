package agg

import (
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// stallFS is a file system whose files' writes wait until release is
// closed.
type stallFS struct {
	vfs.FS
	release chan struct{}
}

func (s *stallFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := s.FS.Create(name, c)
	if err != nil {
		return nil, err
	}
	return stallFile{f, s.release}, nil
}

type stallFile struct {
	vfs.File
	release chan struct{}
}

func (f stallFile) Write(p []byte) (int, error) {
	<-f.release
	return f.File.Write(p)
}

// TestCarryHandsOverAhead checks that adding to a carry does not wait for
// the file system's write of an earlier chunk: with the first write
// stalled, carryAhead more chunks are handed over (before, the second
// hand-over waited for the first write: the bubble deadlocks), and the
// file then reads back whole.
func TestCarryHandsOverAhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &stallFS{FS: vfs.NewMem(), release: make(chan struct{})}
		key := func(i int) []byte { return fmt.Appendf(nil, "key-%08d-%040d", i, i) }
		val := func(i int) []byte { return fmt.Appendf(nil, "v%d", i) }
		w := newCarryWriter(fs, "/s", 1)
		n := 0
		// Until the hand-over of chunk carryAhead+1: the first waits in
		// its write, the others for it.
		for w.size <= int64(carryAhead)*carryChunk {
			if err := w.add(key(n), val(n)); err != nil {
				t.Fatal(err)
			}
			n++
		}
		close(fs.release)
		rec := opRecord{ClosedRows: int64(n)}
		if err := w.finish(&rec); err != nil {
			t.Fatal(err)
		}
		if err := w.wait(); err != nil {
			t.Fatal(err)
		}
		c, err := readCarry(fs, "/s", 1, rec)
		if err != nil {
			t.Fatal(err)
		}
		if c.len() != n {
			t.Fatalf("%d records read back, want %d", c.len(), n)
		}
		for i := range n {
			if v, ok := c.get(key(i)); !ok || string(v) != string(val(i)) {
				t.Fatalf("key %s: %q, %v", key(i), v, ok)
			}
		}
	})
}
