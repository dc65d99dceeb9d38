package state

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestOperatorRecordKept: a version committed after SetOperatorRecord
// keeps those bytes (metadata format 5) and ReadRecord and OperatorRecord
// return them unread; a version without one is written as before (format
// 2) and has none; Abort forgets it; a repartition carries the base
// version's; a reopened store reads it back.
func TestOperatorRecordKept(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil)
	s := e.open(2, -1)
	commit := func(v int64, rec string, abortFirst bool) {
		t.Helper()
		if abortFirst {
			s.SetOperatorRecord([]byte("forgotten"))
			s.Abort()
		}
		if err := s.Put(testKey(int(v)), testVal(v)); err != nil {
			t.Fatal(err)
		}
		if rec != "" {
			s.SetOperatorRecord([]byte(rec))
		}
		if _, err := s.Commit(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	check := func(v int64, want string, format string) {
		t.Helper()
		r, ok, err := ReadRecord(e.fs, e.dir, v)
		if err != nil || !ok {
			t.Fatalf("version %d: %v %v", v, ok, err)
		}
		if string(r.Operator) != want || !r.Schema.Equal(testSchema) {
			t.Fatalf("version %d records %+v, want operator record %q", v, r, want)
		}
		if s.Version() == v && string(s.OperatorRecord()) != want {
			t.Fatalf("version %d: OperatorRecord %q, want %q", v, s.OperatorRecord(), want)
		}
		b, err := readAllFS(e.fs, r.Path)
		if err != nil || !strings.Contains(b, `"formatVersion":`+format+`,`) {
			t.Fatalf("version %d: %s is not format %s: %v\n%s", v, r.Path, format, err, b)
		}
	}
	commit(0, "\x00any\xffbytes", false)
	check(0, "\x00any\xffbytes", "5")
	commit(1, "", false)
	check(1, "", "2")
	commit(2, "", true)
	check(2, "", "2")
	commit(3, `{"v":2}`, false)
	check(3, `{"v":2}`, "5")
	if _, err := s.Repartition(ctx, 3, 4, 3); err != nil {
		t.Fatal(err)
	}
	check(4, `{"v":2}`, "5")
	if _, ok, err := ReadRecord(e.fs, e.dir, 9); ok || err != nil {
		t.Fatalf("a version that does not exist: %v %v", ok, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = e.open(3, 4)
	defer s.Close()
	if got := len(storeContents(t, s)); s.Version() != 4 || got != 4 || string(s.OperatorRecord()) != `{"v":2}` {
		t.Fatalf("reopened at version %d: %d rows, record %q; want version 4 with 4 and the record", s.Version(), got, s.OperatorRecord())
	}
}

// TestMetaFormatRules: which operator fields each metadata format requires
// or refuses, and the record formats 3 and 4 (written by builds up to
// 27801e4, read only) hand the operator: the JSON object of their two
// fields as written.
func TestMetaFormatRules(t *testing.T) {
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
		op     string
		ok     bool
		record string
	}{
		{4, &wm, 0, "", true, `{"nextWatermarkMs":7}`}, {4, &wm, 3, "", true, `{"closedRows":3,"nextWatermarkMs":7}`}, {4, nil, 0, "", false, ""},
		{2, &wm, 0, "", false, ""}, {3, &wm, 3, "", false, ""}, {2, nil, 0, "", true, ""}, {3, nil, 3, "", true, `{"closedRows":3}`},
		{3, nil, 0, "", false, ""}, {2, nil, 3, "", false, ""},
		{5, nil, 0, "r", true, "r"}, {5, nil, 0, "", false, ""}, {5, &wm, 0, "r", false, ""}, {5, nil, 3, "r", false, ""},
		{2, nil, 0, "r", false, ""}, {4, &wm, 0, "r", false, ""}, {6, nil, 0, "r", false, ""},
	} {
		m := base()
		m.FormatVersion, m.LegacyNextWatermarkMs, m.LegacyClosedRows, m.Operator = c.format, c.wm, c.closed, []byte(c.op)
		got, err := decodeMeta(encodeMeta(m))
		if (err == nil) != c.ok {
			t.Fatalf("format %d watermark %v closed %d operator %q: %v, want ok %v", c.format, c.wm != nil, c.closed, c.op, err, c.ok)
		}
		if err == nil && string(got.operatorRecord()) != c.record {
			t.Fatalf("format %d: operator record %q, want %q", c.format, got.operatorRecord(), c.record)
		}
	}
}

// TestFormat4VersionKeepsItsRecord: a version whose .meta an older build
// wrote in format 4 (its bytes as written) opens, hands the operator its
// legacy record, and a repartition writes that record into a format 5
// version.
func TestFormat4VersionKeepsItsRecord(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil)
	s := e.open(2, -1)
	if err := s.Put(testKey(1), testVal(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Rewrite version 0's .meta as the old build did (format 4).
	path := e.fs.PathJoin(e.dir, metaFileName(0, 0))
	b, err := readAllFS(e.fs, path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeMeta([]byte(b))
	if err != nil {
		t.Fatal(err)
	}
	js := strings.Split(string(encodeMeta(m)), "\n")[1]
	js = strings.Replace(js, `"formatVersion":2,`, `"formatVersion":4,`, 1)
	js = strings.TrimSuffix(js, "}") + `,"closedRows":12,"nextWatermarkMs":1700000000000}`
	if _, err := decodeMeta(frame(js)); err != nil {
		t.Fatalf("the old build's format 4: %v", err)
	}
	if err := e.fs.Remove(path); err != nil {
		t.Fatal(err)
	}
	writeFS(t, e.fs, path, frame(js))
	s = e.open(2, 0)
	defer s.Close()
	const want = `{"closedRows":12,"nextWatermarkMs":1700000000000}`
	if string(s.OperatorRecord()) != want {
		t.Fatalf("record %q, want %q", s.OperatorRecord(), want)
	}
	if _, err := s.Repartition(ctx, 0, 1, 3); err != nil {
		t.Fatal(err)
	}
	r, _, err := ReadRecord(e.fs, e.dir, 1)
	if err != nil || string(r.Operator) != want {
		t.Fatalf("repartitioned version records %q (%v), want %q", r.Operator, err, want)
	}
}

// frame is a .meta file of JSON line js.
func frame(js string) []byte {
	return []byte(fmt.Sprintf("%s\n%s\ncrc32c:%08x\n", metaHeader, js, crc32.Checksum([]byte(js), crcTable)))
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
