package state

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

var testSchema = Schema{
	OperatorName: "aggregate",
	Key: []Field{
		{Name: "window_end", Type: stream.Timestamp}, {Name: "window_start", Type: stream.Timestamp},
		{Name: "source", Type: stream.String}, {Name: "miner", Type: stream.String},
	},
	Value: []Field{{Name: "count", Type: stream.Int64}},
	Spec:  "window=5m watermark=block_ts-48h mode=update",
}

// env is one checkpoint FS plus a local cache dir.
type env struct {
	t     testing.TB
	fs    vfs.FS
	dir   string
	local string
	// snapEvery, if set, is Options.SnapshotEvery.
	snapEvery int
	// background runs background snapshots in a goroutine, as in
	// production; otherwise inside the commit that starts them
	// (Options.syncMaintenance), so that faults hit them deterministically.
	background bool
	// memCache is Options.MemCacheBytes.
	memCache int64
	// lazy is Options.LazyCache.
	lazy bool
}

func newEnv(t testing.TB, fs vfs.FS) *env {
	if fs == nil {
		fs = vfs.NewMem()
	}
	return &env{t: t, fs: fs, dir: "ckpt/state/0", local: filepath.Join(t.TempDir(), "cache")}
}

func (e *env) opts(n int) Options {
	return Options{Dir: e.dir, FS: e.fs, LocalDir: e.local, Partitions: n, Schema: testSchema, SnapshotEvery: e.snapEvery,
		syncMaintenance: !e.background, MemCacheBytes: e.memCache, LazyCache: e.lazy}
}

func (e *env) open(n int, v int64) *Store {
	e.t.Helper()
	s, err := Open(context.Background(), e.opts(n), v)
	if err != nil {
		e.t.Fatalf("open version %d with %d partitions: %v", v, n, err)
	}
	return s
}

func testKey(i int) []byte {
	return EncodeKeyRow(nil, testSchema.Key, int64(i/7)*300_000_000, int64(i/7)*300_000_000-300_000_000,
		[]string{"s3_backfill", "eth_live"}[i%2], fmt.Sprintf("0x%040x", i))
}

func testVal(c int64) []byte { return AppendInt64Value(nil, c) }

// storeContents returns the store's rows through Scan, checking partition
// placement and order.
func storeContents(t testing.TB, s *Store) map[string]string {
	t.Helper()
	got := map[string]string{}
	var last []byte
	lastPart := -1
	err := s.Scan(nil, nil, func(k, v []byte) error {
		p := PartitionOf(k, s.Partitions())
		if p < lastPart || (p == lastPart && string(k) <= string(last)) {
			t.Fatalf("scan out of order at key %x", k)
		}
		lastPart, last = p, append(last[:0], k...)
		if _, dup := got[string(k)]; dup {
			t.Fatalf("scan visits key %x twice", k)
		}
		got[string(k)] = string(v)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(got)) != s.NumKeys() {
		t.Fatalf("scan saw %d keys, NumKeys says %d", len(got), s.NumKeys())
	}
	return got
}

// checkpointContents reads a version from the files alone.
func checkpointContents(t testing.TB, fs vfs.FS, dir string, v int64) map[string]string {
	t.Helper()
	got := map[string]string{}
	_, _, err := ReadAllRaw(context.Background(), fs, dir, v, func(p int, k, val []byte) error {
		got[string(k)] = string(val)
		return nil
	})
	if err != nil {
		t.Fatalf("read version %d: %v", v, err)
	}
	return got
}

func diffMaps(t testing.TB, what string, want, got map[string]string) {
	t.Helper()
	if maps.Equal(want, got) {
		return
	}
	n := 0
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s: key %x want %x got %x (present %v)", what, k, v, g, ok)
			if n++; n > 5 {
				break
			}
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected key %x", what, k)
			if n++; n > 10 {
				break
			}
		}
	}
	t.Fatalf("%s: %d keys want, %d got", what, len(want), len(got))
}

