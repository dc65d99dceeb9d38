package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/internal/durable"
	"github.com/ethstream/ethstream/storage/s3test"
)

// TestSpool writes random runs (appends and WriteAt, some past the end)
// against a byte-slice oracle: the staged bytes always read back equal, the
// spool spills to disk exactly when it outgrows spoolLimit, and the spill
// leaves no file in its directory, open or closed.
func TestSpool(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, target := range []int{0, 1, spoolLimit, spoolLimit + 1, 3*spoolLimit + 17} {
		dir := t.TempDir()
		sp := &spool{dir: dir}
		var oracle []byte
		before := spills.Load()
		for len(oracle) < target {
			n := min(1+rng.IntN(1<<20), target-len(oracle))
			p := make([]byte, n)
			for i := range p {
				p[i] = byte(rng.Uint32())
			}
			if rng.IntN(4) == 0 && len(oracle) > 0 {
				// Overwrite inside, possibly running past the end.
				off := rng.IntN(len(oracle))
				if _, err := sp.WriteAt(p, int64(off)); err != nil {
					t.Fatal(err)
				}
				if end := off + n; end > len(oracle) {
					oracle = append(oracle, make([]byte, end-len(oracle))...)
				}
				copy(oracle[off:], p)
				sp.off = int64(len(oracle))
				continue
			}
			if _, err := sp.Write(p); err != nil {
				t.Fatal(err)
			}
			oracle = append(oracle, p...)
		}
		got, err := io.ReadAll(sp.body())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, oracle) || sp.size != int64(len(oracle)) {
			t.Fatalf("target %d: staged %d bytes differ from the %d written", target, len(got), len(oracle))
		}
		if spilled := spills.Load() > before; spilled != (len(oracle) > spoolLimit) {
			t.Fatalf("target %d: spilled=%v with %d bytes", target, spilled, len(oracle))
		}
		if len(oracle) > spoolLimit && sp.buf != nil {
			t.Fatalf("target %d: spilled spool still holds %d bytes in memory", target, len(sp.buf))
		}
		if names, _ := os.ReadDir(dir); runtime.GOOS == "linux" && len(names) != 0 {
			t.Fatalf("target %d: spool file visible while open: %v", target, names)
		}
		if err := sp.Close(); err != nil {
			t.Fatal(err)
		}
		if names, _ := os.ReadDir(dir); len(names) != 0 {
			t.Fatalf("target %d: spool left %v", target, names)
		}
	}
}

// bigWriter writes n pseudo-random bytes of seed in 64 KiB chunks, as a
// Parquet or state writer streams a large file.
func bigWriter(n int, seed uint64) func(w io.Writer) error {
	return func(w io.Writer) error {
		rng := rand.New(rand.NewPCG(seed, seed))
		buf := make([]byte, 64<<10)
		for n > 0 {
			c := min(n, len(buf))
			for i := range buf[:c] {
				buf[i] = byte(rng.Uint32())
			}
			if _, err := w.Write(buf[:c]); err != nil {
				return err
			}
			n -= c
		}
		return nil
	}
}

