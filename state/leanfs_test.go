package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// cacheFiles lists the base names of every file under the local cache dir
// (none if it does not exist).
func cacheFiles(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == dir && errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			names = append(names, d.Name())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// unneeded reports the Pebble files leanFS leaves out (WAL, OPTIONS and
// its temp name, LOCK).
func unneeded(names []string) []string {
	var bad []string
	for _, n := range names {
		if isWALName(n) || isOptionsTempName(n) || strings.HasPrefix(n, "OPTIONS-") || n == "LOCK" {
			bad = append(bad, n)
		}
	}
	return bad
}

// leanVersions commits versions from..to-1 on s, each putting 300 keys
// (some overwritten) and deleting a few, and records them in want.
func leanVersions(t *testing.T, s *Store, from, to int64, want map[string]string) {
	t.Helper()
	for v := from; v < to; v++ {
		for i := range 300 {
			k := testKey(int(v)*200 + i)
			val := testVal(v*1000 + int64(i))
			if err := s.Put(k, val); err != nil {
				t.Fatal(err)
			}
			want[string(k)] = string(val)
		}
		for i := 0; i < 60; i += 7 {
			k := testKey(int(v)*200 + i)
			if err := s.Delete(k); err != nil {
				t.Fatal(err)
			}
			delete(want, string(k))
		}
		if _, err := s.Commit(context.Background(), v); err != nil {
			t.Fatal(err)
		}
	}
}

// openTrusted opens version v and checks that it reuses the cache (no
// rebuild, no damaged partition) and holds want.
func openTrusted(t *testing.T, e *env, n int, v int64, want map[string]string) *Store {
	t.Helper()
	var logs bytes.Buffer
	o := e.opts(n)
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	s, err := Open(context.Background(), o, v)
	if err != nil {
		t.Fatal(err)
	}
	if s.parts.trusted == nil {
		t.Fatalf("version %d: the cache was rebuilt, want it reused", v)
	}
	diffMaps(t, fmt.Sprintf("version %d reopened", v), want, storeContents(t, s))
	if strings.Contains(logs.String(), "damaged") {
		t.Fatalf("version %d: a reused partition was found damaged:\n%s", v, logs.String())
	}
	return s
}

// TestCacheWritesOnlyWhatItReads: the local cache's Pebble instances keep
// no WAL, OPTIONS or LOCK file, and a cache so written is trusted and read
// back whole by the next Open.
func TestCacheWritesOnlyWhatItReads(t *testing.T) {
	e := newEnv(t, nil)
	s := e.open(8, -1)
	want := map[string]string{}
	leanVersions(t, s, 0, 4, want)
	if bad := unneeded(cacheFiles(t, e.local)); len(bad) > 0 {
		t.Fatalf("the open cache holds files it never reads: %v", bad)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if bad := unneeded(cacheFiles(t, e.local)); len(bad) > 0 {
		t.Fatalf("the closed cache holds files it never reads: %v", bad)
	}
	s = openTrusted(t, e, 8, 3, want)
	leanVersions(t, s, 4, 6, want)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := openTrusted(t, e, 8, 5, want).Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCacheOfEarlierBuilds: a cache written with every Pebble file (as
// builds before leanFS did) is trusted and read back, and written on; and
// a cache written by this build is trusted by such a build.
func TestCacheOfEarlierBuilds(t *testing.T) {
	e := newEnv(t, nil)
	leanCache = false
	t.Cleanup(func() { leanCache = true })
	s := e.open(8, -1)
	want := map[string]string{}
	leanVersions(t, s, 0, 3, want)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if bad := unneeded(cacheFiles(t, e.local)); len(bad) == 0 {
		t.Fatal("the fixture is not a cache of an earlier build: no WAL, OPTIONS or LOCK file")
	}

	leanCache = true
	s = openTrusted(t, e, 8, 2, want)
	leanVersions(t, s, 3, 5, want)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	leanCache = false
	s = openTrusted(t, e, 8, 4, want)
	leanVersions(t, s, 5, 6, want)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	leanCache = true
	if err := openTrusted(t, e, 8, 5, want).Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLeanFSMemtableRotations: an instance whose memtable fills many times
// (each new memtable gets a WAL, recycled from an obsolete one) flushes,
// closes and reopens with every key, and no WAL ever reaches the disk.
func TestLeanFSMemtableRotations(t *testing.T) {
	dir := t.TempDir()
	p := newPartitions(nil, dir, newGen(), 1, 0, slog.Default())
	defer p.close()
	o := p.opts.Clone()
	o.MemTableSize = 64 << 10
	path := filepath.Join(p.dir, "p-0")
	d, err := pebble.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	val := bytes.Repeat([]byte{'v'}, 100)
	const keys = 20000 // ~2.4 MB: dozens of memtables
	for i := 0; i < keys; i += 500 {
		b := d.NewBatch()
		for j := i; j < i+500; j++ {
			if err := b.Set(fmt.Appendf(nil, "k%08d", j), val, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if m := d.Metrics(); m.Flush.Count < 5 {
		t.Fatalf("%d flushes: the test wants memtable rotations", m.Flush.Count)
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	if bad := unneeded(cacheFiles(t, dir)); len(bad) > 0 {
		t.Fatalf("files on disk that leanFS leaves out: %v", bad)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if d, err = pebble.Open(path, o.Clone()); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	it, err := d.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for valid := it.First(); valid; valid = it.Next() {
		if want := fmt.Sprintf("k%08d", n); string(it.Key()) != want || !bytes.Equal(it.Value(), val) {
			t.Fatalf("key %d: %q, want %q", n, it.Key(), want)
		}
		n++
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if n != keys {
		t.Fatalf("reopened instance holds %d keys, want %d", n, keys)
	}
}

// TestLeanFSLock: without a LOCK file an instance still cannot be opened
// twice in one process.
func TestLeanFSLock(t *testing.T) {
	dir := t.TempDir()
	p := newPartitions(nil, dir, newGen(), 1, 0, slog.Default())
	defer p.close()
	path := filepath.Join(p.dir, "p-0")
	d, err := pebble.Open(path, p.opts.Clone())
	if err != nil {
		t.Fatal(err)
	}
	if d2, err := pebble.Open(path, p.opts.Clone()); err == nil {
		_ = d2.Close()
		t.Fatal("an instance opened twice in one process")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d, err = pebble.Open(path, p.opts.Clone())
	if err != nil {
		t.Fatalf("reopen after close: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}
