package pqcol

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/ethstream/ethstream/stream"
)

// TestListColumns: a three-level LIST of strings (the logs table's
// topics, as parquet-go's list tag writes it) and a bare repeated int32
// read as Spark reads them: the schema says array<string> and array<int>,
// the values decode, and an element type that does not match is refused.
func TestListColumns(t *testing.T) {
	type lrow struct {
		ID     int64    `parquet:"id"`
		Topics []string `parquet:"Topics,list"`
		Nums   []int32  `parquet:"nums"`
	}
	rows := []lrow{{ID: 1, Topics: []string{"a", "b"}, Nums: []int32{7}}, {ID: 2}, {ID: 3, Topics: []string{"c"}, Nums: []int32{1, 2, 3}}}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[lrow](&buf)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	fields, err := Schema(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]stream.Type{}
	for _, f := range fields {
		got[f.Name] = f.Type
	}
	if got["Topics"] != stream.ArrayOf(stream.String) || got["nums"] != stream.ArrayOf(stream.Int32) {
		t.Fatalf("schema %v", fields)
	}
	bs, err := Decode(bytes.NewReader(data), int64(len(data)), []Column{{"topics", stream.ArrayOf(stream.String)}, {"nums", stream.ArrayOf(stream.Int64)}})
	if err != nil {
		t.Fatal(err)
	}
	c, n := bs[0].Columns[0], bs[0].Columns[1]
	if !slices.Equal(c.Offsets, []int32{0, 2, 2, 3}) || !slices.Equal(c.Elems.Strings, []string{"a", "b", "c"}) {
		t.Fatalf("topics %v %v", c.Offsets, c.Elems.Strings)
	}
	if !slices.Equal(n.Offsets, []int32{0, 1, 1, 4}) || !slices.Equal(n.Elems.Int64s, []int64{7, 1, 2, 3}) {
		t.Fatalf("nums %v %v", n.Offsets, n.Elems.Int64s)
	}
	for _, bad := range []Column{{"topics", stream.ArrayOf(stream.Int64)}, {"topics", stream.String}, {"id", stream.ArrayOf(stream.Int64)}} {
		if _, err := Decode(bytes.NewReader(data), int64(len(data)), []Column{bad}); !errors.Is(err, ErrTypeMismatch) && !errors.Is(err, ErrUnsupported) {
			t.Errorf("%v: %v, want a refusal", bad, err)
		}
	}
}
