package state

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/ethstream/ethstream/errcode"
)

// nthOp fails the i-th file operation after it is armed (and, with crash
// set, every later one: the process is dead). onHit runs at the failing op.
type nthOp struct {
	armed bool
	i, n  int
	hit   bool
	crash bool
	onHit func()
}

func (f *nthOp) String() string { return fmt.Sprintf("fail op %d", f.i) }

func (f *nthOp) MaybeError(op errorfs.Op) error {
	if !f.armed {
		return nil
	}
	if f.hit && f.crash {
		return errorfs.ErrInjected
	}
	f.n++
	if f.n-1 == f.i {
		f.hit = true
		if f.onHit != nil {
			f.onHit()
		}
		return errorfs.ErrInjected
	}
	return nil
}

func batchOps(s *Store, rng *rand.Rand, work map[string]string) error {
	for range 40 {
		k := testKey(rng.IntN(120))
		if rng.IntN(3) == 0 {
			if err := s.Delete(k); err != nil {
				return err
			}
			delete(work, string(k))
			continue
		}
		v := testVal(rng.Int64N(100))
		if err := s.Put(k, v); err != nil {
			return err
		}
		work[string(k)] = string(v)
	}
	return nil
}

func noTemps(t *testing.T, fs vfs.FS, dir string) {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasSuffix(n, tmpSuffix) {
			t.Fatalf("temp file %s left in %s", n, dir)
		}
	}
}

// TestFaultLoop fails the i-th file operation of a commit (delta and
// snapshot) and of a repartition, for every i. Then: a retry succeeds and
// leaves no temp file; a restart sees the old version, or exactly the new
// one, never a mix.
func TestFaultLoop(t *testing.T) {
	for _, kind := range []string{"delta", "prepared", "snapshot", "repartition"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			for _, retry := range []bool{true, false} {
				for i := 0; ; i++ {
					if !faultOnce(t, kind, i, retry) {
						if i < 5 {
							t.Fatalf("only %d file operations", i)
						}
						break
					}
				}
			}
		})
	}
}

// TestFaultLoopOverlapped is TestFaultLoop's commits with their large
// commit's concurrency forced on a small one: the data file written
// alongside nextBounds, the cache's partitions written and flushed by
// several goroutines (prepareOverlapMin, applyParallelMin).
func TestFaultLoopOverlapped(t *testing.T) {
	defer func(o, a int) { prepareOverlapMin, applyParallelMin = o, a }(prepareOverlapMin, applyParallelMin)
	prepareOverlapMin, applyParallelMin = 0, 0
	for _, kind := range []string{"delta", "prepared"} {
		for _, retry := range []bool{true, false} {
			for i := 0; ; i++ {
				if !faultOnce(t, kind, i, retry) {
					if i < 5 {
						t.Fatalf("%s: only %d file operations", kind, i)
					}
					break
				}
			}
		}
	}
}

