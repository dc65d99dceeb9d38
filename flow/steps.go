package flow

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/filter"
	"github.com/ethstream/ethstream/stream"
)

// Column is one output column of Select: an input column, maybe renamed,
// or a derived one (WindowTime).
type Column struct {
	name, as   string
	windowTime bool
}

// Col is the input column name. As a filter operand, compare it with Eq,
// Gt and the other helpers.
func Col(name string) Column { return Column{name: name} }

// WindowTime is Spark's window_time(window): the time of a window, its end
// minus one microsecond, so that a window [12:55, 13:00) falls in the hour
// starting at 12:00. It reads window_end (an aggregation's output) and is
// named window_time unless renamed with As.
func WindowTime() Column { return Column{name: agg.ColWindowEnd, windowTime: true} }

// As renames the column.
func (c Column) As(alias string) Column {
	c.as = alias
	return c
}

func (c Column) outName() string {
	switch {
	case c.as != "":
		return c.as
	case c.windowTime:
		return "window_time"
	}
	return c.name
}

func (c Column) String() string {
	s := c.name
	if c.windowTime {
		s = "window_time(" + c.name + ")"
	}
	if c.as != "" {
		s += " as " + c.as
	}
	return s
}

func (c Column) cmp(op filter.CmpOp, v any) filter.Expr {
	return filter.Cmp{Op: op, L: filter.Col{Name: c.name}, R: lit(v)}
}

// Eq is the filter c = v (v an int, int64, float64, string or bool).
func (c Column) Eq(v any) filter.Expr { return c.cmp(filter.Eq, v) }

// Ne is the filter c <> v.
func (c Column) Ne(v any) filter.Expr { return c.cmp(filter.Ne, v) }

// Lt is the filter c < v.
func (c Column) Lt(v any) filter.Expr { return c.cmp(filter.Lt, v) }

// Le is the filter c <= v.
func (c Column) Le(v any) filter.Expr { return c.cmp(filter.Le, v) }

// Gt is the filter c > v.
func (c Column) Gt(v any) filter.Expr { return c.cmp(filter.Gt, v) }

// Ge is the filter c >= v.
func (c Column) Ge(v any) filter.Expr { return c.cmp(filter.Ge, v) }

// And is the filter a AND b.
func And(a, b filter.Expr) filter.Expr { return filter.And{L: a, R: b} }

// Or is the filter a OR b.
func Or(a, b filter.Expr) filter.Expr { return filter.Or{L: a, R: b} }

// lit is v as a literal; a type without one is a NULL literal, which the
// filter's type check reports.
func lit(v any) filter.Lit {
	switch x := v.(type) {
	case int:
		return filter.Lit{Kind: filter.LitInt, Int: int64(x)}
	case int64:
		return filter.Lit{Kind: filter.LitInt, Int: x}
	case float64:
		return filter.Lit{Kind: filter.LitFloat, Flt: x}
	case string:
		return filter.Lit{Kind: filter.LitString, Str: x}
	case bool:
		return filter.Lit{Kind: filter.LitBool, Bool: x}
	}
	return filter.Lit{Kind: filter.LitNull}
}

// whereStep is Where's stateless step.
type whereStep struct{ pred *filter.Predicate }

var _ stream.Transform = (*whereStep)(nil)

func (w *whereStep) String() string { return "where " + w.pred.String() }

// OutputSchema is in: a filter keeps the columns.
func (w *whereStep) OutputSchema(in stream.Schema) (stream.Schema, error) {
	for _, c := range w.pred.Columns() {
		if in.Field(c) == nil {
			return in, invalid("where reads column %q, which the rows lack: %s", c, in)
		}
	}
	return in, nil
}

// Apply returns the rows the predicate keeps (in itself when it keeps all).
func (w *whereStep) Apply(in *stream.Batch) (*stream.Batch, error) {
	keep, err := w.pred.Keep(in)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, k := range keep {
		if k {
			n++
		}
	}
	if n == in.Len {
		return in, nil
	}
	return in.Filter(keep), nil // stream's kernel: every type's storage, signs included
}

// selectStep is Select's stateless step.
type selectStep struct{ cols []Column }

var _ stream.Transform = (*selectStep)(nil)

func (s *selectStep) String() string {
	t := make([]string, len(s.cols))
	for i, c := range s.cols {
		t[i] = c.String()
	}
	return "select " + strings.Join(t, ", ")
}

// OutputSchema is the selected fields; the key keeps the selected key
// columns, and a window_time of a keyed window_end stands for it.
func (s *selectStep) OutputSchema(in stream.Schema) (stream.Schema, error) {
	var out stream.Schema
	for _, c := range s.cols {
		f := in.Field(c.name)
		if f == nil {
			return out, invalid("select reads column %q, which the rows lack: %s", c.name, in)
		}
		if c.windowTime && f.Type != stream.Timestamp {
			return out, invalid("window_time reads %s, a %v, not a timestamp", c.name, f.Type)
		}
		name := c.outName()
		if out.Field(name) != nil {
			return out, invalid("select names column %q twice", name)
		}
		out.Fields = append(out.Fields, stream.Field{Name: name, Type: f.Type, Nullable: f.Nullable})
		if slices.Contains(in.Key, c.name) {
			out.Key = append(out.Key, name)
		}
	}
	return out, nil
}

// Apply returns in's selected columns (sharing their values) and the
// derived ones.
func (s *selectStep) Apply(in *stream.Batch) (*stream.Batch, error) {
	out := &stream.Batch{Len: in.Len, Signs: in.Signs, Columns: make([]stream.Column, len(s.cols))}
	for i, c := range s.cols {
		src := in.Column(c.name)
		if src == nil {
			return nil, fmt.Errorf("select: no column %q in the rows", c.name)
		}
		col := *src
		col.Name = c.outName()
		if c.windowTime {
			col.Int64s = make([]int64, len(src.Int64s))
			for r, v := range src.Int64s {
				col.Int64s[r] = v - 1
			}
		}
		out.Columns[i] = col
	}
	return out, nil
}
