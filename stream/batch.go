package stream

import (
	"fmt"
	"strings"
	"unsafe"
)

// Type is the logical type of a Column: a kind (the low 8 bits, Kind)
// and, for the two parameterised kinds, its parameters packed above it, so
// that a Type stays one comparable value (a map key, a struct field
// compared with ==):
//
//	bits 0-7    the kind (Int64 .. Array)
//	Decimal     bits 8-15 the precision (1..38), bits 16-23 the scale (0..p)
//	Array       bits 8-31 the element's Type (itself not an Array)
//
// Make a decimal with DecimalOf and an array with ArrayOf; switch on
// t.Kind() for them (a Decimal Type equals the constant Decimal only
// with no precision, which no column has). The number is never written to
// disk: state schemas and the Delta log record a type by its name.
type Type uint32

// Column kinds. Values are never renumbered.
const (
	Int64     Type = 1 // Int64s (Spark's BIGINT)
	Float64   Type = 2 // Float64s (DOUBLE)
	String    Type = 3 // Strings (STRING, UTF-8)
	Timestamp Type = 4 // Int64s, microseconds since the Unix epoch, UTC
	// Boolean is Int64s, 1 for true and 0 for false: held as a long, every
	// per-type copy of a column carries it unchanged.
	Boolean Type = 5
	Int32   Type = 6 // Int64s, each within int32 (Spark's INT)
	Date    Type = 7 // Int64s, days since the Unix epoch
	// Decimal is Spark's DECIMAL(p, s), exact to 38 digits: Decimals, the
	// unscaled values as 128-bit integers (value = unscaled / 10^s).
	Decimal Type = 8
	Int8    Type = 9  // Int64s, each within int8 (Spark's TINYINT)
	Int16   Type = 10 // Int64s, each within int16 (SMALLINT)
	// Float32 is Float64s, each a float32's exact value (Spark's FLOAT).
	Float32 Type = 11
	// Binary is Strings holding the raw bytes (not UTF-8) of Spark's BINARY.
	Binary Type = 12
	// TimestampNTZ is Int64s, microseconds since 1970-01-01T00:00 of a
	// wall clock without a time zone (Spark's TIMESTAMP_NTZ).
	TimestampNTZ Type = 13
	// Array is Spark's ARRAY<T>, laid out as Arrow's list: Offsets has
	// Len+1 entries and row i's elements are rows Offsets[i] ..
	// Offsets[i+1]-1 of the child column Elems (of the element Type, its
	// own Valid marking null elements). A null array is Valid[i] false
	// with Offsets[i] == Offsets[i+1]; an empty array is a valid row with
	// no elements. Offsets need not start at 0 (a Slice shares the child).
	Array Type = 14
)

// DecimalOf is the type DECIMAL(p, s); it panics outside 1 <= p <= 38,
// 0 <= s <= p (a bug: parsers check their input first).
func DecimalOf(p, s int) Type {
	if p < 1 || p > MaxDecimalPrecision || s < 0 || s > p {
		panic(fmt.Sprintf("stream: DECIMAL(%d,%d) out of range", p, s))
	}
	return Decimal | Type(p)<<8 | Type(s)<<16
}

// MaxDecimalPrecision is Spark's DecimalType.MAX_PRECISION.
const MaxDecimalPrecision = 38

// ArrayOf is the type ARRAY<elem>; it panics for an array of arrays, which
// the engine does not hold.
func ArrayOf(elem Type) Type {
	if elem.Kind() == Array || elem == 0 {
		panic(fmt.Sprintf("stream: array of %v", elem))
	}
	return Array | elem<<8
}

// Kind is the type without its parameters: Decimal for every DECIMAL(p,
// s), Array for every array, the type itself otherwise.
func (t Type) Kind() Type { return t & 0xff }

// Precision is a Decimal's precision (0 for other kinds).
func (t Type) Precision() int {
	if t.Kind() != Decimal {
		return 0
	}
	return int(t >> 8 & 0xff)
}

// Scale is a Decimal's scale (0 for other kinds).
func (t Type) Scale() int {
	if t.Kind() != Decimal {
		return 0
	}
	return int(t >> 16 & 0xff)
}

// Elem is an Array's element type (0 for other kinds).
func (t Type) Elem() Type {
	if t.Kind() != Array {
		return 0
	}
	return t >> 8
}

// Storage is the kind whose value slice holds a column of t: Int64 (the
// Int64s), Float64, String, Decimal or Array.
func (t Type) Storage() Type {
	switch t.Kind() {
	case Float64, Float32:
		return Float64
	case String, Binary:
		return String
	case Decimal:
		return Decimal
	case Array:
		return Array
	}
	return Int64
}

