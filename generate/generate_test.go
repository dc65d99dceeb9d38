package generate

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ethstream/ethstream/stream"
)

// TestExplodeAgainstNaive: explode, explode_outer, posexplode and
// posexplode_outer of random arrays (null arrays, empty arrays, null
// elements, retracted rows) against a row-at-a-time model written from
// Spark's documentation: one output row per element with the row's other
// columns and sign; a null or empty array gives no row, or, outer, one
// row with null element and position.
func TestExplodeAgainstNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for iter := 0; iter < 200; iter++ {
		n := r.IntN(7)
		type row struct {
			id   int64
			arr  []*string // nil with null: a null array
			null bool
			sign int8
		}
		rows := make([]row, n)
		arr := stream.MakeColumn("a", stream.ArrayOf(stream.String), 0, n)
		id := stream.MakeColumn("id", stream.Int64, 0, n)
		valid, evalid := make([]bool, n), []bool{}
		var signs []int8
		for k := range rows {
			rows[k] = row{id: int64(k), sign: 1, null: r.IntN(5) == 0}
			if r.IntN(4) == 0 {
				rows[k].sign = -1
			}
			valid[k] = !rows[k].null
			if !rows[k].null {
				for e := range r.IntN(4) {
					s := fmt.Sprintf("r%de%d", k, e)
					p := &s
					if r.IntN(4) == 0 {
						p = nil
					}
					rows[k].arr = append(rows[k].arr, p)
					arr.Elems.Strings = append(arr.Elems.Strings, s)
					evalid = append(evalid, p != nil)
				}
			}
			arr.Offsets = append(arr.Offsets, int32(len(arr.Elems.Strings)))
			id.Int64s = append(id.Int64s, int64(k))
			signs = append(signs, rows[k].sign)
		}
		arr.Valid, arr.Elems.Valid = valid, evalid
		in := &stream.Batch{Len: n, Columns: []stream.Column{id, arr}, Signs: signs}
		if err := in.Validate(); err != nil {
			t.Fatal(err)
		}
		for _, g := range []Explode{{Column: "a", As: "t"}, {Column: "a", As: "t", Outer: true}, {Column: "a", As: "t", PosAs: "p"}, {Column: "a", As: "t", PosAs: "p", Outer: true}} {
			var want []string
			for _, x := range rows {
				if len(x.arr) == 0 {
					if g.Outer {
						want = append(want, fmt.Sprintf("%d id=%d p=<nil> t=<nil>", x.sign, x.id))
					}
					continue
				}
				for k, e := range x.arr {
					v := "<nil>"
					if e != nil {
						v = *e
					}
					want = append(want, fmt.Sprintf("%d id=%d p=%d t=%s", x.sign, x.id, k, v))
				}
			}
			out, err := g.Apply(in)
			if err != nil {
				t.Fatal(err)
			}
			if err := out.Validate(); err != nil {
				t.Fatal(err)
			}
			s, err := g.OutputSchema(stream.Schema{Fields: []stream.Field{{Name: "id", Type: stream.Int64}, {Name: "a", Type: stream.ArrayOf(stream.String), Nullable: true}}})
			if err != nil || len(s.Fields) != len(out.Columns) {
				t.Fatalf("schema %v (%v), %d columns", s, err, len(out.Columns))
			}
			var got []string
			tc, pc := out.Column("t"), out.Column("p")
			for i := range out.Len {
				v, p := "<nil>", "<nil>"
				if !tc.IsNull(i) {
					v = tc.Strings[i]
				}
				switch {
				case pc == nil:
					p = fmt.Sprint(got2pos(want, len(got)))
				case !pc.IsNull(i):
					p = fmt.Sprint(pc.Int64s[i])
				}
				got = append(got, fmt.Sprintf("%d id=%d p=%s t=%s", out.Sign(i), out.Column("id").Int64s[i], p, v))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s over %d rows:\n got %q\nwant %q", g.String(), n, got, want)
			}
		}
	}
}

// got2pos reads the expected position back from the model's row (explode
// has no position column; the rows are compared without it).
func got2pos(want []string, i int) string {
	if i >= len(want) {
		return "?"
	}
	var sign, id int
	var p, v string
	fmt.Sscanf(want[i], "%d id=%d p=%s t=%s", &sign, &id, &p, &v)
	return p
}
