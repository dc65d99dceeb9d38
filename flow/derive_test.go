package flow

import (
	"testing"

	"github.com/ethstream/ethstream/expr"
	"github.com/ethstream/ethstream/filter"
	"github.com/ethstream/ethstream/stream"
)

// TestDeriveSchemaTypes: a derived column's schema type is its values'
// column type: DECIMAL with its precision and scale (the bare kind named
// no precision, which the Delta sink refused), an untyped NULL as BIGINT,
// an array as ARRAY<T>.
func TestDeriveSchemaTypes(t *testing.T) {
	in := stream.Schema{Fields: []stream.Field{{Name: "x", Type: stream.Int64}}}
	cols := func(name string) (stream.Type, bool) { return stream.Int64, name == "x" }
	var ds []filter.Derived
	for i, e := range []expr.Expr{
		expr.Cast{X: expr.Col{Name: "x"}, To: expr.Decimal(10, 2)},
		expr.Lit{Kind: expr.LitNull},
		expr.Call{Name: "array", Args: []expr.Expr{expr.Col{Name: "x"}}},
	} {
		c, err := expr.Compile(e, cols, expr.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, filter.Derived{Name: string(rune('a' + i)), Expr: c})
	}
	out, err := (&deriveStep{cols: ds}).OutputSchema(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []stream.Type{stream.Int64, stream.DecimalOf(10, 2), stream.Int64, stream.ArrayOf(stream.Int64)}
	for i, f := range out.Fields {
		if f.Type != want[i] {
			t.Errorf("column %s: %v, want %v", f.Name, f.Type, want[i])
		}
	}
}
