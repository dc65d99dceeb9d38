package durable

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

func readAll(t *testing.T, fs vfs.FS, path string) ([]byte, bool) {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b, true
}

func listTemps(t *testing.T, fs vfs.FS, dir string) []string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if IsTemp(n) {
			out = append(out, n)
		}
	}
	return out
}

func TestPublishModes(t *testing.T) {
	fs := vfs.NewMem()
	if err := EnsureDir(fs, "/a/b"); err != nil {
		t.Fatal(err)
	}
	p := Local{FS: fs}
	res, err := Bytes(p, "/a/b", "x", Options{}, []byte("one"))
	if err != nil || res.Size != 3 || res.Temp != "" {
		t.Fatalf("publish = %+v, %v", res, err)
	}
	if _, err := Bytes(p, "/a/b", "x", Options{}, []byte("two")); !errors.Is(err, ErrExists) {
		t.Fatalf("second no-overwrite publish: %v, want ErrExists", err)
	}
	if b, _ := readAll(t, fs, "/a/b/x"); string(b) != "one" {
		t.Fatalf("x = %q after a refused overwrite", b)
	}
	if _, err := Bytes(p, "/a/b", "x", Options{Mode: Replace}, []byte("three")); err != nil {
		t.Fatal(err)
	}
	if b, _ := readAll(t, fs, "/a/b/x"); string(b) != "three" {
		t.Fatalf("x = %q after replace", b)
	}
	if tmps := listTemps(t, fs, "/a/b"); len(tmps) != 0 {
		t.Fatalf("temps left: %v", tmps)
	}
}

