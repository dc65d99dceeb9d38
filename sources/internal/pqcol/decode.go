// Package pqcol decodes the top-level columns of a Parquet file of any
// schema into engine batches: the one Parquet read of the parquet file
// source and the Delta table source, kept behind Decode and Schema so that
// the shared Parquet-to-column decoder, when it lands, replaces this file
// alone. It reads with parquet-go's page API (no row reconstruction): one
// batch per row group, values converted to the engine's four column types.
package pqcol

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"

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
func Decode(r io.ReaderAt, size int64, cols []Column) ([]*stream.Batch, error) {
	f, err := parquet.OpenFile(r, size, parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	if err != nil {
		return nil, fmt.Errorf("open parquet: %w", err)
	}
	idx := make([]int, len(cols)) // column chunk index, -1: missing
	nodes := make([]parquet.Node, len(cols))
	for i, c := range cols {
		idx[i] = -1
		leaf, k, err := findLeaf(f.Schema(), c.Name)
		if err != nil {
			return nil, err
		}
		if leaf == nil {
			continue
		}
		if err := compatible(leaf, c.Type); err != nil {
			return nil, fmt.Errorf("column %s: %w", c.Name, err)
		}
		idx[i], nodes[i] = k, leaf
	}
	var out []*stream.Batch
	for _, rg := range f.RowGroups() {
		n := int(rg.NumRows())
		b := &stream.Batch{Len: n, Columns: make([]stream.Column, len(cols))}
		chunks := rg.ColumnChunks()
		for i, c := range cols {
			col := newColumn(c, n)
			if idx[i] < 0 {
				col.Valid = make([]bool, n)
			} else if err := readChunk(chunks[idx[i]], nodes[i], &col, n); err != nil {
				return nil, fmt.Errorf("column %s: %w", c.Name, err)
			}
			b.Columns[i] = col
		}
		out = append(out, b)
	}
	return out, nil
}

// findLeaf resolves name (a top-level column, or a dotted path into
// structs: window.start) to its leaf node and column chunk index, matching
// each part case-insensitively; nil when the file lacks it. A repeated
// field on the way, or a group at the end, is ErrUnsupported.
func findLeaf(root parquet.Node, name string) (parquet.Node, int, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 1 && fieldByName(root, name) != nil {
		parts = []string{name} // a top-level column whose name holds a dot
	}
	node, k := root, 0
	for _, part := range parts {
		var next parquet.Node
		for _, f := range node.Fields() {
			if next == nil && strings.EqualFold(f.Name(), part) {
				next = f
				break
			}
			k += countLeaves(f)
		}
		if next == nil {
			return nil, 0, nil
		}
		if next.Repeated() {
			return nil, 0, fmt.Errorf("column %s: %w (repeated)", name, ErrUnsupported)
		}
		node = next
	}
	if !node.Leaf() {
		return nil, 0, fmt.Errorf("column %s: %w (a group: read its fields, e.g. %s.<field>)", name, ErrUnsupported, name)
	}
	return node, k, nil
}

func fieldByName(n parquet.Node, name string) parquet.Node {
	for _, f := range n.Fields() {
		if strings.EqualFold(f.Name(), name) {
			return f
		}
	}
	return nil
}

func countLeaves(n parquet.Node) int {
	if n.Leaf() {
		return 1
	}
	c := 0
	for _, f := range n.Fields() {
		c += countLeaves(f)
	}
	return c
}

func newColumn(c Column, n int) stream.Column {
	col := stream.Column{Name: c.Name, Type: c.Type}
	switch c.Type {
	case stream.Float64:
		col.Float64s = make([]float64, n)
	case stream.String:
		col.Strings = make([]string, n)
	default:
		col.Int64s = make([]int64, n)
	}
	return col
}

// kindOf classifies a leaf: its physical kind and annotations.
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

func classify(n parquet.Node) leafKind {
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
	case *format.TimestampType:
		return kTimestamp
	case *format.DecimalType:
		return kDecimal
	case *format.DateType:
		return kDate
	case *format.StringType, *format.EnumType, *format.JsonType:
		return kString
	}
	switch {
	case isCT(deprecated.TimestampMillis, deprecated.TimestampMicros):
		return kTimestamp
	case isCT(deprecated.Decimal):
		return kDecimal
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
	case parquet.Int96:
		return kTimestamp
	case parquet.Boolean:
		return kBool
	case parquet.ByteArray, parquet.FixedLenByteArray:
		return kBinary
	}
	return kOther
}

// StreamType is the engine type a Parquet leaf reads as, as Spark maps it
// (spark.sql.parquet.binaryAsString=false, int96AsTimestamp=true):
// integers to Int64, floating point to Float64, strings (UTF8, ENUM, JSON)
// to String, timestamps (INT96, INT64 TIMESTAMP) to Timestamp; and the
// Spark type name of a leaf it cannot read (boolean, date, decimal,
// binary) with ok false.
func StreamType(n parquet.Node) (t stream.Type, spark string, ok bool) {
	switch classify(n) {
	case kInt:
		if n.Type().Kind() == parquet.Int32 {
			return stream.Int64, "int", true
		}
		return stream.Int64, "bigint", true
	case kFloat:
		if n.Type().Kind() == parquet.Float {
			return stream.Float64, "float", true
		}
		return stream.Float64, "double", true
	case kString:
		return stream.String, "string", true
	case kTimestamp:
		return stream.Timestamp, "timestamp", true
	case kBool:
		return 0, "boolean", false
	case kDate:
		return 0, "date", false
	case kDecimal:
		return 0, "decimal", false
	case kBinary:
		return 0, "binary", false
	}
	return 0, n.Type().String(), false
}

