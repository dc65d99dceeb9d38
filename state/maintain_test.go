package state

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// TestCommitBytesFollowChanges: every commit writes bytes in proportion to
// the keys it changed (docs/contracts.md, Targets: the largest commit's
// bytes per changed key over the smallest's, at most 2x), snapshots
// included: they are written off the commit path. Before background
// snapshots every SnapshotEvery-th commit wrote the whole state (10x here).
func TestCommitBytesFollowChanges(t *testing.T) {
	ctx := context.Background()
	e, s := openSnapshotting(t, 3)
	rng := rand.New(rand.NewPCG(3, 3))
	lo, hi := 0.0, 0.0
	snaps := 0
	for v := int64(0); v < 20; v++ {
		n := 200
		if v == 0 {
			n = 2000 // the initial state: ten times any later batch
		}
		for range n {
			k := testKey(rng.IntN(3000))
			if v > 0 && rng.IntN(4) == 0 {
				_ = s.Delete(k)
				continue
			}
			if err := s.Put(k, testVal(v)); err != nil {
				t.Fatal(err)
			}
		}
		m, err := s.Commit(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		r := float64(m.BytesWritten) / float64(m.RowsUpdated+m.RowsRemoved)
		if lo == 0 || r < lo {
			lo = r
		}
		hi = max(hi, r)
		if e.snapshotted(v) {
			snaps++
		}
	}
	if hi > 2*lo {
		t.Fatalf("bytes per changed key from %.0f to %.0f B (%.1fx, want at most 2x)", lo, hi, hi/lo)
	}
	// A snapshot waits for deltas of its base's bytes (chainDue): 2,000
	// keys, then batches of 200 changes.
	if snaps < 2 {
		t.Fatalf("%d background snapshots in 20 versions at SnapshotEvery 3", snaps)
	}
}

// TestSnapshotsFollowBytes: a background snapshot waits until the deltas
// since the last one hold its bytes (chainDue), so a backfill of equal
// batches snapshots at doubling sizes, not every SnapshotEvery batches,
// and a live query's small deltas over a large state snapshot only every
// snapshotChainCap x SnapshotEvery versions. A chain whose keys were only
// added (each written once) has nothing a snapshot would drop: none until
// the cap.
func TestSnapshotsFollowBytes(t *testing.T) {
	ctx := context.Background()
	e, s := openSnapshotting(t, 2)
	var snaps []int64
	commit := func(v int64, keys ...int) {
		t.Helper()
		for _, k := range keys {
			if err := s.Put(testKey(k), testVal(v)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Commit(ctx, v); err != nil {
			t.Fatal(err)
		}
		if e.snapshotted(v) {
			snaps = append(snaps, v)
		}
	}
	// A backfill: 40 batches of 100 new keys and one written before.
	// Every SnapshotEvery deltas would be 20 snapshots; by bytes the state
	// doubles between two.
	v := int64(0)
	for ; v < 40; v++ {
		keys := make([]int, 100, 101)
		for i := range keys {
			keys[i] = int(v)*100 + i
		}
		if v > 0 {
			keys = append(keys, int(v)-1)
		}
		commit(v, keys...)
	}
	if len(snaps) < 3 || len(snaps) > 7 {
		t.Fatalf("backfill: background snapshots at versions %v, want 3 to 7 (doubling)", snaps)
	}
	for i := 1; i < len(snaps); i++ {
		if snaps[i]+1 < 2*(snaps[i-1]+1) {
			t.Fatalf("backfill: background snapshots at versions %v: the state less than doubled between two", snaps)
		}
	}
	// Live batches of one key over the 4,000: none until the cap.
	last := snaps[len(snaps)-1]
	snaps = nil
	for ; v <= last+int64(snapshotChainCap*e.snapEvery)+5; v++ {
		commit(v, int(v)%4000)
	}
	if want := []int64{last + int64(snapshotChainCap*e.snapEvery)}; !slices.Equal(snaps, want) {
		t.Fatalf("live: background snapshots at versions %v, want %v", snaps, want)
	}
	// The last version loads from its snapshot and deltas alone.
	want := storeContents(t, s)
	e.local = filepath.Join(t.TempDir(), "fresh")
	s2 := e.open(4, v-1)
	defer s2.Close()
	if got := storeContents(t, s2); !maps.Equal(got, want) || len(got) != 4000 {
		t.Fatalf("version %d from the checkpoint: %d keys, want the store's %d", v-1, len(got), len(want))
	}
}

// TestNoSnapshotOfAddedKeys: a backfill of keys only added (a
// deduplication's) writes no background snapshot until the chain holds
// snapshotChainCap x SnapshotEvery deltas, and its last version loads
// from the deltas alone.
func TestNoSnapshotOfAddedKeys(t *testing.T) {
	e, s := openSnapshotting(t, 2)
	capped := int64(snapshotChainCap * e.snapEvery)
	var snaps []int64
	for v := int64(0); v <= capped+3; v++ {
		for i := range 50 {
			if err := s.Put(testKey(int(v)*50+i), nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Commit(context.Background(), v); err != nil {
			t.Fatal(err)
		}
		if e.snapshotted(v) {
			snaps = append(snaps, v)
		}
	}
	if want := []int64{capped - 1}; !slices.Equal(snaps, want) {
		t.Fatalf("background snapshots at versions %v, want %v (the cap alone)", snaps, want)
	}
	e.local = filepath.Join(t.TempDir(), "fresh")
	s2 := e.open(4, capped-2)
	defer s2.Close()
	if got := storeContents(t, s2); len(got) != int(capped-1)*50 {
		t.Fatalf("version %d from its deltas: %d keys, want %d", capped-2, len(got), (capped-1)*50)
	}
}

// openSnapshotting opens a new 4-partition store whose background
// snapshots run inside the commit that starts them, SnapshotEvery every.
func openSnapshotting(t *testing.T, every int) (*env, *Store) {
	e := newEnv(t, nil)
	e.snapEvery = every
	s := e.open(4, -1)
	t.Cleanup(func() { _ = s.Close() })
	return e, s
}

// snapshotted reports whether a background snapshot of version v (its
// first attempt) is published.
func (e *env) snapshotted(v int64) bool {
	_, err := e.fs.Stat(e.fs.PathJoin(e.dir, snapMetaFileName(v, 0)))
	return err == nil
}

// model is the brute-force oracle of a store: the state at every version
// whose Commit (or Repartition) returned, and the partition count of each.
type model struct {
	versions map[int64]map[string]string
	parts    map[int64]int
	cur      int64
}

// checkRetained reads every retained version (the Retain versions up to
// cur) from the checkpoint files alone and compares it with the oracle,
// then verifies the directory in full: garbage collection never removed a
// file one of them needs, and every background snapshot verifies.
func (md *model) checkRetained(t *testing.T, what string, fs vfs.FS, dir string, retain int) {
	t.Helper()
	for v := max(md.cur-int64(retain), 0); v <= md.cur; v++ {
		if want, ok := md.versions[v]; ok {
			diffMaps(t, fmt.Sprintf("%s: version %d", what, v), want, checkpointContents(t, fs, dir, v))
		}
	}
	if _, err := Verify(context.Background(), fs, dir, md.cur); err != nil {
		t.Fatalf("%s: verify: %v", what, err)
	}
}

// TestBackgroundSnapshotModel runs random sequences of commits,
// repartitions (inline snapshots, the format before background ones),
// waits for the maintenance, clean restarts and crashes (CrashClone while
// a background snapshot may be in flight) against the oracle: after every
// step each retained version loads from the files equal to it, and a
// restart loads the committed version equal to it.
func TestBackgroundSnapshotModel(t *testing.T) {
	snapshots := 0
	for seed := range uint64(12) {
		snapshots += modelRun(t, seed)
	}
	if snapshots < 12 {
		t.Fatalf("only %d background snapshots in all runs", snapshots)
	}
}

func modelRun(t *testing.T, seed uint64) int {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 29))
	mem := vfs.NewCrashableMem()
	e := &env{t: t, fs: mem, dir: "ckpt/state/0", local: filepath.Join(t.TempDir(), "c0"),
		snapEvery: 2 + rng.IntN(3), background: seed%2 == 0}
	retain := 2 + rng.IntN(4)
	open := func(n int, v int64) *Store {
		o := e.opts(n)
		o.Retain = retain
		s, err := Open(ctx, o, v)
		if err != nil {
			t.Fatalf("seed %d: open version %d: %v", seed, v, err)
		}
		return s
	}
	md := &model{versions: map[int64]map[string]string{}, parts: map[int64]int{}, cur: -1}
	n := 3
	s := open(n, -1)
	cur := map[string]string{}
	snaps := map[string]bool{}
	for step := range 50 {
		what := fmt.Sprintf("seed %d step %d", seed, step)
		switch r := rng.IntN(20); {
		case r < 13 || md.cur < 0:
			next := maps.Clone(cur)
			if err := batchOps(s, rng, next); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Commit(ctx, md.cur+1); err != nil {
				t.Fatalf("%s: commit: %v", what, err)
			}
			md.cur++
			cur, md.versions[md.cur], md.parts[md.cur] = next, next, n
		case r < 14:
			n = 2 + rng.IntN(3)
			if _, err := s.Repartition(ctx, md.cur, md.cur+1, n); err != nil {
				t.Fatalf("%s: repartition: %v", what, err)
			}
			md.cur++
			md.versions[md.cur], md.parts[md.cur] = cur, n
		case r < 16:
			s.collectMaintenance(true)
		case r < 18:
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = open(n, md.cur)
		default:
			// A crash: only what was synced survives (and a share of the
			// rest), the cache is lost with the machine.
			clone := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(3) * 50, RNG: rand.New(rand.NewPCG(seed, uint64(step)))})
			_ = s.Close()
			mem, e.fs = clone, clone
			e.local = filepath.Join(filepath.Dir(e.local), fmt.Sprintf("c%d", step))
			s = open(n, md.cur)
		}
		diffMaps(t, what+": store", cur, storeContents(t, s))
		md.checkRetained(t, what, mem, e.dir, retain)
		names, _ := mem.List(e.dir)
		for _, nm := range names {
			if strings.HasSuffix(nm, ".snapmeta") {
				snaps[nm] = true
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	md.checkRetained(t, fmt.Sprintf("seed %d at the end", seed), mem, e.dir, retain)
	noTemps(t, mem, e.dir)
	return len(snaps)
}

// TestMaintenanceFaults fails (and, separately, crashes at) every file
// operation of a commit whose background snapshot runs in it, garbage
// collection after it included. A failed snapshot costs the commit
// nothing and the next commit retries it (replacing the .snap a failure
// left); a crash leaves every committed version loadable and equal to the
// oracle; the checkpoint verifies and no temp file is left.
func TestMaintenanceFaults(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprint("crash=", crash), func(t *testing.T) {
			t.Parallel()
			for i := 0; ; i++ {
				if !maintenanceFault(t, i, crash) {
					if i < 20 {
						t.Fatalf("only %d file operations", i)
					}
					return
				}
			}
		})
	}
}

// maintenanceFault runs one scenario failing op i; it reports whether op
// i existed.
func maintenanceFault(t *testing.T, i int, crash bool) bool {
	ctx := context.Background()
	mem := vfs.NewCrashableMem()
	var clone *vfs.MemFS
	inj := &nthOp{i: i, crash: crash}
	inj.onHit = func() {
		if crash {
			clone = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: i % 3 * 50, RNG: rand.New(rand.NewPCG(1, uint64(i)))})
		}
	}
	e := &env{t: t, fs: errorfs.Wrap(mem, inj), dir: "ckpt/state/0", local: t.TempDir(), snapEvery: 3}
	o := e.opts(4)
	o.Retain = 2
	s, err := Open(ctx, o, -1)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(i), 5))
	md := &model{versions: map[int64]map[string]string{}, parts: map[int64]int{}, cur: -1}
	cur := map[string]string{}
	commit := func(v int64) error {
		next := maps.Clone(cur)
		if err := batchOps(s, rng, next); err != nil {
			return err
		}
		md.versions[v] = next // intended: the oracle of a half-published version
		if _, err := s.Commit(ctx, v); err != nil {
			return err
		}
		cur, md.cur = next, v
		return nil
	}
	for v := range int64(5) { // version 2 is snapshotted, 3-4 follow
		if err := commit(v); err != nil {
			t.Fatal(err)
		}
	}
	// Version 5 is the third delta after the snapshot of 2: its commit
	// runs the snapshot of 5 and the collection of versions below 2.
	inj.armed = true
	opErr := commit(5)
	inj.armed = false
	if !inj.hit {
		_ = s.Close()
		return false
	}
	what := fmt.Sprintf("fail op %d (crash %v)", i, crash)
	if !crash {
		if opErr != nil {
			_ = s.Close()
			if s, err = Open(ctx, o, md.cur); err != nil {
				t.Fatalf("%s: reopen: %v", what, err)
			}
		}
		for v, end := md.cur+1, md.cur+5; v < end; v++ { // the next commits retry the snapshot
			if err := commit(v); err != nil {
				t.Fatalf("%s: commit %d: %v", what, v, err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		md.checkRetained(t, what, mem, e.dir, o.Retain)
		noTemps(t, mem, e.dir)
		if names, _ := mem.List(e.dir); !strings.Contains(strings.Join(names, ","), ".snapmeta") {
			t.Fatalf("%s: no background snapshot after the retries: %v", what, names)
		}
		return true
	}
	_ = s.Close()
	if latest, err := LatestVersion(clone, e.dir); err != nil {
		t.Fatal(err)
	} else if latest > md.cur {
		// Half published: exactly the intended state.
		diffMaps(t, what+": half-published version", md.versions[latest], checkpointContents(t, clone, e.dir, latest))
	}
	o.FS, o.LocalDir = clone, t.TempDir()
	if s, err = Open(ctx, o, md.cur); err != nil {
		t.Fatalf("%s: open version %d after the crash: %v", what, md.cur, err)
	}
	diffMaps(t, what+": after the crash", cur, storeContents(t, s))
	md.checkRetained(t, what+": after the crash", clone, e.dir, o.Retain)
	for v, end := md.cur+1, md.cur+5; v < end; v++ { // the snapshot a crash cut short is redone
		if err := commit(v); err != nil {
			t.Fatalf("%s: commit %d after the crash: %v", what, v, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	md.checkRetained(t, what+": commits after the crash", clone, e.dir, o.Retain)
	noTemps(t, clone, e.dir)
	return true
}
