package state

import (
	"testing"
)

// TestMemCacheFillsPartitionsOpened: a cache rebuilt into memory fills a
// partition from the chain when it is first opened (chainfill.go): a Get
// opens one, a commit the ones it writes, a Scan the rest. A move to disk
// fills those not filled yet, once: a partition filled again on disk would
// lose the commits written to it since its first fill.
func TestMemCacheFillsPartitionsOpened(t *testing.T) {
	const n = 50
	e := newEnv(t, nil)
	want := lazyFixture(t, e) // deltas that overwrite, add and delete keys
	e.memCache = 1 << 20
	e.local = t.TempDir() // no trusted cache: a rebuild
	reopen := func(v int64) *Store {
		t.Helper()
		s := e.open(n, v)
		if !s.parts.inMem || s.parts.build == nil || openCount(s) != 0 {
			t.Fatalf("reopened: in memory %v, build deferred %v, %d instances open", s.parts.inMem, s.parts.build != nil, openCount(s))
		}
		return s
	}
	get := func(s *Store, i int) {
		t.Helper()
		k := testKey(i)
		v, ok, err := s.Get(k)
		w, wok := want[string(k)]
		if err != nil || ok != wok || string(v) != w {
			t.Fatalf("Get of key %d: %x %v %v, want %x %v", i, v, ok, err, w, wok)
		}
	}
	part := func(i int) int { return PartitionOf(testKey(i), n) }
	opened := map[int]bool{}
	checkOpen := func(s *Store, what string) {
		t.Helper()
		if got := openCount(s); got != len(opened) {
			t.Fatalf("%s: %d instances open, want %d (partitions %v)", what, got, len(opened), opened)
		}
	}

	s := reopen(3)
	// Key 1 is overwritten by version 1, key 5 only in the snapshot.
	for _, i := range []int{1, 5} {
		get(s, i)
		opened[part(i)] = true
		checkOpen(s, "after Get")
	}
	// Keys 10 (v1) and 20 (v2) are deleted: their partitions' rows and
	// bounds may answer without opening them.
	for _, i := range []int{10, 20} {
		get(s, i)
	}
	for i, d := range s.parts.dbs {
		if d != nil {
			opened[i] = true
		}
	}
	commitRange(t, s, want, 1, 4, 4) // overwrites keys 1-3
	for i := 1; i < 4; i++ {
		opened[part(i)] = true
	}
	checkOpen(s, "after the commit")
	if len(opened) >= n/2 || s.parts.fill.pending() == 0 {
		t.Fatalf("%d partitions of %d open, %d bytes waiting: the test reads too many", len(opened), n, s.parts.fill.pending())
	}
	diffMaps(t, "scanned after a Get and a commit", want, storeContents(t, s))
	if p := s.parts.fill.pending(); p != 0 {
		t.Fatalf("%d bytes still waiting after a Scan of every partition", p)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The chain now ends with version 4. A Get and a commit fill a few
	// partitions; a commit past the budget moves the cache to disk, which
	// fills the others: the Get reopens key 1's partition on disk, filled
	// already (once more would undo version 5), and the next Open trusts
	// every partition of the cache on disk without a Scan first.
	s = reopen(4)
	get(s, 1)
	commitRange(t, s, want, 1, 3, 5)
	s.opts.MemCacheBytes = 1
	commitRange(t, s, want, 700, 710, 6)
	if s.parts.inMem || s.parts.fill != nil {
		t.Fatalf("past its budget: in memory %v, records waiting %v", s.parts.inMem, s.parts.fill != nil)
	}
	get(s, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTrusted(t, e, n, 6, want)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
