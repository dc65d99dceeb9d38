package state

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// damageCache flips bytes in, truncates, or deletes every file of the local
// cache whose name matches, leaving MARKER intact. It returns how many.
func damageCache(t *testing.T, root, match, how string) int {
	t.Helper()
	n := 0
	err := filepath.Walk(root, func(path string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || !strings.Contains(filepath.Base(path), match) {
			return err
		}
		n++
		if how == "delete" {
			return os.Remove(path)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		switch how {
		case "flip":
			for i := len(b) / 4; i < len(b)*3/4; i += 7 {
				b[i] ^= 0x5a
			}
		case "truncate":
			b = b[:len(b)/2]
		}
		return os.WriteFile(path, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCorruptCacheRebuilt damages the sstables (and the MANIFESTs) of a
// trusted cache: each damaged partition is discarded and rebuilt from the
// checkpoint with a warning, reads are exact, and the store goes on
// committing. No panic.
func TestCorruptCacheRebuilt(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ match, how string }{
		{".sst", "flip"}, {".sst", "truncate"}, {".sst", "delete"}, {"MANIFEST", "flip"}, {"MANIFEST", "delete"},
	} {
		t.Run(c.match+"/"+c.how, func(t *testing.T) {
			e := newEnv(t, vfs.NewMem())
			s := e.open(4, -1)
			for v := int64(0); v < 3; v++ {
				for k := range 300 {
					if err := s.Put(testKey(k+int(v)*50), testVal(v*1000+int64(k))); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := s.Commit(ctx, v); err != nil {
					t.Fatal(err)
				}
			}
			want := storeContents(t, s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if n := damageCache(t, e.local, c.match, c.how); n == 0 {
				t.Fatalf("no %s file in the cache", c.match)
			}
			var logs bytes.Buffer
			o := e.opts(4)
			o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			s, err := Open(ctx, o, 2)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.Get(testKey(1)); err != nil {
				t.Fatal(err)
			}
			diffMaps(t, "after repair", want, storeContents(t, s))
			if !strings.Contains(logs.String(), "rebuilding it from the checkpoint") {
				t.Fatalf("no repair warning in the log:\n%s", logs.String())
			}
			if err := s.Put(testKey(5000), testVal(1)); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Commit(ctx, 3); err != nil {
				t.Fatal(err)
			}
			want[string(testKey(5000))] = string(testVal(1))
			diffMaps(t, "next version", want, storeContents(t, s))
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			// The repaired cache is trusted again.
			s = e.open(4, 3)
			diffMaps(t, "reopened", want, storeContents(t, s))
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
