package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

func generalSchema() stream.Schema {
	return stream.Schema{Fields: []stream.Field{
		{Name: KeyWindowStart, Type: stream.Timestamp}, {Name: KeyWindowEnd, Type: stream.Timestamp},
		{Name: "miner", Type: stream.String, Nullable: true},
		{Name: "gas", Type: stream.Int64, Nullable: true}, {Name: "avg_gas", Type: stream.Float64, Nullable: true},
	}, Key: []string{KeyWindowStart, KeyWindowEnd, "miner"}}
}

const hourUs = int64(3600e6)

func generalBatch(signs []int8, rows ...[4]any) *stream.Batch {
	b := &stream.Batch{Len: len(rows), Signs: signs, Columns: []stream.Column{
		{Name: KeyWindowStart, Type: stream.Timestamp}, {Name: KeyWindowEnd, Type: stream.Timestamp},
		{Name: "miner", Type: stream.String}, {Name: "gas", Type: stream.Int64}, {Name: "avg_gas", Type: stream.Float64, Valid: []bool{}},
	}}
	for _, r := range rows {
		ws := r[0].(int64) * hourUs
		b.Columns[0].Int64s = append(b.Columns[0].Int64s, ws)
		b.Columns[1].Int64s = append(b.Columns[1].Int64s, ws+hourUs)
		b.Columns[2].Strings = append(b.Columns[2].Strings, r[1].(string))
		b.Columns[3].Int64s = append(b.Columns[3].Int64s, r[2].(int64))
		f, ok := r[3].(float64)
		b.Columns[4].Float64s = append(b.Columns[4].Float64s, f)
		b.Columns[4].Valid = append(b.Columns[4].Valid, ok)
	}
	return b
}

func showCSV(t *testing.T, dir string) string {
	t.Helper()
	var out bytes.Buffer
	if err := Show(context.Background(), &out, dir, FormatCSV, -1); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestGeneralSink: a table created from a non-reference output schema takes
// inserts, updates and deletions by key, has stats for every column, shows
// with table show, and refuses an output of another schema.
func TestGeneralSink(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func(s stream.Schema) (*MergeSink, error) {
		m, err := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: dir, Logger: quietLog, TargetFileRows: 2})
		closeAtEnd(t, m)
		if err != nil {
			t.Fatal(err)
		}
		return m, m.Open(ctx, stream.SinkEnv{QueryID: "q", Schema: s})
	}
	m, err := open(generalSchema())
	if err != nil {
		t.Fatal(err)
	}
	if m.layout == nil || len(m.layout.keys) != 3 || m.layout.predicate() != `["(t.window.start = s.window.start) AND (t.window.end = s.window.end) AND (t.miner <=> s.miner)"]` {
		t.Fatal("the sink's layout is not keyed by the output's key")
	}
	want := `{"type":"struct","fields":[{"name":"window","type":{"type":"struct","fields":[{"name":"start","type":"timestamp","nullable":true,"metadata":{}},{"name":"end","type":"timestamp","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},{"name":"miner","type":"string","nullable":true,"metadata":{}},{"name":"gas","type":"long","nullable":true,"metadata":{}},{"name":"avg_gas","type":"double","nullable":true,"metadata":{}}]}`
	if got := m.snap.Metadata.SchemaString; got != want {
		t.Fatalf("schema\n%s\nwant\n%s", got, want)
	}
	steps := []struct {
		b    *stream.Batch
		want string
	}{
		{generalBatch(nil, [4]any{int64(1), "0xbb", int64(10), 1.5}, [4]any{int64(1), "0xaa", int64(5), nil}, [4]any{int64(2), "0xaa", int64(7), 7.0}),
			"1970-01-01T01:00:00Z,1970-01-01T02:00:00Z,0xaa,5,\n1970-01-01T01:00:00Z,1970-01-01T02:00:00Z,0xbb,10,1.5\n1970-01-01T02:00:00Z,1970-01-01T03:00:00Z,0xaa,7,7\n"},
		// Update one key (twice in the batch: the last wins), insert one.
		{generalBatch(nil, [4]any{int64(1), "0xaa", int64(6), 3.0}, [4]any{int64(1), "0xaa", int64(8), 4.0}, [4]any{int64(3), "0xcc", int64(1), 1.0}),
			"1970-01-01T01:00:00Z,1970-01-01T02:00:00Z,0xaa,8,4\n1970-01-01T01:00:00Z,1970-01-01T02:00:00Z,0xbb,10,1.5\n1970-01-01T02:00:00Z,1970-01-01T03:00:00Z,0xaa,7,7\n1970-01-01T03:00:00Z,1970-01-01T04:00:00Z,0xcc,1,1\n"},
		// A retraction deletes its key.
		{generalBatch([]int8{-1, 1}, [4]any{int64(1), "0xbb", int64(0), nil}, [4]any{int64(3), "0xcc", int64(2), 2.0}),
			"1970-01-01T01:00:00Z,1970-01-01T02:00:00Z,0xaa,8,4\n1970-01-01T02:00:00Z,1970-01-01T03:00:00Z,0xaa,7,7\n1970-01-01T03:00:00Z,1970-01-01T04:00:00Z,0xcc,2,2\n"},
	}
	for i, st := range steps {
		if _, err := m.AddBatch(ctx, int64(i), st.b); err != nil {
			t.Fatal(err)
		}
		got := showCSV(t, dir)
		if !sort3(got, "window_start,window_end,miner,gas,avg_gas\n"+st.want) {
			t.Fatalf("batch %d: table\n%s\nwant\n%s", i, got, st.want)
		}
	}
	// A re-run batch writes nothing.
	if p, err := m.AddBatch(ctx, 1, steps[0].b); err != nil || p.Metrics["skipped"] != "true" {
		t.Fatalf("re-run: %v %v", p, err)
	}
	// Stats for every column.
	for _, f := range m.snap.Files() {
		var st struct {
			NumRecords                      int64
			MinValues, MaxValues, NullCount map[string]any
		}
		if err := json.Unmarshal([]byte(f.Stats), &st); err != nil || st.NumRecords == 0 {
			t.Fatalf("stats %s: %v", f.Stats, err)
		}
		nc := st.NullCount
		w, _ := nc["window"].(map[string]any)
		if w == nil || w["start"] == nil || w["end"] == nil || nc["miner"] == nil || nc["gas"] == nil || nc["avg_gas"] == nil {
			t.Fatalf("stats %s lack a column's null count", f.Stats)
		}
		if st.MinValues["gas"] == nil || st.MaxValues["miner"] == nil {
			t.Fatalf("stats %s lack min/max", f.Stats)
		}
	}
	m.Close()
	// Another output schema is refused, naming both.
	other := generalSchema()
	other.Fields[3].Name = "gas_used"
	if _, err := open(other); errcode.Code(err) != CodeSchemaMismatch || !strings.Contains(err.Error(), `"gas"`) || !strings.Contains(err.Error(), `"gas_used"`) {
		t.Fatalf("other schema: %v", err)
	}
	// The reference output schema makes the reference table.
	ref := stream.Schema{Fields: []stream.Field{{Name: KeyWindowStart, Type: stream.Timestamp}, {Name: KeyWindowEnd, Type: stream.Timestamp},
		{Name: "source", Type: stream.String}, {Name: "miner", Type: stream.String}, {Name: "count", Type: stream.Int64}},
		Key: ReferenceSchema().Key}
	r, err := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: t.TempDir(), Logger: quietLog})
	closeAtEnd(t, r)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Open(ctx, stream.SinkEnv{QueryID: "q", Schema: ref}); err != nil || r.snap.Metadata.SchemaString != SinkSchemaString {
		t.Fatalf("reference schema: table %s err %v", r.snap.Metadata.SchemaString, err)
	}
}

