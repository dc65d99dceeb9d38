package files

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
)

// TestWriteParquetChunks: rows over several of writeParquet's chunks of
// 1024, of varying width (arrays of 0..3 elements, null arrays, null
// scalars), read back through parquet-go's row reader as the rows written:
// each row's values, which share one buffer per chunk, are its own.
func TestWriteParquetChunks(t *testing.T) {
	const n = 2500
	schema := stream.Schema{Fields: []stream.Field{{Name: "id", Type: stream.Int64, Nullable: true},
		{Name: "nums", Type: stream.ArrayOf(stream.Int64), Nullable: true}}}
	pq, leaves, err := parquetSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	id := stream.Column{Name: "id", Type: stream.Int64, Int64s: make([]int64, n), Valid: make([]bool, n)}
	nums := stream.MakeColumn("nums", stream.ArrayOf(stream.Int64), 0, n)
	nums.Offsets = []int32{0}
	nums.Valid = make([]bool, n)
	want := make([]string, n)
	for i := range n {
		id.Int64s[i], id.Valid[i] = int64(i), i%3 != 0
		nums.Valid[i] = i%5 != 0
		var elems []int64
		if nums.Valid[i] {
			for k := range i % 4 {
				elems = append(elems, int64(i*10+k))
			}
		}
		nums.Elems.Int64s = append(nums.Elems.Int64s, elems...)
		nums.Offsets = append(nums.Offsets, int32(len(nums.Elems.Int64s)))
		idText := "null"
		if id.Valid[i] {
			idText = fmt.Sprint(i)
		}
		arr := fmt.Sprint(elems)
		switch {
		case !nums.Valid[i]:
			arr = "null"
		case len(elems) == 0:
			arr = "empty"
		}
		want[i] = idText + " " + arr
	}
	b := &stream.Batch{Len: n, Columns: []stream.Column{id, nums}}
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := writeParquet(&buf, pq, leaves, b); err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rg := range pf.RowGroups() {
		rows := make([]parquet.Row, rg.NumRows())
		rr := rg.Rows()
		k, err := rr.ReadRows(rows)
		rr.Close()
		if k != len(rows) || err != nil && err != io.EOF {
			t.Fatalf("read %d rows of %d: %v", k, len(rows), err)
		}
		for _, row := range rows {
			idText, arr, elems := "", "", []int64{}
			for _, v := range row {
				switch {
				case v.Column() == 0 && v.IsNull():
					idText = "null"
				case v.Column() == 0:
					idText = fmt.Sprint(v.Int64())
				case v.DefinitionLevel() == 0:
					arr = "null"
				case v.DefinitionLevel() == 1:
					arr = "empty"
				default:
					elems = append(elems, v.Int64())
				}
			}
			if arr == "" {
				arr = fmt.Sprint(elems)
			}
			got = append(got, idText+" "+arr)
		}
	}
	if len(got) != n {
		t.Fatalf("read %d rows back, wrote %d", len(got), n)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("row %d read back as %q, wrote %q", i, got[i], want[i])
		}
	}
}
