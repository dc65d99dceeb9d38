package checkpoint

import (
	"reflect"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
)

func writeFiles(t *testing.T, fs vfs.FS, dir string, files map[string]string) {
	t.Helper()
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		f, err := fs.Create(fs.PathJoin(dir, name), vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(data)); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}

func TestFileSourceLog(t *testing.T) {
	e := func(n int64) FileEntry {
		return FileEntry{Path: "s3://b/f" + string(rune('0'+n)), Timestamp: 100 + n, BatchID: n}
	}
	enc := func(es ...FileEntry) string { return string(EncodeFileSourceLog(es)) }
	if got := enc(e(0)); got != "v1\n{\"path\":\"s3://b/f0\",\"timestamp\":100,\"batchId\":0}" {
		t.Fatalf("layout %q", got)
	}
	ok := []struct {
		name  string
		files map[string]string
		want  []FileEntry
	}{
		{"no compaction", map[string]string{"0": enc(e(0)), "1": enc(e(1)) + "\n", "2": enc()}, []FileEntry{e(0), e(1)}},
		{"compacted, old ids deleted, temp and crc files ignored",
			map[string]string{"5.compact": enc(e(0), e(3), e(5)), "6": enc(e(6)), ".7.tmp": "v1\n{", ".6.crc": "x"},
			[]FileEntry{e(0), e(3), e(5), e(6)}},
		{"two compactions, the newest wins", map[string]string{"2.compact": enc(e(1)), "5.compact": enc(e(1), e(4))}, []FileEntry{e(1), e(4)}},
	}
	for _, c := range ok {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			writeFiles(t, fs, "/s", c.files)
			l, err := ReadFileSourceLog(fs, "/s")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(l.Entries, c.want) {
				t.Fatalf("entries %+v, want %+v", l.Entries, c.want)
			}
		})
	}
	bad := map[string]map[string]string{
		"gap":               {"0": enc(e(0)), "2": enc(e(2))},
		"gap after compact": {"2.compact": enc(e(2)), "4": enc(e(4))},
		"both forms":        {"2": enc(e(2)), "2.compact": enc(e(2))},
		"unparsable line":   {"0": "v1\n{\"path\":"},
		"missing field":     {"0": "v1\n{\"path\":\"p\",\"batchId\":0}"},
		"wrong batch id":    {"0": enc(e(1))},
		"future in compact": {"1.compact": enc(e(2))},
		"future version":    {"0": "v2\n" + enc(e(0))[3:]},
		"empty file":        {"0": ""},
		"no version line":   {"0": "{\"path\":\"p\",\"timestamp\":1,\"batchId\":0}"},
	}
	for name, files := range bad {
		t.Run(name, func(t *testing.T) {
			fs := vfs.NewMem()
			writeFiles(t, fs, "/s", files)
			if _, err := ReadFileSourceLog(fs, "/s"); !errcode.Is(err, errcode.CheckpointCorrupt) {
				t.Fatalf("got %v, want CHECKPOINT_CORRUPT", err)
			}
		})
	}
	l, err := (Dir{FS: vfs.NewMem(), Path: "/ck"}).ReadSourceLog("0")
	if err != nil || l.LatestID != -1 || len(l.Entries) != 0 {
		t.Fatalf("missing log = %+v, %v", l, err)
	}
}

// FuzzParseFileSourceLog checks the file source log parser never panics,
// refuses only with CHECKPOINT_CORRUPT and round-trips what it accepts.
func FuzzParseFileSourceLog(f *testing.F) {
	f.Add([]byte("v1\n{\"path\":\"/a/b/0\",\"timestamp\":1480730949000,\"batchId\":0}\n{\"path\":\"/a/b/1\",\"timestamp\":1480730950000,\"batchId\":1}\n"), int64(2), true)
	f.Add([]byte("v1\n{\"path\":\"/a/b/3\",\"timestamp\":1480730950000,\"batchId\":3}"), int64(3), false)
	f.Add([]byte("v1"), int64(0), false)
	f.Fuzz(func(t *testing.T, data []byte, n int64, compacted bool) {
		es, err := ParseFileSourceLog("f", n, compacted, data)
		if err != nil {
			if !errcode.Is(err, errcode.CheckpointCorrupt) {
				t.Fatalf("non-corrupt error %v", err)
			}
			return
		}
		back, err := ParseFileSourceLog("f", n, compacted, EncodeFileSourceLog(es))
		if err != nil || !reflect.DeepEqual(back, es) {
			t.Fatalf("round trip %+v -> %+v (%v)", es, back, err)
		}
	})
}

// TestFileEntrySize: the additive size field round-trips, is omitted when
// unknown (a log Spark writes, or one written before sizes, reads with size
// 0), fields neither knows are ignored as Spark's json4s ignores them, and
// a negative size is refused.
func TestFileEntrySize(t *testing.T) {
	es := []FileEntry{{Path: "s3://b/f0", Timestamp: 1, BatchID: 0, Size: 52947}, {Path: "s3://b/f1", Timestamp: 2, BatchID: 0}}
	data := EncodeFileSourceLog(es)
	want := "v1\n" + `{"path":"s3://b/f0","timestamp":1,"batchId":0,"size":52947}` + "\n" + `{"path":"s3://b/f1","timestamp":2,"batchId":0}`
	if string(data) != want {
		t.Fatalf("encoded\n%s\nwant\n%s", data, want)
	}
	got, err := ParseFileSourceLog("/l/0", 0, false, data)
	if err != nil || !reflect.DeepEqual(got, es) {
		t.Fatalf("parsed %+v, %v; want %+v", got, err, es)
	}
	spark := "v1\n" + `{"path":"s3://b/f0","timestamp":1,"batchId":0,"isDir":false}`
	got, err = ParseFileSourceLog("/l/0", 0, false, []byte(spark))
	if err != nil || len(got) != 1 || got[0].Size != 0 {
		t.Fatalf("a Spark entry parsed as %+v, %v", got, err)
	}
	_, err = ParseFileSourceLog("/l/0", 0, false, []byte("v1\n"+`{"path":"s3://b/f0","timestamp":1,"batchId":0,"size":-1}`))
	if !errcode.Is(err, errcode.CheckpointCorrupt) {
		t.Fatalf("a negative size: %v, want CHECKPOINT_CORRUPT", err)
	}
}