func TestBasicLifecycle(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil)
	s := e.open(4, -1)
	for i := range 100 {
		if err := s.Put(testKey(i), testVal(int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	v, ok, err := s.Get(testKey(7))
	if err != nil || !ok || string(v) != string(testVal(7)) {
		t.Fatalf("get pending: %x %v %v", v, ok, err)
	}
	m, err := s.Commit(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.RowsTotal != 100 || m.RowsUpdated != 100 || m.RowsRemoved != 0 || len(m.PartitionRows) != 4 {
		t.Fatalf("metrics %+v", m)
	}
	for i := range 50 {
		if err := s.Delete(testKey(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(testKey(1000), testVal(1)); err != nil {
		t.Fatal(err)
	}
	if s.NumKeys() != 51 {
		t.Fatalf("NumKeys %d", s.NumKeys())
	}
	m, err = s.Commit(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.RowsTotal != 51 || m.RowsUpdated != 1 || m.RowsRemoved != 50 {
		t.Fatalf("metrics %+v", m)
	}
	want := storeContents(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopen with the cache, then without it.
	s = e.open(4, 1)
	diffMaps(t, "reopen with cache", want, storeContents(t, s))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(e.local); err != nil {
		t.Fatal(err)
	}
	s = e.open(4, 1)
	diffMaps(t, "reopen without cache", want, storeContents(t, s))
	diffMaps(t, "checkpoint", want, checkpointContents(t, e.fs, e.dir, 1))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// An older version.
	s = e.open(4, 0)
	if s.NumKeys() != 100 {
		t.Fatalf("version 0 has %d keys", s.NumKeys())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestSchemaMismatch(t *testing.T) {
	e := newEnv(t, nil)
	s := e.open(2, -1)
	if err := s.Put(testKey(1), testVal(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	o := e.opts(2)
	o.Schema.Value = []Field{{Name: "count", Type: stream.Int64}, {Name: "sum_gas", Type: stream.Int64}}
	_, err := Open(context.Background(), o, 0)
	if !errcode.Is(err, errcode.StateSchemaMismatch) {
		t.Fatalf("want STATE_SCHEMA_MISMATCH, got %v", err)
	}
	for _, want := range []string{"value(count int64)", "value(count int64, sum_gas int64)"} {
		if !containsStr(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

func containsStr(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// TestPropertyOracle runs random batches against a plain map: random puts and
// deletes, scans with deletes (eviction), aborts, restarts with and without
// the cache, and repartitions 200 -> 8 -> 1 -> 37.
func TestPropertyOracle(t *testing.T) {
	seeds := []uint64{1, 2}
	if *long {
		seeds = []uint64{1, 2, 3, 4, 5, 6, 7, 8}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			runOracle(t, seed, false)
		})
	}
	t.Run("wipe-cache-every-restart", func(t *testing.T) {
		t.Parallel()
		runOracle(t, 9, true)
	})
}

var long = flag.Bool("long", false, "run the long property and fault tests")

func runOracle(t *testing.T, seed uint64, wipe bool) {
	runOracleCache(t, seed, wipe, 0, false)
}

// runOracleCache is runOracle with Options.MemCacheBytes = memCache, and
// returns the cache's moves from memory to disk. lazy sets
// Options.LazyCache and writes as the join does (PutKnown, DeleteKnown),
// reading the store in some steps only, so that runs of commits go
// unapplied before a read, a crash, a reopen or a repartition.
func runOracleCache(t *testing.T, seed uint64, wipe bool, memCache int64, lazy bool) (st oracleStats) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, seed))
	getRng := rand.New(rand.NewPCG(seed, ^seed)) // apart, so the batches stay those of rng
	lazyRng := rand.New(rand.NewPCG(^seed, seed))
	// reads: whether this step reads the store (always unless lazy).
	var reading bool
	reads := func() bool { return reading }
	e := newEnv(t, nil)
	e.memCache = memCache
	e.lazy = lazy
	e.snapEvery = 2 + int(seed%4) // snapshots often, also right after a reopen
	n := 200
	s := e.open(n, -1)
	oracle := map[string]string{}
	versions := map[int64]map[string]string{}
	version := int64(-1)
	plan := []int{8, 1, 37}
	steps, every := 40, 10
	skipped := 0 // commits the cache did not apply since the last open
	if lazy {
		steps = 100 // a lazy run's reads are rarer
	}
	if *long {
		steps, every = 200, 50
	}
	for step := 0; step < steps; step++ {
		// One batch.
		work := maps.Clone(oracle)
		// Some lazy batches write keys of unknown presence, whose look-up
		// at commit builds the cache.
		known := lazy && lazyRng.IntN(8) != 0
		reading = !lazy || lazyRng.IntN(6) == 0
		unbuilt := s.lazyUnbuilt()
		for range rng.IntN(60) {
			k := testKey(rng.IntN(300))
			_, existed := oracle[string(k)]
			if rng.IntN(4) == 0 {
				if known {
					if err := s.DeleteKnown(k, existed); err != nil {
						t.Fatal(err)
					}
				} else if err := s.Delete(k); err != nil {
					t.Fatal(err)
				}
				delete(work, string(k))
			} else {
				v := testVal(rng.Int64N(1000))
				if known {
					if err := s.PutKnown(k, v, existed); err != nil {
						t.Fatal(err)
					}
				} else if err := s.Put(k, v); err != nil {
					t.Fatal(err)
				}
				work[string(k)] = string(v)
			}
		}
		if evict := rng.IntN(5) == 0; evict && lazy && lazyRng.IntN(4) != 0 {
			// The same eviction without reading the store: the join's,
			// from the rows it holds.
			upper := string(AppendInt64Key(nil, int64(rng.IntN(60))*300_000_000))
			for k := range work {
				if k < upper {
					_, existed := oracle[k]
					if err := s.DeleteKnown([]byte(k), existed); err != nil {
						t.Fatal(err)
					}
					delete(work, k)
				}
			}
		} else if evict {
			// Evict a key range, like agg's watermark eviction.
			upper := AppendInt64Key(nil, int64(rng.IntN(60))*300_000_000)
			err := s.Scan(nil, upper, func(k, v []byte) error {
				if string(work[string(k)]) != string(v) {
					t.Fatalf("scan value of %x: want %x got %x", k, work[string(k)], v)
				}
				delete(work, string(k))
				return s.Delete(k)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if s.NumKeys() != int64(len(work)) {
			t.Fatalf("step %d: NumKeys %d want %d", step, s.NumKeys(), len(work))
		}
		if reads() {
			checkKeySuperset(t, s, work, oracle)
		}
		switch rng.IntN(10) {
		case 0:
			s.Abort()
		default:
			version++
			inMem := s.parts.inMem
			m, err := s.Commit(ctx, version)
			if err != nil {
				t.Fatal(err)
			}
			if inMem && !s.parts.inMem {
				st.moves++
			}
			if s.lazyUnbuilt() {
				st.skipped++
				skipped++
			}
			if reads() {
				checkGets(t, s, getRng, work)
			}
			if m.RowsTotal != int64(len(work)) {
				t.Fatalf("RowsTotal %d want %d", m.RowsTotal, len(work))
			}
			oracle = work
			versions[version] = oracle
		}
		// Checked at most steps; skipping leaves partitions closed after a
		// reopen, so later snapshots are written from the files.
		if check := rng.IntN(3) != 0; step == steps-1 || check && reads() {
			diffMaps(t, fmt.Sprintf("step %d", step), oracle, storeContents(t, s))
		}
		if version >= 0 {
			checkBoundsHold(t, e, s, true, !lazy)
		}
		if unbuilt && !s.lazyUnbuilt() && skipped > 0 {
			st.builtAfter++
		}
		// A lazy run reopens more often, and crashes more: a reopen
		// leaves the cache unbuilt unless Close left it trusted.
		if rng.IntN(8) == 0 || (step%every == every-1 && len(plan) > 0) || lazy && lazyRng.IntN(5) == 0 {
			if rng.IntN(2) == 0 || lazy && lazyRng.IntN(4) != 0 {
				crashStore(s)
			} else if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if wipe {
				if err := os.RemoveAll(e.local); err != nil {
					t.Fatal(err)
				}
			}
			s, skipped = e.open(n, version), 0
			// A full scan opens every partition; without it, the next
			// repartition or snapshot reads the checkpoint files instead.
			if rng.IntN(3) == 0 && reads() {
				// Some partitions still closed: KeySuperset opens them.
				checkKeySuperset(t, s, oracle, oracle)
			}
			if rng.IntN(2) == 0 && reads() {
				diffMaps(t, fmt.Sprintf("step %d reopened", step), oracle, storeContents(t, s))
			}
		}
		if step%every == every-1 && len(plan) > 0 && version >= 0 {
			to := plan[0]
			plan = plan[1:]
			version++
			st, err := s.Repartition(ctx, version-1, version, to)
			if err != nil {
				t.Fatal(err)
			}
			if st.From != n || st.To != to || st.KeysBefore != int64(len(oracle)) || st.KeysAfter != st.KeysBefore {
				t.Fatalf("repartition stats %+v, oracle has %d keys", st, len(oracle))
			}
			n = to
			versions[version] = oracle
			diffMaps(t, fmt.Sprintf("step %d repartitioned to %d", step, to), oracle, storeContents(t, s))
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Every retained version reads back from the checkpoint alone.
	for v, want := range versions {
		if v < version-int64(e.opts(1).Retain) {
			continue
		}
		diffMaps(t, fmt.Sprintf("checkpoint version %d", v), want, checkpointContents(t, e.fs, e.dir, v))
	}
	_ = slices.Sorted(maps.Keys(versions))
	return st
}

// oracleStats counts what a run of runOracleCache exercised.
type oracleStats struct {
	moves      int // of the cache from memory to disk
	skipped    int // commits a lazy cache did not apply
	builtAfter int // lazy builds after commits were skipped
}

// checkGets checks Get of a few random keys, present or not, against want.
func checkGets(t *testing.T, s *Store, rng *rand.Rand, want map[string]string) {
	t.Helper()
	for range 20 {
		checkGet(t, s, testKey(rng.IntN(300)), want)
	}
}

// checkGet checks Get of k, present or not, against want.
func checkGet(t *testing.T, s *Store, k []byte, want map[string]string) {
	t.Helper()
	v, ok, err := s.Get(k)
	if err != nil {
		t.Fatal(err)
	}
	w, wok := want[string(k)]
	if ok != wok || string(v) != w {
		t.Fatalf("Get %x: got %x, %v; want %x, %v", k, v, ok, w, wok)
	}
}

// crashStore simulates the death of the process holding s: the Pebble
// instances go away without a flush (there is no WAL, so their memtables are
// lost) and no marker is written; the next Open must not trust the cache.
func crashStore(s *Store) {
	s.bg.Wait()
	_ = s.parts.close()
	s.closed = true
}

// TestRepartitionExtremes grows 1 -> 10,000 -> 1: only non-empty partitions
// get a Pebble instance, and no key is lost, duplicated or altered.
func TestRepartitionExtremes(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil)
	s := e.open(1, -1)
	want := map[string]string{}
	for i := range 300 {
		k, v := testKey(i), testVal(int64(i))
		if err := s.Put(k, v); err != nil {
			t.Fatal(err)
		}
		want[string(k)] = string(v)
	}
	if _, err := s.Commit(ctx, 0); err != nil {
		t.Fatal(err)
	}
	for v, n := range []int{10000, 1, 3} {
		st, err := s.Repartition(ctx, int64(v), int64(v+1), n)
		if err != nil {
			t.Fatal(err)
		}
		if st.KeysBefore != 300 || st.KeysAfter != 300 || st.To != n {
			t.Fatalf("stats %+v", st)
		}
		diffMaps(t, fmt.Sprintf("after repartition to %d", n), want, storeContents(t, s))
		open := 0
		for _, d := range s.parts.dbs {
			if d != nil {
				open++
			}
		}
		if open > 300 {
			t.Fatalf("%d Pebble instances open for 300 keys", open)
		}
		diffMaps(t, fmt.Sprintf("checkpoint after repartition to %d", n), want, checkpointContents(t, e.fs, e.dir, int64(v+1)))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, e.opts(7), 3); err == nil {
		t.Fatal("open with a partition count other than the recorded one succeeded")
	}
}

// TestRerunBatch re-commits a version from its base, as the engine does when
// a batch's state was committed but its commits/<id> was not: the new attempt
// wins, readers and restarts see it, and the old attempt becomes garbage.
func TestRerunBatch(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil)
	s := e.open(4, -1)
	for i := range 20 {
		_ = s.Put(testKey(i), testVal(1))
	}
	if _, err := s.Commit(ctx, 0); err != nil {
		t.Fatal(err)
	}
	_ = s.Put(testKey(100), testVal(1))
	if _, err := s.Commit(ctx, 1); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	s = e.open(4, 0)
	_ = s.Put(testKey(200), testVal(2))
	if _, err := s.Commit(ctx, 1); err != nil {
		t.Fatal(err)
	}
	want := storeContents(t, s)
	if _, ok := want[string(testKey(100))]; ok {
		t.Fatal("abandoned attempt's key visible")
	}
	_ = s.Close()
	diffMaps(t, "checkpoint", want, checkpointContents(t, e.fs, e.dir, 1))
	if err := os.RemoveAll(e.local); err != nil {
		t.Fatal(err)
	}
	s = e.open(4, 1)
	diffMaps(t, "restart", want, storeContents(t, s))
	// Later snapshots collect the old attempt.
	o := e.opts(4)
	for v := int64(2); v < 13; v++ {
		_ = s.Put(testKey(int(v)), testVal(v))
		if _, err := s.Commit(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.Close()
	names, _ := e.fs.List(e.dir)
	for _, n := range names {
		if strings.HasPrefix(n, "00000000000000000001.0.") {
			t.Fatalf("old attempt %s not collected (retain %d)", n, o.Retain)
		}
	}
}

// TestSpecCompatible: an operator may accept its older Spec text for the
// same key and value fields; the layout itself must still match.
func TestSpecCompatible(t *testing.T) {
	e := newEnv(t, nil)
	s := e.open(2, -1)
	if err := s.Put(testKey(1), testVal(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	recorded := e.opts(2).Schema.Spec
	o := e.opts(2)
	o.Schema.Spec = "new spec"
	if _, err := Open(context.Background(), o, 0); !errcode.Is(err, errcode.StateSchemaMismatch) {
		t.Fatalf("another spec without SpecCompatible: %v", err)
	}
	o.SpecCompatible = func(r string) bool { return r == recorded }
	s, err := Open(context.Background(), o, 0)
	if err != nil {
		t.Fatalf("compatible spec: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	o.Schema.Value = []Field{{Name: "count", Type: stream.Int64}, {Name: "sum_gas", Type: stream.Int64}}
	if _, err := Open(context.Background(), o, 0); !errcode.Is(err, errcode.StateSchemaMismatch) {
		t.Fatalf("compatible spec, other fields: %v", err)
	}
}
