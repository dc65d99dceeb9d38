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

// BenchmarkEvalTxFee: the transactions shape's fee (TxQuery's sum input,
// receipt_gas_used * receipt_effective_gas_price / 1000000000, inside the
// CASE WHEN block_timestamp IS NOT NULL a windowed query's derived column
// becomes) over one row group of the shape's archive (131,072 rows); with
// gas nulls in one row of ten, and with the whole CASE's rows selected
// (nil) or a tenth of them not.
func BenchmarkEvalTxFee(b *testing.B) {
	const n = 131072
	gas, price, ts := make([]int64, n), make([]int64, n), make([]int64, n)
	valid := make([]bool, n)
	for r := range gas {
		gas[r], price[r], ts[r] = int64(21_000+r%200_000), int64(10e9+r*1000), int64(1_759_104_000_000_000+r*600_000)
		valid[r] = r%10 != 3
	}
	fee := Case{Whens: []When{{Cond: IsNull{X: col("block_timestamp"), Neg: true},
		Then: Arith{Op: "/", L: Arith{Op: "*", L: col("receipt_gas_used"), R: col("receipt_effective_gas_price")}, R: i(1_000_000_000)}}}}
	for _, bc := range []struct {
		name  string
		valid []bool
	}{{"no_nulls", nil}, {"gas_nulls", valid}} {
		batch := &stream.Batch{Len: n, Columns: []stream.Column{
			{Name: "receipt_gas_used", Type: stream.Int64, Int64s: gas, Valid: bc.valid},
			{Name: "receipt_effective_gas_price", Type: stream.Int64, Int64s: price},
			{Name: "block_timestamp", Type: stream.Timestamp, Int64s: ts},
		}}
		c, err := Compile(fee, func(name string) (stream.Type, bool) {
			if c := batch.Column(name); c != nil {
				return c.Type, true
			}
			return 0, false
		}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Eval(batch, "fee"); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
