package state

import (
	"context"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// TestPendingAllocByPartition: the pending batch's keys and values lie in
// chunks of their partition, so that a commit reading a partition's keys
// reads them together: keys put in turn to two partitions each follow the
// previous one of their own partition in memory, and a copy has no spare
// capacity (appending to it cannot overwrite its neighbour).
func TestPendingAllocByPartition(t *testing.T) {
	var a pendingAlloc
	var prev [2][]byte
	adjacent := 0
	for i := range 100 {
		p := i % 2
		b := a.bytes(p, []byte{byte(i), 1, 2, 3, 4, 5, 6})
		if cap(b) != len(b) {
			t.Fatalf("copy %d has capacity %d for %d bytes", i, cap(b), len(b))
		}
		if &b[0] == &a.parts[p].buf[0] {
			prev[p] = b // the first of a new chunk
			continue
		}
		if unsafe.Pointer(&b[0]) != unsafe.Add(unsafe.Pointer(&prev[p][0]), len(prev[p])) {
			t.Fatalf("copy %d in partition %d does not follow the partition's previous one", i, p)
		}
		adjacent++
		prev[p] = b
	}
	if adjacent < 80 {
		t.Errorf("%d of 100 copies follow their partition's previous one", adjacent)
	}
	for p := range 2 {
		e1, e2 := a.entry(p), a.entry(p)
		if uintptr(unsafe.Pointer(e2))-uintptr(unsafe.Pointer(e1)) != unsafe.Sizeof(*e1) {
			t.Errorf("partition %d's entries are not adjacent", p)
		}
	}
}

// TestPendingChanges: a large pending batch (read partition by partition
// from the allocator's chunks) and a small one give their entries that
// are not gone, sorted by (partition, key), as a plain sort does.
func TestPendingChanges(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{1000, 40_000} {
		env := newEnv(t, nil)
		s := env.open(7, -1)
		for i := range n {
			if err := s.PutKnown(testKey(i), testVal(int64(i)), false); err != nil {
				t.Fatal(err)
			}
			if i%5 == 0 {
				// Deleting a key put in this batch forgets it: gone.
				if err := s.DeleteKnown(testKey(i), false); err != nil {
					t.Fatal(err)
				}
			}
		}
		var want []change
		for _, e := range s.ptab.ents {
			if !e.gone {
				want = append(want, change{part: int(e.part), key: e.key, e: e})
			}
		}
		slices.SortFunc(want, func(a, b change) int {
			if a.part != b.part {
				return a.part - b.part
			}
			return strings.Compare(a.key, b.key)
		})
		got, _ := s.pendingGrouped(func(e *pendingEntry) bool { return !e.gone })
		if len(got) != len(want) || len(want) != n-(n+4)/5 {
			t.Fatalf("n=%d: %d changes, want %d (%d expected)", n, len(got), len(want), n-(n+4)/5)
		}
		for i := range got {
			if got[i].e != want[i].e {
				t.Fatalf("n=%d: change %d is (%d, %x), want (%d, %x)", n, i, got[i].part, got[i].key, want[i].part, want[i].key)
			}
		}
		if _, err := s.Commit(ctx, 0); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
}
