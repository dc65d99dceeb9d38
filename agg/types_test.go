package agg

import (
	"context"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/stream"
)

// typedVal renders row i of c for comparison ("null" for a null), by type.
func typedVal(c *stream.Column, i int) string {
	if c.IsNull(i) {
		return "null"
	}
	switch c.Type.Storage() {
	case stream.Decimal:
		return c.Decimals[i].Text(c.Type.Scale())
	case stream.Float64:
		return strconv.FormatFloat(c.Float64s[i], 'g', -1, 64)
	case stream.String:
		return strconv.Quote(c.Strings[i])
	}
	return strconv.FormatInt(c.Int64s[i], 10)
}

// genKey draws a group value of type t from a small domain (so groups
// repeat), null one time in eight.
func genKey(rng *rand.Rand, c *stream.Column) {
	if rng.IntN(8) == 0 {
		appendNull(c)
		return
	}
	k := rng.IntN(5)
	switch c.Type.Storage() {
	case stream.Decimal:
		c.Decimals = append(c.Decimals, stream.Dec128Of(int64(k*k*1000-3000)))
	case stream.Float64:
		c.Float64s = append(c.Float64s, []float64{math.Copysign(0, -1), 0, 1.5, math.NaN(), -2.25}[k])
	case stream.String:
		c.Strings = append(c.Strings, []string{"a", "b", "\x00z", "", "é"}[k])
	default:
		if c.Type == stream.Boolean {
			k %= 2
		}
		c.Int64s = append(c.Int64s, int64(k-2))
	}
	appendValid(c, true)
}

func appendNull(c *stream.Column) {
	switch c.Type.Storage() {
	case stream.Decimal:
		c.Decimals = append(c.Decimals, stream.Dec128{})
	case stream.Float64:
		c.Float64s = append(c.Float64s, 0)
	case stream.String:
		c.Strings = append(c.Strings, "")
	default:
		c.Int64s = append(c.Int64s, 0)
	}
	appendValid(c, false)
}

func appendValid(c *stream.Column, ok bool) {
	if !ok && c.Valid == nil {
		c.Valid = make([]bool, c.Len()-1, c.Len())
		for i := range c.Valid {
			c.Valid[i] = true
		}
	}
	if c.Valid != nil {
		c.Valid = append(c.Valid, ok)
	}
}

// TestTypedGroupsOracle groups by a key of every scalar type and takes
// count, sum, min, max and avg of a DECIMAL(30,3) (values near 10^26,
// beyond any int64) and min/max/sum of INT, FLOAT, DATE and BOOLEAN
// columns, over three batches with a restart (the state codec reads back
// every type), against an independent recount in big.Rat.
func TestTypedGroupsOracle(t *testing.T) {
	keyTypes := []stream.Type{stream.Boolean, stream.Int8, stream.Int16, stream.Int32, stream.Int64, stream.Float32,
		stream.Float64, stream.DecimalOf(10, 2), stream.String, stream.Binary, stream.Date, stream.Timestamp, stream.TimestampNTZ}
	amtT := stream.DecimalOf(30, 3)
	for _, kt := range keyTypes {
		t.Run(kt.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(kt), 7))
			spec := Spec{GroupBy: []string{"k"}, Mode: Complete,
				ColumnTypes: map[string]stream.Type{"k": kt, "amt": amtT, "n": stream.Int32, "x": stream.Float32, "d": stream.Date, "b": stream.Boolean},
				Aggregates: []Aggregate{{Kind: Count}, {Kind: Sum, Column: "amt"}, {Kind: Min, Column: "amt"}, {Kind: Max, Column: "amt"},
					{Kind: Avg, Column: "amt"}, {Kind: Sum, Column: "n"}, {Kind: Min, Column: "x"}, {Kind: Sum, Column: "x"},
					{Kind: Max, Column: "d"}, {Kind: Min, Column: "b"}, {Kind: Count, Column: "amt"}}}
			h := newHarness(t, spec, vfs.NewMem(), 2)
			var all []*stream.Batch
			var out *stream.Batch
			for id := range int64(3) {
				b := &stream.Batch{Columns: []stream.Column{{Name: "k", Type: kt}, {Name: "amt", Type: amtT},
					{Name: "n", Type: stream.Int32}, {Name: "x", Type: stream.Float32}, {Name: "d", Type: stream.Date}, {Name: "b", Type: stream.Boolean}}}
				for range 200 {
					genKey(rng, &b.Columns[0])
					if rng.IntN(6) == 0 {
						appendNull(&b.Columns[1])
					} else {
						v, _ := stream.Dec128FromBig(new(big.Int).Sub(new(big.Int).Exp(big.NewInt(10), big.NewInt(26), nil), big.NewInt(rng.Int64N(1e12))))
						if rng.IntN(2) == 0 {
							v = v.Neg()
						}
						b.Columns[1].Decimals = append(b.Columns[1].Decimals, v)
						appendValid(&b.Columns[1], true)
					}
					b.Columns[2].Int64s = append(b.Columns[2].Int64s, rng.Int64N(1<<31)-1<<30)
					b.Columns[3].Float64s = append(b.Columns[3].Float64s, float64(float32(rng.NormFloat64())))
					b.Columns[4].Int64s = append(b.Columns[4].Int64s, rng.Int64N(40000)-10000)
					b.Columns[5].Int64s = append(b.Columns[5].Int64s, rng.Int64N(2))
					b.Len++
				}
				if err := b.Validate(); err != nil {
					t.Fatal(err)
				}
				all = append(all, b)
				if err := h.op.Process(context.Background(), id, 0, b); err != nil {
					t.Fatal(err)
				}
				var err error
				if out, _, err = h.op.Finish(context.Background(), id, 0); err != nil {
					t.Fatal(err)
				}
				if err := h.op.Commit(context.Background(), id); err != nil {
					t.Fatal(err)
				}
				h.committed = id
				if id == 1 {
					h.restart(true)
				}
			}
			got := map[string][]string{}
			for i := range out.Len {
				var vals []string
				for c := 1; c < len(out.Columns); c++ {
					vals = append(vals, typedVal(&out.Columns[c], i))
				}
				got[typedVal(&out.Columns[0], i)] = vals
			}
			want := typedOracle(all, amtT)
			if len(got) != len(want) {
				t.Fatalf("%d groups, want %d:\n%v\n%v", len(got), len(want), got, want)
			}
			for k, w := range want {
				if !slices.Equal(got[k], w) {
					t.Errorf("group %s: got %v\nwant %v", k, got[k], w)
				}
			}
			if out.Columns[0].Type != kt || out.Columns[1].Type != stream.Int64 || out.Columns[2].Type != stream.DecimalOf(38, 3) ||
				out.Columns[5].Type != stream.DecimalOf(34, 7) || out.Columns[6].Type != stream.Int64 || out.Columns[7].Type != stream.Float32 ||
				out.Columns[8].Type != stream.Float64 || out.Columns[9].Type != stream.Date || out.Columns[10].Type != stream.Boolean {
				t.Fatalf("output schema %v", h.op.OutputSchema())
			}
		})
	}
}

