package expr

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ethstream/ethstream/stream"
)

// TestBatchLoopsEqualRowLoops: the batch loops (arith_fast.go) and
// caseNode's first-arm shortcut give what eval's row loops give (their
// reference, rowLoopsOnly), over random batches and expressions: the same
// values, nulls and error (code and message), under ANSI and not, for
// every row (Eval) and for a random selection (EvalRows). The batches
// cross the loops' block size, hold nulls (a nil, an all-true and a
// random Valid), values at the edges of overflow, zeros (and -0.0, NaN,
// infinities) as divisors; the expressions mix the batch loops' operators
// with those eval keeps row by row (%, div, negation, decimals), their
// try_ functions, literals, casts and CASEs (the windowed query's guard
// among them).
func TestBatchLoopsEqualRowLoops(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 50))
	batched, errs, tries := 0, 0, 0
	for iter := range 3000 {
		b := randomArithBatch(rng)
		e := randomArith(rng, 3)
		if rng.IntN(3) == 0 {
			e = Case{Whens: []When{{Cond: IsNull{X: col("ts"), Neg: true}, Then: e}}}
		}
		o := Options{NonANSI: rng.IntN(2) == 0}
		c, err := Compile(e, func(name string) (stream.Type, bool) {
			if col := b.Column(name); col != nil {
				return col.Type, true
			}
			return 0, false
		}, o)
		if err != nil {
			continue // div of a double: a type error, no evaluation
		}
		var use []bool
		if rng.IntN(2) == 0 {
			use = make([]bool, b.Len)
			for r := range use {
				use[r] = rng.IntN(4) != 0
			}
		}
		eval := func(rowOnly bool) (stream.Column, error) {
			rowLoopsOnly = rowOnly
			defer func() { rowLoopsOnly = false }()
			if use != nil {
				return c.EvalRows(b, "v", use)
			}
			return c.Eval(b, "v")
		}
		want, wantErr := eval(true)
		got, gotErr := eval(false)
		what := fmt.Sprintf("iteration %d: %s over %d rows (non-ANSI %v, selection %v)", iter, e, b.Len, o.NonANSI, use != nil)
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("%s: error %v, the row loops' %v", what, gotErr, wantErr)
		}
		if wantErr != nil {
			errs++
			continue
		}
		if d := sameColumn(got, want, b.Len); d != "" {
			t.Fatalf("%s: %s", what, d)
		}
		if a, ok := c.root.(*arithNode); ok && a.batchable() {
			batched++
			if a.try {
				tries++
			}
		}
	}
	// The random expressions must reach the batch loops and the errors.
	t.Logf("batch loops at the root %d times, errors %d, try_ at the root %d", batched, errs, tries)
	if batched < 300 || errs < 100 || tries < 30 {
		t.Fatalf("batch loops at the root %d times (try_ %d), errors %d: the generator no longer covers them", batched, tries, errs)
	}
}

// sameColumn reports how got differs from want over n rows: nulls, and
// the values of the rows that are not null (a double by its bits, any
// NaN equal to any NaN).
func sameColumn(got, want stream.Column, n int) string {
	if got.Type != want.Type {
		return fmt.Sprintf("type %v, want %v", got.Type, want.Type)
	}
	null := func(c stream.Column, r int) bool { return c.Valid != nil && !c.Valid[r] }
	for r := range n {
		if null(got, r) != null(want, r) {
			return fmt.Sprintf("row %d: null %v, want %v", r, null(got, r), null(want, r))
		}
		if null(got, r) {
			continue
		}
		switch {
		case want.Float64s != nil:
			g, w := got.Float64s[r], want.Float64s[r]
			if math.Float64bits(g) != math.Float64bits(w) && !(math.IsNaN(g) && math.IsNaN(w)) {
				return fmt.Sprintf("row %d: %v, want %v", r, g, w)
			}
		case want.Int64s != nil:
			if got.Int64s[r] != want.Int64s[r] {
				return fmt.Sprintf("row %d: %d, want %d", r, got.Int64s[r], want.Int64s[r])
			}
		case want.Decimals != nil:
			if got.Decimals[r] != want.Decimals[r] {
				return fmt.Sprintf("row %d: %v, want %v", r, got.Decimals[r], want.Decimals[r])
			}
		}
	}
	return ""
}

