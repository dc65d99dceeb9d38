// Package generate holds Spark's generators over arrays: explode,
// explode_outer, posexplode and posexplode_outer, each a stateless step
// (stream.Transform) that turns every row into one row per element of
// its array column (Spark's GenerateExec). The rows keep their columns,
// and their sign (a retracted row's elements are retracted).
package generate

import (
	"fmt"

	"github.com/ethstream/ethstream/stream"
)

// Explode is one generator: the rows of the array column Column, one per
// element, with the element as column As and, with PosAs set, its
// 0-based position as an INT column PosAs. Outer keeps a row whose array
// is null or empty, once, with null element and position (Spark's
// explode_outer); without it such a row yields nothing. It is immutable
// and safe for concurrent use.
type Explode struct {
	Column string
	As     string
	PosAs  string // "": no position column (explode)
	Outer  bool
}

var _ stream.Transform = (*Explode)(nil)

// Name is the generator's SQL name.
func (e *Explode) Name() string {
	n := "explode"
	if e.PosAs != "" {
		n = "posexplode"
	}
	if e.Outer {
		n += "_outer"
	}
	return n
}

func (e *Explode) String() string {
	out := e.Name() + "(" + e.Column + ") as "
	if e.PosAs != "" {
		out += "(" + e.PosAs + ", " + e.As + ")"
	} else {
		out += e.As
	}
	return out
}

// OutputSchema is in with the position (INT) and element columns
// appended; the array column must be in in.
func (e *Explode) OutputSchema(in stream.Schema) (stream.Schema, error) {
	f := in.Field(e.Column)
	if f == nil || f.Type.Kind() != stream.Array {
		return in, fmt.Errorf("%s reads the array column %q, which the rows lack: %s", e.Name(), e.Column, in)
	}
	out := stream.Schema{Fields: append([]stream.Field(nil), in.Fields...)}
	for _, name := range []string{e.PosAs, e.As} {
		if name != "" && out.Field(name) != nil {
			return in, fmt.Errorf("%s names column %q, which the rows have", e.Name(), name)
		}
	}
	if e.PosAs != "" {
		out.Fields = append(out.Fields, stream.Field{Name: e.PosAs, Type: stream.Int32, Nullable: e.Outer})
	}
	out.Fields = append(out.Fields, stream.Field{Name: e.As, Type: f.Type.Elem(), Nullable: true})
	return out, nil
}

// Apply returns one row per element of each row's array.
func (e *Explode) Apply(in *stream.Batch) (*stream.Batch, error) {
	c := in.Column(e.Column)
	if c == nil || c.Type.Kind() != stream.Array {
		return nil, fmt.Errorf("%s: no array column %q in the rows", e.Name(), e.Column)
	}
	var rows, elems []int // elems[k] is -1 for an outer row's null
	for r := 0; r < in.Len; r++ {
		lo, hi := 0, 0
		if !c.IsNull(r) {
			lo, hi = int(c.Offsets[r]), int(c.Offsets[r+1])
		}
		if lo == hi {
			if e.Outer {
				rows, elems = append(rows, r), append(elems, -1)
			}
			continue
		}
		for x := lo; x < hi; x++ {
			rows, elems = append(rows, r), append(elems, x)
		}
	}
	out := in.Take(rows)
	if e.PosAs != "" {
		pos := stream.MakeColumn(e.PosAs, stream.Int32, len(rows), len(rows))
		for k, x := range elems {
			if x < 0 {
				if pos.Valid == nil {
					pos.Valid = make([]bool, len(rows))
					for i := range pos.Valid {
						pos.Valid[i] = true
					}
				}
				pos.Valid[k] = false
				continue
			}
			pos.Int64s[k] = int64(x - int(c.Offsets[rows[k]]))
		}
		out.Columns = append(out.Columns, pos)
	}
	el := stream.MakeColumn(e.As, c.Type.Elem(), 0, len(rows))
	null := stream.MakeColumn(e.As, c.Type.Elem(), 1, 1)
	null.Valid = []bool{false}
	for _, x := range elems {
		if x < 0 {
			el.Append(&null, 0)
			continue
		}
		el.Append(c.Elems, x)
	}
	out.Columns = append(out.Columns, el)
	return out, nil
}