var typeNames = map[Type]string{Int64: "int64", Float64: "float64", String: "string", Timestamp: "timestamp",
	Boolean: "boolean", Int32: "int", Date: "date", Decimal: "decimal", Int8: "tinyint", Int16: "smallint",
	Float32: "float", Binary: "binary", TimestampNTZ: "timestamp_ntz", Array: "array"}

// String names the type: int64, float64, string, timestamp (the four first
// kinds keep the names state schemas recorded), else Spark's simpleString:
// boolean, tinyint, smallint, int, float, binary, date, timestamp_ntz,
// decimal(p,s), array<T>.
func (t Type) String() string {
	switch t.Kind() {
	case Decimal:
		if t == Decimal {
			return "decimal"
		}
		return fmt.Sprintf("decimal(%d,%d)", t.Precision(), t.Scale())
	case Array:
		if t == Array {
			return "array"
		}
		return "array<" + t.Elem().String() + ">"
	}
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("Type(%d)", uint32(t))
}

// ParseType reads what String writes; ok is false for any other text.
func ParseType(s string) (Type, bool) {
	for t, n := range typeNames {
		if n == s && t != Decimal && t != Array {
			return t, true
		}
	}
	if in, ok := strings.CutPrefix(s, "array<"); ok {
		if in, ok = strings.CutSuffix(in, ">"); ok {
			if e, ok := ParseType(in); ok && e.Kind() != Array {
				return ArrayOf(e), true
			}
		}
		return 0, false
	}
	var p, sc int
	if n, err := fmt.Sscanf(s, "decimal(%d,%d)", &p, &sc); err == nil && n == 2 &&
		p >= 1 && p <= MaxDecimalPrecision && sc >= 0 && sc <= p && fmt.Sprintf("decimal(%d,%d)", p, sc) == s {
		return DecimalOf(p, sc), true
	}
	return 0, false
}

// Column is one typed column of a Batch. Exactly one value slice is used,
// chosen by Type.Storage(), and it has the batch's length (an Array
// column: Offsets has Len+1 entries). Valid is nil when every value is
// present; otherwise Valid[i] is false for a null at row i.
type Column struct {
	Name     string
	Type     Type
	Int64s   []int64 // Int64, Int32, Int16, Int8, Boolean, Date, Timestamp, TimestampNTZ
	Float64s []float64
	Strings  []string
	Decimals []Dec128 // Decimal: unscaled values
	Offsets  []int32  // Array: Len+1 offsets into Elems
	Elems    *Column  // Array: the elements of every row
	Valid    []bool
	// Dict, when set on a String or Binary column by its producer
	// (NewDict), is a dictionary view of Strings; read it with DictView.
	Dict *Dict
}

// Dict is a dictionary-encoded column's view of its strings, for a
// consumer that works per distinct value rather than per row (the
// aggregation interns and hashes each value once, not each row's):
// Strings[i] is Values[Index[i]], the same string (same bytes at the same
// address), for every valid row i; a null row's Index is -1. Values may
// hold values no row has (a filtered column keeps its dictionary). The
// view lives as long as the batch: only for the call that hands it over.
//
// A view describes the Strings slice it was made for (NewDict): a copy
// of the Column that replaces Strings keeps a view DictView ignores. Code
// that changes the rows otherwise (reorders, selects, appends, nulls a
// row, rewrites a string in place) carries the view or sets Dict to nil:
// the kernels (kernel.go) do. A stale view gives wrong answers to a
// consumer that trusts it; Validate checks it row by row.
type Dict struct {
	Index  []int32
	Values []string
	rows   *string // the first of the Strings described
}

// NewDict is the view of rows (a column's Strings) by index into values.
func NewDict(rows []string, index []int32, values []string) *Dict {
	return &Dict{Index: index, Values: values, rows: unsafe.SliceData(rows)}
}

// DictView returns c's dictionary view, or nil when it has none or has
// one made for other Strings (a copy of the column replaced them).
func (c *Column) DictView() *Dict {
	d := c.Dict
	if d == nil || d.rows != unsafe.SliceData(c.Strings) || len(d.Index) != len(c.Strings) || c.Type.Storage() != String {
		return nil
	}
	return d
}

// Len returns the number of values in the column.
func (c *Column) Len() int {
	switch c.Type.Storage() {
	case Float64:
		return len(c.Float64s)
	case String:
		return len(c.Strings)
	case Decimal:
		return len(c.Decimals)
	case Array:
		return max(len(c.Offsets)-1, 0)
	default:
		return len(c.Int64s)
	}
}

