package delta

import (
	"fmt"
	"slices"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// Column names of the window in an operator's output; the table holds them
// as Spark does, in one struct column window<start, end>.
const (
	windowField = "window"
	windowStart = "start"
	windowEnd   = "end"
)

// deltaPrimitive maps a column type to its Delta (Spark) type per the
// protocol's primitive types.
func deltaPrimitive(t stream.Type) (string, error) {
	switch t {
	case stream.Int64:
		return "long", nil
	case stream.Float64:
		return "double", nil
	case stream.String:
		return "string", nil
	case stream.Timestamp:
		return "timestamp", nil
	}
	return "", fmt.Errorf("no Delta type for %s", t)
}

// outLeaf is one output column as the table stores it: the engine column
// and its path in the table schema (["window","start"] or ["miner"]).
type outLeaf struct {
	col  string
	path []string
	typ  stream.Type
	key  bool
}

// outLayout is the table layout of an operator's output schema.
type outLayout struct {
	leaves []outLeaf
	keys   []int // leaf indexes of the MERGE key, in key order
	schema Schema
}

// TableSchema returns the Delta schema of the table that holds rows of out:
// window_start/window_end become the struct window<start, end> (in the place
// of window_start), every other field a top-level column of its Delta type,
// all nullable as Spark writes streaming output.
func TableSchema(out stream.Schema) (Schema, error) {
	l, err := newOutLayout(out)
	if err != nil {
		return Schema{}, err
	}
	return l.schema, nil
}

func newOutLayout(out stream.Schema) (*outLayout, error) {
	l := &outLayout{}
	ws, we := out.Field(KeyWindowStart), out.Field(KeyWindowEnd)
	if (ws == nil) != (we == nil) || ws != nil && (ws.Type != stream.Timestamp || we.Type != stream.Timestamp) {
		return nil, errcode.New(errcode.InvalidArgument, "", "emit both window_start and window_end as timestamps",
			"output schema %s has a partial window", out)
	}
	for _, f := range out.Fields {
		switch f.Name {
		case KeyWindowEnd:
			continue
		case KeyWindowStart:
			l.leaves = append(l.leaves,
				outLeaf{col: KeyWindowStart, path: []string{windowField, windowStart}, typ: stream.Timestamp},
				outLeaf{col: KeyWindowEnd, path: []string{windowField, windowEnd}, typ: stream.Timestamp})
			st := &Schema{Fields: []Field{
				{Name: windowStart, Type: DataType{Primitive: "timestamp"}, Nullable: true},
				{Name: windowEnd, Type: DataType{Primitive: "timestamp"}, Nullable: true}}}
			l.schema.Fields = append(l.schema.Fields, Field{Name: windowField, Type: DataType{Struct: st}, Nullable: true})
			continue
		case windowField:
			return nil, errcode.New(errcode.InvalidArgument, "", "rename the column", "output column %q clashes with the window struct", f.Name)
		}
		p, err := deltaPrimitive(f.Type)
		if err != nil {
			return nil, errcode.Wrap(err, errcode.InvalidArgument, "", "emit int64, float64, string or timestamp columns", "output column %q", f.Name)
		}
		l.leaves = append(l.leaves, outLeaf{col: f.Name, path: []string{f.Name}, typ: f.Type})
		l.schema.Fields = append(l.schema.Fields, Field{Name: f.Name, Type: DataType{Primitive: p}, Nullable: true})
	}
	for _, k := range out.Key {
		i := slices.IndexFunc(l.leaves, func(x outLeaf) bool { return x.col == k })
		if i < 0 {
			return nil, errcode.New(errcode.InvalidArgument, "", "key the output by its own columns", "key column %q is not in the output schema %s", k, out)
		}
		l.leaves[i].key = true
		l.keys = append(l.keys, i)
	}
	return l, nil
}

// isReference reports whether the layout is the reference table's (the
// five columns, keyed by window, source and miner), which the typed sinkRow
// path writes.
func (l *outLayout) isReference() bool {
	if !sameShape(l.schema, SinkSchema()) || len(l.keys) != len(DefaultKeyColumns) {
		return false
	}
	for i, k := range l.keys {
		if l.leaves[k].col != DefaultKeyColumns[i] {
			return false
		}
	}
	return true
}

// predicate renders the MERGE condition the way Spark shows it.
func (l *outLayout) predicate() string {
	var parts string
	for i, k := range l.keys {
		if i > 0 {
			parts += " AND "
		}
		p := l.leaves[k].path
		name := p[0]
		if len(p) == 2 {
			name += "." + p[1]
		}
		parts += "(t." + name + " = s." + name + ")"
	}
	return `["` + parts + `"]`
}