// sort3 compares CSV tables ignoring row order (rows come in file order).
func sort3(got, want string) bool {
	g, w := strings.Split(strings.TrimSpace(got), "\n"), strings.Split(strings.TrimSpace(want), "\n")
	if len(g) != len(w) || g[0] != w[0] {
		return false
	}
	seen := map[string]int{}
	for _, l := range g[1:] {
		seen[l]++
	}
	for _, l := range w[1:] {
		seen[l]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

// A table without a window: the key is the group columns alone.
func TestGeneralSinkNoWindow(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := stream.Schema{Fields: []stream.Field{{Name: "miner", Type: stream.String}, {Name: "count", Type: stream.Int64}}, Key: []string{"miner"}}
	m, err := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: dir, Logger: quietLog})
	closeAtEnd(t, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Open(ctx, stream.SinkEnv{QueryID: "q", Schema: s}); err != nil {
		t.Fatal(err)
	}
	b := func(miner string, n int64) *stream.Batch {
		return &stream.Batch{Len: 1, Columns: []stream.Column{{Name: "miner", Type: stream.String, Strings: []string{miner}}, {Name: "count", Type: stream.Int64, Int64s: []int64{n}}}}
	}
	for i, bb := range []*stream.Batch{b("a", 1), b("b", 1), b("a", 3)} {
		if _, err := m.AddBatch(ctx, int64(i), bb); err != nil {
			t.Fatal(err)
		}
	}
	if got := showCSV(t, dir); !sort3(got, "miner,count\na,3\nb,1\n") {
		t.Fatalf("table\n%s", got)
	}
}

// A table without a key (a global aggregation): every row has the one empty
// key, so the table holds one row, updated by each batch.
func TestGeneralSinkNoKey(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := stream.Schema{Fields: []stream.Field{{Name: "count", Type: stream.Int64}, {Name: "gas", Type: stream.Int64, Nullable: true}}}
	m, err := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: dir, Logger: quietLog})
	closeAtEnd(t, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Open(ctx, stream.SinkEnv{QueryID: "q", Schema: s}); err != nil {
		t.Fatal(err)
	}
	for i, n := range []int64{3, 5, 9} {
		b := &stream.Batch{Len: 1, Columns: []stream.Column{{Name: "count", Type: stream.Int64, Int64s: []int64{n}},
			{Name: "gas", Type: stream.Int64, Int64s: []int64{n * 10}}}}
		if _, err := m.AddBatch(ctx, int64(i), b); err != nil {
			t.Fatal(err)
		}
		if got, want := showCSV(t, dir), fmt.Sprintf("count,gas\n%d,%d\n", n, n*10); got != want {
			t.Fatalf("batch %d: table\n%s\nwant\n%s", i, got, want)
		}
	}
}
