package filter

import (
	"math/rand/v2"
	"testing"

	"github.com/ethstream/ethstream/stream"
)

// BenchmarkWhereColumnConstant is the stateless shape's WHERE
// (transaction_count > 150) and an AND of two such comparisons over a
// 6,400-row chunk, one column with nulls.
func BenchmarkWhereColumnConstant(b *testing.B) {
	const n = 6400
	rng := rand.New(rand.NewPCG(1, 2))
	tx := make([]int64, n)
	gas := make([]int64, n)
	fee := make([]float64, n)
	valid := make([]bool, n)
	for i := range n {
		tx[i] = rng.Int64N(400)
		gas[i] = rng.Int64N(30_000_000)
		fee[i] = rng.Float64() * 100
		valid[i] = rng.IntN(10) != 0
	}
	batch := &stream.Batch{Len: n, Columns: []stream.Column{
		{Name: "n", Type: stream.Int64, Int64s: tx},
		{Name: "gas", Type: stream.Int64, Int64s: gas, Valid: valid},
		{Name: "fee", Type: stream.Float64, Float64s: fee},
	}}
	for _, bc := range []struct {
		name string
		e    Expr
	}{
		{"gt", cmp(Gt, col("n"), num(150))},
		{"and", And{L: cmp(Gt, col("gas"), num(10_000_000)), R: cmp(Le, col("fee"), Lit{Kind: LitFloat, Flt: 50})}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p, err := Compile(bc.e, testTypes)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Keep(batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
