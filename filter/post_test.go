package filter

import (
	"fmt"
	"testing"

	"github.com/ethstream/ethstream/expr"
	"github.com/ethstream/ethstream/stream"
)

// TestPost: HAVING keeps the groups it holds for, the expression over
// aggregates is computed, the hidden aggregate is dropped; a retraction
// row (its aggregates meaningless: here a zero count a division would
// fail on) passes untouched and unevaluated.
func TestPost(t *testing.T) {
	in := &stream.Batch{Len: 4, Signs: []int8{1, 1, -1, 1}, Columns: []stream.Column{
		{Name: "miner", Type: stream.String, Strings: []string{"a", "b", "c", "d"}},
		{Name: "blocks", Type: stream.Int64, Int64s: []int64{50, 10, 0, 41}},
		{Name: "__agg_0", Type: stream.Int64, Int64s: []int64{5, 1, 0, 0}},
	}}
	types := func(name string) (stream.Type, bool) {
		for _, c := range in.Columns {
			if c.Name == name {
				return c.Type, true
			}
		}
		return 0, false
	}
	having, err := expr.Compile(expr.Cmp{Op: expr.Gt, L: Col{Name: "blocks"}, R: Lit{Kind: LitInt, Int: 40}}, types, expr.Options{})
	if err != nil {
		t.Fatal(err)
	}
	share, err := expr.Compile(expr.Arith{Op: "/", L: Col{Name: "__agg_0"}, R: Col{Name: "blocks"}}, types, expr.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := &Post{Having: having, Columns: []Derived{{Name: "share", Expr: share}}, Drop: []string{"__agg_0"}}
	out, err := p.apply(in)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	for r := 0; r < out.Len; r++ {
		got += fmt.Sprintf("%s %d %d ", out.Columns[0].Strings[r], out.Columns[1].Int64s[r], out.Sign(r))
		if c := out.Columns[2]; c.IsNull(r) {
			got += "NULL;"
		} else {
			got += fmt.Sprintf("%g;", c.Float64s[r])
		}
	}
	if want := "a 50 1 0.1;c 0 -1 NULL;d 41 1 0;"; got != want || len(out.Columns) != 3 {
		t.Fatalf("got %q (%d columns), want %q", got, len(out.Columns), want)
	}
	s := p.Schema(stream.Schema{Fields: []stream.Field{{Name: "miner", Type: stream.String}, {Name: "blocks", Type: stream.Int64}, {Name: "__agg_0", Type: stream.Int64}}, Key: []string{"miner"}})
	if s.String() != "miner string, blocks int64, share float64 null (key: miner)" {
		t.Fatalf("schema %s", s)
	}
}

// TestPostHavingKeepsEveryType: the rows HAVING keeps are taken with every
// column's own storage. A DECIMAL or BOOLEAN aggregate beside a HAVING
// that drops a row panicked (index out of range) when the stage copied
// rows as if every column were Int64, Float64 or String.
func TestPostHavingKeepsEveryType(t *testing.T) {
	dec := stream.DecimalOf(38, 0)
	in := &stream.Batch{Len: 3, Columns: []stream.Column{
		{Name: "miner", Type: stream.String, Strings: []string{"a", "b", "c"}},
		{Name: "n", Type: stream.Int64, Int64s: []int64{50, 10, 41}},
		{Name: "m", Type: dec, Decimals: []stream.Dec128{stream.Dec128Of(7), stream.Dec128Of(8), stream.Dec128Of(9)}},
		{Name: "full", Type: stream.Boolean, Int64s: []int64{1, 0, 1}},
	}}
	types := func(name string) (stream.Type, bool) {
		for _, c := range in.Columns {
			if c.Name == name {
				return c.Type, true
			}
		}
		return 0, false
	}
	having, err := expr.Compile(expr.Cmp{Op: expr.Gt, L: Col{Name: "n"}, R: Lit{Kind: LitInt, Int: 40}}, types, expr.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := (&Post{Having: having}).apply(in)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	for r := 0; r < out.Len; r++ {
		got += fmt.Sprintf("%s %d %v %d;", out.Columns[0].Strings[r], out.Columns[1].Int64s[r], out.Columns[2].Decimals[r], out.Columns[3].Int64s[r])
	}
	want := fmt.Sprintf("a 50 %v 1;c 41 %v 1;", stream.Dec128Of(7), stream.Dec128Of(9))
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
