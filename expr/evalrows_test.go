package expr

import (
	"slices"
	"testing"

	"github.com/ethstream/ethstream/stream"
)

// TestEvalRowsLeavesInputAlone: the rows EvalRows skips are null in its
// result only. A bare column's vector shares the input's validity, so
// marking them in place wrote nulls into the input batch, which the
// operator after the guard (and an unguarded column sharing the same
// input) still reads.
func TestEvalRowsLeavesInputAlone(t *testing.T) {
	b := &stream.Batch{Len: 4, Columns: []stream.Column{{
		Name: "x", Type: stream.Int64, Int64s: []int64{1, 2, 3, 4}, Valid: []bool{true, true, false, true},
	}}}
	c, err := Compile(col("x"), func(name string) (stream.Type, bool) {
		if cl := b.Column(name); cl != nil {
			return cl.Type, true
		}
		return 0, false
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.EvalRows(b, "v", []bool{false, true, true, false})
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{false, true, false, false}; !slices.Equal(got.Valid, want) {
		t.Fatalf("result's validity %v, want %v", got.Valid, want)
	}
	if want := []bool{true, true, false, true}; !slices.Equal(b.Columns[0].Valid, want) {
		t.Fatalf("the input's validity became %v, want it unchanged %v", b.Columns[0].Valid, want)
	}
}
