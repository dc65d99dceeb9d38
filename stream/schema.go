package stream

import (
	"fmt"
	"strings"
)

// Field is one column of a Schema.
type Field struct {
	Name     string
	Type     Type
	Nullable bool
}

// Schema describes the rows an operator emits: its fields in output order
// and the key, the fields that identify a row across batches (the group keys
// and the window of an aggregation; the sink's MERGE keys). An empty Key
// means rows are only ever appended.
type Schema struct {
	Fields []Field
	Key    []string
}

// Field returns the field named name, or nil.
func (s *Schema) Field(name string) *Field {
	for i := range s.Fields {
		if s.Fields[i].Name == name {
			return &s.Fields[i]
		}
	}
	return nil
}

// String renders the schema for errors and plans, e.g.
// "window_start timestamp, miner string, count int64 (key: window_start, miner)".
func (s Schema) String() string {
	var b strings.Builder
	for i, f := range s.Fields {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %v", f.Name, f.Type)
		if f.Nullable {
			b.WriteString(" null")
		}
	}
	if len(s.Key) > 0 {
		b.WriteString(" (key: " + strings.Join(s.Key, ", ") + ")")
	}
	return b.String()
}

// Equal reports whether two schemas have the same fields, types, nullability
// and key, in the same order.
func (s Schema) Equal(o Schema) bool {
	if len(s.Fields) != len(o.Fields) || len(s.Key) != len(o.Key) {
		return false
	}
	for i := range s.Fields {
		if s.Fields[i] != o.Fields[i] {
			return false
		}
	}
	for i := range s.Key {
		if s.Key[i] != o.Key[i] {
			return false
		}
	}
	return true
}
