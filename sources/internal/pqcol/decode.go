// Package pqcol reads the Parquet files of the parquet file source and the
// Delta table source: it resolves a Spark schema's columns (top-level
// names or dotted paths into structs, matched case-insensitively) to the
// file's leaves, checks each against the engine type it is read as (Spark's
// type mapping), and leaves every decode to internal/columnar, whose table
// of rules (timestamp units, INT96, decimals) every reader of Parquet in the
// repository shares.
package pqcol

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"

	"github.com/ethstream/ethstream/internal/columnar"
	"github.com/ethstream/ethstream/stream"
)

// Column is a column to decode: its name (matched case-insensitively, as
// Spark resolves names with spark.sql.caseSensitive=false) and its type.
type Column struct {
	Name string
	Type stream.Type
}

// ErrTypeMismatch is wrapped by the error of a file column whose physical
// type cannot be read as the declared type (Spark's
// PARQUET_COLUMN_DATA_TYPE_MISMATCH).
var ErrTypeMismatch = errors.New("parquet column type does not match the schema")

// ErrUnsupported is wrapped by the error of a file column this decoder
// cannot read (nested, repeated).
var ErrUnsupported = errors.New("unsupported parquet column")

// Decode reads cols from the Parquet file r of size bytes: one batch per
// row group holding cols in order. A column is a top-level leaf or a
// dotted path to a leaf inside structs (window.start: null where the leaf
// or any struct above it is null). A column the file lacks is all nulls
// (Spark reads a missing column as null).
//
// Before anything is allocated by the file's metadata (rows per row
// group, page sizes), columnar.CheckBounds holds every such number to the
// file's size and a limit: a damaged or hostile file is an error wrapping
// columnar.ErrOutOfBounds, and a panic of the Parquet library on
// inconsistent metadata is an error too, never the process's end.
func Decode(r io.ReaderAt, size int64, cols []Column) ([]*stream.Batch, error) {
	return DecodePooled(r, size, cols, nil)
}

// DecodePooled is Decode with the batches' value slices taken from pool
// (columnar.Pool; nil: new ones), for a reader that puts each batch back
// once its consumer is done with it.
func DecodePooled(r io.ReaderAt, size int64, cols []Column, pool *columnar.Pool) (_ []*stream.Batch, err error) {
	defer recoverDecoder(&err)
	f, footer, err := openFile(r, size)
	if err != nil {
		return nil, err
	}
	fields := make([]columnar.Field, len(cols))
	for i, c := range cols {
		// A column the file lacks keeps its name as the path, which
		// columnar finds nowhere either and reads as nulls.
		fields[i] = columnar.Field{Name: c.Name, Path: []string{c.Name}, Type: c.Type}
		leaf, path, err := findLeaf(f.Schema(), c.Name, c.Type.Kind() == stream.Array)
		if err != nil {
			return nil, err
		}
		if leaf == nil {
			continue
		}
		if c.Type.Kind() == stream.Array {
			elem, _, err := columnar.ListElement(leaf)
			if err != nil {
				return nil, fmt.Errorf("column %s: %w: the schema says %v, the file has %s", c.Name, ErrTypeMismatch, c.Type, err)
			}
			if err := compatible(elem, c.Type.Elem()); err != nil {
				return nil, fmt.Errorf("column %s (its elements): %w", c.Name, err)
			}
		} else if err := compatible(leaf, c.Type); err != nil {
			return nil, fmt.Errorf("column %s: %w", c.Name, err)
		}
		fields[i].Path = path
	}
	dec, err := columnar.Open(f, fields, nil)
	if err != nil {
		return nil, err
	}
	dec.UsePool(pool)
	if err := checkBounds(f, r, size, footer, dec.Columns()); err != nil {
		return nil, err
	}
	out := make([]*stream.Batch, len(f.RowGroups()))
	for g := range out {
		rg, err := dec.DecodeRowGroup(g)
		if err != nil {
			return nil, err
		}
		out[g] = rg.Batch
	}
	return out, nil
}

