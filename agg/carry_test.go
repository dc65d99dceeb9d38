package agg

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/ethstream/ethstream/errcode"
)

// TestClosedCarry checks the carry against a map: keys added in key order
// or not, each found with its value (the first get sorts), absent keys
// not found.
func TestClosedCarry(t *testing.T) {
	for _, sorted := range []bool{true, false} {
		rng := rand.New(rand.NewPCG(1, 2))
		c := newClosedCarry(7, 0)
		want := map[string]string{}
		for i := range 500 {
			k := fmt.Sprintf("k%05d", i*2)
			if !sorted {
				k = fmt.Sprintf("k%05d", rng.IntN(1000)*2)
			}
			if _, dup := want[k]; dup {
				continue
			}
			v := fmt.Sprint(rng.Int64())
			want[k] = v
			c.add([]byte(k), []byte(v))
		}
		if c.sorted != sorted {
			t.Fatalf("sorted input %v: carry sorted %v", sorted, c.sorted)
		}
		if c.len() != len(want) || c.bytes() <= 0 {
			t.Fatalf("carry holds %d keys in %d bytes, want %d keys", c.len(), c.bytes(), len(want))
		}
		for k, v := range want {
			if got, ok := c.get([]byte(k)); !ok || string(got) != v {
				t.Fatalf("get %s = %q, %v; want %q", k, got, ok, v)
			}
		}
		for _, k := range []string{"k00001", "k", "", "l", "k99999"} {
			if _, ok := c.get([]byte(k)); ok {
				t.Fatalf("get %q found a key never added", k)
			}
		}
	}
	var none *closedCarry
	if none.bytes() != 0 {
		t.Fatal("a nil carry has bytes")
	}
}

// setCarryInlineMax sets carryInlineMax for a test and returns the undo.
func setCarryInlineMax(n int) func() {
	old := carryInlineMax
	carryInlineMax = n
	return func() { carryInlineMax = old }
}

// carryFileBytes is the size of the committed version's carry file, 0 if none.
func carryFileBytes(o *Operator) int64 { return o.committed.CarryBytes }

// TestCarryFile writes carries of several chunks through carryWriter and
// reads them back (every key found with its value, the count checked);
// an abort mid-file, or after the last record, leaves no file a record
// names and no temp file once collected.
func TestCarryFile(t *testing.T) {
	fs := vfs.NewMem()
	dir := "/ck/state/0"
	const n = 60_000 // ~3 MB: three chunks
	key := func(i int) []byte { return fmt.Appendf(nil, "key-%08d-%040d", i*7%n, i) }
	val := func(i int) []byte { return fmt.Appendf(nil, "v%d", i) }
	for _, abortAt := range []int{-1, n / 2, n} {
		t.Run(fmt.Sprintf("abortAt=%d", abortAt), func(t *testing.T) {
			w := newCarryWriter(fs, dir, 3)
			for i := range n {
				if i == abortAt {
					break
				}
				if err := w.add(key(i), val(i)); err != nil {
					t.Fatal(err)
				}
			}
			rec := opRecord{ClosedRows: n}
			if abortAt >= 0 {
				if abortAt == n {
					if err := w.finish(&rec); err != nil {
						t.Fatal(err)
					}
				}
				w.abort()
				if err := collectCarries(fs, dir); err != nil {
					t.Fatal(err)
				}
				if names, _ := fs.List(fs.PathJoin(dir, carryDirName)); len(names) != 0 {
					t.Fatalf("an aborted carry left %v", names)
				}
				return
			}
			if err := w.finish(&rec); err != nil {
				t.Fatal(err)
			}
			if err := w.wait(); err != nil {
				t.Fatal(err)
			}
			if rec.Carry != nil || !validCarryFile(rec.CarryFile) || rec.CarryBytes < 2*carryChunk {
				t.Fatalf("record %+v, want a carry file of several chunks", rec)
			}
			c, err := readCarry(fs, dir, 3, rec)
			if err != nil {
				t.Fatal(err)
			}
			for i := range n {
				if v, ok := c.get(key(i)); !ok || string(v) != string(val(i)) {
					t.Fatalf("key %s: %q, %v", key(i), v, ok)
				}
			}
			if _, ok := c.get([]byte("key-")); ok {
				t.Fatal("found a key never written")
			}
			rec.ClosedRows--
			if _, err := readCarry(fs, dir, 3, rec); errcode.Code(err) != errcode.CheckpointCorrupt {
				t.Fatalf("a count off by one: %v, want %s", err, errcode.CheckpointCorrupt)
			}
		})
	}
}

// failNth fails the i-th file operation (errorfs), from any goroutine.
type failNth struct {
	i   int64
	n   atomic.Int64
	hit atomic.Bool
}

func (f *failNth) String() string { return fmt.Sprintf("fail op %d", f.i) }

func (f *failNth) MaybeError(errorfs.Op) error {
	if f.n.Add(1)-1 == f.i {
		f.hit.Store(true)
		return errorfs.ErrInjected
	}
	return nil
}

// TestCarryFileFaults fails each file operation of a carry file's write in
// turn: the writer returns an error (never hangs), or the carry it reports
// reads back whole; no temp file stays once collected.
func TestCarryFileFaults(t *testing.T) {
	const n = 30_000
	for i := int64(0); ; i++ {
		mem := vfs.NewMem()
		inj := &failNth{i: i}
		fs := errorfs.Wrap(mem, inj)
		w := newCarryWriter(fs, "/ck/state/0", 1)
		rec := opRecord{ClosedRows: n}
		err := func() error {
			for k := range n {
				if err := w.add(fmt.Appendf(nil, "key-%040d", k), []byte("v")); err != nil {
					return err
				}
			}
			if err := w.finish(&rec); err != nil {
				return err
			}
			return w.wait()
		}()
		if !inj.hit.Load() {
			if err != nil {
				t.Fatal(err)
			}
			if i < 5 {
				t.Fatalf("only %d file operations: the loop tests nothing", i)
			}
			return
		}
		if err == nil {
			// The fault hit what did not matter (a temp file's removal).
			if _, rerr := readCarry(mem, "/ck/state/0", 1, rec); rerr != nil {
				t.Fatalf("fail op %d: the write succeeded but reads back: %v", i, rerr)
			}
		}
		w.abort()
		keep := rec.CarryFile // the file a commit would name
		if err != nil {
			keep = "" // the batch failed: no record names it
		}
		if err := collectCarries(mem, "/ck/state/0", keep); err != nil {
			t.Fatal(err)
		}
		names, _ := mem.List("/ck/state/0/" + carryDirName)
		for _, nm := range names {
			if err != nil || "carry/"+nm != rec.CarryFile {
				t.Fatalf("fail op %d (%v): %s left", i, err, nm)
			}
		}
	}
}
