package query

import (
	"fmt"
	"math"
	"testing"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// The teaching queries of the README (issue 45's table): they compile, and
// their derived columns, computed over a batch of blocks, hold what a
// row-at-a-time reading of the SQL gives (computed here by hand).
func TestTeachingQueriesDerive(t *testing.T) {
	o := testOptions()
	o.WatermarkColumn, o.WatermarkDelay = "", 0
	hour := int64(3_600_000_000)
	b := &stream.Batch{Len: 3, Columns: []stream.Column{
		{Name: "block_ts", Type: stream.Timestamp, Int64s: []int64{10*hour + 5, 10*hour + 7, 11 * hour}},
		{Name: "miner", Type: stream.String, Strings: []string{"0xAbCdEf12", "0xabcdef99", "0x1234567"}},
		{Name: "gas_used", Type: stream.Int64, Int64s: []int64{15_000_000, 0, 30_000_000}},
		{Name: "gas_limit", Type: stream.Int64, Int64s: []int64{30_000_000, 30_000_000, 30_000_000}},
		{Name: "transaction_count", Type: stream.Int64, Int64s: []int64{120, 0, 300}},
		{Name: "base_fee_per_gas", Type: stream.Int64, Int64s: []int64{20_000_000_000, 0, 0}, Valid: []bool{true, false, true}},
	}}
	for _, tc := range []struct {
		q    string
		aggs string
		cols map[string]string
	}{{
		q: "SELECT date_trunc('HOUR', block_ts) AS hour, sum(base_fee_per_gas * gas_used / 1e18) AS burned_eth, count(*) AS blocks " +
			"FROM blocks GROUP BY date_trunc('HOUR', block_ts)",
		aggs: "[{sum __in_burned_eth burned_eth 0} {count  blocks 0}]",
		cols: map[string]string{"hour": "[36000000000 36000000000 39600000000]", "__in_burned_eth": "[0.3 NULL 0]"},
	}, {
		q: "SELECT lower(substring(miner, 1, 6)) AS miner6, avg(IF(transaction_count = 0, 1, 0)) AS empty_share, " +
			"count_if(transaction_count = 0) AS empty FROM blocks GROUP BY miner6",
		aggs: "[{avg __in_empty_share empty_share 0} {count __in_empty empty 0}]",
		cols: map[string]string{"miner6": "[0xabcd 0xabcd 0x1234]", "__in_empty_share": "[0 1 0]", "__in_empty": "[NULL 1 NULL]"},
	}, {
		q: "SELECT window(block_ts, '1 hour') AS window, avg(gas_used / gas_limit) AS utilisation, " +
			"max(gas_used) FILTER (WHERE base_fee_per_gas > 0) AS max_gas FROM blocks WHERE gas_limit > 0 GROUP BY window(block_ts, '1 hour')",
		aggs: "[{avg __in_utilisation utilisation 0} {max __in_max_gas max_gas 0}]",
		cols: map[string]string{"__in_utilisation": "[0.5 0 1]", "__in_max_gas": "[15000000 NULL NULL]"},
	}} {
		c, err := Compile(tc.q, o)
		if err != nil {
			t.Fatalf("%s: %v", tc.q, err)
		}
		if got := fmt.Sprint(c.Spec.Aggregates); got != tc.aggs {
			t.Errorf("%s: aggregates %s, want %s", tc.q, got, tc.aggs)
		}
		for _, d := range c.Derived {
			col, err := d.Expr.Eval(b, d.Name)
			if err != nil {
				t.Fatalf("%s: %s: %v", tc.q, d.Name, err)
			}
			if got := render(col); got != tc.cols[d.Name] {
				t.Errorf("%s: %s = %s, want %s", tc.q, d.Name, got, tc.cols[d.Name])
			}
		}
		for _, name := range c.Columns {
			if sc := o.Schemas[0]; sc.Field(name) == nil && name != stream.ColSource {
				t.Errorf("%s: the sources are asked for %q", tc.q, name)
			}
		}
	}
}

func render(c stream.Column) string {
	out := "["
	for i := 0; i < c.Len(); i++ {
		if i > 0 {
			out += " "
		}
		switch {
		case c.IsNull(i):
			out += "NULL"
		case c.Type == stream.Float64:
			out += fmt.Sprint(math.Round(c.Float64s[i]*1e9) / 1e9)
		case c.Type == stream.String:
			out += c.Strings[i]
		default:
			out += fmt.Sprint(c.Int64s[i])
		}
	}
	return out + "]"
}

// An overflow inside an aggregate's input fails the batch with Spark's
// error class under ANSI, and wraps with it off.
func TestDerivedOverflow(t *testing.T) {
	o := testOptions()
	q := "SELECT miner, sum(gas_used * gas_limit) AS s FROM blocks GROUP BY miner"
	b := &stream.Batch{Len: 1, Columns: []stream.Column{
		{Name: "gas_used", Type: stream.Int64, Int64s: []int64{math.MaxInt64 / 2}},
		{Name: "gas_limit", Type: stream.Int64, Int64s: []int64{3}},
	}}
	c, err := Compile(q, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Derived[0].Expr.Eval(b, "x"); err == nil || !containsCode(err, "ARITHMETIC_OVERFLOW") {
		t.Fatalf("got %v, want ARITHMETIC_OVERFLOW", err)
	}
	o.NonANSI = true
	c, err = Compile(q, o)
	if err != nil {
		t.Fatal(err)
	}
	col, err := c.Derived[0].Expr.Eval(b, "x")
	wrapped := int64(math.MaxInt64 / 2)
	wrapped *= 3 // two's complement, as Java's long multiply
	if err != nil || col.Int64s[0] != wrapped {
		t.Fatalf("got %v, %v", col.Int64s, err)
	}
}

func containsCode(err error, code string) bool { return errcode.Code(err) == code }