// findLeaf resolves name (a top-level column, or a dotted path into
// structs: window.start) to its leaf node and its path as the file spells
// it, matching each part case-insensitively; nil when the file lacks it. A
// repeated field on the way, or a group at the end, is ErrUnsupported;
// with list, the end is the list's node (a LIST group or a repeated leaf,
// which columnar resolves).
func findLeaf(root parquet.Node, name string, list bool) (parquet.Node, []string, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 1 && fieldByName(root, name) != nil {
		parts = []string{name} // a top-level column whose name holds a dot
	}
	var node parquet.Node = root
	path := make([]string, 0, len(parts))
	for _, part := range parts {
		next := fieldByName(node, part)
		if next == nil {
			return nil, nil, nil
		}
		node = next
		path = append(path, next.Name())
		if next.Repeated() && !(list && len(path) == len(parts)) {
			return nil, nil, fmt.Errorf("column %s: %w (repeated)", name, ErrUnsupported)
		}
	}
	if list {
		return node, path, nil
	}
	if !node.Leaf() {
		return nil, nil, fmt.Errorf("column %s: %w (a group: read its fields, e.g. %s.<field>)", name, ErrUnsupported, name)
	}
	return node, path, nil
}

func fieldByName(n parquet.Node, name string) parquet.Field {
	for _, f := range n.Fields() {
		if strings.EqualFold(f.Name(), name) {
			return f
		}
	}
	return nil
}

// leafKind classifies a leaf: its physical kind and annotations.
type leafKind uint8

const (
	kInt leafKind = iota + 1
	kFloat
	kString
	kBinary
	kTimestamp
	kBool
	kDate
	kDecimal
	kOther
)

// classify reads decimals and timestamps off columnar's rules table, so
// that what this package accepts as a timestamp is what columnar converts.
func classify(n parquet.Node) leafKind {
	el := columnar.NodeElement(n)
	if columnar.IsDecimal(el) {
		return kDecimal
	}
	if ts, ok := columnar.TimestampOf(el); ok && ts.Unit != columnar.Infer {
		return kTimestamp // INT96, or INT64 annotated as a timestamp
	}
	t := n.Type()
	var lv format.LogicalTypeValue
	if lt := t.LogicalType(); lt != nil {
		lv = lt.Value
	}
	ct := t.ConvertedType()
	isCT := func(cs ...deprecated.ConvertedType) bool {
		for _, c := range cs {
			if ct != nil && *ct == c {
				return true
			}
		}
		return false
	}
	switch lv.(type) {
	case *format.DateType:
		return kDate
	case *format.StringType, *format.EnumType, *format.JsonType:
		return kString
	}
	switch {
	case isCT(deprecated.Date):
		return kDate
	case isCT(deprecated.UTF8, deprecated.Enum, deprecated.Json):
		return kString
	}
	switch t.Kind() {
	case parquet.Int32, parquet.Int64:
		return kInt
	case parquet.Float, parquet.Double:
		return kFloat
	case parquet.Boolean:
		return kBool
	case parquet.ByteArray, parquet.FixedLenByteArray:
		return kBinary
	}
	return kOther
}

// StreamType is the engine type a Parquet leaf reads as, as Spark maps it
// (spark.sql.parquet.binaryAsString=false, int96AsTimestamp=true): INT32
// to int (tinyint and smallint for INT(8) and INT(16)), INT64 to bigint,
// FLOAT and DOUBLE, BOOLEAN, DATE, DECIMAL(p,s), strings (UTF8, ENUM, JSON)
// to string, other byte arrays to binary, INT96 and INT64 TIMESTAMP to
// timestamp (timestamp_ntz when not adjusted to UTC); with Spark's type
// name, and ok false for a leaf it cannot read.
func StreamType(n parquet.Node) (t stream.Type, spark string, ok bool) {
	el := columnar.NodeElement(n)
	switch classify(n) {
	case kInt:
		if n.Type().Kind() == parquet.Int32 {
			if it, ok := el.LogicalType.Value.(*format.IntType); ok && it.BitWidth == 8 {
				return stream.Int8, "tinyint", true
			} else if ok && it.BitWidth == 16 {
				return stream.Int16, "smallint", true
			}
			return stream.Int32, "int", true
		}
		return stream.Int64, "bigint", true
	case kFloat:
		if n.Type().Kind() == parquet.Float {
			return stream.Float32, "float", true
		}
		return stream.Float64, "double", true
	case kString:
		return stream.String, "string", true
	case kTimestamp:
		if ts, _ := columnar.TimestampOf(el); !ts.UTC {
			return stream.TimestampNTZ, "timestamp_ntz", true
		}
		return stream.Timestamp, "timestamp", true
	case kBool:
		return stream.Boolean, "boolean", true
	case kDate:
		return stream.Date, "date", true
	case kDecimal:
		p, sc := columnar.DecimalPrecision(el), int(columnar.DecimalScale(el))
		if p < 1 || p > stream.MaxDecimalPrecision || sc < 0 || sc > p {
			return 0, fmt.Sprintf("decimal(%d,%d)", p, sc), false
		}
		t := stream.DecimalOf(p, sc)
		return t, t.String(), true
	case kBinary:
		return stream.Binary, "binary", true
	}
	return 0, n.Type().String(), false
}

