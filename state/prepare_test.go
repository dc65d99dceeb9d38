package state

import (
	"context"
	"os"
	"strings"
	"testing"
)

// TestPrepareCommit: Prepare publishes the data file only; reads see the
// pending batch as before, writes are refused; Commit publishes the same
// version a plain Commit would; Abort after Prepare leaves a data file
// that neither the store nor a reopen ever reads, the next attempt of the
// version gets a new number, and garbage collection removes it.
func TestPrepareCommit(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil)
	s := e.open(4, -1)
	for i := range 30 {
		_ = s.Put(testKey(i), testVal(1))
	}
	if err := s.Prepare(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if v, ok := s.Prepared(); !ok || v != 0 {
		t.Fatalf("Prepared() = %d, %v", v, ok)
	}
	if err := s.Put(testKey(99), testVal(1)); err == nil || !strings.Contains(err.Error(), "after Prepare") {
		t.Fatalf("Put after Prepare: %v", err)
	}
	if err := s.Delete(testKey(1)); err == nil {
		t.Fatal("Delete after Prepare accepted")
	}
	if err := s.Prepare(ctx, 0); err == nil {
		t.Fatal("second Prepare accepted")
	}
	if _, ok, err := s.Get(testKey(3)); err != nil || !ok {
		t.Fatalf("Get of a pending key after Prepare: %v %v", ok, err)
	}
	names, _ := e.fs.List(e.dir)
	if strings.Join(names, ",") != "00000000000000000000.0.delta" {
		t.Fatalf("after Prepare the state dir holds %v, want only the data file", names)
	}
	if _, err := s.Commit(ctx, 1); err == nil {
		t.Fatal("Commit of another version than the prepared one accepted")
	}
	// That refusal dropped the prepared version: Commit writes attempt 1.
	m, err := s.Commit(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.RowsTotal != 30 || s.head.Attempt != 1 {
		t.Fatalf("commit after a refused one: %d rows, attempt %d", m.RowsTotal, s.head.Attempt)
	}

	// Prepare, then Commit: what a plain commit writes, and the time split.
	_ = s.Put(testKey(100), testVal(2))
	_ = s.Delete(testKey(0))
	if err := s.Prepare(ctx, 1); err != nil {
		t.Fatal(err)
	}
	m, err = s.Commit(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.RowsTotal != 30 || m.RowsUpdated != 1 || m.RowsRemoved != 1 || m.PrepareTimeMs > m.CommitTimeMs {
		t.Fatalf("prepared commit metrics %+v", m)
	}
	want := storeContents(t, s)
	diffMaps(t, "checkpoint v1", want, checkpointContents(t, e.fs, e.dir, 1))

	// Prepare, then Abort: version 2 attempt 0 has a data file, no meta.
	_ = s.Put(testKey(200), testVal(3))
	if err := s.Prepare(ctx, 2); err != nil {
		t.Fatal(err)
	}
	s.Abort()
	if _, ok := s.Prepared(); ok {
		t.Fatal("Abort left a prepared version")
	}
	if _, ok, _ := s.Get(testKey(200)); ok {
		t.Fatal("aborted key visible")
	}
	if _, err := e.fs.Stat(e.fs.PathJoin(e.dir, "00000000000000000002.0.delta")); err != nil {
		t.Fatalf("prepared data file: %v", err)
	}
	diffMaps(t, "store after Abort", want, storeContents(t, s))
	_ = s.Close()

	// A restart at version 1 ignores it; re-running version 2 writes
	// attempt 1 and collects attempt 0.
	if err := os.RemoveAll(e.local); err != nil {
		t.Fatal(err)
	}
	s = e.open(4, 1)
	diffMaps(t, "reopen", want, storeContents(t, s))
	_ = s.Put(testKey(300), testVal(4))
	if err := s.Prepare(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if s.head.Attempt != 1 {
		t.Fatalf("re-run of a prepared version wrote attempt %d, want 1", s.head.Attempt)
	}
	names, _ = e.fs.List(e.dir)
	for _, n := range names {
		if strings.HasPrefix(n, "00000000000000000002.0.") {
			t.Fatalf("aborted prepared file %s not collected: %v", n, names)
		}
	}
	want[string(testKey(300))] = string(testVal(4))
	_ = s.Close()
	diffMaps(t, "checkpoint v2", want, checkpointContents(t, e.fs, e.dir, 2))
}

// TestPrepareOpensTouched: Prepare opens (and, in a reused cache,
// checks) every partition the batch writes before its data file is
// written beside nextBounds, a lone one too: opening may repair the
// partition from the checkpoint, which must not run beside that write.
func TestPrepareOpensTouched(t *testing.T) {
	defer func(o int) { prepareOverlapMin = o }(prepareOverlapMin)
	prepareOverlapMin = 0
	e := newEnv(t, nil)
	s := e.open(4, -1)
	for i := range 40 {
		if err := s.Put(testKey(i), testVal(0)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Commit(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = e.open(4, 0) // the cache reused: its partitions open lazily
	defer s.Close()
	k := testKey(0)
	p := PartitionOf(k, 4)
	if s.parts.dbs[p] != nil {
		t.Fatalf("partition %d is open before the batch touches it", p)
	}
	// Known to exist: the commit looks nothing up in the partition.
	if err := s.PutKnown(k, testVal(1), true); err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	if s.parts.dbs[p] == nil || s.parts.trusted[p].pending {
		t.Fatalf("after Prepare, partition %d, the batch's only one, is not open and checked", p)
	}
	if _, err := s.Commit(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
}
