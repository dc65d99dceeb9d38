package state

import (
	"context"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestDamageUnderTrustedCache damages each checkpoint file the loaded
// version depends on while the local cache still holds that version (its
// MARKER intact): the damage is refused as CHECKPOINT_CORRUPT naming the
// file, at Open or at the latest by the Commit that would extend the chain,
// and restoring the file lets the store continue with exact contents.
func TestDamageUnderTrustedCache(t *testing.T) {
	ctx := context.Background()
	for _, suffix := range []string{".snap", ".snapmeta", ".delta", ".meta"} {
		for _, how := range []string{"flip", "truncate", "delete"} {
			t.Run(suffix+"/"+how, func(t *testing.T) {
				mem := vfs.NewMem()
				// Version 1's background snapshot starts version 2's chain.
				e := &env{t: t, fs: mem, dir: "ckpt/state/0", local: t.TempDir(), snapEvery: 2}
				s := e.open(3, -1)
				for v := int64(0); v < 3; v++ {
					for k := range 50 {
						if err := s.Put(testKey(k+int(v)), testVal(v)); err != nil {
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
				names, _ := mem.List(e.dir)
				var victim string
				for _, n := range names {
					if strings.HasSuffix(n, suffix) && strings.HasPrefix(n, "00000000000000000002") != strings.HasPrefix(suffix, ".snap") {
						victim = mem.PathJoin(e.dir, n)
					}
				}
				if victim == "" {
					t.Fatalf("no %s file in %v", suffix, names)
				}
				orig := readAll(t, mem, victim)
				if how == "delete" {
					if err := mem.Remove(victim); err != nil {
						t.Fatal(err)
					}
					if suffix == ".snapmeta" {
						// A background snapshot without its record is
						// one a crash cut short: the chain of deltas
						// still holds the version.
						s := e.open(3, 2)
						diffMaps(t, "without the snapshot", want, storeContents(t, s))
						if err := s.Close(); err != nil {
							t.Fatal(err)
						}
						diffMaps(t, "checkpoint without the snapshot", want, checkpointContents(t, mem, e.dir, 2))
						return
					}
				} else {
					damage(t, mem, victim, how)
				}
				s, err := Open(ctx, e.opts(3), 2)
				if err == nil {
					if err := s.Put(testKey(1000), testVal(7)); err != nil {
						t.Fatal(err)
					}
					_, err = s.Commit(ctx, 3)
					_ = s.Close()
				}
				if suffix == ".meta" && how == "delete" {
					// The version is gone from the directory, which is named.
					checkCorrupt(t, err, e.dir)
				} else {
					checkCorrupt(t, err, victim)
				}
				if _, err := Verify(ctx, mem, e.dir, 2); err == nil {
					t.Fatalf("Verify accepts a damaged %s", victim)
				}
				// Nothing was written on top of the damage.
				if _, err := mem.Stat(mem.PathJoin(e.dir, metaFileName(3, 0))); err == nil {
					t.Fatal("version 3 was committed over a damaged chain")
				}
				writeAll(t, mem, victim, orig)
				if rep, err := Verify(ctx, mem, e.dir, 2); err != nil || rep.Versions != 3 {
					t.Fatalf("Verify after restore: %+v %v", rep, err)
				}
				s = e.open(3, 2)
				diffMaps(t, "after restore", want, storeContents(t, s))
				if err := s.Put(testKey(1000), testVal(7)); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Commit(ctx, 3); err != nil {
					t.Fatal(err)
				}
				want[string(testKey(1000))] = string(testVal(7))
				diffMaps(t, "next version", want, checkpointContents(t, mem, e.dir, 3))
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

func readAll(t *testing.T, fs vfs.FS, path string) []byte {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

func writeAll(t *testing.T, fs vfs.FS, path string, b []byte) {
	t.Helper()
	w, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
