package state

import (
	"bytes"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestCommitFlushesLargeBatches: a commit whose Pebble batches exceed
// applyFlushBudget waits for their flush, so the instances it wrote before
// the last wait hold no queued batch when Commit returns (a backfill batch
// of the join at scale held 440 MB of them). Each partition here gets a
// batch over half a memtable (1.28 MB at 200 partitions), which Pebble
// queues whole as a flushable batch.
func TestCommitFlushesLargeBatches(t *testing.T) {
	defer func(b int) { applyFlushBudget = b }(applyFlushBudget)
	applyFlushBudget = 1 << 20
	const n, parts, perPart = 200, 4, 4
	val := bytes.Repeat([]byte{7}, 300<<10)
	e := newEnv(t, vfs.NewMem())
	s := e.open(n, -1)
	count := map[int]int{}
	for i := 0; len(count) < parts || slices.ContainsFunc(mapValues(count), func(c int) bool { return c < perPart }); i++ {
		k := testKey(i)
		p := PartitionOf(k, n)
		if p >= parts || count[p] == perPart {
			continue
		}
		count[p]++
		if err := s.Put(k, val); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Commit(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	// Partitions 0..2 were written before the commit's last wait (each
	// batch is over the budget); partition 3's may still be queued.
	for p := range parts - 1 {
		if m := s.parts.dbs[p].Metrics().MemTable; m.Size >= uint64(perPart*len(val)) {
			t.Errorf("partition %d holds %d bytes of memtables and queued batches after the commit (%d memtables), want them flushed", p, m.Size, m.Count)
		}
	}
	got := storeContents(t, s)
	if len(got) != parts*perPart {
		t.Fatalf("%d keys after the commit, want %d", len(got), parts*perPart)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func mapValues(m map[int]int) []int {
	var vs []int
	for _, v := range m {
		vs = append(vs, v)
	}
	return vs
}

// TestRebuildFlushesLargeBatches: rebuilding a cache from a chain of deltas
// waits for the flush of the partitions it wrote past applyFlushBudget, as
// a commit does; without the wait the memtables and queued batches of 200
// instances held the rebuilt rows (rebuilding 4M keys and repartitioning
// them peaked at 461 MB, 328 MB with the wait). Each delta writes a key
// over half a memtable to each of the first partitions, which Pebble queues
// as a flushable batch.
func TestRebuildFlushesLargeBatches(t *testing.T) {
	defer func(b int) { applyFlushBudget = b }(applyFlushBudget)
	applyFlushBudget = 1 << 20
	const n, parts, versions = 200, 4, 4
	val := bytes.Repeat([]byte{7}, 700<<10)
	keys := make([][][]byte, parts) // keys[p]: keys of partition p
	for i := 0; slices.ContainsFunc(keys, func(ks [][]byte) bool { return len(ks) < versions }); i++ {
		if p := PartitionOf(testKey(i), n); p < parts && len(keys[p]) < versions {
			keys[p] = append(keys[p], testKey(i))
		}
	}
	e := newEnv(t, vfs.NewMem())
	s := e.open(n, -1)
	for v := range versions {
		for p := range parts {
			if err := s.Put(keys[p][v], val); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Commit(t.Context(), int64(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	e.local = filepath.Join(t.TempDir(), "fresh") // nothing to reuse: a rebuild
	s = e.open(n, versions-1)
	defer s.Close()
	// Every partition was written before one of the rebuild's waits but
	// the last one's.
	for p := range parts - 1 {
		if m := s.parts.dbs[p].Metrics().MemTable; m.Size >= uint64(2*len(val)) {
			t.Errorf("partition %d holds %d bytes of memtables and queued batches after the rebuild (%d memtables), want them flushed", p, m.Size, m.Count)
		}
	}
	if got := storeContents(t, s); len(got) != parts*versions {
		t.Fatalf("%d keys after the rebuild, want %d", len(got), parts*versions)
	}
}

// TestCommitAppliesInParallel: a commit large enough (applyParallelMin,
// prepareOverlapMin, lowered here) writes and flushes its partitions'
// Pebble batches on several goroutines, and its data file alongside its
// key bounds' computation. The cache then holds what a model of the puts
// and deletes holds, commit after commit, through waves that pass the
// flush budget (lowered too) and evictions of a partition's oldest keys
// (range deletions), and so does a cache rebuilt from the checkpoint (its
// data files, and the key bounds in its metadata: a scan skips a
// partition outside them). Run with -race, it checks that the
// partitions' writes share nothing.
func TestCommitAppliesInParallel(t *testing.T) {
	defer func(b, m, o int) { applyFlushBudget, applyParallelMin, prepareOverlapMin = b, m, o }(applyFlushBudget, applyParallelMin, prepareOverlapMin)
	applyFlushBudget, applyParallelMin, prepareOverlapMin = 16<<10, 0, 0
	const n, versions = 16, 6
	rng := rand.New(rand.NewPCG(43, 7))
	e := newEnv(t, vfs.NewMem())
	s := e.open(n, -1)
	model := map[string]string{}
	next := 0
	for v := range int64(versions) {
		// The oldest keys go (testKey orders by i), as an eviction's;
		// then random ones; then new keys.
		var keys []string
		for k := range model {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i < len(keys)/3 || rng.IntN(5) == 0 {
				if err := s.Delete([]byte(k)); err != nil {
					t.Fatal(err)
				}
				delete(model, k)
			}
		}
		for range 300 + rng.IntN(300) {
			k, val := testKey(next), testVal(int64(rng.IntN(1e6)))
			next++
			if err := s.Put(k, val); err != nil {
				t.Fatal(err)
			}
			model[string(k)] = string(val)
		}
		if _, err := s.Commit(t.Context(), v); err != nil {
			t.Fatal(err)
		}
		if got := storeContents(t, s); !maps.Equal(got, model) {
			t.Fatalf("version %d: the cache holds %d keys, the model %d (or other values)", v, len(got), len(model))
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	e.local = filepath.Join(t.TempDir(), "fresh") // a rebuild from the checkpoint
	s = e.open(n, versions-1)
	defer s.Close()
	if got := storeContents(t, s); !maps.Equal(got, model) {
		t.Fatalf("rebuilt: the cache holds %d keys, the model %d (or other values)", len(got), len(model))
	}
}
