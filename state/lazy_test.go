package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
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
	// A key of a new window lies beyond every partition's bounds: reading
	// and writing it opens nothing until Commit writes it.
	nk := testKey(7000)
	np := PartitionOf(nk, 50)
	if s.parts.dbs[np] != nil {
		t.Skip("fixture: the new key's partition is already open")
	}
	if _, ok, err := s.Get(nk); err != nil || ok {
		t.Fatalf("Get of a new key: ok %v err %v", ok, err)
	}
	if err := s.Put(nk, testVal(7)); err != nil {
		t.Fatal(err)
	}
	if s.parts.dbs[np] != nil || s.NumKeys() != int64(len(want))+1 {
		t.Fatalf("new key: partition open %v, NumKeys %d want %d", s.parts.dbs[np] != nil, s.NumKeys(), len(want)+1)
	}
	if _, err := s.Commit(context.Background(), 4); err != nil {
		t.Fatal(err)
	}
	want[string(nk)] = string(testVal(7))
	if s.parts.dbs[np] == nil {
		t.Fatal("Commit did not write the new key's partition")
	}
	diffMaps(t, "lazily opened store", want, storeContents(t, s))
	checkBounds(t, e, s, true)
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

// checkBounds compares the store's key bounds with the committed version
// read from the files: known bounds are exact, empty partitions have none,
// and with wantAll every non-empty partition's bounds are known.
func checkBounds(t *testing.T, e *env, s *Store, wantAll bool) {
	t.Helper()
	checkBoundsHold(t, e, s, wantAll, true)
}

// checkBoundsHold is checkBounds where, unless exact, a partition's bounds
// may be wider than its keys (a lazy cache's deletes: lazybuild.go).
func checkBoundsHold(t *testing.T, e *env, s *Store, wantAll, exact bool) {
	t.Helper()
	lo := map[int][]byte{}
	hi := map[int][]byte{}
	_, _, err := ReadAllRaw(context.Background(), e.fs, e.dir, s.Version(), func(p int, k, _ []byte) error {
		if _, ok := lo[p]; !ok {
			lo[p] = bytes.Clone(k)
		}
		hi[p] = bytes.Clone(k)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p, b := range s.bounds {
		l, ok := lo[p]
		switch {
		case !ok && b != nil:
			t.Fatalf("empty partition %d has bounds %x..%x", p, b.Min, b.Max)
		case ok && b == nil && wantAll:
			t.Fatalf("partition %d has no bounds", p)
		case ok && b != nil && exact && (!bytes.Equal(b.Min, l) || !bytes.Equal(b.Max, hi[p])),
			ok && b != nil && (bytes.Compare(b.Min, l) > 0 || bytes.Compare(b.Max, hi[p]) < 0):
			t.Fatalf("partition %d bounds %x..%x, keys span %x..%x", p, b.Min, b.Max, l, hi[p])
		}
	}
}

// TestScanOpensOnlyPartitionsInRange: after a restart, an eviction-like
// scan [nil, upper) opens exactly the partitions holding a key below upper,
// and still sees the pending keys of the others; deletes of a partition's
// smallest keys move its bounds.
func TestScanOpensOnlyPartitionsInRange(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil)
	want := lazyFixture(t, e)
	s := e.open(50, 3)
	defer s.Close()
	checkBounds(t, e, s, true)
	upper := AppendInt64Key(nil, 5*300_000_000) // the first few windows
	inRange := map[int]bool{}
	for k := range want {
		if k < string(upper) {
			inRange[PartitionOf([]byte(k), 50)] = true
		}
	}
	if len(inRange) == 0 || len(inRange) > 25 {
		t.Fatalf("fixture: %d partitions below the bound", len(inRange))
	}
	// A pending key below upper in a partition with no committed key there.
	var extra []byte
	for i := 0; ; i++ {
		k := EncodeKeyRow(nil, testSchema.Key, int64(0), int64(-1), "x", fmt.Sprintf("extra%d", i))
		if !inRange[PartitionOf(k, 50)] {
			extra = k
			break
		}
	}
	if err := s.Put(extra, testVal(1)); err != nil {
		t.Fatal(err)
	}
	seen := 0
	err := s.Scan(nil, upper, func(k, v []byte) error {
		seen++
		return s.Delete(k)
	})
	if err != nil {
		t.Fatal(err)
	}
	for p, d := range s.parts.dbs {
		if (d != nil) != inRange[p] {
			t.Fatalf("partition %d open=%v, has keys in range=%v", p, d != nil, inRange[p])
		}
	}
	wantSeen := 1
	for k := range want {
		if k < string(upper) {
			wantSeen++
			delete(want, k)
		}
	}
	if seen != wantSeen {
		t.Fatalf("scan saw %d keys, want %d", seen, wantSeen)
	}
	if _, err := s.Commit(ctx, 4); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, e, s, true)
	diffMaps(t, "after eviction", want, storeContents(t, s))
	// The next scan of the same range opens nothing more and finds nothing.
	open := openCount(s)
	if err := s.Scan(nil, upper, func(k, v []byte) error { t.Fatalf("key %x left below the bound", k); return nil }); err != nil {
		t.Fatal(err)
	}
	if openCount(s) != open {
		t.Fatal("an empty range scan opened partitions")
	}
}

