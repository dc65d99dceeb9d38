// Package pqcol is the Parquet read of the parquet file source and the Delta
// table source: Spark's mapping of a file's top-level columns to the
// engine's types (Schema, StreamType) and the pairs it accepts (Decode
// refuses the others), decoding through the repository's one
// Parquet-to-column decoder, package columnar (one batch per row group,
// its one table of timestamp and INT96 conversions).
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
// row group holding cols in order. A column the file lacks is all nulls
// (Spark reads a missing column as null).
func Decode(r io.ReaderAt, size int64, cols []Column) ([]*stream.Batch, error) {
	f, err := parquet.OpenFile(r, size, parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	if err != nil {
		return nil, fmt.Errorf("open parquet: %w", err)
	}
	leaves := f.Schema().Fields()
	idx := make([]int, len(cols)) // column chunk index, -1: missing
	for i, c := range cols {
		idx[i] = -1
		for j, l := range leaves {
			if strings.EqualFold(l.Name(), c.Name) {
				if !l.Leaf() || l.Repeated() {
					return nil, fmt.Errorf("column %s: %w (nested or repeated)", l.Name(), ErrUnsupported)
				}
				idx[i] = leafIndex(leaves, j)
				if err := compatible(l, c.Type); err != nil {
					return nil, fmt.Errorf("column %s: %w", l.Name(), err)
				}
				break
			}
		}
	}
	fields := make([]columnar.Field, len(cols))
	for i, c := range cols {
		// A column the file lacks (idx -1) is found by columnar neither,
		// and reads as nulls.
		fields[i] = columnar.Field{Name: c.Name, Type: c.Type}
		if idx[i] >= 0 {
			fields[i].Path = []string{leaves[fieldOf(leaves, idx[i])].Name()}
		}
	}
	dec, err := columnar.Open(f, fields, nil)
	if err != nil {
		return nil, err
	}
	var out []*stream.Batch
	for g := range f.RowGroups() {
		rg, err := dec.DecodeRowGroup(g)
		if err != nil {
			return nil, err
		}
		out = append(out, rg.Batch)
	}
	return out, nil
}

// leafIndex is the column chunk index of top-level field j: every field
// before it is a leaf (nested fields are refused before they are read, but
// a nested field before j would shift the index by its leaves).
func leafIndex(fields []parquet.Field, j int) int {
	n := 0
	for _, f := range fields[:j] {
		n += countLeaves(f)
	}
	return n
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

// fieldOf is the top-level field whose leaf is chunk index k (a leaf).
func fieldOf(fields []parquet.Field, k int) int {
	n := 0
	for j, f := range fields {
		if n == k {
			return j
		}
		n += countLeaves(f)
	}
	panic(fmt.Sprintf("pqcol: no top-level leaf at chunk %d", k))
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
