package delta

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/stream"
)

// arrayText renders row r of any column, arrays as [e, ...] with null
// elements: the test's own oracle of a row's value.
func arrayText(c *stream.Column, r int) string {
	if c.IsNull(r) {
		return "null"
	}
	if c.Type.Kind() == stream.Array {
		var parts []string
		for e := int(c.Offsets[r]); e < int(c.Offsets[r+1]); e++ {
			parts = append(parts, arrayText(c.Elems, e))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	switch c.Type.Storage() {
	case stream.Float64:
		return fmt.Sprint(c.Float64s[r])
	case stream.String:
		return fmt.Sprintf("%q", c.Strings[r])
	}
	return fmt.Sprint(c.Int64s[r])
}

// TestArrayTableRoundTrip writes an array of every element type the sink
// writes (a null array, an empty one, null elements, several elements per
// row) and reads the table back: every array as written.
func TestArrayTableRoundTrip(t *testing.T) {
	ctx := context.Background()
	elems := []stream.Type{stream.String, stream.Int64, stream.Int32, stream.Float64, stream.Boolean}
	schema := stream.Schema{Key: []string{"k"}, Fields: []stream.Field{{Name: "k", Type: stream.Int32}}}
	for i, e := range elems {
		schema.Fields = append(schema.Fields, stream.Field{Name: fmt.Sprintf("a%d", i), Type: stream.ArrayOf(e), Nullable: true})
	}
	const rows = 6
	b := &stream.Batch{Len: rows}
	for _, f := range schema.Fields {
		c := stream.MakeColumn(f.Name, f.Type, 0, rows)
		b.Columns = append(b.Columns, c)
	}
	for r := range rows {
		b.Columns[0].Int64s = append(b.Columns[0].Int64s, int64(r))
		for i, e := range elems {
			// Row r holds r-1 elements (row 0 a null array, row 1 an empty
			// one), element 1 of each row null.
			one := stream.MakeColumn("element", e, 1, 1)
			switch e.Storage() {
			case stream.Float64:
				one.Float64s[0] = float64(r) / 4
			case stream.String:
				one.Strings[0] = strings.Repeat("é", r)
			}
			arr := stream.MakeColumn("", stream.ArrayOf(e), 1, 1)
			for x := range max(r-1, 0) {
				if e.Storage() == stream.Int64 {
					one.Int64s[0] = int64(r*10+x) % map[bool]int64{true: 2, false: 1 << 40}[e == stream.Boolean]
				}
				one.Valid = nil
				if x == 1 {
					one.Valid = []bool{false}
				}
				arr.Elems.Append(&one, 0)
				arr.Offsets[1]++
			}
			if r == 0 {
				arr.Valid = []bool{false}
			}
			b.Columns[i+1].Append(&arr, 0)
		}
	}
	dir := t.TempDir()
	s, err := NewMergeSink(SinkOptions{Schema: schema, Path: dir, Logger: quietLog})
	closeAtEnd(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(ctx, stream.SinkEnv{QueryID: "q"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddBatch(ctx, 0, b); err != nil {
		t.Fatal(err)
	}
	tbl, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	if err := snap.Scan(ctx, func(o *stream.Batch) error {
		for r := range o.Len {
			k := int(o.Columns[0].Int64s[r])
			got++
			for i := 1; i < len(o.Columns); i++ {
				if g, w := arrayText(&o.Columns[i], r), arrayText(&b.Columns[i], k); g != w {
					t.Errorf("key %d column %s: got %s, want %s", k, o.Columns[i].Name, g, w)
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got != rows {
		t.Fatalf("%d rows, want %d", got, rows)
	}
	if arrayText(&b.Columns[1], 3) != `["ééé", null]` {
		t.Fatalf("the test's batch is not what it means: %s", arrayText(&b.Columns[1], 3))
	}
}
