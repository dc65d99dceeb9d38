package state

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestNextWatermarkRecorded: a version committed after SetNextWatermark
// records it (metadata format 4) and ReadRecord returns it with the
// schema; a version without one is written as before (format 2) and records
// none; Abort forgets it; a repartition carries the base version's.
func TestNextWatermarkRecorded(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil)
	s := e.open(2, -1)
	commit := func(v int64, wm *int64, abortFirst bool) {
		t.Helper()
		if abortFirst {
			s.SetNextWatermark(999)
			s.Abort()
		}
		if err := s.Put(testKey(int(v)), testVal(v)); err != nil {
			t.Fatal(err)
		}
		if wm != nil {
			s.SetNextWatermark(*wm)
		}
		if _, err := s.Commit(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	check := func(v int64, want int64, has bool, format string) {
		t.Helper()
		r, ok, err := ReadRecord(e.fs, e.dir, v)
		if err != nil || !ok {
			t.Fatalf("version %d: %v %v", v, ok, err)
		}
		if r.HasNextWatermark != has || (has && r.NextWatermarkMs != want) || !r.Schema.Equal(testSchema) {
			t.Fatalf("version %d records %+v, want watermark %d (%v)", v, r, want, has)
		}
		b, err := readAllFS(e.fs, r.Path)
		if err != nil || !strings.Contains(b, `"formatVersion":`+format+`,`) {
			t.Fatalf("version %d: %s is not format %s: %v\n%s", v, r.Path, format, err, b)
		}
	}
	wm := int64(1_700_000_000_000)
	commit(0, &wm, false)
	check(0, wm, true, "4")
	commit(1, nil, false)
	check(1, 0, false, "2")
	commit(2, nil, true)
	check(2, 0, false, "2")
	wm2 := int64(-5)
	commit(3, &wm2, false)
	check(3, wm2, true, "4")
	if _, err := s.Repartition(ctx, 3, 4, 3); err != nil {
		t.Fatal(err)
	}
	check(4, wm2, true, "4")
	if _, ok, err := ReadRecord(e.fs, e.dir, 9); ok || err != nil {
		t.Fatalf("a version that does not exist: %v %v", ok, err)
	}
	// Reopened from the checkpoint, the store reads format 4.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = e.open(3, 4)
	defer s.Close()
	if got := len(storeContents(t, s)); s.Version() != 4 || got != 4 {
		t.Fatalf("reopened at version %d: %d rows, want version 4 with 4", s.Version(), got)
	}
}

// TestMetaFormat4Rules: nextWatermarkMs is required in format 4 and refused
// before it.
func TestMetaFormat4Rules(t *testing.T) {
	wm := int64(7)
	base := func() *versionMeta {
		return &versionMeta{StoreID: "x", Version: 3, Attempt: 1, Kind: kindNameSnapshot,
			Data: dataFileName(3, 1, kindNameSnapshot), DataSize: 100, DataRecords: 2,
			Partitions: 2, Rows: 5, PartitionRows: []int64{2, 3}, Schema: testSchema,
			PartitionKeys: []*keyBounds{nil, nil}}
	}
	for _, c := range []struct {
		format int
		wm     *int64
		closed int64
		ok     bool
	}{
		{4, &wm, 0, true}, {4, &wm, 3, true}, {4, nil, 0, false},
		{2, &wm, 0, false}, {3, &wm, 3, false}, {2, nil, 0, true}, {3, nil, 3, true},
	} {
		m := base()
		m.FormatVersion, m.NextWatermarkMs, m.ClosedRows = c.format, c.wm, c.closed
		got, err := decodeMeta(encodeMeta(m))
		if (err == nil) != c.ok {
			t.Fatalf("format %d watermark %v closed %d: %v, want ok %v", c.format, c.wm != nil, c.closed, err, c.ok)
		}
		if err == nil && c.wm != nil && (got.NextWatermarkMs == nil || *got.NextWatermarkMs != *c.wm) {
			t.Fatalf("format %d: watermark not read back", c.format)
		}
	}
}

func readAllFS(fs vfs.FS, path string) (string, error) {
	f, err := fs.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	return string(b), err
}
