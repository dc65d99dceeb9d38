package state

import (
	"context"
	"fmt"
	"testing"
)

func openCount(s *Store) int {
	n := 0
	for _, d := range s.parts.dbs {
		if d != nil {
			n++
		}
	}
	return n
}

// lazyFixture commits version 0 (a snapshot of 600 keys over 50 partitions)
// and versions 1-3 as deltas that overwrite, add and delete keys, closes
// the store (so the cache is trusted) and returns the expected contents.
func lazyFixture(t *testing.T, e *env) map[string]string {
	t.Helper()
	ctx := context.Background()
	s := e.open(50, -1)
	want := map[string]string{}
	for i := range 600 {
		k, v := testKey(i), testVal(int64(i))
		if err := s.Put(k, v); err != nil {
			t.Fatal(err)
		}
		want[string(k)] = string(v)
	}
	if _, err := s.Commit(ctx, 0); err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= 3; v++ {
		for i := int(v); i < 700; i += 9 {
			k := testKey(i)
			if i%2 == 0 {
				if err := s.Delete(k); err != nil {
					t.Fatal(err)
				}
				delete(want, string(k))
				continue
			}
			val := testVal(v*1000 + int64(i))
			if err := s.Put(k, val); err != nil {
				t.Fatal(err)
			}
			want[string(k)] = string(val)
		}
		m, err := s.Commit(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		if m.Snapshot {
			t.Fatalf("version %d is a snapshot; the test wants a delta chain", v)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return want
}

// TestOpenIsLazy: a restart from a trusted cache opens no Pebble instance;
// a Get opens only the key's partition.
func TestOpenIsLazy(t *testing.T) {
	e := newEnv(t, nil)
	want := lazyFixture(t, e)
	s := e.open(50, 3)
	defer s.Close()
	if n := openCount(s); n != 0 {
		t.Fatalf("Open opened %d partitions, want none", n)
	}
	k := testKey(1)
	if _, _, err := s.Get(k); err != nil {
		t.Fatal(err)
	}
	if n := openCount(s); n != 1 || s.parts.dbs[PartitionOf(k, 50)] == nil {
		t.Fatalf("Get opened %d partitions, want only the key's", n)
	}
	diffMaps(t, "lazily opened store", want, storeContents(t, s))
}

// TestRepartitionFromFiles: right after a restart, Repartition reads the
// base version from the checkpoint files (snapshot and deltas) and opens no
// old partition; the result equals the base version, in the store and in
// the checkpoint, and survives another restart.
func TestRepartitionFromFiles(t *testing.T) {
	ctx := context.Background()
	for _, someOpen := range []bool{false, true} {
		t.Run(fmt.Sprintf("someOpen=%v", someOpen), func(t *testing.T) {
			e := newEnv(t, nil)
			want := lazyFixture(t, e)
			s := e.open(50, 3)
			if someOpen {
				// Some partitions open: the files are still the source.
				for p := range 10 {
					if _, err := s.parts.db(p); err != nil {
						t.Fatal(err)
					}
				}
			}
			old := s.parts
			var before []bool
			for _, d := range old.dbs {
				before = append(before, d != nil)
			}
			st, err := s.Repartition(ctx, 3, 4, 7)
			if err != nil {
				t.Fatal(err)
			}
			s.bg.Wait()
			for p, d := range old.dbs {
				if d != nil && !before[p] {
					t.Fatalf("repartition opened old partition %d", p)
				}
			}
			if st.KeysBefore != int64(len(want)) || st.KeysAfter != int64(len(want)) || st.From != 50 || st.To != 7 {
				t.Fatalf("stats %+v, want %d keys 50 -> 7", st, len(want))
			}
			diffMaps(t, "store after repartition", want, storeContents(t, s))
			diffMaps(t, "checkpoint after repartition", want, checkpointContents(t, e.fs, e.dir, 4))
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = e.open(7, 4)
			defer s.Close()
			diffMaps(t, "store reopened after repartition", want, storeContents(t, s))
		})
	}
}

// TestRepartitionFromOpenCache: with every non-empty partition open the
// cache is the source, and gives the same result as the files.
func TestRepartitionFromOpenCache(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil)
	want := lazyFixture(t, e)
	s := e.open(50, 3)
	defer s.Close()
	diffMaps(t, "before", want, storeContents(t, s)) // opens every non-empty partition
	if !s.allNonEmptyOpen() {
		t.Fatal("a full scan left a non-empty partition closed")
	}
	if _, err := s.Repartition(ctx, 3, 4, 2); err != nil {
		t.Fatal(err)
	}
	diffMaps(t, "store after repartition", want, storeContents(t, s))
	diffMaps(t, "checkpoint after repartition", want, checkpointContents(t, e.fs, e.dir, 4))
}
