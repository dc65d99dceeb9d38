// Package logtest is the one test suite of checkpoint.Log, run against the
// codec of every artifact that is such a log (offsets, commits, the file
// source log, shape/, the ethrpc history), in the manner of etcd's rafttest:
// each artifact's package calls Run with its codec and a few valid values,
// so every artifact is held to the same listing, publishing, purging and
// corruption rules over an in-memory FS, a fault-injecting one and a
// crashing one.
package logtest

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
)

// Case is one codec under test.
type Case[K, T any] struct {
	Codec checkpoint.Codec[K, T]
	// Strict is the Log's Strict setting the artifact uses.
	Strict bool
	// Key returns the i-th key (i >= 0), ascending in i.
	Key func(i int) K
	// Value returns a value valid under Key(i); Value(i) and Value(j)
	// differ for i != j where the artifact allows it.
	Value func(i int) T
	// Stray is a name in the log's directory that is not one of its files.
	Stray string
}

// Dir is the directory of the log under test in the in-memory FS, so that
// a Case can know the paths its values are read from.
const Dir = "/ck/log"

const dir = Dir

func (c Case[K, T]) log(fs vfs.FS) checkpoint.Log[K, T] { return c.logAt(fs, dir) }

func (c Case[K, T]) logAt(fs vfs.FS, dir string) checkpoint.Log[K, T] {
	return checkpoint.Log[K, T]{FS: fs, Dir: dir, Codec: c.Codec, What: "log file", Strict: c.Strict}
}

// open creates the directory of the log on fs.
func (c Case[K, T]) open(t *testing.T, fs vfs.FS) checkpoint.Log[K, T] {
	t.Helper()
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return c.log(fs)
}

// Run runs the suite.
func Run[K, T any](t *testing.T, c Case[K, T]) {
	t.Run("round trip", func(t *testing.T) { roundTrip(t, c) })
	t.Run("put if absent", func(t *testing.T) { putIfAbsent(t, c) })
	t.Run("latest with gaps", func(t *testing.T) { latestWithGaps(t, c) })
	t.Run("purge", func(t *testing.T) { purge(t, c) })
	t.Run("stale temps", func(t *testing.T) { staleTemps(t, c) })
	t.Run("corrupt", func(t *testing.T) { corrupt(t, c) })
	t.Run("faults", func(t *testing.T) { faults(t, c) })
	t.Run("crash", func(t *testing.T) { crash(t, c) })
}

// keys returns Key(i) for each i.
func (c Case[K, T]) keys(is ...int) []K {
	out := make([]K, len(is))
	for j, i := range is {
		out[j] = c.Key(i)
	}
	return out
}

func mustAdd[K, T any](t *testing.T, l checkpoint.Log[K, T], c Case[K, T], is ...int) {
	t.Helper()
	for _, i := range is {
		if err := l.Add(c.Key(i), c.Value(i)); err != nil {
			t.Fatalf("add %d: %v", i, err)
		}
	}
}

func mustList[K, T any](t *testing.T, l checkpoint.Log[K, T]) []K {
	t.Helper()
	keys, err := l.List()
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	return keys
}

