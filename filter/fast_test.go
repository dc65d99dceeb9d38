package filter

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ethstream/ethstream/stream"
)

// TestFastMatchesEval checks the column-at-a-time path against the row
// evaluator (the oracle) over random columns with nulls and extremes
// (MinInt64, MaxInt64, NaN, ±0.0, ±Inf), every operator, the literal on
// either side, and ANDs of up to four comparisons.
func TestFastMatchesEval(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 3))
	ints := []int64{math.MinInt64, math.MinInt64 + 1, -1, 0, 1, 150, 151, math.MaxInt64 - 1, math.MaxInt64}
	flts := []float64{math.NaN(), math.Inf(-1), -1e300, -1.5, math.Copysign(0, -1), 0, 1.5, 150, 1e300, math.Inf(1), -math.NaN()}
	ops := []CmpOp{Eq, Ne, Lt, Le, Gt, Ge}
	for iter := range 3000 {
		n := 1 + rng.IntN(70)
		col := func(name string, typ stream.Type) stream.Column {
			c := stream.Column{Name: name, Type: typ}
			if typ == stream.Float64 {
				c.Float64s = make([]float64, n)
			} else {
				c.Int64s = make([]int64, n)
			}
			if rng.IntN(2) == 0 {
				c.Valid = make([]bool, n)
			}
			for r := range n {
				if typ == stream.Float64 {
					c.Float64s[r] = flts[rng.IntN(len(flts))]
				} else {
					c.Int64s[r] = ints[rng.IntN(len(ints))]
				}
				if c.Valid != nil {
					c.Valid[r] = rng.IntN(3) != 0
				}
			}
			return c
		}
		b := &stream.Batch{Len: n, Columns: []stream.Column{col("n", stream.Int64), col("ts", stream.Timestamp), col("fee", stream.Float64)}}
		cmpOne := func() Expr {
			var c string
			var l Lit
			switch rng.IntN(4) {
			case 0:
				c, l = "n", num(ints[rng.IntN(len(ints))])
			case 1: // BIGINT against a double compares as doubles
				c, l = "n", Lit{Kind: LitFloat, Flt: flts[rng.IntN(len(flts))]}
			case 2:
				c, l = "fee", Lit{Kind: LitFloat, Flt: flts[rng.IntN(len(flts))]}
				if rng.IntN(3) == 0 {
					c, l = "fee", num(ints[rng.IntN(len(ints))])
				}
			default:
				c, l = "ts", str([]string{"1970-01-01", "2024-01-01 00:00:00", "0001-01-01"}[rng.IntN(3)])
			}
			op := ops[rng.IntN(len(ops))]
			if rng.IntN(2) == 0 {
				return cmp(op, l, Col{Name: c})
			}
			return cmp(op, Col{Name: c}, l)
		}
		e := cmpOne()
		for range rng.IntN(4) {
			e = And{L: e, R: cmpOne()}
		}
		p, err := Compile(e, testTypes)
		if err != nil {
			t.Fatalf("%s: %v", e, err)
		}
		if p.fast == nil {
			t.Fatalf("%s: not on the fast path", e)
		}
		got, err := p.Keep(b)
		if err != nil {
			t.Fatal(err)
		}
		got = slices.Clone(got)
		p.fast = nil
		want, err := p.Keep(b)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("iter %d: %s over %+v:\nfast %v\neval %v", iter, e, b.Columns, got, want)
		}
	}
}

// TestFastFallback: what is not an AND of column-constant comparisons
// keeps the row evaluator.
func TestFastFallback(t *testing.T) {
	for _, e := range []Expr{
		Or{L: cmp(Gt, col("n"), num(1)), R: cmp(Lt, col("n"), num(0))},
		Not{X: cmp(Gt, col("n"), num(1))},
		And{L: cmp(Gt, col("n"), num(1)), R: IsNull{X: col("gas")}},
		cmp(Eq, col("miner"), str("0xaa")),
		cmp(Gt, col("n"), col("gas")),
		cmp(Gt, col("n"), Lit{Kind: LitNull}),
	} {
		p, err := Compile(e, testTypes)
		if err != nil {
			t.Fatalf("%s: %v", e, err)
		}
		if p.fast != nil {
			t.Errorf("%s: on the fast path", e)
		}
	}
}

// TestDoubleOrder is Spark's order of doubles in a WHERE: NaN equals NaN
// and is above every other value, -0.0 equals 0.0; on both paths.
func TestDoubleOrder(t *testing.T) {
	nan := math.NaN()
	b := &stream.Batch{Len: 4, Columns: []stream.Column{
		{Name: "fee", Type: stream.Float64, Float64s: []float64{nan, math.Inf(1), math.Copysign(0, -1), 5}},
	}}
	flt := func(f float64) Lit { return Lit{Kind: LitFloat, Flt: f} }
	for _, tc := range []struct {
		e    Expr
		want string
	}{
		{cmp(Eq, col("fee"), flt(5)), "[false false false true]"},
		{cmp(Gt, col("fee"), flt(5)), "[true true false false]"},
		{cmp(Ge, col("fee"), flt(math.Inf(1))), "[true true false false]"},
		{cmp(Lt, col("fee"), flt(math.Inf(1))), "[false false true true]"},
		{cmp(Eq, col("fee"), flt(0)), "[false false true false]"},
		{cmp(Eq, col("fee"), flt(nan)), "[true false false false]"},
		{cmp(Lt, col("fee"), flt(nan)), "[false true true true]"},
		{cmp(Ne, col("fee"), flt(nan)), "[false true true true]"},
		{cmp(Le, flt(nan), col("fee")), "[true false false false]"},
		{In{X: col("fee"), List: []Lit{flt(5)}}, "[false false false true]"},
		{In{X: col("fee"), List: []Lit{flt(nan)}}, "[true false false false]"},
	} {
		p, err := Compile(tc.e, testTypes)
		if err != nil {
			t.Fatalf("%s: %v", tc.e, err)
		}
		for _, fast := range []bool{true, false} {
			if !fast {
				p.fast = nil
			}
			keep, err := p.Keep(b)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(keep); got != tc.want {
				t.Errorf("%s (fast %v) = %s, want %s", tc.e, fast, got, tc.want)
			}
		}
	}
}
