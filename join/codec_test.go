package join

import (
	"strings"
	"testing"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// TestRowOfEveryStorage: a side's row keeps FLOAT, BINARY, BOOLEAN and
// INT columns by their storage (float64, string, int64) through the
// state value and back, and a BINARY join key is keyed as a string. The
// codec switched on the four original types: a FLOAT or BINARY column
// read Int64s and panicked.
func TestRowOfEveryStorage(t *testing.T) {
	fields := []stream.Field{{Name: "f", Type: stream.Float32}, {Name: "b", Type: stream.Binary}, {Name: "ok", Type: stream.Boolean}, {Name: "i", Type: stream.Int32}}
	cols := []*stream.Column{
		{Name: "f", Type: stream.Float32, Float64s: []float64{1.5, 2, 0}},
		{Name: "b", Type: stream.Binary, Strings: []string{"ab", "cd", ""}},
		{Name: "ok", Type: stream.Boolean, Int64s: []int64{1, 0, 0}},
		{Name: "i", Type: stream.Int32, Int64s: []int64{7, -3, 0}, Valid: []bool{true, false, true}},
	}
	// Row 2: an empty string and zeros, which are not nulls.
	for i := range 3 {
		r := rowAt(cols, i)
		for _, val := range [][]byte{encodeRow(nil, fields, r, i == 1), encodeRowV1(fields, r, i == 1)} {
			got, matched, err := decodeRow(fields, fastNames(fields), val)
			if err != nil {
				t.Fatal(err)
			}
			if !sameRow(got, r) || matched != (i == 1) {
				t.Fatalf("row %d: got %v (matched %v), want %v", i, boxed(got), matched, boxed(r))
			}
		}
		if key, null := encodeJoinKey(nil, r, []int{1}, []stream.Type{stream.Binary}); null || len(key) == 0 {
			t.Fatalf("row %d: binary key %q (null %v)", i, key, null)
		}
	}
}

// TestDecimalColumnRefused: a side with a DECIMAL column is refused when
// the plan is built, naming the column, not at its first row.
// TestMatchedColumnRefused: a side column named "matched" is refused when
// the plan is built: its stored value would be read back as the row's
// matched flag (a ParseInt error at the first eviction scan before).
func TestMatchedColumnRefused(t *testing.T) {
	side := func(alias string) Side {
		return Side{Alias: alias, Keys: []string{"k"}, Schema: stream.Schema{Fields: []stream.Field{
			{Name: "k", Type: stream.String}, {Name: "matched", Type: stream.Int64}}}}
	}
	_, err := newPlan(Spec{Type: Inner, Left: side("a"), Right: side("b")})
	if errcode.Code(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), "a.matched") {
		t.Fatalf("got %v, want %s naming a.matched", err, errcode.InvalidArgument)
	}
}

func TestDecimalColumnRefused(t *testing.T) {
	side := func(alias string) Side {
		return Side{Alias: alias, Keys: []string{"k"}, Schema: stream.Schema{Fields: []stream.Field{
			{Name: "k", Type: stream.String}, {Name: "amount", Type: stream.DecimalOf(10, 2)}}}}
	}
	_, err := newPlan(Spec{Type: Inner, Left: side("a"), Right: side("b")})
	if errcode.Code(err) != errcode.InvalidArgument {
		t.Fatalf("got %v, want %s", err, errcode.InvalidArgument)
	}
}