// TestPublishStreams writes a file many times the buffer size in small and
// large writes, and checks that the caller's slices are never handed to the
// file (a File may modify them).
func TestPublishStreams(t *testing.T) {
	fs := vfs.NewMem()
	rng := rand.New(rand.NewPCG(1, 2))
	var want bytes.Buffer
	chunk := make([]byte, 3*bufferSize+17)
	res, err := Local{FS: fs}.Publish("/", "big", Options{}, func(w io.Writer) error {
		for i := range 40 {
			n := 1 + rng.IntN(len(chunk))
			if i%3 == 0 {
				n = 1 + rng.IntN(100)
			}
			for j := range n {
				chunk[j] = byte(rng.Uint32())
			}
			want.Write(chunk[:n])
			keep := bytes.Clone(chunk[:n])
			if _, err := w.Write(chunk[:n]); err != nil {
				return err
			}
			if !bytes.Equal(keep, chunk[:n]) {
				return fmt.Errorf("write %d modified its argument", i)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := readAll(t, fs, "/big")
	if res.Size != int64(want.Len()) || !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("published %d bytes (size %d), want %d", len(got), res.Size, want.Len())
	}
}

// nth fails the i-th file operation once armed; with crash set every later
// one fails too (the process is dead).
type nth struct {
	i, n  int
	hit   bool
	crash bool
}

func (f *nth) String() string { return fmt.Sprintf("fail op %d", f.i) }

func (f *nth) MaybeError(op errorfs.Op) error {
	if f.hit && f.crash {
		return errorfs.ErrInjected
	}
	f.n++
	if f.n-1 == f.i {
		f.hit = true
		return errorfs.ErrInjected
	}
	return nil
}

// TestPublishFaults fails the i-th file operation of a publish, for every i
// and both modes, and then crashes (losing everything unsynced). After the
// error, and after the crash, the name holds the old content or the complete
// new content, never anything else; a nil error means the new content
// survives the crash; RemoveTemps leaves no temp file.
func TestPublishFaults(t *testing.T) {
	for _, mode := range []Mode{NoOverwrite, Replace} {
		for _, crash := range []bool{false, true} {
			ops := 0
			for i := 0; ; i++ {
				mem := vfs.NewCrashableMem()
				if err := EnsureDir(mem, "/d"); err != nil {
					t.Fatal(err)
				}
				old := []byte("old content\n")
				if mode == Replace {
					if _, err := Bytes(Local{FS: mem}, "/d", "f", Options{}, old); err != nil {
						t.Fatal(err)
					}
				} else {
					old = nil
				}
				inj := &nth{i: i, crash: crash}
				fs := errorfs.Wrap(mem, inj)
				data := bytes.Repeat([]byte("new content "), 50_000)
				_, err := Bytes(Local{FS: fs}, "/d", "f", Options{Mode: mode}, data)
				if !inj.hit {
					if err != nil {
						t.Fatalf("%s: no fault, still %v", mode, err)
					}
					ops = i
					break
				}
				check := func(fs vfs.FS, when string) {
					got, ok := readAll(t, fs, "/d/f")
					switch {
					case err == nil && !bytes.Equal(got, data):
						t.Fatalf("%s op %d %s: publish returned nil but the file holds %d bytes", mode, i, when, len(got))
					case !ok && old == nil, bytes.Equal(got, old) && ok, bytes.Equal(got, data):
					default:
						t.Fatalf("%s op %d %s: file holds %d bytes: neither old nor new", mode, i, when, len(got))
					}
				}
				check(mem, "after the error")
				crashed := mem.CrashClone(vfs.CrashCloneCfg{})
				check(crashed, "after a crash")
				if _, err := RemoveTemps(crashed, "/d"); err != nil {
					t.Fatal(err)
				}
				if tmps := listTemps(t, crashed, "/d"); len(tmps) != 0 {
					t.Fatalf("temps left after cleanup: %v", tmps)
				}
			}
			if ops < 5 {
				t.Fatalf("%s: only %d file operations", mode, ops)
			}
			t.Logf("%s crash=%v: %d file operations", mode, crash, ops)
		}
	}
}

func TestIsTemp(t *testing.T) {
	for name, want := range map[string]bool{
		tempName("00000000000000000001.json"): true,
		".7.tmp":                              true,
		"7.tmp":                               false, // state's old temp names are matched by state itself
		".tmp":                                false,
		"7":                                   false,
		".hidden":                             false,
	} {
		if IsTemp(name) != want {
			t.Errorf("IsTemp(%q) = %v", name, !want)
		}
	}
	if n := tempName("x"); !strings.HasPrefix(n, ".x.") || len(n) != len(".x.")+16+len(".tmp") {
		t.Errorf("temp name %q", n)
	}
}

// nativeFS is a store that publishes by itself (as an object store would).
type nativeFS struct {
	vfs.FS
	published []string
}

func (n *nativeFS) Publish(dir, name string, o Options, write func(io.Writer) error) (Result, error) {
	n.published = append(n.published, n.PathJoin(dir, name))
	return Result{Visible: true}, write(io.Discard)
}

func TestForPrefersNativePublisher(t *testing.T) {
	if _, ok := For(vfs.NewMem()).(Local); !ok {
		t.Fatal("a plain FS does not get the temp file protocol")
	}
	n := &nativeFS{FS: vfs.NewMem()}
	if _, err := Bytes(For(n), "/d", "x", Options{}, []byte("a")); err != nil {
		t.Fatal(err)
	}
	if len(n.published) != 1 || n.published[0] != "/d/x" {
		t.Fatalf("native publisher not used: %v", n.published)
	}
}

// TestWaitGatesThePublish: a failing Wait publishes nothing and leaves no
// temp file; a succeeding one has run before the name appears.
func TestWaitGatesThePublish(t *testing.T) {
	fs := vfs.NewMem()
	boom := errors.New("data files not durable")
	_, err := Bytes(Local{FS: fs}, "/", "c", Options{Wait: func() error { return boom }}, []byte("x"))
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the Wait error", err)
	}
	if _, ok := readAll(t, fs, "/c"); ok {
		t.Fatal("published although Wait failed")
	}
	if tmps := listTemps(t, fs, "/"); len(tmps) != 0 {
		t.Fatalf("temps left: %v", tmps)
	}
	waited := false
	if _, err := Bytes(Local{FS: fs}, "/", "c", Options{Wait: func() error {
		if _, err := fs.Stat("/c"); err == nil {
			return errors.New("name visible before Wait returned")
		}
		waited = true
		return nil
	}}, []byte("x")); err != nil || !waited {
		t.Fatalf("publish = %v, waited %v", err, waited)
	}
}
