package files

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/internal/parquettype"
	"github.com/ethstream/ethstream/internal/sinklog"
	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
)

// TestEveryType writes a batch of every scalar type, with nulls and the
// extremes of each, and reads the part file back through parquet-go's
// generic rows: each column has the physical and logical type Spark
// writes, and each value reads back as written.
func TestEveryType(t *testing.T) {
	d38 := stream.DecimalOf(38, 4)
	big38, _ := stream.ParseDecimal("-9999999999999999999999999999999999.9999", 38, 4)
	d20 := stream.DecimalOf(20, 2)
	big20, _ := stream.ParseDecimal("123456789012345678.91", 20, 2)
	neg20, _ := stream.ParseDecimal("-0.01", 20, 2)
	cols := []stream.Column{
		{Name: "b", Type: stream.Boolean, Int64s: []int64{1, 0, 0}},
		{Name: "i8", Type: stream.Int8, Int64s: []int64{-128, 127, 0}},
		{Name: "i16", Type: stream.Int16, Int64s: []int64{-32768, 32767, 0}},
		{Name: "i32", Type: stream.Int32, Int64s: []int64{-2147483648, 2147483647, 0}},
		{Name: "i64", Type: stream.Int64, Int64s: []int64{-1 << 63, 1<<63 - 1, 0}},
		{Name: "f32", Type: stream.Float32, Float64s: []float64{float64(float32(1.5)), -3.25, 0}},
		{Name: "f64", Type: stream.Float64, Float64s: []float64{1e300, -0.5, 0}},
		{Name: "s", Type: stream.String, Strings: []string{"ünï", "", ""}},
		{Name: "bin", Type: stream.Binary, Strings: []string{"\x00\xff", "", ""}},
		{Name: "day", Type: stream.Date, Int64s: []int64{19723, -1, 0}},
		{Name: "ts", Type: stream.Timestamp, Int64s: []int64{1_700_000_000_123_456, -1, 0}},
		{Name: "ntz", Type: stream.TimestampNTZ, Int64s: []int64{1_700_000_000_123_456, 0, 0}},
		{Name: "d9", Type: stream.DecimalOf(9, 2), Decimals: []stream.Dec128{stream.Dec128Of(-999999999), stream.Dec128Of(5), {}}},
		{Name: "d18", Type: stream.DecimalOf(18, 0), Decimals: []stream.Dec128{stream.Dec128Of(999999999999999999), stream.Dec128Of(-1), {}}},
		{Name: "d20", Type: d20, Decimals: []stream.Dec128{big20, neg20, {}}},
		{Name: "d38", Type: d38, Decimals: []stream.Dec128{big38, stream.Dec128Of(1), {}}},
	}
	var schema stream.Schema
	for i := range cols {
		cols[i].Valid = []bool{true, true, false}
		schema.Fields = append(schema.Fields, stream.Field{Name: cols[i].Name, Type: cols[i].Type, Nullable: true})
	}
	fs := vfs.NewMem()
	s := newSink(fs, 0)
	ctx := context.Background()
	if err := s.Open(ctx, stream.SinkEnv{QueryID: "q", Schema: schema}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddBatch(ctx, 0, &stream.Batch{Len: 3, Columns: cols}); err != nil {
		t.Fatal(err)
	}
	c, _ := sinklog.ReadLog(fs, "/out")
	fh, err := fs.Open("/out/" + c.Files[0].Path[len("file:/out/"):])
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	st, _ := fh.Stat()
	pf, err := parquet.OpenFile(fh.(io.ReaderAt), st.Size())
	if err != nil {
		t.Fatal(err)
	}
	wantTypes := map[string]string{
		"b": "BOOLEAN", "i8": "INT32 INT(8,true)", "i16": "INT32 INT(16,true)", "i32": "INT32 INT(32,true)", "i64": "INT64 INT(64,true)", // parquet-go annotates the plain ints Spark leaves bare
		"f32": "FLOAT", "f64": "DOUBLE", "s": "BYTE_ARRAY STRING", "bin": "BYTE_ARRAY", "day": "INT32 DATE",
		"ts": "INT64 TIMESTAMP(isAdjustedToUTC=true,unit=MICROS)", "ntz": "INT64 TIMESTAMP(isAdjustedToUTC=false,unit=MICROS)",
		"d9": "INT32 DECIMAL(9,2)", "d18": "INT64 DECIMAL(18,0)", "d20": "FIXED_LEN_BYTE_ARRAY(9) DECIMAL(20,2)",
		"d38": "FIXED_LEN_BYTE_ARRAY(16) DECIMAL(38,4)",
	}
	for _, f := range pf.Schema().Fields() {
		typ := f.Type()
		got := typ.Kind().String()
		if typ.Kind() == parquet.FixedLenByteArray {
			got += fmt.Sprintf("(%d)", typ.Length())
		}
		if lt := typ.LogicalType(); lt != nil {
			got += " " + strings.ToUpper(lt.String())
		}
		if !f.Optional() {
			t.Errorf("%s is not OPTIONAL", f.Name())
		}
		if want := wantTypes[f.Name()]; !strings.EqualFold(got, want) {
			t.Errorf("%s: %s, want %s", f.Name(), got, want)
		}
	}
	rows := make([]parquet.Row, 3)
	n, err := parquet.NewReader(pf).ReadRows(rows)
	if n != 3 || (err != nil && err != io.EOF) {
		t.Fatalf("read %d rows: %v", n, err)
	}
	for ci, col := range cols {
		for r := range 3 {
			v := rows[r][ci]
			if r == 2 {
				if !v.IsNull() {
					t.Errorf("%s row 2: %v, want null", col.Name, v)
				}
				continue
			}
			want := parquettype.Value(col.Type, &col, r) // the value written; compared by its bytes and kind
			if v.Kind() != want.Kind() || string(v.Bytes()) != string(want.Bytes()) {
				t.Errorf("%s row %d: read %v, wrote %v", col.Name, r, v, want)
			}
		}
	}
	// The decimal bytes are Spark's: big-endian two's complement.
	if got := rows[1][14].Bytes(); fmt.Sprintf("%x", got) != "ffffffffffffffffff" {
		t.Errorf("decimal(20,2) -0.01 as %x", got)
	}
	// Arrays of the element types with a writer are LISTs (array_test.go);
	// an array of another element type is refused.
	if _, _, err := goType(stream.ArrayOf(stream.Date)); err == nil {
		t.Error("an array of dates was accepted")
	}
}
