package files

import (
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/snappy"
)

// Part files: one flat Parquet schema per query, every field OPTIONAL in
// the output schema's order (Spark writes its columns nullable), longs
// INT64, doubles DOUBLE, strings BYTE_ARRAY (STRING), timestamps INT64
// TIMESTAMP(MICROS, UTC); snappy pages, as Spark's default
// spark.sql.parquet.compression.codec.

// parquetSchema builds the part files' schema through a struct type made
// at run time, so the columns keep the output's order (a parquet.Group
// would sort them by name).
func parquetSchema(s stream.Schema) (*parquet.Schema, error) {
	var fields []reflect.StructField
	for i, f := range s.Fields {
		if f.Name == "" || strings.ContainsAny(f.Name, ",\"`") {
			return nil, errcode.New(errcode.InvalidArgument, "", "rename the column with AS",
				"the column name %q cannot be written to a Parquet file by this sink", f.Name)
		}
		var t reflect.Type
		tag := ",optional"
		switch f.Type {
		case stream.Int64:
			t = reflect.TypeOf((*int64)(nil))
		case stream.Timestamp:
			t, tag = reflect.TypeOf((*int64)(nil)), ",optional,timestamp(microsecond:utc)"
		case stream.Float64:
			t = reflect.TypeOf((*float64)(nil))
		case stream.String:
			t = reflect.TypeOf((*string)(nil))
		default:
			return nil, fmt.Errorf("column %s has type %s, which the file sink cannot write", f.Name, f.Type)
		}
		fields = append(fields, reflect.StructField{Name: fmt.Sprintf("F%d", i), Type: t,
			Tag: reflect.StructTag(`parquet:"` + f.Name + tag + `"`)})
	}
	return parquet.NewSchema("spark_schema", parquet.SchemaOf(reflect.New(reflect.StructOf(fields)).Interface())), nil
}

// writeParquet writes the rows of out, whose columns are in the order of
// the schema pq was built from, as one Parquet file.
func writeParquet(w io.Writer, pq *parquet.Schema, out *stream.Batch) error {
	pw := parquet.NewWriter(w, pq, parquet.Compression(&snappy.Codec{}),
		parquet.CreatedBy("ethstream", "file sink", ""))
	const chunk = 1024
	rows := make([]parquet.Row, 0, min(chunk, out.Len))
	for lo := 0; lo < out.Len; lo += chunk {
		rows = rows[:0]
		for r := lo; r < min(lo+chunk, out.Len); r++ {
			row := make(parquet.Row, len(out.Columns))
			for c := range out.Columns {
				v := &out.Columns[c]
				if v.IsNull(r) {
					row[c] = parquet.NullValue().Level(0, 0, c)
				} else {
					row[c] = value(v, r).Level(0, 1, c)
				}
			}
			rows = append(rows, row)
		}
		if _, err := pw.WriteRows(rows); err != nil {
			return err
		}
	}
	return pw.Close()
}

// value is the non-null row r of column v as a parquet value.
func value(v *stream.Column, r int) parquet.Value {
	switch v.Type {
	case stream.Float64:
		return parquet.DoubleValue(v.Float64s[r])
	case stream.String:
		return parquet.ByteArrayValue([]byte(v.Strings[r]))
	}
	return parquet.Int64Value(v.Int64s[r])
}