func bigBytes(t *testing.T, n int, seed uint64) []byte {
	var b bytes.Buffer
	if err := bigWriter(n, seed)(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestPublishLarge publishes objects larger than spoolLimit on each server:
// they are staged on disk (in the spool dir, which is empty afterwards),
// read back byte for byte, and put-if-absent stays exact: a second
// NoOverwrite publish of the name loses with ErrExists and the first
// content stays; Replace and Create overwrite.
func TestPublishLarge(t *testing.T) {
	s3test.Run(t, func(t *testing.T, s s3test.Server) {
		fs, root := openFS(t, s, "q1/table")
		spoolDir := t.TempDir()
		fs.(*Mux).SetSpoolDir(spoolDir)
		pub := durable.For(fs)
		size := 3*spoolLimit + 1234
		before := spills.Load()
		res, err := pub.Publish(root, "part-0.parquet", durable.Options{}, bigWriter(size, 1))
		if err != nil {
			t.Fatal(err)
		}
		if res.Size != int64(size) || spills.Load() == before {
			t.Fatalf("published %d bytes, spilled %d times", res.Size, spills.Load()-before)
		}
		first := bigBytes(t, size, 1)
		if got := readAllFS(t, fs, fs.PathJoin(root, "part-0.parquet")); !bytes.Equal(got, first) {
			t.Fatalf("read back %d bytes, differ from the %d published", len(got), size)
		}
		if _, err := pub.Publish(root, "part-0.parquet", durable.Options{}, bigWriter(size+5, 2)); !errors.Is(err, durable.ErrExists) {
			t.Fatalf("second no-overwrite publish of a large object = %v, want ErrExists", err)
		}
		if got := readAllFS(t, fs, fs.PathJoin(root, "part-0.parquet")); !bytes.Equal(got, first) {
			t.Fatal("a lost put-if-absent changed the object")
		}
		if _, err := pub.Publish(root, "_last", durable.Options{Mode: durable.Replace}, bigWriter(size, 3)); err != nil {
			t.Fatal(err)
		}
		if got := readAllFS(t, fs, fs.PathJoin(root, "_last")); !bytes.Equal(got, bigBytes(t, size, 3)) {
			t.Fatal("replaced large object differs")
		}
		// Create: Write, WriteAt back into the spilled part, Close PUTs.
		f, err := fs.Create(fs.PathJoin(root, "state.bin"), vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		want := bigBytes(t, size, 4)
		if err := bigWriter(size, 4)(f); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("header"), 0); err != nil {
			t.Fatal(err)
		}
		copy(want, "header")
		if st, err := f.Stat(); err != nil || st.Size() != int64(size) {
			t.Fatalf("stat of the file being written: %v %v", st, err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if got := readAllFS(t, fs, fs.PathJoin(root, "state.bin")); !bytes.Equal(got, want) {
			t.Fatal("created large object differs")
		}
		if names, _ := os.ReadDir(spoolDir); len(names) != 0 {
			t.Fatalf("spool dir holds %v", names)
		}
	})
}

// TestPublishMemoryBounded publishes a 64 MiB object and checks the process
// allocated at most 3×spoolLimit (12 MiB) for it, whatever its size: the
// bytes stream from the spool file instead of being held (and, in a growing
// buffer, copied) in memory. Only
// against Versity Gateway, whose allocations are in another process (the
// embedded endpoint's would count here).
func TestPublishMemoryBounded(t *testing.T) {
	s := s3test.Versity(t)
	fs, root := openFS(t, s, "q1/table")
	fs.(*Mux).SetSpoolDir(t.TempDir())
	pub := durable.For(fs)
	const size = 64 << 20
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	if _, err := pub.Publish(root, "big.parquet", durable.Options{}, bigWriter(size, 9)); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&m1)
	alloc := m1.TotalAlloc - m0.TotalAlloc
	t.Logf("publishing %d MiB allocated %.1f MiB", size>>20, float64(alloc)/(1<<20))
	if alloc > 3*spoolLimit {
		t.Fatalf("publishing %d MiB allocated %d MiB: the object is held in memory", size>>20, alloc>>20)
	}
}

// BenchmarkPublish32MiB publishes 32 MiB objects put-if-absent to the
// embedded endpoint: throughput, and allocations per publish (bounded by
// the spool, not the object: about 2×spoolLimit plus the SDK's own).
func BenchmarkPublish32MiB(b *testing.B) {
	s := s3test.Embedded(b)
	fs, root := openFS(b, s, "bench")
	fs.(*Mux).SetSpoolDir(b.TempDir())
	pub := durable.For(fs)
	const size = 32 << 20
	b.SetBytes(size)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := pub.Publish(root, fmt.Sprintf("part-%d.parquet", i), durable.Options{}, bigWriter(size, uint64(i))); err != nil {
			b.Fatal(err)
		}
	}
}
