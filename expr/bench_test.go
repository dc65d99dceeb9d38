package expr

import (
	"testing"

	"github.com/ethstream/ethstream/stream"
)

// BenchmarkEval: the teaching queries' expressions over a batch of 4096
// blocks (ns/op is per batch; rows/s reported).
func BenchmarkEval(b *testing.B) {
	const n = 4096
	batch := &stream.Batch{Len: n}
	fee, gas, limit, ts := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	miner := make([]string, n)
	for i := range fee {
		fee[i], gas[i], limit[i], ts[i] = int64(20e9+i), int64(15e6+i), 30e6, int64(1_700_000_000_000_000+i*12_000_000)
		miner[i] = "0xAbCdEf0123456789"
	}
	batch.Columns = []stream.Column{
		{Name: "base_fee_per_gas", Type: stream.Int64, Int64s: fee},
		{Name: "gas_used", Type: stream.Int64, Int64s: gas},
		{Name: "gas_limit", Type: stream.Int64, Int64s: limit},
		{Name: "block_ts", Type: stream.Timestamp, Int64s: ts},
		{Name: "miner", Type: stream.String, Strings: miner},
	}
	types := func(name string) (stream.Type, bool) {
		if c := batch.Column(name); c != nil {
			return c.Type, true
		}
		return 0, false
	}
	for _, bc := range []struct {
		name string
		e    Expr
	}{
		{"fee_times_gas_over_1e18", Arith{Op: "/", L: Arith{Op: "*", L: col("base_fee_per_gas"), R: col("gas_used")}, R: f(1e18)}},
		{"gas_over_limit", Arith{Op: "/", L: col("gas_used"), R: col("gas_limit")}},
		{"date_trunc_hour", call("date_trunc", str("HOUR"), col("block_ts"))},
		{"lower_substring", call("lower", call("substring", col("miner"), i(1), i(6)))},
	} {
		c, err := Compile(bc.e, types, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := c.Eval(batch, "x"); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