// TestMetaFormat1: a checkpoint whose metadata files are format 1 (no key
// bounds) opens, scans correctly (opening partitions of unknown bounds),
// and the next commit writes format 2 with exact bounds for the partitions
// it touched; a repartition gives every partition bounds.
func TestMetaFormat1(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil)
	want := lazyFixture(t, e)
	toFormat1(t, e)
	s := e.open(50, 3)
	defer s.Close()
	for p, b := range s.bounds {
		if b != nil {
			t.Fatalf("partition %d has bounds from format-1 metadata", p)
		}
	}
	upper := AppendInt64Key(nil, 5*300_000_000)
	n := 0
	if err := s.Scan(nil, upper, func(k, v []byte) error { n++; return s.Delete(k) }); err != nil {
		t.Fatal(err)
	}
	for k := range want {
		if k < string(upper) {
			n--
			delete(want, k)
		}
	}
	if n != 0 {
		t.Fatalf("scan count off by %d", n)
	}
	if _, err := s.Commit(ctx, 4); err != nil {
		t.Fatal(err)
	}
	m, err := readMeta(e.fs, e.dir, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.FormatVersion != metaFormatVersion || m.PartitionKeys == nil {
		t.Fatalf("commit wrote formatVersion %d, bounds %v", m.FormatVersion, m.PartitionKeys != nil)
	}
	checkBounds(t, e, s, false)
	diffMaps(t, "after commit on format 1", want, storeContents(t, s))
	if _, err := s.Repartition(ctx, 4, 5, 9); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, e, s, true)
	diffMaps(t, "after repartition", want, storeContents(t, s))
}

