package s3archive

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// copyDir copies the regular files of src to dst (new modification times,
// as a copy to a mirror has).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func blocksURI(root string) string { return fileURI(filepath.Join(root, "v1.0", "eth", "blocks")) }

// memTree is every file under dir of fs with its content: what a refused
// check must leave as it was.
func memTree(t *testing.T, fs vfs.FS, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	names, err := fs.List(dir)
	if err != nil {
		return out
	}
	for _, n := range names {
		p := fs.PathJoin(dir, n)
		if st, err := fs.Stat(p); err == nil && st.IsDir() {
			for k, v := range memTree(t, fs, p) {
				out[k] = v
			}
			continue
		}
		f, err := fs.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		b := make([]byte, st.Size())
		_, _ = f.ReadAt(b, 0)
		f.Close()
		out[p] = string(b)
	}
	return out
}

// checkMove is New on uri, then CheckMove from old.
func checkMove(t *testing.T, uri, old string, env stream.SourceEnv) (*Source, bool, error) {
	t.Helper()
	o, err := ParseURI(uri)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(withBlocks(o))
	if err != nil {
		t.Fatal(err)
	}
	ok, err := s.CheckMove(t.Context(), env, old)
	return s, ok, err
}

// TestMoveAdmitted: a log written at A resumes at its copy B (and then at
// C) when told movedFrom: the pending batch reads the same rows at the new
// location, files admitted before the move are never admitted again, and
// the next start needs no option.
func TestMoveAdmitted(t *testing.T) {
	a, b, c := t.TempDir(), t.TempDir(), t.TempDir()
	writeDays(t, a, day0, 3, 2, "modern")
	fs := vfs.NewMem()
	env := testEnv(t, fs)
	s := openSource(t, Options{URI: blocksURI(a), MaxFilesPerTrigger: 1}, env)
	e0, err := s.LatestOffset(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	e1, err := s.LatestOffset(t.Context(), e0)
	if err != nil {
		t.Fatal(err)
	}
	pending := collect(t, s, e0, e1) // batch 1 is planned, not committed
	copyDir(t, a, b)

	s2, ok, err := checkMove(t, blocksURI(b)+"?maxFilesPerTrigger=1&movedFrom="+blocksURI(a), blocksURI(a), env)
	if err != nil || !ok {
		t.Fatalf("CheckMove from A to its copy: %v %v", ok, err)
	}
	if err := s2.Open(t.Context(), env); err != nil {
		t.Fatal(err)
	}
	if got := collect(t, s2, e0, e1); !reflect.DeepEqual(got, pending) {
		t.Fatalf("the pending batch read %d rows at B, %d at A", len(got), len(pending))
	}
	for p := range s2.seen {
		if !strings.HasPrefix(p, blocksURI(b)+"/") {
			t.Fatalf("seen path %s is not at B", p)
		}
	}
	e2, err := s2.LatestOffset(t.Context(), e1)
	if err != nil {
		t.Fatal(err)
	}
	es, err := s2.log.Batch(2, s2.entries)
	if err != nil || len(es) != 1 || !strings.Contains(es[0].Path, "date=2026-08-03") {
		t.Fatalf("the first admission after the move: %+v %v (want day 3 only)", es, err)
	}
	rec := memTree(t, fs, fs.PathJoin(env.MetadataDir, movesDir))
	want := "v1\n" + `{"from":"` + blocksURI(a) + `","to":"` + blocksURI(b) + `"}`
	if len(rec) != 1 || rec[fs.PathJoin(env.MetadataDir, movesDir, "0")] != want {
		t.Fatalf("move records %v, want 0 = %s", rec, want)
	}

	// The next start at B needs no option; then B moves to C.
	s3 := openSource(t, Options{URI: blocksURI(b)}, env)
	if got := collect(t, s3, e0, e1); !reflect.DeepEqual(got, pending) {
		t.Fatal("a start at B without movedFrom reads another batch")
	}
	copyDir(t, b, c)
	s4, ok, err := checkMove(t, blocksURI(c)+"?movedFrom="+blocksURI(b), blocksURI(b), env)
	if err != nil || !ok {
		t.Fatalf("CheckMove from B to C: %v %v", ok, err)
	}
	if err := s4.Open(t.Context(), env); err != nil {
		t.Fatal(err)
	}
	if got := collect(t, s4, e0, e1); !reflect.DeepEqual(got, pending) {
		t.Fatal("after A -> B -> C the pending batch reads other rows")
	}
	if got := collect(t, s4, e1, e2); len(got) != 2 {
		t.Fatalf("batch 2 (admitted at B) read %d rows at C, want 2", len(got))
	}
	if n := len(memTree(t, fs, fs.PathJoin(env.MetadataDir, movesDir))); n != 2 {
		t.Fatalf("%d move records after two moves", n)
	}
}

// TestMoveRefused: not told, told of another location, a missing file, a
// file of another size: refused (or not admitted), and nothing written.
func TestMoveRefused(t *testing.T) {
	a := t.TempDir()
	writeDays(t, a, day0, 3, 2, "modern")
	fs := vfs.NewMem()
	env := testEnv(t, fs)
	s := openSource(t, Options{URI: blocksURI(a)}, env)
	if _, err := s.LatestOffset(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	before := memTree(t, fs, "/ckpt")
	mirror := func(t *testing.T, damage func(root string)) string {
		b := t.TempDir()
		copyDir(t, a, b)
		damage(b)
		return b
	}
	day2 := func(root string) string { return dayPath(root, day0.AddDate(0, 0, 1), 0) }
	for _, tc := range []struct {
		name   string
		b      string
		option string // the movedFrom value ("": none)
		want   string // a substring of the error ("": not admitted, no error)
	}{
		{"not told", mirror(t, func(string) {}), "", ""},
		{"told of another location", mirror(t, func(string) {}), "file:///elsewhere/v1.0/eth/blocks", "the checkpoint recorded the source at"},
		{"a file missing", mirror(t, func(r string) { os.Remove(day2(r)) }), blocksURI(a), "date=2026-08-02/part-00000-0b3c5a1e-c000.snappy.parquet is not at"},
		{"a file of another size", mirror(t, func(r string) {
			if err := os.WriteFile(day2(r), []byte("PAR1 not the same file PAR1"), 0o644); err != nil {
				t.Fatal(err)
			}
		}), blocksURI(a), "has 27 bytes where the logged file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			uri := blocksURI(tc.b)
			if tc.option != "" {
				uri += "?movedFrom=" + tc.option
			}
			s, ok, err := checkMove(t, uri, blocksURI(a), env)
			if ok {
				t.Fatal("admitted")
			}
			if tc.want == "" && err != nil || tc.want != "" && (errcode.Code(err) != errcode.SourceLocationChanged || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("got %v, want SOURCE_LOCATION_CHANGED with %q", err, tc.want)
			}
			if s.moveAdmitted != (move{}) {
				t.Fatal("a refused move is remembered")
			}
			if !reflect.DeepEqual(memTree(t, fs, "/ckpt"), before) {
				t.Fatal("the check wrote to the checkpoint")
			}
		})
	}
}

// TestMoveRecordCorrupt: a damaged move record is CHECKPOINT_CORRUPT naming
// it; a stray name beside the log still is too.
func TestMoveRecordCorrupt(t *testing.T) {
	a := t.TempDir()
	writeDays(t, a, day0, 1, 1, "modern")
	for name, content := range map[string]string{
		"future version": "v2\n{}",
		"unknown field":  "v1\n" + `{"from":"file:///a","to":"file:///b","x":1}`,
		"nested":         "v1\n" + `{"from":"file:///a","to":"file:///a/b"}`,
		"not normalised": "v1\n" + `{"from":"file:///a/","to":"file:///b"}`,
		"not json":       "v1\n{",
	} {
		t.Run(name, func(t *testing.T) {
			fs := vfs.NewMem()
			env := testEnv(t, fs)
			dir := fs.PathJoin(env.MetadataDir, movesDir)
			if err := fs.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := fs.Create(fs.PathJoin(dir, "0"), vfs.WriteCategoryUnspecified)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = f.Write([]byte(content))
			f.Close()
			s, err := New(withBlocks(Options{URI: blocksURI(a)}))
			if err != nil {
				t.Fatal(err)
			}
			err = s.Open(t.Context(), env)
			if !errcode.Is(err, errcode.CheckpointCorrupt) || !strings.Contains(err.Error(), fs.PathJoin(dir, "0")) {
				t.Fatalf("got %v, want CHECKPOINT_CORRUPT naming the record", err)
			}
		})
	}
}

// TestMovedFromOption: the option is normalised as the shape records a
// location; a bad one is refused.
func TestMovedFromOption(t *testing.T) {
	o, err := ParseURI("s3://b/v1.1/eth/blocks?movedFrom=s3://a/v1.0/eth/blocks/&anonymous=true")
	if err != nil || o.MovedFrom != "s3://a/v1.0/eth/blocks" {
		t.Fatalf("%q %v", o.MovedFrom, err)
	}
	if _, err := ParseURI("s3://b/p?movedFrom=http://a/p"); errcode.Code(err) != errcode.InvalidArgument {
		t.Fatalf("movedFrom=http://...: %v", err)
	}
}

// FuzzMoveRecord feeds arbitrary bytes to the move record parser: it
// returns a record or CHECKPOINT_CORRUPT, never panics, and what it
// accepts encodes back to what it decodes.
func FuzzMoveRecord(f *testing.F) {
	f.Add([]byte("v1\n" + `{"from":"file:///a/v1.0/eth/blocks","to":"s3://b/v1.0/eth/blocks"}`))
	f.Add([]byte("v1\n" + `{"from":"s3://a/p","to":"s3://a/p/q"}`))
	f.Add([]byte("v2\n{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := moveCodec{}.Decode("/m/0", 0, data)
		if err != nil {
			if !errcode.Is(err, errcode.CheckpointCorrupt) {
				t.Fatalf("%q: %v, want CHECKPOINT_CORRUPT", data, err)
			}
			return
		}
		enc, err := moveCodec{}.Encode(0, m)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := (moveCodec{}).Decode("/m/0", 0, enc); err != nil || back != m {
			t.Fatalf("%q decodes to %+v, which re-encodes to %q: %+v %v", data, m, enc, back, err)
		}
	})
}

// TestMoveRecordedTwice: a start that recorded the move and crashed before
// the engine recorded the new shape is told the same move again: it is
// admitted (the logged paths already map to the new location) and not
// recorded twice.
func TestMoveRecordedTwice(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	writeDays(t, a, day0, 2, 1, "modern")
	fs := vfs.NewMem()
	env := testEnv(t, fs)
	s := openSource(t, Options{URI: blocksURI(a)}, env)
	if _, err := s.LatestOffset(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	copyDir(t, a, b)
	for i := range 2 {
		s, ok, err := checkMove(t, blocksURI(b)+"?movedFrom="+blocksURI(a), blocksURI(a), env)
		if err != nil || !ok {
			t.Fatalf("start %d: CheckMove %v %v", i, ok, err)
		}
		if err := s.Open(t.Context(), env); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(memTree(t, fs, fs.PathJoin(env.MetadataDir, movesDir))); n != 1 {
		t.Fatalf("%d move records, want 1", n)
	}
}