// Schema is the file's top-level columns as the engine reads them, in
// file order; a column it cannot read is an error naming it and its Spark
// type (UnsupportedError).
func Schema(r io.ReaderAt, size int64) ([]stream.Field, error) {
	f, err := parquet.OpenFile(r, size, parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	if err != nil {
		return nil, fmt.Errorf("open parquet: %w", err)
	}
	var out []stream.Field
	for _, l := range f.Schema().Fields() {
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
// reader accepts the same pairs, integers widening).
func compatible(n parquet.Node, t stream.Type) error {
	k := classify(n)
	ok := false
	switch t {
	case stream.Int64:
		ok = k == kInt
	case stream.Float64:
		ok = k == kFloat || k == kInt
	case stream.String:
		ok = k == kString || k == kBinary
	case stream.Timestamp:
		ok = k == kTimestamp
	}
	if !ok {
		_, spark, _ := StreamType(n)
		return fmt.Errorf("%w: the file has %s (%s), the schema says %v", ErrTypeMismatch, spark, n.Type(), t)
	}
	return nil
}

// readChunk decodes one column chunk into col (n rows).
func readChunk(cc parquet.ColumnChunk, leaf parquet.Node, col *stream.Column, n int) error {
	pages := cc.Pages()
	defer pages.Close()
	conv := converter(leaf, col.Type)
	buf := make([]parquet.Value, 1024)
	row := 0
	for {
		p, err := pages.ReadPage()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		vr := p.Values()
		for {
			k, err := vr.ReadValues(buf)
			for _, v := range buf[:k] {
				if row >= n {
					parquet.Release(p)
					return fmt.Errorf("more values than the row group's %d rows", n)
				}
				if v.IsNull() {
					if col.Valid == nil {
						col.Valid = make([]bool, n)
						for i := 0; i < row; i++ {
							col.Valid[i] = true
						}
					}
				} else {
					conv(col, row, v)
					if col.Valid != nil {
						col.Valid[row] = true
					}
				}
				row++
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				parquet.Release(p)
				return err
			}
		}
		parquet.Release(p)
	}
	if row != n {
		return fmt.Errorf("%d values for the row group's %d rows", row, n)
	}
	return nil
}

// converter returns the function that stores a non-null value of leaf
// into a column of type t (compatible checked the pair).
func converter(leaf parquet.Node, t stream.Type) func(*stream.Column, int, parquet.Value) {
	kind := leaf.Type().Kind()
	switch t {
	case stream.Int64:
		return func(c *stream.Column, i int, v parquet.Value) { c.Int64s[i] = v.Int64() }
	case stream.Float64:
		switch kind {
		case parquet.Float:
			return func(c *stream.Column, i int, v parquet.Value) { c.Float64s[i] = float64(v.Float()) }
		case parquet.Double:
			return func(c *stream.Column, i int, v parquet.Value) { c.Float64s[i] = v.Double() }
		}
		return func(c *stream.Column, i int, v parquet.Value) { c.Float64s[i] = float64(v.Int64()) }
	case stream.String:
		return func(c *stream.Column, i int, v parquet.Value) { c.Strings[i] = string(v.ByteArray()) }
	}
	// Timestamp: microseconds since the epoch.
	if kind == parquet.Int96 {
		return func(c *stream.Column, i int, v parquet.Value) { c.Int64s[i] = int96Micros(v.Int96()) }
	}
	scale := func(x int64) int64 { return x } // micros
	var lv format.LogicalTypeValue
	if lt := leaf.Type().LogicalType(); lt != nil {
		lv = lt.Value
	}
	if ts, ok := lv.(*format.TimestampType); ok {
		switch ts.Unit.Value.(type) {
		case *format.MilliSeconds:
			scale = func(x int64) int64 { return x * 1000 }
		case *format.NanoSeconds:
			scale = func(x int64) int64 { return floorDiv(x, 1000) }
		}
	} else if ct := leaf.Type().ConvertedType(); ct != nil && *ct == deprecated.TimestampMillis {
		scale = func(x int64) int64 { return x * 1000 }
	}
	return func(c *stream.Column, i int, v parquet.Value) { c.Int64s[i] = scale(v.Int64()) }
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// int96Micros is an INT96 timestamp (nanoseconds of the day, Julian day)
// in microseconds since the Unix epoch.
func int96Micros(x deprecated.Int96) int64 {
	nanos := int64(uint64(x[1])<<32 | uint64(x[0]))
	days := int64(x[2]) - 2440588 // Julian day of 1970-01-01
	return days*86400_000_000 + floorDiv(nanos, 1000)
}