func readFS(t *testing.T, fs vfs.FS, path string) []byte {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFS(t *testing.T, fs vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotFromFiles: the commit that starts a background snapshot
// with most partitions closed writes a delta, opens only the partitions
// the batch changed, and the snapshot (written from the checkpoint files:
// the last snapshot and the deltas since) holds the committed state.
func TestSnapshotFromFiles(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil)
	want := lazyFixture(t, e)
	opts := e.opts(50)
	opts.SnapshotEvery = 2
	s, err := Open(ctx, opts, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	touched := map[int]bool{}
	for i := 1000; i < 1010; i++ { // new keys
		k, v := testKey(i), testVal(int64(i))
		if err := s.Put(k, v); err != nil {
			t.Fatal(err)
		}
		want[string(k)] = string(v)
		touched[PartitionOf(k, 50)] = true
	}
	for i := 5; i < 300; i += 40 { // overwrite or delete existing keys
		k := testKey(i)
		if _, ok := want[string(k)]; !ok {
			continue
		}
		touched[PartitionOf(k, 50)] = true
		if i%3 == 0 {
			if err := s.Delete(k); err != nil {
				t.Fatal(err)
			}
			delete(want, string(k))
			continue
		}
		if err := s.Put(k, testVal(-int64(i))); err != nil {
			t.Fatal(err)
		}
		want[string(k)] = string(testVal(-int64(i)))
	}
	m, err := s.Commit(ctx, 4)
	if err != nil {
		t.Fatal(err)
	}
	if m.Snapshot {
		t.Fatal("commit wrote a snapshot")
	}
	if _, err := e.fs.Stat(e.fs.PathJoin(e.dir, snapMetaFileName(4, 0))); err != nil {
		t.Fatalf("no background snapshot of version 4: %v", err)
	}
	for p, d := range s.parts.dbs {
		if d != nil && !touched[p] {
			t.Fatalf("snapshot commit opened untouched partition %d", p)
		}
	}
	diffMaps(t, "checkpoint snapshot", want, checkpointContents(t, e.fs, e.dir, 4))
	diffMaps(t, "store after snapshot", want, storeContents(t, s))
	checkBounds(t, e, s, true)
}

// TestOpenRecordedDefersRebuild: OpenRecorded over a local cache it cannot
// reuse (an offline repartition's fresh directory) opens and builds no
// partition; a Repartition then reads the checkpoint files alone and gives
// the base version, and a store that reads instead builds the cache on its
// first read. Rebuilding the 200 old partitions before repartitioning them
// peaked at 461 MB for 4M keys, 240 MB for 1M.
func TestOpenRecordedDefersRebuild(t *testing.T) {
	ctx := context.Background()
	t.Run("repartition", func(t *testing.T) {
		e := newEnv(t, nil)
		want := lazyFixture(t, e)
		o := e.opts(50)
		o.LocalDir = filepath.Join(t.TempDir(), "fresh")
		s, err := OpenRecorded(ctx, o, 3)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		old := s.parts
		if n := openCount(s); n != 0 || old.build == nil {
			t.Fatalf("OpenRecorded opened %d partitions (build deferred: %v), want none and a deferred build", n, old.build != nil)
		}
		st, err := s.Repartition(ctx, 3, 4, 7)
		if err != nil {
			t.Fatal(err)
		}
		s.bg.Wait()
		if old.build == nil {
			t.Fatal("the repartition built the old cache")
		}
		if st.KeysBefore != int64(len(want)) || st.KeysAfter != int64(len(want)) {
			t.Fatalf("stats %+v, want %d keys", st, len(want))
		}
		diffMaps(t, "checkpoint after repartition", want, checkpointContents(t, e.fs, e.dir, 4))
		diffMaps(t, "store after repartition", want, storeContents(t, s))
	})
	t.Run("read", func(t *testing.T) {
		e := newEnv(t, nil)
		want := lazyFixture(t, e)
		o := e.opts(50)
		o.LocalDir = filepath.Join(t.TempDir(), "fresh")
		s, err := OpenRecorded(ctx, o, 3)
		if err != nil {
			t.Fatal(err)
		}
		// Closed unbuilt: no marker vouches for the empty generation.
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(o.LocalDir, markerName)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a store closed with its cache unbuilt wrote a marker: %v", err)
		}
		if s, err = OpenRecorded(ctx, o, 3); err != nil {
			t.Fatal(err)
		}
		getBuilds(t, s, want)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		// Built, the cache is trusted at the next Open.
		if s, err = Open(ctx, o, 3); err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if n := openCount(s); n != 0 {
			t.Fatalf("the reopened store rebuilt %d partitions, want the built cache reused", n)
		}
		diffMaps(t, "store reopened", want, storeContents(t, s))
	})
}

// toFormat1 rewrites every metadata file of e's checkpoint as format 1
// (no key bounds).
func toFormat1(t *testing.T, e *env) {
	t.Helper()
	names, err := e.fs.List(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if !strings.HasSuffix(n, ".meta") {
			continue
		}
		path := e.fs.PathJoin(e.dir, n)
		b := readFS(t, e.fs, path)
		m, err := decodeMeta(b)
		if err != nil {
			t.Fatal(err)
		}
		m.FormatVersion, m.PartitionKeys = 1, nil
		old := encodeMeta(m)
		if strings.Contains(string(old), "partitionKeys") {
			t.Fatal("format 1 metadata with partitionKeys")
		}
		writeFS(t, e.fs, path, old)
	}
}

// getBuilds checks that a Get of a key of s, whose cache's build is
// deferred, reads the built cache, and that all of it is built.
func getBuilds(t *testing.T, s *Store, want map[string]string) {
	t.Helper()
	k := testKey(1)
	v, ok, err := s.Get(k)
	if err != nil || !ok || string(v) != want[string(k)] {
		t.Fatalf("Get of a key of the deferred cache: %x %v %v, want %x", v, ok, err, want[string(k)])
	}
	if s.parts.build != nil {
		t.Fatal("a Get left the cache unbuilt")
	}
	diffMaps(t, "store built on its first read", want, storeContents(t, s))
}