// IsNull reports whether row i is null.
func (c *Column) IsNull(i int) bool { return c.Valid != nil && !c.Valid[i] }

// Batch is a columnar chunk of rows. Sources emit batches, operators consume
// them and produce output batches, sinks receive them. A Batch is not safe for
// concurrent mutation; a receiver must not retain it after the call that
// handed it over returns unless the producer documents otherwise.
type Batch struct {
	Len     int
	Columns []Column
	// Signs, when non-nil, has one entry per row: +1 for an insertion, -1 for
	// a retraction. nil means every row is an insertion, the common case, so
	// plain batches pay nothing.
	//
	// In a source's batch a retraction takes back a row the same source
	// emitted in an earlier batch, with identical column values (a block
	// orphaned by a chain reorganisation); the replacement rows follow as
	// insertions in the same batch. In an operator's output a retraction
	// deletes the row with that key from the sink (an aggregate whose count
	// reached zero); only the key columns of such a row are meaningful.
	Signs []int8
}

// Sign returns the sign of row i: +1 or -1.
func (b *Batch) Sign(i int) int8 {
	if b.Signs == nil {
		return 1
	}
	return b.Signs[i]
}

// Column returns the column with the given name, or nil.
func (b *Batch) Column(name string) *Column {
	for i := range b.Columns {
		if b.Columns[i].Name == name {
			return &b.Columns[i]
		}
	}
	return nil
}

// Validate checks that every column has the batch's length; it is meant for
// tests and for data that crossed a trust boundary.
func (b *Batch) Validate() error {
	for i := range b.Columns {
		c := &b.Columns[i]
		if n := c.Len(); n != b.Len {
			return fmt.Errorf("column %q has %d values, batch has %d rows", c.Name, n, b.Len)
		}
		if c.Valid != nil && len(c.Valid) != b.Len {
			return fmt.Errorf("column %q has %d validity flags, batch has %d rows", c.Name, len(c.Valid), b.Len)
		}
		if err := c.validateArray(); err != nil {
			return err
		}
		if err := c.validateDict(); err != nil {
			return err
		}
	}
	if b.Signs != nil {
		if len(b.Signs) != b.Len {
			return fmt.Errorf("batch has %d signs for %d rows", len(b.Signs), b.Len)
		}
		for i, s := range b.Signs {
			if s != 1 && s != -1 {
				return fmt.Errorf("row %d has sign %d, want +1 or -1", i, s)
			}
		}
	}
	return nil
}

// ColSource is the literal column the engine adds to the input rows when the
// query reads it: the name of the source the row came from (Spark's lit(name)
// in a union by name).
const ColSource = "source"

// validateArray checks an Array column's offsets against its elements.
func (c *Column) validateArray() error {
	if c.Type.Kind() != Array || len(c.Offsets) == 0 {
		return nil
	}
	if c.Elems == nil || c.Elems.Type != c.Type.Elem() {
		return fmt.Errorf("array column %q has no child column of its element type %v", c.Name, c.Type.Elem())
	}
	for i := 1; i < len(c.Offsets); i++ {
		if c.Offsets[i] < c.Offsets[i-1] {
			return fmt.Errorf("array column %q: offsets decrease at row %d", c.Name, i-1)
		}
	}
	if c.Offsets[0] < 0 || int(c.Offsets[len(c.Offsets)-1]) > c.Elems.Len() {
		return fmt.Errorf("array column %q: offsets [%d, %d] outside its %d elements", c.Name, c.Offsets[0], c.Offsets[len(c.Offsets)-1], c.Elems.Len())
	}
	return nil
}

// validateDict checks a column's dictionary view (DictView) against its
// strings.
func (c *Column) validateDict() error {
	d := c.DictView()
	if d == nil {
		return nil
	}
	for i, k := range d.Index {
		if c.IsNull(i) {
			if k != -1 {
				return fmt.Errorf("column %q: null row %d has dictionary index %d, want -1", c.Name, i, k)
			}
			continue
		}
		if k < 0 || int(k) >= len(d.Values) {
			return fmt.Errorf("column %q: row %d has dictionary index %d of %d values", c.Name, i, k, len(d.Values))
		}
		if !SameString(d.Values[k], c.Strings[i]) {
			return fmt.Errorf("column %q: row %d is not its dictionary value %d", c.Name, i, k)
		}
	}
	return nil
}

// SameString reports whether a and b are the same string: equal lengths
// and, unless empty, the same address (so equal bytes while neither's
// memory is rewritten). False says nothing of their bytes.
func SameString(a, b string) bool {
	return len(a) == len(b) && (len(a) == 0 || unsafe.StringData(a) == unsafe.StringData(b))
}
