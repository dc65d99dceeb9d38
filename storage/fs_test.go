package storage

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/internal/durable"
	"github.com/ethstream/ethstream/storage/s3test"
)

// openFS returns the Mux over one S3 location of s, and that location's
// path. Its retries wait on a manual clock: no test sleeps.
func openFS(t testing.TB, s s3test.Server, prefix string) (vfs.FS, string) {
	t.Helper()
	loc, err := Parse("--checkpoint", s.Location(prefix))
	if err != nil {
		t.Fatal(err)
	}
	fs, err := NewFS(context.Background(), vfs.NewMem(), loc)
	if err != nil {
		t.Fatal(err)
	}
	useClock(fs, &manualClock{})
	return fs, loc.Path
}

func readAllFS(t *testing.T, fs vfs.FS, p string) []byte {
	t.Helper()
	f, err := fs.Open(p)
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

func TestFSFiles(t *testing.T) {
	s3test.Run(t, func(t *testing.T, s s3test.Server) {
		fs, root := openFS(t, s, "q1/checkpoint")
		pub := durable.For(fs)
		if _, err := fs.Stat(root); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("stat of an empty prefix = %v, want not exist", err)
		}
		if _, err := fs.Open(fs.PathJoin(root, "metadata")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("open of a missing object = %v, want not exist", err)
		}
		off := fs.PathJoin(root, "offsets")
		if _, err := durable.Bytes(pub, off, "0", durable.Options{}, []byte("v1\n{}")); err != nil {
			t.Fatal(err)
		}
		// put-if-absent: the second publish of a name loses, the first stays.
		if _, err := durable.Bytes(pub, off, "0", durable.Options{}, []byte("other")); !errors.Is(err, durable.ErrExists) {
			t.Fatalf("second no-overwrite publish = %v, want ErrExists", err)
		}
		if got := readAllFS(t, fs, fs.PathJoin(off, "0")); string(got) != "v1\n{}" {
			t.Fatalf("content = %q", got)
		}
		// Replace overwrites.
		for _, c := range []string{"a", "bb"} {
			if _, err := durable.Bytes(pub, root, "_last", durable.Options{Mode: durable.Replace}, []byte(c)); err != nil {
				t.Fatal(err)
			}
		}
		if got := readAllFS(t, fs, fs.PathJoin(root, "_last")); string(got) != "bb" {
			t.Fatalf("replaced content = %q", got)
		}
		st, err := fs.Stat(root)
		if err != nil || !st.IsDir() {
			t.Fatalf("stat of a prefix with objects = %v, %v; want a directory", st, err)
		}
		if st, err := fs.Stat(fs.PathJoin(root, "_last")); err != nil || st.IsDir() || st.Size() != 2 {
			t.Fatalf("stat of an object = %v, %v", st, err)
		}
		names, err := fs.List(root)
		if err != nil {
			t.Fatal(err)
		}
		sort.Strings(names)
		if len(names) != 2 || names[0] != "_last" || names[1] != "offsets" {
			t.Fatalf("list = %q", names)
		}
		// A large object is read by ranged GETs.
		big := make([]byte, memoryReadLimit+12345)
		for i := range big {
			big[i] = byte(rand.Uint32())
		}
		if _, err := durable.Bytes(pub, root, "big", durable.Options{}, big); err != nil {
			t.Fatal(err)
		}
		f, err := fs.Open(fs.PathJoin(root, "big"))
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 5000)
		for _, off := range []int64{0, 1 << 20, int64(len(big)) - 5000} {
			if n, err := f.ReadAt(buf, off); err != nil || n != len(buf) || !bytes.Equal(buf, big[off:off+5000]) {
				t.Fatalf("ReadAt(%d) = %d, %v (equal %v)", off, n, err, bytes.Equal(buf, big[off:off+5000]))
			}
		}
		if n, err := f.ReadAt(buf, int64(len(big))-100); n != 100 || err != io.EOF {
			t.Fatalf("ReadAt past the end = %d, %v", n, err)
		}
		all, err := io.ReadAll(f)
		if err != nil || !bytes.Equal(all, big) {
			t.Fatalf("sequential read: %v, equal %v", err, bytes.Equal(all, big))
		}
		f.Close()
		// Append-style writes (progress logs) rewrite the object.
		for _, line := range []string{"a\n", "b\n"} {
			w, err := fs.OpenReadWrite(fs.PathJoin(root, "progress.jsonl"), vfs.WriteCategoryUnspecified)
			if err != nil {
				t.Fatal(err)
			}
			st, _ := w.Stat()
			if _, err := w.WriteAt([]byte(line), st.Size()); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if got := readAllFS(t, fs, fs.PathJoin(root, "progress.jsonl")); string(got) != "a\nb\n" {
			t.Fatalf("appended = %q", got)
		}
		if err := fs.Remove(fs.PathJoin(off, "0")); err != nil {
			t.Fatal(err)
		}
		if _, err := fs.Stat(fs.PathJoin(off, "0")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("stat after remove = %v", err)
		}
		if err := fs.RemoveAll(root); err != nil {
			t.Fatal(err)
		}
		if keys := s.Keys(t, "q1/"); len(keys) != 0 {
			t.Fatalf("left after RemoveAll: %q", keys)
		}
		// Local paths still go to the local FS.
		if err := fs.MkdirAll("/local", 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := durable.Bytes(durable.For(fs), "/local", "x", durable.Options{}, []byte("x")); err != nil {
			t.Fatal(err)
		}
		if got := readAllFS(t, fs, "/local/x"); string(got) != "x" {
			t.Fatalf("local = %q", got)
		}
	})
}

// TestFSPutIfAbsentRace: of many writers publishing one name at once,
// exactly one wins and the object holds its bytes.
func TestFSPutIfAbsentRace(t *testing.T) {
	s3test.Run(t, func(t *testing.T, s s3test.Server) {
		fs, root := openFS(t, s, "race")
		const writers = 8
		for round := 0; round < 3; round++ {
			name := string(rune('a' + round))
			var wg sync.WaitGroup
			errs := make([]error, writers)
			for i := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, errs[i] = durable.Bytes(durable.For(fs), root, name, durable.Options{}, []byte{byte(i)})
				}()
			}
			wg.Wait()
			winner := -1
			for i, err := range errs {
				switch {
				case err == nil:
					if winner >= 0 {
						t.Fatalf("round %d: writers %d and %d both won", round, winner, i)
					}
					winner = i
				case !errors.Is(err, durable.ErrExists):
					t.Fatalf("round %d: writer %d: %v", round, i, err)
				}
			}
			if winner < 0 {
				t.Fatalf("round %d: nobody won", round)
			}
			if got := readAllFS(t, fs, fs.PathJoin(root, name)); len(got) != 1 || int(got[0]) != winner {
				t.Fatalf("round %d: object %v, winner %d", round, got, winner)
			}
		}
	})
}
