package state

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestMemoryUsedIsStable: memoryUsedBytes is the same for the same state in
// the process that wrote it (after many flushes, which grow its memtables)
// and in a fresh one that has opened nothing yet, and scales with the
// partitions that hold keys (the shrink's saving).
func TestMemoryUsedIsStable(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, vfs.NewMem())
	s := e.open(16, -1)
	for i := range 400 {
		if err := s.Put(testKey(i), testVal(int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	m0, err := s.Commit(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= 6; v++ { // rewrite the same keys: the state stays the same
		for i := range 400 {
			if err := s.Put(testKey(i), testVal(int64(i))); err != nil {
				t.Fatal(err)
			}
		}
		m, err := s.Commit(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		if m.MemoryUsedBytes != m0.MemoryUsedBytes {
			t.Fatalf("memory at version %d = %d, at 0 = %d", v, m.MemoryUsedBytes, m0.MemoryUsedBytes)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	holding := 0
	for _, r := range m0.PartitionRows {
		if r > 0 {
			holding++
		}
	}
	if want := int64(holding) * pebbleInitialMemtable; m0.MemoryUsedBytes != want {
		t.Fatalf("memory after the first commit = %d, want %d (%d partitions holding keys)", m0.MemoryUsedBytes, want, holding)
	}
	// A restart opens partitions lazily: an empty batch touches none.
	s = e.open(16, 6)
	m1, err := s.Commit(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	if m1.MemoryUsedBytes != m0.MemoryUsedBytes {
		t.Fatalf("memory after a restart = %d, before %d", m1.MemoryUsedBytes, m0.MemoryUsedBytes)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPebbleInitialMemtable pins the arena Pebble allocates for a freshly
// opened instance's memtable, which memoryUsed counts for every partition
// holding keys.
func TestPebbleInitialMemtable(t *testing.T) {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), MemTableSize: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := db.Metrics().MemTable.Size; got != pebbleInitialMemtable {
		t.Fatalf("a fresh Pebble memtable is %d bytes, memoryUsed assumes %d", got, pebbleInitialMemtable)
	}
}