// faultOnce runs one scenario failing op i; it reports whether op i existed.
func faultOnce(t *testing.T, kind string, i int, retry bool) bool {
	ctx := context.Background()
	mem := vfs.NewMem()
	inj := &nthOp{i: i}
	fs := errorfs.Wrap(mem, inj)
	e := &env{t: t, fs: fs, dir: "ckpt/state/0", local: t.TempDir()}
	opts := e.opts(5)
	if kind == "snapshot" {
		opts.SnapshotEvery = 2
	}
	rng := rand.New(rand.NewPCG(uint64(i), 7))
	s, err := Open(ctx, opts, -1)
	if err != nil {
		t.Fatal(err)
	}
	old := map[string]string{}
	if err := batchOps(s, rng, old); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, 0); err != nil {
		t.Fatal(err)
	}
	want := maps.Clone(old)
	parts := 5
	inj.armed = true
	var opErr error
	switch kind {
	case "repartition":
		parts = 3
		_, opErr = s.Repartition(ctx, 0, 1, 3)
	default:
		if err := batchOps(s, rng, want); err != nil {
			t.Fatal(err)
		}
		if kind == "prepared" {
			// The engine's overlapped commit: Prepare, then Commit.
			if opErr = s.Prepare(ctx, 1); opErr == nil {
				_, opErr = s.Commit(ctx, 1)
			}
		} else {
			_, opErr = s.Commit(ctx, 1)
		}
	}
	inj.armed = false
	if !inj.hit {
		if opErr != nil {
			t.Fatalf("op %d: no fault injected, still %v", i, opErr)
		}
		_ = s.Close()
		return false
	}
	if opErr == nil {
		// The fault hit garbage collection or another best-effort step.
		diffMaps(t, fmt.Sprintf("op %d ignored fault", i), want, storeContents(t, s))
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		diffMaps(t, fmt.Sprintf("op %d ignored fault, checkpoint", i), want, checkpointContents(t, mem, e.dir, 1))
		return true
	}
	if retry {
		if kind == "repartition" {
			_, err = s.Repartition(ctx, 0, 1, 3)
			if err != nil && strings.Contains(err.Error(), "reopen the store") {
				t.Fatalf("op %d: %v", i, err)
			}
		} else {
			_, err = s.Commit(ctx, 1)
		}
		if err != nil {
			// The local cache may have broken after the version was
			// published; the caller reopens.
			_ = s.Close()
			s, err = Open(ctx, Options{Dir: e.dir, FS: fs, LocalDir: e.local, Partitions: parts, Schema: testSchema}, 1)
			if err != nil {
				t.Fatalf("op %d: reopen after failed retry: %v", i, err)
			}
		}
		diffMaps(t, fmt.Sprintf("op %d retried", i), want, storeContents(t, s))
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		noTemps(t, mem, e.dir)
		diffMaps(t, fmt.Sprintf("op %d retried, checkpoint", i), want, checkpointContents(t, mem, e.dir, 1))
		return true
	}
	// Restart from the last committed batch (0), as the engine would.
	_ = s.Close()
	s, err = Open(ctx, e.opts(5), 0)
	if err != nil {
		t.Fatalf("op %d: reopen at version 0: %v", i, err)
	}
	diffMaps(t, fmt.Sprintf("op %d restarted", i), old, storeContents(t, s))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if v, err := LatestVersion(mem, e.dir); err != nil {
		t.Fatal(err)
	} else if v == 1 {
		diffMaps(t, fmt.Sprintf("op %d half-published version", i), want, checkpointContents(t, mem, e.dir, 1))
	}
	return true
}

// TestCrashLoop crashes (CrashClone: only synced data survives, plus a random
// share of unsynced data) at every file operation of a run of commits and
// repartitions, then restarts on the clone without the local cache: the
// store loads the last version whose Commit returned, and any later version
// present equals its intended contents.
func TestCrashLoop(t *testing.T) {
	for i := 0; ; i++ {
		if !crashOnce(t, i) {
			if i < 20 {
				t.Fatalf("only %d file operations", i)
			}
			return
		}
	}
}

