package filter

import (
	"slices"

	"github.com/ethstream/ethstream/expr"
	"github.com/ethstream/ethstream/stream"
)

// Post is the stage after an aggregation, over its output rows: HAVING
// keeps the rows for which it is TRUE, Columns are computed from the
// row's keys and aggregates and appended, and Drop removes the columns
// only they read (the hidden aggregates). A retraction row (Sign -1)
// carries only its key: it is kept, and its computed columns are null.
// Every output row is one whole group, so the stage is stateless and
// deterministic, and a batch's output is final before the sink sees it.
type Post struct {
	Having  *expr.Compiled // nil: every row
	Columns []Derived
	Drop    []string
}

// Schema is the output schema after the stage: Drop removed, Columns
// appended (nullable).
func (p *Post) Schema(in stream.Schema) stream.Schema {
	out := stream.Schema{Key: in.Key}
	for _, f := range in.Fields {
		if !slices.Contains(p.Drop, f.Name) {
			out.Fields = append(out.Fields, f)
		}
	}
	for _, c := range p.Columns {
		out.Fields = append(out.Fields, stream.Field{Name: c.Name, Type: c.Expr.Type().Stream(), Nullable: true})
	}
	return out
}

func (p *Post) apply(in *stream.Batch) (*stream.Batch, error) {
	rows := make([]int, 0, in.Len)
	var keep []bool
	if p.Having != nil {
		var err error
		if keep, err = p.Having.EvalTruth(in, retractionsFalse(in)); err != nil {
			return nil, err
		}
	}
	for r := 0; r < in.Len; r++ {
		if in.Sign(r) < 0 || keep == nil || keep[r] {
			rows = append(rows, r)
		}
	}
	b := in
	if len(rows) != in.Len {
		b = in.Take(rows) // every type's storage (stream's kernel)
	}
	use := make([]bool, b.Len)
	for r := range use {
		use[r] = b.Sign(r) > 0
	}
	out := &stream.Batch{Len: b.Len, Signs: b.Signs}
	for _, c := range b.Columns {
		if !slices.Contains(p.Drop, c.Name) {
			out.Columns = append(out.Columns, c)
		}
	}
	for _, d := range p.Columns {
		c, err := d.Expr.EvalRows(b, d.Name, use)
		if err != nil {
			return nil, err
		}
		out.Columns = append(out.Columns, c)
	}
	return out, nil
}

// retractionsFalse marks the insertion rows (nil when every row is one).
func retractionsFalse(b *stream.Batch) []bool {
	if b.Signs == nil {
		return nil
	}
	use := make([]bool, b.Len)
	for r := range use {
		use[r] = b.Signs[r] > 0
	}
	return use
}
