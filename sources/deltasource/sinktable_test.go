package deltasource

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/stream"
)

// sinkSchema is the reference query's output, the schema the Delta sink
// writes here (the sink has no default schema of its own).
var sinkSchema = stream.Schema{Fields: []stream.Field{
	{Name: delta.KeyWindowStart, Type: stream.Timestamp}, {Name: delta.KeyWindowEnd, Type: stream.Timestamp},
	{Name: "source", Type: stream.String, Nullable: true}, {Name: "miner", Type: stream.String, Nullable: true},
	{Name: "count", Type: stream.Int64},
}, Key: []string{delta.KeyWindowStart, delta.KeyWindowEnd, "source", "miner"}}

// TestReadsSinkTable reads a table written by ethstream's own Delta sink
// (one query's output as the next query's input): the window struct as
// window.start and window.end, the other columns by name; its first batch
// is the snapshot, later MERGE commits that only insert new keys stream as
// appends, and one that updates a key is refused unless skipChangeCommits.
func TestReadsSinkTable(t *testing.T) {
	dir := t.TempDir()
	sink, err := delta.NewMergeSink(delta.SinkOptions{Path: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	if err := sink.Open(t.Context(), stream.SinkEnv{QueryID: "q1", Schema: sinkSchema, Locked: true}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	batch := func(w int, miner string, n int64) *stream.Batch {
		ws := t0.Add(time.Duration(w) * 5 * time.Minute).UnixMicro()
		return &stream.Batch{Len: 1, Columns: []stream.Column{
			{Name: "window_start", Type: stream.Timestamp, Int64s: []int64{ws}},
			{Name: "window_end", Type: stream.Timestamp, Int64s: []int64{ws + 300e6}},
			{Name: "source", Type: stream.String, Strings: []string{"s"}},
			{Name: "miner", Type: stream.String, Strings: []string{miner}},
			{Name: "count", Type: stream.Int64, Int64s: []int64{n}}}}
	}
	add := func(id int64, b *stream.Batch) {
		if _, err := sink.AddBatch(t.Context(), id, b); err != nil {
			t.Fatal(err)
		}
	}
	add(0, batch(0, "a", 1))
	add(1, batch(1, "b", 2))
	s := open(t, dir, "", nil)
	if got, want := s.Schema().String(), "window.start timestamp null, window.end timestamp null, source string null, miner string null, count int64 null"; got != want {
		t.Fatalf("schema %s, want %s", got, want)
	}
	bs, end, err := drain(t, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"2026-01-01T00:00:00Z|2026-01-01T00:05:00Z|s|a|1", "2026-01-01T00:05:00Z|2026-01-01T00:10:00Z|s|b|2"}
	if got := allRows(bs); !slices.Equal(got, want) {
		t.Fatalf("snapshot %v, want %v", got, want)
	}
	add(2, batch(2, "c", 3))
	bs, end, err = drain(t, s, end)
	if err != nil || fmt.Sprint(allRows(bs)) != "[2026-01-01T00:10:00Z|2026-01-01T00:15:00Z|s|c|3]" {
		t.Fatalf("append: %v %v", bs, err)
	}
	add(3, batch(2, "c", 4)) // the same key again: the MERGE rewrites its file
	if _, _, err := drain(t, s, end); errcode.Code(err) != CodeIgnoreChanges {
		t.Fatalf("an update without an option: %v", err)
	}
	s = open(t, dir, "skipChangeCommits=true", end)
	if bs, _, err := drain(t, s, end); err != nil || len(bs) != 0 {
		t.Fatalf("skipChangeCommits: %v %v", bs, err)
	}
}

// TestReadsSinkArrays reads array columns written by the Delta sink: a
// null array, an empty one, null elements and several elements, of
// strings and of longs, as the Array columns they were.
func TestReadsSinkArrays(t *testing.T) {
	dir := t.TempDir()
	schema := stream.Schema{Fields: []stream.Field{{Name: "k", Type: stream.Int64},
		{Name: "s", Type: stream.ArrayOf(stream.String), Nullable: true}, {Name: "n", Type: stream.ArrayOf(stream.Int64), Nullable: true}},
		Key: []string{"k"}}
	sink, err := delta.NewMergeSink(delta.SinkOptions{Path: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	if err := sink.Open(t.Context(), stream.SinkEnv{QueryID: "q1", Schema: schema, Locked: true}); err != nil {
		t.Fatal(err)
	}
	b := &stream.Batch{Len: 3, Columns: []stream.Column{
		{Name: "k", Type: stream.Int64, Int64s: []int64{1, 2, 3}},
		{Name: "s", Type: schema.Fields[1].Type, Offsets: []int32{0, 0, 0, 3}, Valid: []bool{false, true, true},
			Elems: &stream.Column{Name: "element", Type: stream.String, Strings: []string{"a", "", "c"}, Valid: []bool{true, false, true}}},
		{Name: "n", Type: schema.Fields[2].Type, Offsets: []int32{0, 2, 2, 3},
			Elems: &stream.Column{Name: "element", Type: stream.Int64, Int64s: []int64{7, 0, 1 << 40}, Valid: []bool{true, false, true}}}}}
	if _, err := sink.AddBatch(t.Context(), 0, b); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir, "", nil)
	if got, want := s.Schema().String(), "k int64 null, s array<string> null, n array<int64> null"; got != want {
		t.Fatalf("schema %s, want %s", got, want)
	}
	bs, _, err := drain(t, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"1|null|[7,null]", "2|[]|[]", "3|[a,null,c]|[1099511627776]"}
	if got := allRows(bs); !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
}
