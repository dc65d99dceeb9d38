package state

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestEachRowEqualsReadAll: the streaming EachRow reads every version of
// a state written through puts, overwrites and deletes over several
// commits (snapshots and deltas) as ReadAllRaw, which folds the files
// into a map, reads it: the same rows in the same order.
func TestEachRowEqualsReadAll(t *testing.T) {
	fs := vfs.NewMem()
	e := newEnv(t, fs)
	e.snapEvery = 3
	s := e.open(5, -1)
	for v := range int64(7) {
		for i := range 300 {
			switch k := testKey(i); {
			case (i+int(v))%5 == 0:
				if err := s.Delete(k); err != nil {
					t.Fatal(err)
				}
			case i%3 == int(v)%3:
				if err := s.Put(k, testVal(v*1000+int64(i))); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := s.Commit(t.Context(), v); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for v := range int64(7) {
		var want, got strings.Builder
		if _, _, err := ReadAllRaw(t.Context(), fs, e.dir, v, func(p int, k, val []byte) error {
			fmt.Fprintf(&want, "%d %x %x\n", p, k, val)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := EachRow(t.Context(), fs, e.dir, v, func(p int, k, val []byte) error {
			fmt.Fprintf(&got, "%d %x %x\n", p, k, val)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() || want.Len() == 0 {
			t.Fatalf("version %d: EachRow read\n%s\nReadAllRaw\n%s", v, got.String(), want.String())
		}
	}
	if err := EachRow(t.Context(), fs, e.dir, 9, func(int, []byte, []byte) error { return nil }); err == nil {
		t.Fatal("EachRow of a missing version read something")
	}
}