func crashOnce(t *testing.T, i int) bool {
	ctx := context.Background()
	mem := vfs.NewCrashableMem()
	var clone *vfs.MemFS
	rng := rand.New(rand.NewPCG(uint64(i), 11))
	inj := &nthOp{i: i, crash: true, armed: true}
	inj.onHit = func() {
		clone = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(3) * 50, RNG: rand.New(rand.NewPCG(1, uint64(i)))})
	}
	fs := errorfs.Wrap(mem, inj)
	e := &env{t: t, fs: fs, dir: "ckpt/state/0", local: t.TempDir()}
	opts := e.opts(4)
	opts.SnapshotEvery = 3
	versions := map[int64]map[string]string{}
	committed := int64(-1)
	parts := map[int64]int{}
	s, err := Open(ctx, opts, -1)
	if err != nil {
		if !inj.hit {
			t.Fatal(err)
		}
	} else {
		cur := map[string]string{}
		n := 4
		for v := int64(0); v < 7 && !inj.hit; v++ {
			var err error
			if v == 4 {
				n = 2
				_, err = s.Repartition(ctx, v-1, v, n)
				versions[v] = maps.Clone(cur)
			} else {
				next := maps.Clone(cur)
				if err := batchOps(s, rng, next); err != nil {
					break
				}
				versions[v] = next
				if v%2 == 1 {
					// Odd versions commit as the engine's overlap does.
					err = s.Prepare(ctx, v)
				}
				if err == nil {
					_, err = s.Commit(ctx, v)
				}
				if err == nil {
					cur = next
				}
			}
			parts[v] = n
			if err != nil {
				break
			}
			committed = v
		}
		_ = s.Close()
	}
	if !inj.hit {
		return false
	}
	if clone == nil {
		t.Fatal("no clone")
	}
	// Restart on the crashed file system, without the cache.
	if err := os.RemoveAll(e.local); err != nil {
		t.Fatal(err)
	}
	ro := Options{Dir: e.dir, FS: clone, LocalDir: e.local, Partitions: 4, Schema: testSchema}
	if committed >= 0 {
		ro.Partitions = parts[committed]
	}
	s, err = Open(ctx, ro, committed)
	if err != nil {
		t.Fatalf("crash at op %d: open version %d: %v", i, committed, err)
	}
	want := versions[committed]
	if committed < 0 {
		want = map[string]string{}
	}
	diffMaps(t, fmt.Sprintf("crash at op %d, version %d", i, committed), want, storeContents(t, s))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if latest, err := LatestVersion(clone, e.dir); err != nil {
		t.Fatal(err)
	} else if latest > committed {
		if latest != committed+1 {
			t.Fatalf("crash at op %d: version %d present, committed %d", i, latest, committed)
		}
		diffMaps(t, fmt.Sprintf("crash at op %d, half-published %d", i, latest), versions[latest], checkpointContents(t, clone, e.dir, latest))
	}
	return true
}

// TestCorruptFiles damages each kind of checkpoint file and expects
// CHECKPOINT_CORRUPT naming it, from Open (without cache) and from ReadAll.
func TestCorruptFiles(t *testing.T) {
	ctx := context.Background()
	for _, suffix := range []string{".snap", ".snapmeta", ".delta", ".meta"} {
		for _, how := range []string{"flip", "truncate"} {
			t.Run(suffix+"/"+how, func(t *testing.T) {
				mem := vfs.NewMem()
				// Version 1's background snapshot starts version 2's chain.
				e := &env{t: t, fs: mem, dir: "ckpt/state/0", local: t.TempDir(), snapEvery: 2}
				s := e.open(3, -1)
				for v := int64(0); v < 3; v++ {
					for k := range 50 {
						if err := s.Put(testKey(k+int(v)), testVal(v)); err != nil {
							t.Fatal(err)
						}
					}
					if _, err := s.Commit(ctx, v); err != nil {
						t.Fatal(err)
					}
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				names, _ := mem.List(e.dir)
				var victim string
				for _, n := range names {
					if strings.HasSuffix(n, suffix) && strings.HasPrefix(n, "00000000000000000002") != strings.HasPrefix(suffix, ".snap") {
						victim = mem.PathJoin(e.dir, n)
					}
				}
				if victim == "" {
					t.Fatalf("no %s file in %v", suffix, names)
				}
				damage(t, mem, victim, how)
				if err := os.RemoveAll(e.local); err != nil {
					t.Fatal(err)
				}
				_, err := Open(ctx, e.opts(3), 2)
				checkCorrupt(t, err, victim)
				_, _, err = ReadAllRaw(ctx, mem, e.dir, 2, func(int, []byte, []byte) error { return nil })
				checkCorrupt(t, err, victim)
			})
		}
	}
}

func damage(t *testing.T, fs vfs.FS, path, how string) {
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	switch how {
	case "flip":
		b[len(b)/2] ^= 0x10
	case "truncate":
		b = b[:len(b)-3]
	}
	w, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
}

func checkCorrupt(t *testing.T, err error, path string) {
	t.Helper()
	var ce *errcode.Error
	if !errors.As(err, &ce) || ce.Code != errcode.CheckpointCorrupt {
		t.Fatalf("want CHECKPOINT_CORRUPT, got %v", err)
	}
	if ce.Path != path {
		t.Fatalf("corrupt error names %q, want %q (%v)", ce.Path, path, err)
	}
}
