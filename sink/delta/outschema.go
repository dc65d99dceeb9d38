package delta

import (
	"fmt"
	"slices"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
)

// Column names of the window in an operator's output; the table holds them
// as Spark does, in one struct column window<start, end>.
const (
	windowField = "window"
	windowStart = "start"
	windowEnd   = "end"
)

// outLeaf is one output column as the table stores it: the engine column
// and its path in the table schema (["window","start"] or ["miner"]).
type outLeaf struct {
	col  string
	path []string
	typ  stream.Type
	key  bool
	// nullable: the output may hold nulls here; the MERGE condition shows
	// such a key column as t.c <=> s.c (it matches null-safely either way).
	nullable bool
}

// outLayout is the table layout of an operator's output schema.
type outLayout struct {
	leaves []outLeaf
	keys   []int // leaf indexes of the MERGE key, in key order
	schema Schema
	pq     *parquet.Schema // of its data files (datafile.go)
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
				outLeaf{col: KeyWindowStart, path: []string{windowField, windowStart}, typ: stream.Timestamp, nullable: ws.Nullable},
				outLeaf{col: KeyWindowEnd, path: []string{windowField, windowEnd}, typ: stream.Timestamp, nullable: we.Nullable})
			st := &Schema{Fields: []Field{
				{Name: windowStart, Type: DataType{Primitive: "timestamp"}, Nullable: true},
				{Name: windowEnd, Type: DataType{Primitive: "timestamp"}, Nullable: true}}}
			l.schema.Fields = append(l.schema.Fields, Field{Name: windowField, Type: DataType{Struct: st}, Nullable: true})
			continue
		case windowField:
			return nil, errcode.New(errcode.InvalidArgument, "", "rename the column", "output column %q clashes with the window struct", f.Name)
		}
		if f.Type.Kind() == stream.Array {
			dt, err := arrayDataType(f.Type)
			if err != nil {
				return nil, errcode.Wrap(err, errcode.InvalidArgument, "", "emit arrays of string, bigint, int, double or boolean (docs/contracts.md, Arrays)", "output column %q", f.Name)
			}
			l.leaves = append(l.leaves, outLeaf{col: f.Name, path: []string{f.Name}, typ: f.Type, nullable: f.Nullable})
			l.schema.Fields = append(l.schema.Fields, Field{Name: f.Name, Type: dt, Nullable: true})
			continue
		}
		p, err := deltaPrimitive(f.Type)
		if err != nil {
			return nil, errcode.Wrap(err, errcode.InvalidArgument, "", "emit columns of Spark's scalar types (arrays, maps and structs are not written yet)", "output column %q", f.Name)
		}
		l.leaves = append(l.leaves, outLeaf{col: f.Name, path: []string{f.Name}, typ: f.Type, nullable: f.Nullable})
		l.schema.Fields = append(l.schema.Fields, Field{Name: f.Name, Type: DataType{Primitive: p}, Nullable: true})
	}
	if err := l.setKey(out.Key); err != nil {
		return nil, errcode.Wrap(err, errcode.InvalidArgument, "", "key the output by its own columns", "output schema %s", out)
	}
	l.pq = parquetSchemaOf(l)
	return l, nil
}

// setKey makes cols (engine column names) the MERGE key, in that order.
func (l *outLayout) setKey(cols []string) error {
	for i := range l.leaves {
		l.leaves[i].key = false
	}
	l.keys = l.keys[:0]
	for _, k := range cols {
		i := slices.IndexFunc(l.leaves, func(x outLeaf) bool { return x.col == k })
		if i < 0 {
			return fmt.Errorf("key column %q is not an output column", k)
		}
		if l.leaves[i].key {
			return fmt.Errorf("key column %q named twice", k)
		}
		l.leaves[i].key = true
		l.keys = append(l.keys, i)
	}
	return nil
}

// tableLayout is the layout of an existing table's schema, for the code
// that has no output schema (OPTIMIZE, Scan, Show): the window struct and
// the columns of the four Delta types the sink writes. Its key is every
// leaf in table order, the order OPTIMIZE sorts by (the output's key comes
// first in its columns, so a table sorted this way is sorted by that key).
// Any other schema (other types, a column not nullable) is not one of
// ours: an error.
func tableLayout(s Schema) (*outLayout, error) {
	l := &outLayout{schema: s}
	for _, f := range s.Fields {
		if isSinkWindow(f) {
			l.leaves = append(l.leaves,
				outLeaf{col: KeyWindowStart, path: []string{windowField, windowStart}, typ: stream.Timestamp, nullable: true},
				outLeaf{col: KeyWindowEnd, path: []string{windowField, windowEnd}, typ: stream.Timestamp, nullable: true})
			continue
		}
		if !f.Nullable {
			return nil, fmt.Errorf("column %q is not nullable; the sink writes every column nullable", f.Name)
		}
		t, ok := streamOfDelta(f.Type.Primitive)
		if f.Type.Element != nil {
			t, ok = arrayOfDelta(f.Type)
		}
		if !ok {
			return nil, fmt.Errorf("column %q has type %s, which ethstream does not write", f.Name, f.Type.String())
		}
		if f.Name == KeyWindowStart || f.Name == KeyWindowEnd {
			return nil, fmt.Errorf("column %q clashes with the window struct's flat name", f.Name)
		}
		l.leaves = append(l.leaves, outLeaf{col: f.Name, path: []string{f.Name}, typ: t, nullable: true})
	}
	if len(l.leaves) == 0 {
		return nil, fmt.Errorf("table has no columns")
	}
	for i := range l.leaves {
		l.leaves[i].key = true
		l.keys = append(l.keys, i)
	}
	l.pq = parquetSchemaOf(l)
	return l, nil
}

// predicate renders the MERGE condition the way Spark shows it. Keys match
// null-safely (Spark's <=>); a column the output declares non-nullable is
// shown with =, which is the same there.
func (l *outLayout) predicate() string {
	var parts string
	for i, k := range l.keys {
		if i > 0 {
			parts += " AND "
		}
		lf := l.leaves[k]
		name := lf.path[0]
		if len(lf.path) == 2 {
			name += "." + lf.path[1]
		}
		op := " = "
		if lf.nullable {
			op = " <=> "
		}
		parts += "(t." + name + op + "s." + name + ")"
	}
	return `["` + parts + `"]`
}
