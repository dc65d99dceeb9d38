package deltasource

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// order is a row of the hand-written tables.
type order struct {
	ID     string    `parquet:"id"`
	Amount float64   `parquet:"amount"`
	At     time.Time `parquet:"at,timestamp(microsecond)"`
}

// orderV2 has a column more (an additive schema change).
type orderV2 struct {
	ID     string    `parquet:"id"`
	Amount float64   `parquet:"amount"`
	At     time.Time `parquet:"at,timestamp(microsecond)"`
	Note   *string   `parquet:"note,optional"`
}

const schemaV1 = `{"type":"struct","fields":[{"name":"id","type":"string","nullable":true,"metadata":{}},{"name":"amount","type":"double","nullable":true,"metadata":{}},{"name":"at","type":"timestamp","nullable":true,"metadata":{}},{"name":"region","type":"string","nullable":true,"metadata":{}}]}`
const schemaV2 = `{"type":"struct","fields":[{"name":"id","type":"string","nullable":true,"metadata":{}},{"name":"amount","type":"double","nullable":true,"metadata":{}},{"name":"at","type":"timestamp","nullable":true,"metadata":{}},{"name":"region","type":"string","nullable":true,"metadata":{}},{"name":"note","type":"string","nullable":true,"metadata":{}}]}`
const schemaBad = `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"amount","type":"double","nullable":true,"metadata":{}},{"name":"at","type":"timestamp","nullable":true,"metadata":{}},{"name":"region","type":"string","nullable":true,"metadata":{}}]}`

// table writes a Delta table by hand, as another writer would: Parquet
// files under region=R/ and JSON commits.
type table struct {
	t    *testing.T
	dir  string
	next int64
	n    int
	mod  int64
}

func newTable(t *testing.T, id, schema string) *table {
	tb := &table{t: t, dir: t.TempDir(), mod: 1_700_000_000_000}
	tb.commit(
		map[string]any{"protocol": map[string]any{"minReaderVersion": 1, "minWriterVersion": 2}},
		metaData(id, schema),
	)
	return tb
}

func metaData(id, schema string) map[string]any {
	return map[string]any{"metaData": map[string]any{"id": id, "format": map[string]any{"provider": "parquet", "options": map[string]any{}},
		"schemaString": schema, "partitionColumns": []string{"region"}, "configuration": map[string]any{}, "createdTime": 1}}
}

func (tb *table) commit(actions ...map[string]any) {
	tb.t.Helper()
	var buf bytes.Buffer
	for _, a := range actions {
		b, err := json.Marshal(a)
		if err != nil {
			tb.t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	p := filepath.Join(tb.dir, "_delta_log", fmt.Sprintf("%020d.json", tb.next))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.t.Fatal(err)
	}
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		tb.t.Fatal(err)
	}
	tb.next++
}

// file writes rows as a data file of region and returns its add action;
// the modification times count down so that the snapshot's order
// (modificationTime) differs from the path order.
func writeRows[T any](tb *table, region string, rows []T) map[string]any {
	tb.t.Helper()
	tb.n++
	rel := fmt.Sprintf("region=%s/part-%05d.parquet", region, tb.n)
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[T](&buf)
	if _, err := w.Write(rows); err != nil {
		tb.t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.t.Fatal(err)
	}
	p := filepath.Join(tb.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.t.Fatal(err)
	}
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		tb.t.Fatal(err)
	}
	tb.mod -= 1000
	return map[string]any{"add": map[string]any{"path": rel, "partitionValues": map[string]any{"region": region}, "size": buf.Len(),
		"modificationTime": tb.mod, "dataChange": true}}
}

func remove(add map[string]any) map[string]any {
	a := add["add"].(map[string]any)
	return map[string]any{"remove": map[string]any{"path": a["path"], "dataChange": true, "deletionTimestamp": 1}}
}

func orders(prefix string, n int) []order {
	out := make([]order, n)
	for i := range out {
		out[i] = order{ID: fmt.Sprintf("%s%d", prefix, i), Amount: float64(i) / 4, At: time.Date(2026, 1, 1, 0, i, 0, 0, time.UTC)}
	}
	return out
}