// Schema is the file's top-level columns as the engine reads them, in
// file order; a column it cannot read is an error naming it and its Spark
// type (UnsupportedError).
func Schema(r io.ReaderAt, size int64) (_ []stream.Field, err error) {
	defer recoverDecoder(&err)
	f, _, err := openFile(r, size)
	if err != nil {
		return nil, err
	}
	var out []stream.Field
	for _, l := range f.Schema().Fields() {
		if elem, _, err := columnar.ListElement(l); err == nil {
			t, spark, ok := StreamType(elem)
			if !ok {
				return nil, &UnsupportedError{Column: l.Name(), Spark: "array<" + spark + ">"}
			}
			// The list's nullability; an element's is not kept (Spark's
			// containsNull, which the engine takes as true).
			out = append(out, stream.Field{Name: l.Name(), Type: stream.ArrayOf(t), Nullable: l.Optional()})
			continue
		}
		if !l.Leaf() || l.Repeated() {
			return nil, &UnsupportedError{Column: l.Name(), Spark: "nested"}
		}
		t, spark, ok := StreamType(l)
		if !ok {
			return nil, &UnsupportedError{Column: l.Name(), Spark: spark}
		}
		out = append(out, stream.Field{Name: l.Name(), Type: t, Nullable: l.Optional()})
	}
	return out, nil
}

// UnsupportedError names a file column whose type the engine has no
// column for.
type UnsupportedError struct {
	Column string
	Spark  string // Spark's type name: boolean, date, decimal, binary, nested
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("column %s is of type %s, which the engine cannot read yet", e.Column, e.Spark)
}

// compatible checks that leaf n can be read as t (Spark's vectorized
// reader accepts the same pairs, integers and floats widening; a decimal
// to a decimal with no fewer integral and fractional digits).
func compatible(n parquet.Node, t stream.Type) error {
	k := classify(n)
	ok := false
	ft, _, fok := StreamType(n)
	switch t.Kind() {
	case stream.Int64:
		ok = k == kInt
	case stream.Int32, stream.Int16, stream.Int8:
		ok = k == kInt && n.Type().Kind() == parquet.Int32
	case stream.Float64:
		ok = k == kFloat || k == kInt
	case stream.Float32:
		ok = k == kFloat && n.Type().Kind() == parquet.Float
	case stream.String:
		ok = k == kString || k == kBinary
	case stream.Binary:
		ok = k == kString || k == kBinary
	case stream.Timestamp, stream.TimestampNTZ:
		ok = k == kTimestamp
	case stream.Boolean:
		ok = k == kBool
	case stream.Date:
		ok = k == kDate
	case stream.Decimal:
		switch {
		case k == kDecimal && fok:
			ok = ft.Scale() <= t.Scale() && ft.Precision()-ft.Scale() <= t.Precision()-t.Scale()
		case k == kInt:
			ok = t.Precision()-t.Scale() >= map[parquet.Kind]int{parquet.Int32: 10, parquet.Int64: 20}[n.Type().Kind()]
		}
	}
	if !ok {
		_, spark, _ := StreamType(n)
		return fmt.Errorf("%w: the file has %s (%s), the schema says %v", ErrTypeMismatch, spark, n.Type(), t)
	}
	return nil
}

// openFile opens the Parquet file r of size bytes, after checking its
// footer's length against the file (columnar.FooterOffset), and returns the
// footer's offset.
func openFile(r io.ReaderAt, size int64) (*parquet.File, int64, error) {
	footer, err := columnar.FooterOffset(r, size)
	if err != nil {
		return nil, 0, fmt.Errorf("open parquet: %w", err)
	}
	f, err := parquet.OpenFile(r, size, parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	if err != nil {
		return nil, 0, fmt.Errorf("open parquet: %w", err)
	}
	return f, footer, nil
}

// checkBounds is columnar.CheckBounds over the projected leaves of f, a
// file of size bytes read through r whose footer starts at footer.
func checkBounds(f *parquet.File, r io.ReaderAt, size, footer int64, cols []columnar.Column) error {
	leaves := make([]int, len(cols))
	for i, c := range cols {
		leaves[i] = c.Leaf
	}
	return columnar.CheckBounds(f.Metadata(), r, size, footer, leaves)
}

// recoverDecoder turns a panic of the Parquet library (it panics on some
// inconsistent metadata) into the decode's error: a damaged file fails its
// batch, not the process.
func recoverDecoder(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("parquet decoder panic on a damaged file: %v", r)
	}
}
