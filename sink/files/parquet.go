package files

import (
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/parquettype"
	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/snappy"
)

// Part files: one Parquet schema per query, every field OPTIONAL in the
// output schema's order (Spark writes its columns nullable), each type as
// Spark writes it (types.go); a window (the engine's window_start and
// window_end columns) is Spark's struct window<start, end> at the place of
// window_start; snappy pages, Spark's default
// spark.sql.parquet.compression.codec.

// Engine columns that form the window struct, and the struct's names.
const (
	colWindowStart = "window_start"
	colWindowEnd   = "window_end"
	windowField    = "window"
)

// leaf is one Parquet column: the engine column it is written from and
// its maximum definition level (2 inside the window struct, else 1).
type leaf struct {
	col   string
	typ   stream.Type
	depth int
}

// parquetSchema returns the part files' schema and its leaves in column
// order. It builds the schema through a struct type made at run time, so
// the columns keep the output's order (a parquet.Group would sort them by
// name).
func parquetSchema(s stream.Schema) (*parquet.Schema, []leaf, error) {
	ws, we := s.Field(colWindowStart), s.Field(colWindowEnd)
	if (ws == nil) != (we == nil) || ws != nil && (ws.Type != stream.Timestamp || we.Type != stream.Timestamp) {
		return nil, nil, errcode.New(errcode.InvalidArgument, "", "emit both window_start and window_end as timestamps",
			"output schema %s has a partial window", s)
	}
	var fields []reflect.StructField
	var leaves []leaf
	for i, f := range s.Fields {
		switch {
		case f.Name == colWindowEnd:
			continue
		case f.Name == colWindowStart:
			ts, tag, _ := goType(stream.Timestamp)
			win := reflect.StructOf([]reflect.StructField{
				{Name: "Start", Type: ts, Tag: reflect.StructTag(`parquet:"start` + tag + `"`)},
				{Name: "End", Type: ts, Tag: reflect.StructTag(`parquet:"end` + tag + `"`)},
			})
			fields = append(fields, reflect.StructField{Name: fmt.Sprintf("F%d", i), Type: reflect.PointerTo(win),
				Tag: reflect.StructTag(`parquet:"` + windowField + `,optional"`)})
			leaves = append(leaves, leaf{colWindowStart, stream.Timestamp, 2}, leaf{colWindowEnd, stream.Timestamp, 2})
			continue
		case f.Name == windowField && ws != nil:
			return nil, nil, errcode.New(errcode.InvalidArgument, "", "rename the column with AS",
				"output column %q clashes with the window struct", f.Name)
		case f.Name == "" || strings.ContainsAny(f.Name, ",\"`"):
			return nil, nil, errcode.New(errcode.InvalidArgument, "", "rename the column with AS",
				"the column name %q cannot be written to a Parquet file by this sink", f.Name)
		}
		t, tag, err := goType(f.Type)
		if err != nil {
			return nil, nil, err
		}
		fields = append(fields, reflect.StructField{Name: fmt.Sprintf("F%d", i), Type: t,
			Tag: reflect.StructTag(`parquet:"` + f.Name + tag + `"`)})
		leaves = append(leaves, leaf{f.Name, f.Type, 1})
	}
	pq := parquet.NewSchema("spark_schema", parquet.SchemaOf(reflect.New(reflect.StructOf(fields)).Interface()))
	return pq, leaves, nil
}

// writeParquet writes the rows of out, whose columns are the leaves' in
// order, as one Parquet file. A window whose start is null is written as
// a null struct.
func writeParquet(w io.Writer, pq *parquet.Schema, leaves []leaf, out *stream.Batch) error {
	pw := parquet.NewWriter(w, pq, parquet.Compression(&snappy.Codec{}),
		parquet.CreatedBy("ethstream", "file sink", ""))
	const chunk = 1024
	// The values of a chunk's rows share one buffer, reused by the next
	// chunk (WriteRows copies them): a row of its own was an allocation
	// per row.
	rows := make([]parquet.Row, 0, min(chunk, out.Len))
	var vals []parquet.Value
	var sc parquettype.Scratch // a wide DECIMAL's bytes, reused too
	ends := make([]int, 0, min(chunk, out.Len))
	for lo := 0; lo < out.Len; lo += chunk {
		vals, ends = vals[:0], ends[:0]
		sc.Reset()
		for r := lo; r < min(lo+chunk, out.Len); r++ {
			for c, lf := range leaves {
				v := &out.Columns[c]
				switch {
				case lf.typ.Kind() == stream.Array:
					vals = sc.AppendList(vals, v.Type.Elem(), v, r, c)
				case lf.depth == 2 && out.Columns[c-btoi(lf.col == colWindowEnd)].IsNull(r):
					vals = append(vals, parquet.NullValue().Level(0, 0, c))
				case v.IsNull(r):
					vals = append(vals, parquet.NullValue().Level(0, lf.depth-1, c))
				default:
					vals = append(vals, sc.Value(v.Type, v, r).Level(0, lf.depth, c))
				}
			}
			ends = append(ends, len(vals))
		}
		// Sliced once every value is appended: vals no longer moves.
		rows = rows[:0]
		start := 0
		for _, end := range ends {
			rows = append(rows, parquet.Row(vals[start:end:end]))
			start = end
		}
		if _, err := pw.WriteRows(rows); err != nil {
			return err
		}
	}
	return pw.Close()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
