package files

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/internal/sinklog"
	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
)

// TestArrayColumns: array<string> and array<bigint> columns (a null
// array, an empty one, null elements) are written as Spark's three-level
// LIST: the part file's schema says so, and its rows read back through
// parquet-go's row reader (levels, not the engine's decoder) are the
// arrays written.
func TestArrayColumns(t *testing.T) {
	fs := vfs.NewMem()
	s := newSink(fs, 10)
	schema := stream.Schema{Fields: []stream.Field{{Name: "id", Type: stream.Int64}, {Name: "tags", Type: stream.ArrayOf(stream.String), Nullable: true},
		{Name: "nums", Type: stream.ArrayOf(stream.Int64), Nullable: true}}}
	ctx := context.Background()
	if err := s.Open(ctx, stream.SinkEnv{QueryID: "q", Schema: schema}); err != nil {
		t.Fatal(err)
	}
	tags := stream.MakeColumn("tags", stream.ArrayOf(stream.String), 0, 4)
	tags.Elems.Strings = []string{"a", "", "c"}
	tags.Elems.Valid = []bool{true, false, true}
	tags.Offsets = []int32{0, 2, 2, 2, 3}
	tags.Valid = []bool{true, false, true, true}
	nums := stream.MakeColumn("nums", stream.ArrayOf(stream.Int64), 0, 4)
	nums.Elems.Int64s = []int64{7, 8, 9}
	nums.Offsets = []int32{0, 0, 1, 3, 3}
	b := &stream.Batch{Len: 4, Columns: []stream.Column{{Name: "id", Type: stream.Int64, Int64s: []int64{1, 2, 3, 4}}, tags, nums}}
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddBatch(ctx, 0, b); err != nil {
		t.Fatal(err)
	}
	c, err := sinklog.ReadLog(fs, "/out")
	if err != nil || len(c.Files) != 1 {
		t.Fatalf("log %+v: %v", c, err)
	}
	fh, err := fs.Open(strings.TrimPrefix(c.Files[0].Path, "file:"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	st, _ := fh.Stat()
	pf, err := parquet.OpenFile(fh.(io.ReaderAt), st.Size())
	if err != nil {
		t.Fatal(err)
	}
	if sc := pf.Schema().String(); !strings.Contains(sc, "optional group tags (LIST) {\n\t\trepeated group list {\n\t\t\toptional binary element (STRING);") {
		t.Fatalf("schema %s", sc)
	}
	rows := make([]parquet.Row, 4)
	n, err := pf.RowGroups()[0].Rows().ReadRows(rows)
	if n != 4 || err != nil && err != io.EOF {
		t.Fatalf("read %d rows: %v", n, err)
	}
	var got []string
	for _, row := range rows {
		cols := map[int][]string{}
		for _, v := range row {
			var cell string
			switch {
			case v.DefinitionLevel() == 0 && v.Column() > 0:
				cell = "null"
			case v.DefinitionLevel() == 1 && v.Column() > 0:
				cell = "empty"
			case v.DefinitionLevel() == 2:
				cell = "nil"
			default:
				cell = fmt.Sprint(v)
			}
			cols[v.Column()] = append(cols[v.Column()], cell)
		}
		got = append(got, fmt.Sprint(cols[0], cols[1], cols[2]))
	}
	want := []string{"[1] [a nil] [empty]", "[2] [null] [7]", "[3] [empty] [8 9]", "[4] [c] [empty]"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("rows %q, want %q", got, want)
	}
}