// typedOracle recounts TestTypedGroupsOracle's aggregates row by row.
func typedOracle(batches []*stream.Batch, amtT stream.Type) map[string][]string {
	type acc struct {
		rows, nAmt int64
		sum        *big.Int
		lo, hi     *big.Int
		sumN       int64
		minX, sumX float64
		maxD, minB int64
		nX, nD, nB int64
	}
	groups := map[string]*acc{}
	for _, b := range batches {
		for i := range b.Len {
			k := typedVal(&b.Columns[0], i)
			switch k { // Spark groups -0.0 with 0.0
			case "-0":
				k = "0"
			}
			a := groups[k]
			if a == nil {
				a = &acc{sum: new(big.Int)}
				groups[k] = a
			}
			a.rows++
			if !b.Columns[1].IsNull(i) {
				v := b.Columns[1].Decimals[i].Big()
				a.sum.Add(a.sum, v)
				if a.lo == nil || v.Cmp(a.lo) < 0 {
					a.lo = v
				}
				if a.hi == nil || v.Cmp(a.hi) > 0 {
					a.hi = v
				}
				a.nAmt++
			}
			a.sumN += b.Columns[2].Int64s[i]
			x := b.Columns[3].Float64s[i]
			if a.nX == 0 || x < a.minX {
				a.minX = x
			}
			a.sumX += x
			a.nX++
			if d := b.Columns[4].Int64s[i]; a.nD == 0 || d > a.maxD {
				a.maxD = d
			}
			a.nD++
			if bb := b.Columns[5].Int64s[i]; a.nB == 0 || bb < a.minB {
				a.minB = bb
			}
			a.nB++
		}
	}
	dec := func(v *big.Int, s int) string {
		if v == nil {
			return "null"
		}
		d, _ := stream.Dec128FromBig(v)
		return d.Text(s)
	}
	out := map[string][]string{}
	for k, a := range groups {
		avg := "null"
		if a.nAmt > 0 {
			d, _ := stream.DecimalOfRat(new(big.Rat).SetFrac(a.sum, big.NewInt(a.nAmt*1000)), 38, 7) // sum is in thousandths
			avg = d.Text(7)
		}
		sum := "null"
		if a.nAmt > 0 {
			sum = dec(a.sum, 3)
		}
		out[k] = []string{strconv.FormatInt(a.rows, 10), sum, dec(a.lo, 3), dec(a.hi, 3), avg,
			strconv.FormatInt(a.sumN, 10), strconv.FormatFloat(a.minX, 'g', -1, 64), strconv.FormatFloat(a.sumX, 'g', -1, 64),
			strconv.FormatInt(a.maxD, 10), strconv.FormatInt(a.minB, 10), strconv.FormatInt(a.nAmt, 10)}
	}
	return out
}