func read(t *testing.T, fs vfs.FS, path string) []byte {
	t.Helper()
	data, err := checkpoint.ReadFile(fs, path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func write(t *testing.T, fs vfs.FS, path string, data []byte) {
	t.Helper()
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// roundTrip: what Add wrote, Get returns, and the bytes on disk are what
// the codec encodes again from the value Get returned (byte-stable).
func roundTrip[K, T any](t *testing.T, c Case[K, T]) {
	fs := vfs.NewMem()
	l := c.open(t, fs)
	mustAdd(t, l, c, 0, 1, 2)
	for i := range 3 {
		k := c.Key(i)
		got, err := l.Get(k)
		if err != nil {
			t.Fatalf("get %d: %v", i, err)
		}
		if want := c.Value(i); !reflect.DeepEqual(got, want) {
			t.Fatalf("get %d = %+v, want %+v", i, got, want)
		}
		again, err := c.Codec.Encode(k, got)
		if err != nil {
			t.Fatal(err)
		}
		if disk := read(t, fs, l.Path(k)); string(disk) != string(again) {
			t.Fatalf("file %d is not byte-stable:\n%q\n%q", i, disk, again)
		}
		if back, ok := c.Codec.Key(c.Codec.Name(k)); !ok || c.Codec.Compare(back, k) != 0 {
			t.Fatalf("name %q does not parse back to its key", c.Codec.Name(k))
		}
	}
	if _, err := l.Get(c.Key(3)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("get of a missing key = %v, want os.ErrNotExist", err)
	}
}

// putIfAbsent: a second Add of a key is ErrExists and changes nothing;
// AddOrMatch accepts the same bytes and refuses others; of writers racing
// for one key exactly one wins.
func putIfAbsent[K, T any](t *testing.T, c Case[K, T]) {
	for _, fs := range []struct {
		name string
		fs   vfs.FS
		dir  string
	}{{"mem", vfs.NewMem(), dir}, {"disk", vfs.Default, t.TempDir()}} {
		t.Run(fs.name, func(t *testing.T) {
			if err := fs.fs.MkdirAll(fs.dir, 0o755); err != nil {
				t.Fatal(err)
			}
			l := c.logAt(fs.fs, fs.dir)
			mustAdd(t, l, c, 0)
			before := read(t, fs.fs, l.Path(c.Key(0)))
			if err := l.Add(c.Key(0), c.Value(0)); !errors.Is(err, checkpoint.ErrExists) {
				t.Fatalf("second add = %v, want ErrExists", err)
			}
			if err := l.AddOrMatch(c.Key(0), c.Value(0)); err != nil {
				t.Fatalf("add-or-match of the same value: %v", err)
			}
			// Value(1) under Key(0): a different file, where the artifact
			// can encode it.
			if data, err := c.Codec.Encode(c.Key(0), c.Value(1)); err == nil && string(data) != string(before) {
				if err := l.AddOrMatch(c.Key(0), c.Value(1)); !errcode.Is(err, errcode.CheckpointCorrupt) {
					t.Fatalf("add-or-match of another value = %v, want CHECKPOINT_CORRUPT", err)
				}
			}
			if after := read(t, fs.fs, l.Path(c.Key(0))); string(after) != string(before) {
				t.Fatal("a refused add changed the file")
			}
			const writers = 8
			var wg sync.WaitGroup
			errs := make([]error, writers)
			for w := range writers {
				wg.Go(func() { errs[w] = l.Add(c.Key(1), c.Value(1)) })
			}
			wg.Wait()
			won := 0
			for _, err := range errs {
				switch {
				case err == nil:
					won++
				case !errors.Is(err, checkpoint.ErrExists):
					t.Fatalf("racing add: %v", err)
				}
			}
			if won != 1 {
				t.Fatalf("%d of %d racing writers won, want 1", won, writers)
			}
		})
	}
}

// latestWithGaps: List is ascending and keeps gaps as they are; Latest is
// the greatest key; an empty or missing directory is an empty log.
func latestWithGaps[K, T any](t *testing.T, c Case[K, T]) {
	fs := vfs.NewMem()
	l := c.log(fs)
	if keys := mustList(t, l); len(keys) != 0 {
		t.Fatalf("missing dir lists %v", keys)
	}
	if _, ok, err := l.Latest(); ok || err != nil {
		t.Fatalf("latest of a missing dir: %v %v", ok, err)
	}
	l = c.open(t, fs)
	mustAdd(t, l, c, 5, 0, 2)
	if got, want := mustList(t, l), c.keys(0, 2, 5); !reflect.DeepEqual(got, want) {
		t.Fatalf("list = %v, want %v", got, want)
	}
	if k, ok, err := l.Latest(); err != nil || !ok || c.Codec.Compare(k, c.Key(5)) != 0 {
		t.Fatalf("latest = %v %v %v, want %v", k, ok, err, c.Key(5))
	}
}

// purge: Purge deletes exactly the keys below the threshold, Remove one key
// by name (a missing one is no error), PurgeIf what its predicate says.
func purge[K, T any](t *testing.T, c Case[K, T]) {
	fs := vfs.NewMem()
	l := c.open(t, fs)
	mustAdd(t, l, c, 0, 1, 2, 4, 5, 6)
	if n, err := l.Purge(c.Key(3)); err != nil || n != 3 {
		t.Fatalf("purge below 3 = %d, %v", n, err)
	}
	if got, want := mustList(t, l), c.keys(4, 5, 6); !reflect.DeepEqual(got, want) {
		t.Fatalf("after purge %v, want %v", got, want)
	}
	if n, err := l.Purge(c.Key(3)); err != nil || n != 0 {
		t.Fatalf("second purge = %d, %v", n, err)
	}
	if ok, err := l.Remove(c.Key(4)); !ok || err != nil {
		t.Fatalf("remove 4 = %v, %v", ok, err)
	}
	if ok, err := l.Remove(c.Key(4)); ok || err != nil {
		t.Fatalf("remove of a missing key = %v, %v", ok, err)
	}
	keep := c.Key(5)
	if n, err := l.PurgeIf(func(k K) bool { return c.Codec.Compare(k, keep) != 0 }); err != nil || n != 1 {
		t.Fatalf("purge all but 5 = %d, %v", n, err)
	}
	if got, want := mustList(t, l), c.keys(5); !reflect.DeepEqual(got, want) {
		t.Fatalf("after purge-if %v, want %v", got, want)
	}
}

// staleTemps: a temp file a crashed publish left is never listed, and
// RemoveTemps and Recover delete it.
func staleTemps[K, T any](t *testing.T, c Case[K, T]) {
	fs := vfs.NewMem()
	l := c.open(t, fs)
	mustAdd(t, l, c, 0)
	temp := func() string {
		p := fs.PathJoin(dir, "."+c.Codec.Name(c.Key(1))+".0123456789abcdef.tmp")
		write(t, fs, p, []byte("partial"))
		return p
	}
	p := temp()
	if got, want := mustList(t, l), c.keys(0); !reflect.DeepEqual(got, want) {
		t.Fatalf("list with a temp file = %v, want %v", got, want)
	}
	if err := l.RemoveTemps(); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temp file survived RemoveTemps: %v", err)
	}
	p = temp()
	if keys, err := l.Recover(); err != nil || !reflect.DeepEqual(keys, c.keys(0)) {
		t.Fatalf("recover = %v, %v", keys, err)
	}
	if _, err := fs.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temp file survived Recover: %v", err)
	}
}

// corrupt: a damaged file is CHECKPOINT_CORRUPT naming its path, never a
// missing one; a stray name is refused by a strict log and ignored by any
// other.
func corrupt[K, T any](t *testing.T, c Case[K, T]) {
	fs := vfs.NewMem()
	l := c.open(t, fs)
	mustAdd(t, l, c, 0)
	p := l.Path(c.Key(1))
	for _, bad := range []string{"", "\x00garbage", "v999\n{}", "{\"version\":999}"} {
		write(t, fs, p, []byte(bad))
		_, err := l.Get(c.Key(1))
		if !errcode.Is(err, errcode.CheckpointCorrupt) || !strings.Contains(err.Error(), p) {
			t.Fatalf("get of %q = %v, want CHECKPOINT_CORRUPT naming %s", bad, err, p)
		}
		if err := fs.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	stray := fs.PathJoin(dir, c.Stray)
	write(t, fs, stray, []byte("x"))
	_, err := l.List()
	switch {
	case c.Strict && (!errcode.Is(err, errcode.CheckpointCorrupt) || !strings.Contains(err.Error(), stray)):
		t.Fatalf("strict list with %s = %v, want CHECKPOINT_CORRUPT naming it", c.Stray, err)
	case !c.Strict && err != nil:
		t.Fatalf("list with %s = %v, want it ignored", c.Stray, err)
	}
}

// faults fails the i-th file operation of an Add, for every i: after the
// error the key has no file or its complete file, and once RemoveTemps ran
// no temp file is left.
func faults[K, T any](t *testing.T, c Case[K, T]) {
	var ops int32
	mem := vfs.NewMem()
	c.open(t, mem)
	mustAdd(t, c.log(errorfs.Wrap(mem, errorfs.InjectorFunc(func(errorfs.Op) error { ops++; return nil }))), c, 0)
	if ops < 3 {
		t.Fatalf("an add took only %d file operations", ops)
	}
	for i := range ops {
		mem := vfs.NewMem()
		c.open(t, mem)
		err := c.log(errorfs.Wrap(mem, errorfs.OnIndex(i))).Add(c.Key(0), c.Value(0))
		if err != nil && !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("op %d: add = %v, want the injected error", i, err)
		}
		clean := c.log(mem)
		if v, gerr := clean.Get(c.Key(0)); gerr == nil {
			if !reflect.DeepEqual(v, c.Value(0)) {
				t.Fatalf("op %d: file holds %+v", i, v)
			}
		} else if !errors.Is(gerr, os.ErrNotExist) {
			t.Fatalf("op %d: after a failed add, get = %v", i, gerr)
		} else if err == nil {
			t.Fatalf("op %d: add succeeded but the file is missing", i)
		}
		if err := clean.RemoveTemps(); err != nil {
			t.Fatal(err)
		}
		names, _ := mem.List(dir)
		for _, n := range names {
			if strings.HasSuffix(n, ".tmp") {
				t.Fatalf("op %d: temp file %s left", i, n)
			}
		}
	}
}

// crash crashes after every Add: what Add acknowledged survives, and a log
// reopened after the crash reads it.
func crash[K, T any](t *testing.T, c Case[K, T]) {
	mem := vfs.NewCrashableMem()
	if err := mem.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syncParents(mem, dir); err != nil {
		t.Fatal(err)
	}
	l := c.log(mem)
	for i := range 3 {
		mustAdd(t, l, c, i)
		after := c.log(mem.CrashClone(vfs.CrashCloneCfg{}))
		if got, want := mustList(t, after), c.keys(rangeInts(i+1)...); !reflect.DeepEqual(got, want) {
			t.Fatalf("after a crash at add %d: %v, want %v", i, got, want)
		}
		if v, err := after.Get(c.Key(i)); err != nil || !reflect.DeepEqual(v, c.Value(i)) {
			t.Fatalf("after a crash at add %d: %+v, %v", i, v, err)
		}
	}
}

func rangeInts(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// syncParents makes the directories of path durable, as a checkpoint's
// Prepare does before any log is written.
func syncParents(fs vfs.FS, path string) error {
	for d := path; d != "/" && d != "."; d = fs.PathDir(d) {
		f, err := fs.OpenDir(fs.PathDir(d))
		if err != nil {
			return err
		}
		err = errors.Join(f.Sync(), f.Close())
		if err != nil {
			return fmt.Errorf("sync %s: %w", fs.PathDir(d), err)
		}
	}
	return nil
}

// CheckName is the body of a fuzz target for a codec's file names: a name
// the codec accepts names its key again, byte for byte, so that no two
// names can stand for one file.
func CheckName[K, T any](t *testing.T, c checkpoint.Codec[K, T], name string) {
	k, ok := c.Key(name)
	if !ok {
		return
	}
	if again := c.Name(k); again != name {
		t.Fatalf("name %q parses to %v, which is named %q", name, k, again)
	}
}
