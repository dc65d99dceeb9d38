package state

import (
	"context"
	"os"
	"testing"
)

// TestLazyCacheOracle is the property oracle with Options.LazyCache: random
// batches written as the join writes them, aborts, crashes, reopens and
// repartitions, the store read in some steps only. Every read, whenever
// it first builds the cache, sees exactly the committed version.
func TestLazyCacheOracle(t *testing.T) {
	for _, tc := range []struct {
		name     string
		seed     uint64
		wipe     bool
		memCache int64
	}{
		{"disk", 11, false, 0},
		{"disk-2", 12, false, 0},
		{"wipe-cache-every-restart", 13, true, 0},
		{"memory", 14, false, 1 << 40},
		{"memory-moves-to-disk", 15, false, 6 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := runOracleCache(t, tc.seed, tc.wipe, tc.memCache, true)
			t.Logf("%d commits skipped the cache, %d builds after them", st.skipped, st.builtAfter)
			// Not vacuous: commits went unapplied and a read built the
			// cache after them.
			if st.skipped < 10 || st.builtAfter < 3 {
				t.Fatalf("%d commits skipped the cache, %d builds after them", st.skipped, st.builtAfter)
			}
		})
	}
}

// TestLazyCacheReadAfterUnappliedCommits commits versions 0-11 (puts,
// overwrites, deletes, background snapshots) without a read: no partition
// opens and no cache file is written. The first Get then builds the cache
// once, and it holds exactly version 11; the commits after it apply to it.
func TestLazyCacheReadAfterUnappliedCommits(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil)
	e.lazy, e.snapEvery = true, 3
	s := e.open(20, -1)
	want := map[string]string{}
	for v := int64(0); v < 12; v++ {
		for i := range 40 {
			k := testKey(int(v)*17 + i)
			_, existed := want[string(k)]
			if i%5 == 4 {
				if err := s.DeleteKnown(k, existed); err != nil {
					t.Fatal(err)
				}
				delete(want, string(k))
				continue
			}
			val := testVal(v*1000 + int64(i))
			if err := s.PutKnown(k, val, existed); err != nil {
				t.Fatal(err)
			}
			want[string(k)] = string(val)
		}
		m, err := s.Commit(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		if m.RowsTotal != int64(len(want)) {
			t.Fatalf("version %d: RowsTotal %d want %d", v, m.RowsTotal, len(want))
		}
	}
	if !s.lazyUnbuilt() || openCount(s) != 0 {
		t.Fatalf("after commits without a read: unbuilt %v, %d partitions open", s.lazyUnbuilt(), openCount(s))
	}
	if files := cacheFiles(t, e.local); len(files) != 0 {
		t.Fatalf("the unbuilt cache holds files %v", files)
	}
	checkBoundsHold(t, e, s, true, false)
	// A key of the first version, deleted and present ones.
	for i := range 60 {
		checkGet(t, s, testKey(i), want)
	}
	if s.lazyUnbuilt() {
		t.Fatal("Get did not build the cache")
	}
	diffMaps(t, "after the build", want, storeContents(t, s))
	commitRange(t, s, want, 300, 340, 12)
	diffMaps(t, "a commit after the build", want, storeContents(t, s))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	e.lazy = false
	s = e.open(20, 12)
	defer s.Close()
	diffMaps(t, "reopened", want, storeContents(t, s))
}

// TestLazyCacheUnknownBounds: deletes in partitions whose bounds are
// unknown (a format-1 checkpoint) cannot keep them, so the commit builds an
// unbuilt lazy cache to read the surviving keys; the bounds come out exact.
func TestLazyCacheUnknownBounds(t *testing.T) {
	e := newEnv(t, nil)
	want := lazyFixture(t, e)
	toFormat1(t, e)
	if err := os.RemoveAll(e.local); err != nil { // no trusted cache
		t.Fatal(err)
	}
	e.lazy = true
	s := e.open(50, 3)
	defer s.Close()
	n := 0
	for k := range want {
		if n++; n%3 == 0 {
			if err := s.DeleteKnown([]byte(k), true); err != nil {
				t.Fatal(err)
			}
			delete(want, k)
		}
	}
	if !s.lazyUnbuilt() {
		t.Fatal("the cache is built before the commit")
	}
	if _, err := s.Commit(context.Background(), 4); err != nil {
		t.Fatal(err)
	}
	if s.lazyUnbuilt() {
		t.Fatal("the commit did not build the cache")
	}
	checkBounds(t, e, s, false)
	diffMaps(t, "after the commit", want, storeContents(t, s))
}
