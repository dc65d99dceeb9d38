package state

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
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
		// (the check of moves below keeps them from turning vacuous; seed
		// 4 stopped moving once a reopen filled only the partitions it
		// opens, chainfill.go).
		{"moves-to-disk", 5, 6 << 10, true},
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
	// Written after the move, the batches are in the files on disk: the
	// first-open checks (cacherepair.go) find nothing to rebuild.
	s = openTrusted(t, e, 20, version+1, want)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestMemCacheKeptAtClose: Close moves an in-memory cache whose files hold
// memCacheKeepBytes or more to disk, and the next Open trusts it: a cache
// a commit wrote, and one a rebuild wrote on its first read and no commit
// followed (its files are measured after the rebuild).
func TestMemCacheKeptAtClose(t *testing.T) {
	defer func(b int64) { memCacheKeepBytes = b }(memCacheKeepBytes)
	for _, rebuilt := range []bool{false, true} {
		t.Run(fmt.Sprintf("rebuilt=%v", rebuilt), func(t *testing.T) {
			memCacheKeepBytes = 1 // any file: the MANIFESTs
			e := newEnv(t, nil)
			e.memCache = 1 << 20
			s := e.open(20, -1)
			want := map[string]string{}
			commitRange(t, s, want, 0, 300, 0)
			if rebuilt {
				memCacheKeepBytes = 1 << 40 // not kept: the next Open rebuilds
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				memCacheKeepBytes = 1
				s = e.open(20, 0)
				// The rebuild waits for the first read (recovery.go).
				diffMaps(t, "rebuilt", want, storeContents(t, s))
			}
			if !s.parts.inMem {
				t.Fatal("the cache is on disk")
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(e.local, markerName)); err != nil {
				t.Fatalf("the kept cache has no marker: %v", err)
			}
			s = openTrusted(t, e, 20, 0, want)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
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

// TestMemCacheKeepOnAFullDisk: a Close whose move of the cache to disk
// (keepMemCache) fails for space only logs it: Close succeeds, leaves no
// marker and no partial copy, and the next Open rebuilds the state. A
// commit whose move fails breaks the store, which a reopen mends.
func TestMemCacheKeepOnAFullDisk(t *testing.T) {
	defer func(b int64, fs vfs.FS) { memCacheKeepBytes, memCacheDisk = b, fs }(memCacheKeepBytes, memCacheDisk)
	memCacheKeepBytes = 1 // any file: the MANIFESTs
	budget := &atomic.Int64{}
	memCacheDisk = fullFS{vfs.Default, budget} // full
	e := newEnv(t, nil)
	e.memCache = 1 << 20
	s := e.open(20, -1)
	want := map[string]string{}
	commitRange(t, s, want, 0, 300, 0)
	if err := s.Close(); err != nil {
		t.Fatalf("Close failed for a cache it could not keep: %v", err)
	}
	if n := cacheFiles(t, e.local); len(n) != 0 {
		t.Fatalf("files under LocalDir after a failed move: %v", n)
	}
	s = e.open(20, 0)
	if !s.parts.inMem {
		t.Fatal("the cache was kept on a full disk")
	}
	diffMaps(t, "rebuilt", want, storeContents(t, s))
	// A commit past the budget must move the cache: it fails, and breaks
	// the store; its version is committed all the same.
	s.opts.MemCacheBytes = 1
	for i := 300; i < 400; i++ {
		if err := s.Put(testKey(i), testVal(1)); err != nil {
			t.Fatal(err)
		}
		want[string(testKey(i))] = string(testVal(1))
	}
	if _, err := s.Commit(context.Background(), 1); err == nil || s.broken == nil {
		t.Fatalf("a commit whose cache could not move: %v, broken %v", err, s.broken)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close of the broken store: %v", err)
	}
	if n := cacheFiles(t, e.local); len(n) != 0 {
		t.Fatalf("files under LocalDir after a failed move: %v", n)
	}
	budget.Store(1 << 40) // space again
	s = e.open(20, 1)
	defer s.Close()
	diffMaps(t, "reopened", want, storeContents(t, s))
}

// TestMemCacheDeferredRebuild: OpenRecorded's deferred rebuild (built on
// the first read) into a cache in memory, kept there or, past the budget,
// moved to disk by the build's measure in the middle of that first read,
// which then reads the partition from disk.
func TestMemCacheDeferredRebuild(t *testing.T) {
	ctx := context.Background()
	for _, moves := range []bool{false, true} {
		t.Run(fmt.Sprintf("moves=%v", moves), func(t *testing.T) {
			e := newEnv(t, nil)
			want := lazyFixture(t, e)
			o := e.opts(50)
			o.LocalDir = filepath.Join(t.TempDir(), "fresh")
			o.MemCacheBytes = 1 << 20
			s, err := OpenRecorded(ctx, o, 3)
			if err != nil {
				t.Fatal(err)
			}
			if !s.parts.inMem || s.parts.build == nil {
				t.Fatalf("in memory %v, build deferred %v", s.parts.inMem, s.parts.build != nil)
			}
			if moves {
				s.opts.MemCacheBytes = 1 // the built files pass it
			}
			k := testKey(1)
			v, ok, err := s.Get(k)
			if err != nil || !ok || string(v) != want[string(k)] {
				t.Fatalf("Get of a key of the deferred cache: %x %v %v, want %x", v, ok, err, want[string(k)])
			}
			if s.parts.build != nil || s.parts.inMem == moves {
				t.Fatalf("built %v, in memory %v", s.parts.build == nil, s.parts.inMem)
			}
			diffMaps(t, "store built on its first read", want, storeContents(t, s))
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if !moves {
				return
			}
			s = openTrusted(t, &env{t: t, fs: e.fs, dir: e.dir, local: o.LocalDir}, 50, 3, want)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestMemCacheRebuildDeferred: a cache rebuilt into memory at Open waits for
// its first read or write (recovery.go): Open opens no instance, a
// repartition right after reads the checkpoint files and never builds the
// old generation, and a Get, or a commit that writes, builds it first.
func TestMemCacheRebuildDeferred(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil)
	want := lazyFixture(t, e)
	e.memCache = 1 << 20
	e.local = t.TempDir() // no trusted cache: a rebuild
	reopen := func() *Store {
		t.Helper()
		s := e.open(50, 3)
		if !s.parts.inMem || s.parts.build == nil || openCount(s) != 0 {
			t.Fatalf("reopened: in memory %v, build deferred %v, %d instances open", s.parts.inMem, s.parts.build != nil, openCount(s))
		}
		return s
	}

	s := reopen()
	old := s.parts
	if _, err := s.Repartition(ctx, 3, 4, 7); err != nil {
		t.Fatal(err)
	}
	s.bg.Wait()
	if old.build == nil {
		t.Fatal("the repartition built the old generation")
	}
	diffMaps(t, "store after repartition", want, storeContents(t, s))
	diffMaps(t, "checkpoint after repartition", want, checkpointContents(t, e.fs, e.dir, 4))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	e = newEnv(t, nil)
	want = lazyFixture(t, e)
	e.memCache = 1 << 20
	e.local = t.TempDir()
	s = reopen()
	getBuilds(t, s, want)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = reopen()
	commitRange(t, s, want, 1000, 1010, 4)
	if s.parts.build != nil {
		t.Fatal("a commit left the cache unbuilt")
	}
	diffMaps(t, "store built by a commit", want, storeContents(t, s))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