func open(t *testing.T, dir, q string, committed stream.Offset) *Source {
	t.Helper()
	s, err := NewFromURI(tableURI(dir, q))
	if err != nil {
		t.Fatal(err)
	}
	env := testEnv(t)
	env.Committed = committed
	if err := s.Open(t.Context(), env); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestOffsetsAndCommits: the snapshot one file per trigger, in
// modification-time order, then appends; offsets are Delta's JSON byte for
// byte; a batch without a start offset re-reads the same rows in a new
// process (the engine's re-run after a crash).
func TestOffsetsAndCommits(t *testing.T) {
	tb := newTable(t, "tbl-1", schemaV1)
	a1, a2 := writeRows(tb, "us", orders("a", 3)), writeRows(tb, "eu", orders("b", 2))
	tb.commit(a1, a2)
	s := open(t, tb.dir, "maxFilesPerTrigger=1", nil)
	if got, want := s.Schema().String(), "id string null, amount float64 null, at timestamp null, region string null"; got != want {
		t.Fatalf("schema %s, want %s", got, want)
	}
	bs, end, err := drain(t, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantEnds := []string{
		`{"sourceVersion":1,"reservoirId":"tbl-1","reservoirVersion":1,"index":0,"isStartingVersion":true}`,
		`{"sourceVersion":1,"reservoirId":"tbl-1","reservoirVersion":2,"index":-1,"isStartingVersion":false}`,
	}
	if len(bs) != 2 || bs[0].end != wantEnds[0] || bs[1].end != wantEnds[1] {
		t.Fatalf("batches %+v", bs)
	}
	// eu's file is newer in the path order but older by modification time.
	if !slices.Equal(bs[0].rows, []string{"b0|0|2026-01-01T00:00:00Z|eu", "b1|0.25|2026-01-01T00:01:00Z|eu"}) {
		t.Fatalf("first batch %v", bs[0].rows)
	}
	first := bs[0]
	again := open(t, tb.dir, "maxFilesPerTrigger=1", nil)
	var rows []string
	if err := again.ReadBatch(t.Context(), nil, stream.Offset(first.end), func(b *stream.Batch) error {
		for i := 0; i < b.Len; i++ {
			rows = append(rows, rowString(b, i))
		}
		return nil
	}); err != nil || !slices.Equal(rows, first.rows) {
		t.Fatalf("re-run: %v %v", rows, err)
	}

	// Appends: two files in one commit, an OPTIMIZE-like dataChange=false
	// rewrite that emits nothing, then one more file.
	b1, b2 := writeRows(tb, "us", orders("c", 1)), writeRows(tb, "us", orders("d", 2))
	tb.commit(b1, b2)
	opt := writeRows(tb, "us", orders("zz", 1))
	opt["add"].(map[string]any)["dataChange"] = false
	tb.commit(opt)
	tb.commit(writeRows(tb, "eu", orders("e", 1)))
	s2 := open(t, tb.dir, "maxFilesPerTrigger=1", end)
	bs, _, err = drain(t, s2, end)
	if err != nil {
		t.Fatal(err)
	}
	var ends []string
	for _, b := range bs {
		ends = append(ends, strings.TrimPrefix(b.end, `{"sourceVersion":1,"reservoirId":"tbl-1",`))
	}
	want := []string{`"reservoirVersion":2,"index":0,"isStartingVersion":false}`, `"reservoirVersion":3,"index":-1,"isStartingVersion":false}`,
		`"reservoirVersion":5,"index":-1,"isStartingVersion":false}`}
	if !slices.Equal(ends, want) {
		t.Fatalf("ends %v, want %v", ends, want)
	}
	if got := fmt.Sprint(allRows(bs)); got != "[c0|0|2026-01-01T00:00:00Z|us d0|0|2026-01-01T00:00:00Z|us d1|0.25|2026-01-01T00:01:00Z|us e0|0|2026-01-01T00:00:00Z|eu]" {
		t.Fatalf("rows %s", got)
	}
}

// TestRemovals: a pure delete is refused (DELTA_SOURCE_IGNORE_DELETE)
// unless ignoreDeletes; an overwrite (remove + add) is refused
// (DELTA_SOURCE_TABLE_IGNORE_CHANGES) unless skipChangeCommits (skipped)
// or ignoreChanges (its file emitted again).
func TestRemovals(t *testing.T) {
	tb := newTable(t, "tbl-2", schemaV1)
	a := writeRows(tb, "us", orders("a", 2))
	tb.commit(a)
	tb.commit(remove(a))
	b := writeRows(tb, "us", orders("b", 1))
	tb.commit(b)
	c := writeRows(tb, "eu", orders("c", 1))
	tb.commit(remove(b), c)
	tb.commit(writeRows(tb, "eu", orders("d", 1)))
	for _, x := range []struct{ q, code, rows string }{
		{"startingVersion=0", CodeIgnoreDelete, ""},
		{"startingVersion=0&ignoreDeletes=true", CodeIgnoreChanges, ""},
		{"startingVersion=0&skipChangeCommits=true", "", "a0 a1 b0 d0"},
		{"startingVersion=0&ignoreChanges=true", "", "a0 a1 b0 c0 d0"},
		{"startingVersion=3&ignoreDeletes=true&maxFilesPerTrigger=1", CodeIgnoreChanges, "b0"},
	} {
		s := open(t, tb.dir, x.q, nil)
		bs, _, err := drain(t, s, nil)
		if errcode.Code(err) != x.code {
			t.Errorf("%s: %v, want %s", x.q, err, x.code)
		}
		var ids []string
		for _, r := range allRows(bs) {
			ids = append(ids, strings.Split(r, "|")[0])
		}
		if strings.Join(ids, " ") != x.rows {
			t.Errorf("%s: rows %v, want %s", x.q, ids, x.rows)
		}
	}
}

// TestSchemaChanges: an additive change stops nothing for a query that
// started after it, stops one that started before (DELTA_SCHEMA_CHANGED)
// until a restart, which reads on with the new column (null in old
// files); a type change stops the stream for good; a table replaced under
// the path is DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE.
func TestSchemaChanges(t *testing.T) {
	tb := newTable(t, "tbl-3", schemaV1)
	tb.commit(writeRows(tb, "us", orders("a", 1)))
	s := open(t, tb.dir, "", nil)
	_, end, err := drain(t, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	note := "n"
	tb.commit(metaData("tbl-3", schemaV2), writeRows(tb, "us", []orderV2{{ID: "b0", At: time.Unix(0, 0), Note: &note}}))
	if _, _, err := drain(t, s, end); errcode.Code(err) != CodeSchemaChanged {
		t.Fatalf("additive change under a running query: %v", err)
	}
	s = open(t, tb.dir, "", end)
	bs, end, err := drain(t, s, end)
	if err != nil || fmt.Sprint(allRows(bs)) != "[b0|0|1970-01-01T00:00:00Z|us|n]" {
		t.Fatalf("after a restart: %v %v", bs, err)
	}
	tb.commit(metaData("tbl-3", schemaBad))
	if _, err := s.LatestOffset(t.Context(), end); errcode.Code(err) != CodeSchemaChanged {
		t.Fatalf("type change: %v", err)
	}

	// The table replaced: same path, another id.
	if err := os.RemoveAll(filepath.Join(tb.dir, "_delta_log")); err != nil {
		t.Fatal(err)
	}
	tb.next = 0
	tb.commit(map[string]any{"protocol": map[string]any{"minReaderVersion": 1, "minWriterVersion": 2}}, metaData("tbl-4", schemaV1))
	s, _ = NewFromURI(tableURI(tb.dir, ""))
	env := testEnv(t)
	env.Committed = end
	if err := s.Open(t.Context(), env); errcode.Code(err) != CodeDifferentTable || !strings.Contains(err.Error(), "tbl-3") {
		t.Fatalf("replaced table: %v", err)
	}
}

// TestStartingOptionsAndLimits: startingVersion=latest reads only later
// commits; maxBytesPerTrigger admits until the file that reaches it; a
// deletion vector is refused naming the feature.
func TestStartingOptionsAndLimits(t *testing.T) {
	tb := newTable(t, "tbl-5", schemaV1)
	tb.commit(writeRows(tb, "us", orders("a", 1)), writeRows(tb, "us", orders("b", 1)), writeRows(tb, "us", orders("c", 1)))
	s := open(t, tb.dir, "startingVersion=latest", nil)
	if bs, _, err := drain(t, s, nil); err != nil || len(bs) != 0 {
		t.Fatalf("latest: %v %v", bs, err)
	}
	tb.commit(writeRows(tb, "eu", orders("d", 1)))
	if bs, _, err := drain(t, s, nil); err != nil || fmt.Sprint(allRows(bs)) != "[d0|0|2026-01-01T00:00:00Z|eu]" {
		t.Fatalf("latest, then a commit: %v %v", bs, err)
	}
	s = open(t, tb.dir, "startingVersion=1&maxBytesPerTrigger=1", nil)
	bs, _, err := drain(t, s, nil)
	if err != nil || len(bs) != 4 {
		t.Fatalf("one file per batch under a 1-byte cap: %v %v", bs, err)
	}
	dv := writeRows(tb, "eu", orders("e", 1))
	dv["add"].(map[string]any)["deletionVector"] = map[string]any{"storageType": "u", "pathOrInlineDv": "x", "sizeInBytes": 1, "cardinality": 1}
	tb.commit(dv)
	if _, _, err := drain(t, open(t, tb.dir, "startingVersion=3", nil), nil); err == nil || !strings.Contains(err.Error(), "deletionVectors") {
		t.Fatalf("deletion vector: %v", err)
	}
	if _, err := ParseURI("file:///x?startingVersion=1&startingTimestamp=2026-01-01"); errcode.Code(err) != errcode.InvalidArgument {
		t.Fatalf("both starting options: %v", err)
	}
	if _, err := ParseURI("file:///x?maxFilesPerTriger=1"); err == nil || !strings.Contains(err.Error(), "unknown delta source option") {
		t.Fatalf("typo: %v", err)
	}
}

func TestOffsetCodec(t *testing.T) {
	p := position{version: 7, index: -1}
	o := formatOffset("abc", p)
	if string(o) != `{"sourceVersion":1,"reservoirId":"abc","reservoirVersion":7,"index":-1,"isStartingVersion":false}` {
		t.Fatalf("%s", o)
	}
	id, q, err := parseOffset(o)
	if err != nil || id != "abc" || q != p {
		t.Fatalf("%v %v %v", id, q, err)
	}
	for _, bad := range []string{`{}`, `{"sourceVersion":4,"reservoirId":"a","reservoirVersion":1,"index":-1,"isStartingVersion":false}`,
		`{"sourceVersion":3,"reservoirId":"a","reservoirVersion":1,"index":-20,"isStartingVersion":false}`, `[1]`} {
		if _, _, err := parseOffset(stream.Offset(bad)); err == nil {
			t.Errorf("%s parsed", bad)
		}
	}
}
