package flow

import (
	"strings"

	"github.com/ethstream/ethstream/filter"
	"github.com/ethstream/ethstream/stream"
)

// Filter keeps the rows for which the compiled predicate p is TRUE: Where
// for a predicate compiled elsewhere (the SQL compiler's, under its
// settings).
func (q *Query) Filter(p *filter.Predicate) *Query {
	if p == nil {
		return q.fail(invalid("filter with no predicate"))
	}
	return q.Transform(&whereStep{pred: p})
}

// Derive appends the columns computed from each row, in order (a SELECT
// expression, window_time of a window, a group expression). A derived
// column's error (ARITHMETIC_OVERFLOW, DIVIDE_BY_ZERO, ...) fails the batch.
func (q *Query) Derive(cols ...filter.Derived) *Query {
	if len(cols) == 0 {
		return q.fail(invalid("derive of no column"))
	}
	return q.Transform(&deriveStep{cols: cols})
}

// deriveStep is Derive's stateless step.
type deriveStep struct{ cols []filter.Derived }

var _ stream.Transform = (*deriveStep)(nil)

func (d *deriveStep) String() string {
	parts := make([]string, len(d.cols))
	for i, c := range d.cols {
		parts[i] = c.Expr.String() + " as " + c.Name
	}
	return "derive " + strings.Join(parts, ", ")
}

// OutputSchema is in with the derived columns appended (nullable).
func (d *deriveStep) OutputSchema(in stream.Schema) (stream.Schema, error) {
	out := stream.Schema{Key: in.Key, Fields: append([]stream.Field(nil), in.Fields...)}
	for _, c := range d.cols {
		for _, col := range c.Expr.Columns() {
			if in.Field(col) == nil {
				return in, invalid("derive reads column %q, which the rows lack: %s", col, in)
			}
		}
		if out.Field(c.Name) != nil {
			return in, invalid("derive names column %q, which the rows have", c.Name)
		}
		out.Fields = append(out.Fields, stream.Field{Name: c.Name, Type: c.Expr.Type().Stream(), Nullable: true})
	}
	return out, nil
}

// Apply returns in with the derived columns appended.
func (d *deriveStep) Apply(in *stream.Batch) (*stream.Batch, error) {
	out := &stream.Batch{Len: in.Len, Signs: in.Signs, Columns: append(make([]stream.Column, 0, len(in.Columns)+len(d.cols)), in.Columns...)}
	for _, c := range d.cols {
		col, err := c.Expr.Eval(out, c.Name)
		if err != nil {
			return nil, err
		}
		out.Columns = append(out.Columns, col)
	}
	return out, nil
}
