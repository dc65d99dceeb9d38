package state

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestMemCacheOracle runs the property oracle (random batches, evictions,
// aborts, crashes and restarts, repartitions) with the cache in memory:
// a budget no state reaches, and one the state outgrows, so that the cache
// moves to disk mid-run and carries on there.
func TestMemCacheOracle(t *testing.T) {
	for _, tc := range []struct {
		name      string
		seed      uint64
		budget    int64
		wantMoves bool
	}{
		{"memory", 3, 1 << 40, false},
		// A partition's files hold ~40 bytes until a flush (its MANIFEST),
		// a batch up to 60 keys of ~120 bytes: these seeds' early batches
		// pass 6 KB before a reopen finds the chain too large for memory
		// (the check of moves below keeps them from turning vacuous).
		{"moves-to-disk", 4, 6 << 10, true},
		{"moves-to-disk-wipe", 6, 6 << 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			moves := runOracleCache(t, tc.seed, tc.name == "moves-to-disk-wipe", tc.budget, false).moves
			if (moves > 0) != tc.wantMoves {
				t.Fatalf("the cache moved to disk %d times", moves)
			}
		})
	}
}

// TestMemCacheLifecycle follows one store: in memory, nothing under
// LocalDir and no marker at Close, a reopen that rebuilds from the
// checkpoint; then past the budget on disk, trusted at the next Open.
func TestMemCacheLifecycle(t *testing.T) {
	e := newEnv(t, nil)
	e.memCache = 1 << 20
	s := e.open(20, -1)
	want := map[string]string{}
	var used int64 // MemoryUsedBytes of the last commit
	put := func(from, to int, ver int64) {
		t.Helper()
		used = commitRange(t, s, want, from, to, ver).MemoryUsedBytes
	}
	put(0, 500, 0)
	// The same batch with the cache on disk: memory counts the files more.
	d := newEnv(t, nil).open(20, -1)
	dm := commitRange(t, d, map[string]string{}, 0, 500, 0)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if s.parts.memBytes == 0 || used != dm.MemoryUsedBytes+s.parts.memBytes {
		t.Fatalf("MemoryUsedBytes %d in memory, %d on disk: the %d bytes of files are not counted", used, dm.MemoryUsedBytes, s.parts.memBytes)
	}
	if !s.parts.inMem {
		t.Fatal("a new store's cache is on disk")
	}
	if n := len(cacheFiles(t, e.local)); n != 0 {
		t.Fatalf("%d files under LocalDir with the cache in memory", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(e.local, markerName)); !os.IsNotExist(err) {
		t.Fatalf("a cache in memory left a marker: %v", err)
	}
	s = e.open(20, 0)
	if !s.parts.inMem {
		t.Fatal("the reopened small cache is on disk")
	}
	diffMaps(t, "reopened", want, storeContents(t, s))
	// A batch larger than the budget moves the cache to disk before it is
	// applied (its files, 20 MANIFESTs, are far below the budget: the
	// batch would stay in the memtables, and a backfill's in memory).
	s.opts.MemCacheBytes = 64 << 10
	put(500, 1500, 1)
	if s.parts.inMem {
		t.Fatal("the cache never left memory")
	}
	if len(cacheFiles(t, e.local)) == 0 {
		t.Fatal("the moved cache has no file on disk")
	}
	diffMaps(t, "moved", want, storeContents(t, s))
	version := s.Version()
	put(0, 300, version+1) // written on disk after the move
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(e.local, markerName)); err != nil {
		t.Fatalf("the moved cache has no marker: %v", err)
	}
	s = e.open(20, version+1)
	defer s.Close()
	if s.parts.inMem || s.parts.trusted == nil {
		t.Fatalf("the moved cache is not reused: in memory %v, trusted %v", s.parts.inMem, s.parts.trusted != nil)
	}
	diffMaps(t, "reused", want, storeContents(t, s))
}

// TestMemCacheKeptAtClose: Close moves an in-memory cache whose files hold
// memCacheKeepBytes or more to disk, and the next Open trusts it.
func TestMemCacheKeptAtClose(t *testing.T) {
	defer func(b int64) { memCacheKeepBytes = b }(memCacheKeepBytes)
	memCacheKeepBytes = 1 // any file: the MANIFESTs
	e := newEnv(t, nil)
	e.memCache = 1 << 20
	s := e.open(20, -1)
	want := map[string]string{}
	commitRange(t, s, want, 0, 300, 0)
	if !s.parts.inMem {
		t.Fatal("a new store's cache is on disk")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(e.local, markerName)); err != nil {
		t.Fatalf("the kept cache has no marker: %v", err)
	}
	s = e.open(20, 0)
	defer s.Close()
	if s.parts.inMem || s.parts.trusted == nil {
		t.Fatalf("the kept cache is not reused: in memory %v, trusted %v", s.parts.inMem, s.parts.trusted != nil)
	}
	diffMaps(t, "reused", want, storeContents(t, s))
}

// commitRange puts keys from..to-1 with values of version ver, commits
// ver and records the keys in want.
func commitRange(t *testing.T, s *Store, want map[string]string, from, to int, ver int64) Metrics {
	t.Helper()
	for i := from; i < to; i++ {
		k, v := testKey(i), testVal(ver*1_000_000+int64(i))
		if err := s.Put(k, v); err != nil {
			t.Fatal(err)
		}
		want[string(k)] = string(v)
	}
	m, err := s.Commit(context.Background(), ver)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
