package agg

import (
	"fmt"
	"math/rand/v2"
	"strings"
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
				if names := carryNames(fs, dir); len(names) != 0 {
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
		names := carryNames(mem, "/ck/state/0")
		for _, nm := range names {
			if err != nil || nm != rec.CarryFile {
				t.Fatalf("fail op %d (%v): %s left", i, err, nm)
			}
		}
	}
}

// FuzzCarryRecords feeds arbitrary bytes to the carry's record decoder
// (inline in a record, or a file's body): it refuses them or decodes
// exactly the count it was told, never panics.
func FuzzCarryRecords(f *testing.F) {
	w := newCarryWriter(vfs.NewMem(), "/s", 0)
	for i := range 5 {
		if err := w.add(fmt.Appendf(nil, "window|src|0x%03d", i*i), []byte{byte(i)}); err != nil {
			f.Fatal(err)
		}
	}
	f.Add(w.buf, int64(5))
	f.Add([]byte{0, 1, 'k', 0}, int64(1))
	f.Add([]byte{5, 1, 'k', 0}, int64(1))
	f.Add([]byte("\x00\x100000000000000001\x00\x0f\x011\x010\x0f\x010\x010\x0f\x010\x010\x0e\x0200\x010"), int64(5)) // a key twice
	f.Fuzz(func(t *testing.T, body []byte, n int64) {
		c, err := parseCarryRecords(body, 0, n, "/s/x.carry")
		if err != nil {
			if errcode.Code(err) != errcode.CheckpointCorrupt {
				t.Fatalf("refused with %v, want %s", err, errcode.CheckpointCorrupt)
			}
			return
		}
		if int64(c.len()) != n {
			t.Fatalf("decoded %d records, told %d", c.len(), n)
		}
		for i := range c.len() {
			// (A key twice, which no writer writes, gives one of its values.)
			k, _ := c.record(i)
			if _, ok := c.get(k); !ok {
				t.Fatalf("record %d: key %q not found back", i, k)
			}
		}
	})
}

// carryNames lists the carry files and carry temp files of stateDir.
func carryNames(fs vfs.FS, stateDir string) []string {
	names, _ := fs.List(stateDir)
	var out []string
	for _, n := range names {
		if strings.Contains(n, carrySuffix) {
			out = append(out, n)
		}
	}
	return out
}

// TestSharedPrefix checks the word-at-a-time prefix against a byte loop
// over keys that differ at every position, of every length up to 40.
func TestSharedPrefix(t *testing.T) {
	naive := func(a, b []byte) int {
		i := 0
		for i < len(a) && i < len(b) && a[i] == b[i] {
			i++
		}
		return i
	}
	r := rand.New(rand.NewPCG(1, 2))
	for la := 0; la <= 40; la++ {
		for lb := 0; lb <= 40; lb++ {
			a := make([]byte, la)
			for i := range a {
				a[i] = byte(r.IntN(4))
			}
			b := append([]byte(nil), a[:min(la, lb)]...)
			for len(b) < lb {
				b = append(b, byte(r.IntN(4)))
			}
			for d := 0; d <= min(la, lb); d++ {
				bb := append([]byte(nil), b...)
				if d < len(bb) {
					bb[d] ^= 0x80
				}
				if got, want := sharedPrefix(a, bb), naive(a, bb); got != want {
					t.Fatalf("sharedPrefix(%x, %x) = %d, want %d", a, bb, got, want)
				}
			}
		}
	}
}
