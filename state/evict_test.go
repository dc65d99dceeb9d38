package state

import (
	"context"
	"testing"
)

// TestEvictionRangeDeletes drives the backfill pattern through the cache's
// range deletions: every version puts the keys of new windows and deletes,
// through Scan, every key below a moving bound (a prefix of each partition),
// plus a put of a never-seen key inside the deleted range (it must survive
// the range deletion) and a point delete above the bound (not a prefix).
// The store, the checkpoint files and a reopened store must all match the
// oracle.
func TestEvictionRangeDeletes(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil)
	e.snapEvery = 4
	const parts = 3
	s := e.open(parts, -1)
	want := map[string]string{}
	next := 0
	for v := int64(0); v < 9; v++ {
		for range 300 {
			k, val := testKey(next), testVal(int64(next))
			next++
			if err := s.Put(k, val); err != nil {
				t.Fatal(err)
			}
			want[string(k)] = string(val)
		}
		if v == 0 {
			if _, err := s.Commit(ctx, v); err != nil {
				t.Fatal(err)
			}
			continue
		}
		// Pending changes of committed keys inside the evicted range: the
		// scan must see the new value of one and skip the other.
		upd, gone := testKey(next-500), testKey(next-501)
		if err := s.Put(upd, testVal(1e9)); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(gone); err != nil {
			t.Fatal(err)
		}
		delete(want, string(gone))
		// Evict everything below the window of key next-450.
		upper := testKey(next - 450)[:8]
		sawUpd := false
		err := s.Scan(nil, upper, func(k, v []byte) error {
			if string(k) == string(gone) {
				t.Fatalf("scan visits a deleted pending key %x", k)
			}
			if string(k) == string(upd) {
				sawUpd = string(v) == string(testVal(1e9))
			}
			delete(want, string(k))
			return s.Delete(k)
		})
		if !sawUpd {
			t.Fatalf("version %d: scan missed the pending value of a committed key", v)
		}
		if err != nil {
			t.Fatal(err)
		}
		// A late key inside the evicted range: its window_end is below
		// the bound, and it never existed.
		late := EncodeKeyRow(nil, testSchema.Key, int64((next-460)/7)*300_000_000, 0, "late", "0x01")
		if err := s.Put(late, testVal(-v)); err != nil {
			t.Fatal(err)
		}
		want[string(late)] = string(testVal(-v))
		// A point delete above the bound.
		mid := testKey(next - 100)
		if err := s.Delete(mid); err != nil {
			t.Fatal(err)
		}
		delete(want, string(mid))
		if _, err := s.Commit(ctx, v); err != nil {
			t.Fatalf("commit %d: %v", v, err)
		}
		diffMaps(t, "store", want, storeContents(t, s))
		diffMaps(t, "checkpoint", want, checkpointContents(t, e.fs, e.dir, v))
		for k, val := range want {
			got, ok, err := s.Get([]byte(k))
			if err != nil || !ok || string(got) != val {
				t.Fatalf("version %d: Get(%x) = %x, %v, %v; want %x", v, k, got, ok, err, val)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = e.open(parts, 8)
	defer s.Close()
	diffMaps(t, "reopened", want, storeContents(t, s))
}
