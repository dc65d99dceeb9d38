package stream

import "fmt"

// Type is the logical type of a Column.
type Type uint8

// Column types. Values are never renumbered.
const (
	Int64     Type = 1 // Int64s
	Float64   Type = 2 // Float64s
	String    Type = 3 // Strings
	Timestamp Type = 4 // Int64s, microseconds since the Unix epoch, UTC
	// Boolean is Int64s, 1 for true and 0 for false: held as a long, every
	// per-type copy of a column carries it unchanged.
	Boolean Type = 5
	Int32   Type = 6 // Int64s, each within int32 (Spark's INT)
	Date    Type = 7 // Int64s, days since the Unix epoch
	// Decimal is Spark's DECIMAL(p, s), exact to 38 digits. Only
	// expressions (package expr) hold it so far; no Column carries it.
	Decimal Type = 8
)

func (t Type) String() string {
	switch t {
	case Int64:
		return "int64"
	case Float64:
		return "float64"
	case String:
		return "string"
	case Timestamp:
		return "timestamp"
	case Boolean:
		return "boolean"
	case Int32:
		return "int"
	case Date:
		return "date"
	case Decimal:
		return "decimal"
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// Column is one typed column of a Batch. Exactly one value slice is used,
// chosen by Type, and it has the batch's length. Valid is nil when every
// value is present; otherwise Valid[i] is false for a null at row i.
type Column struct {
	Name     string
	Type     Type
	Int64s   []int64 // Int64, Timestamp, Boolean, Int32 and Date
	Float64s []float64
	Strings  []string
	Valid    []bool
}

// Len returns the number of values in the column.
func (c *Column) Len() int {
	switch c.Type {
	case Float64:
		return len(c.Float64s)
	case String:
		return len(c.Strings)
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