// randomArithBatch has BIGINT a and b, INT c, DOUBLE x and y and a
// TIMESTAMP ts, each with nulls or not.
func randomArithBatch(rng *rand.Rand) *stream.Batch {
	n := []int{0, 1, 7, blockRows - 1, blockRows, blockRows + 1, 3*blockRows + 17}[rng.IntN(7)]
	ints := func(lo, hi int64, edges []int64) []int64 {
		v := make([]int64, n)
		for r := range v {
			switch rng.IntN(6) {
			case 0:
				v[r] = edges[rng.IntN(len(edges))]
			case 1:
				v[r] = 0
			case 2:
				v[r] = int64(rng.Uint64())
			default:
				v[r] = lo + rng.Int64N(hi-lo)
			}
			if lo >= math.MinInt32 && hi <= math.MaxInt32 {
				v[r] = int64(int32(v[r]))
			}
		}
		return v
	}
	big := []int64{math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, 3037000499, -3037000500, 1 << 32, math.MaxInt32, math.MinInt32, -1}
	small := []int64{math.MaxInt32, math.MinInt32, math.MaxInt32 - 1, 46340, -46341, 65536, -1}
	doubles := func() []float64 {
		edges := []float64{0, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1), math.MaxFloat64, math.SmallestNonzeroFloat64, 1e9}
		v := make([]float64, n)
		for r := range v {
			if rng.IntN(4) == 0 {
				v[r] = edges[rng.IntN(len(edges))]
			} else {
				v[r] = (rng.Float64() - 0.5) * 1e6
			}
		}
		return v
	}
	valid := func() []bool {
		switch rng.IntN(3) {
		case 0:
			return nil
		case 1:
			v := make([]bool, n)
			for r := range v {
				v[r] = true
			}
			return v
		}
		v := make([]bool, n)
		for r := range v {
			v[r] = rng.IntN(8) != 0
		}
		return v
	}
	return &stream.Batch{Len: n, Columns: []stream.Column{
		{Name: "a", Type: stream.Int64, Int64s: ints(-1_000_000, 1_000_000, big), Valid: valid()},
		{Name: "b", Type: stream.Int64, Int64s: ints(-30_000_000_000, 30_000_000_000, big), Valid: valid()},
		{Name: "c", Type: stream.Int32, Int64s: ints(-50_000, 50_000, small), Valid: valid()},
		{Name: "x", Type: stream.Float64, Float64s: doubles(), Valid: valid()},
		{Name: "y", Type: stream.Float64, Float64s: doubles(), Valid: valid()},
		{Name: "ts", Type: stream.Timestamp, Int64s: ints(0, 1<<50, big), Valid: valid()},
	}}
}

// randomArith is a random numeric expression of at most depth levels.
func randomArith(rng *rand.Rand, depth int) Expr {
	if depth == 0 || rng.IntN(4) == 0 {
		switch rng.IntN(9) {
		case 0:
			return i([]int64{0, 1, -1, 7, 1_000_000_000, math.MaxInt32}[rng.IntN(6)])
		case 1:
			return i([]int64{math.MaxInt64, math.MinInt64 + 1, 1 << 40}[rng.IntN(3)])
		case 2:
			return f([]float64{0, 2.5, -1e-3, 1e18}[rng.IntN(4)])
		case 3:
			return dec("1.5")
		default:
			return col([]string{"a", "b", "c", "x", "y"}[rng.IntN(5)])
		}
	}
	sub := func() Expr { return randomArith(rng, depth-1) }
	switch rng.IntN(12) {
	case 0:
		return Neg{X: sub()}
	case 1:
		return Cast{X: sub(), To: []Type{Double, BigInt, Int}[rng.IntN(3)], Try: rng.IntN(4) == 0}
	case 2:
		return Case{Whens: []When{{Cond: Cmp{Op: Gt, L: col("a"), R: i(0)}, Then: sub()}}, Else: sub()}
	case 3:
		return Case{Whens: []When{{Cond: IsNull{X: col([]string{"ts", "a", "x"}[rng.IntN(3)]), Neg: rng.IntN(4) != 0}, Then: sub()}}}
	}
	op := []string{"+", "-", "*", "/", "+", "-", "*", "/", "%", "div"}[rng.IntN(10)]
	// try_add and friends are the operator's node, nulls for its errors.
	if try := map[string]string{"+": "try_add", "-": "try_subtract", "*": "try_multiply", "/": "try_divide"}[op]; try != "" && rng.IntN(5) == 0 {
		return Call{Name: try, Args: []Expr{sub(), sub()}}
	}
	return Arith{Op: op, L: sub(), R: sub()}
}
