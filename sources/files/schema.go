package files

import (
	"fmt"
	"strings"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/sources/ddl"
	"github.com/ethstream/ethstream/stream"
)

// Spark's error classes for a file source's schema.
const (
	// CodeSchemaRequired: a streaming file source without a schema while
	// spark.sql.streaming.schemaInference is off (Spark's
	// "Schema must be specified when creating a streaming source DataFrame").
	CodeSchemaRequired = "UNABLE_TO_INFER_SCHEMA"
	// CodeInvalidCorruptRecordType: the corrupt-record column is not a
	// nullable STRING.
	CodeInvalidCorruptRecordType = "INVALID_CORRUPT_RECORD_TYPE"
)

// role says where a column's values come from.
type role uint8

const (
	dataCol role = iota
	partitionCol
	corruptCol
)

// column is one column of the source's schema.
type column struct {
	name     string
	typ      stream.Type
	kind     ddl.Kind // Spark's type, for range checks (an INT column holds 32 bits)
	nullable bool
	role     role
	pos      int // data: position among the data columns (a CSV field); partition: its index
}

// layout is the source's resolved schema: the data columns (the schema's
// columns that are neither partition nor corrupt-record columns, in order),
// then the partition columns in path order, as Spark's streaming file
// source puts them (dataSchema ++ partitionSchema); the corrupt-record
// column, when the schema names it, keeps its place among the data columns.
type layout struct {
	cols    []column
	nData   int
	parts   []string // partition column names, path order
	corrupt int      // index in cols, -1: none
}

// Schema is the engine's view of the layout.
func (l *layout) Schema() stream.Schema {
	out := stream.Schema{Fields: make([]stream.Field, len(l.cols))}
	for i, c := range l.cols {
		out.Fields[i] = stream.Field{Name: c.name, Type: c.typ, Nullable: c.nullable}
	}
	return out
}

func (l *layout) index(name string) int {
	for i, c := range l.cols {
		if strings.EqualFold(c.name, name) {
			return i
		}
	}
	return -1
}

// resolveLayout builds the layout from the declared (or inferred) schema
// and the discovered partition columns. A partition column the schema
// names takes the schema's type; one it does not takes the inferred type.
func resolveLayout(format string, s ddl.Schema, d discovered, corruptName string) (*layout, error) {
	l := &layout{corrupt: -1}
	isPart := func(name string) int {
		for i, p := range d.names {
			if strings.EqualFold(p, name) {
				return i
			}
		}
		return -1
	}
	for _, f := range s.Fields {
		if isPart(f.Name) >= 0 {
			continue
		}
		t, ok := ddl.StreamType(f.Type)
		isCorrupt := format != Parquet && strings.EqualFold(f.Name, corruptName)
		if isCorrupt && (f.Type.Kind != ddl.String || !f.Nullable) {
			return nil, errcode.New(CodeInvalidCorruptRecordType, "", "declare the corrupt-record column as a nullable STRING",
				"the column %s for corrupt records must be a nullable STRING, not %s", f.Name, strings.ToUpper(f.Type.String()))
		}
		if !ok || t.Kind() == stream.Array && format != Parquet {
			return nil, unsupportedType(format, f.Name, f.Type.String())
		}
		c := column{name: f.Name, typ: t, kind: f.Type.Kind, nullable: f.Nullable, role: dataCol, pos: l.nData}
		if isCorrupt {
			c.role, c.pos = corruptCol, -1
			l.corrupt = len(l.cols)
		} else {
			l.nData++
		}
		l.cols = append(l.cols, c)
	}
	for i, name := range d.names {
		c := column{name: name, nullable: true, role: partitionCol, pos: i}
		if f := s.Field(name); f != nil {
			t, ok := ddl.StreamType(f.Type)
			if !ok || t.Kind() == stream.Array {
				return nil, unsupportedType(format, f.Name, f.Type.String())
			}
			c.name, c.typ, c.kind = f.Name, t, f.Type.Kind
		} else {
			k := d.kinds[i]
			if k == 0 {
				k = ddl.String
			}
			t, ok := ddl.StreamType(ddl.Type{Kind: k})
			if !ok {
				return nil, errcode.New(ddl.UnsupportedForSource, "",
					fmt.Sprintf("declare the partition column in schema= with a supported type, e.g. schema=...,%s STRING", name),
					"the partition column %s of the %s source is inferred as %s, which the engine cannot hold yet", name, format, strings.ToUpper(ddl.Type{Kind: k, Precision: 38}.String()))
			}
			c.typ, c.kind = t, k
		}
		l.parts = append(l.parts, c.name)
		l.cols = append(l.cols, c)
	}
	return l, nil
}

func unsupportedType(format, name, spark string) error {
	return errcode.New(ddl.UnsupportedForSource, "",
		"declare the column with a scalar type (STRING, BIGINT, DECIMAL(p,s), DATE, ...), or leave it out of the schema (arrays, maps and structs are not supported in a file source yet)",
		"the %s source does not support the column `%s` of the type %s", format, name, strings.ToUpper(spark))
}
