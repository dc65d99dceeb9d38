package query

import (
	"testing"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/stream"
)

// TestTypedQuery: a source of Spark's scalar types groups by any of them
// and aggregates with Spark's result types; a BOOLEAN or DECIMAL
// expression (refused before the aggregation held them) is a group key
// or an aggregate's input.
func TestTypedQuery(t *testing.T) {
	schema := stream.Schema{Fields: []stream.Field{{Name: "flag", Type: stream.Boolean}, {Name: "amount", Type: stream.DecimalOf(12, 2)},
		{Name: "day", Type: stream.Date}, {Name: "n", Type: stream.Int16}, {Name: "x", Type: stream.Float32}, {Name: "raw", Type: stream.Binary}}}
	o := Options{Sources: []string{"t"}, Schemas: []stream.Schema{schema}}
	for _, c := range []struct{ q, want string }{
		{"SELECT flag, day, count(*) AS c, sum(amount) AS s, avg(amount) AS a, min(n) AS lo, max(x) AS hi FROM t GROUP BY flag, day",
			"flag boolean null, day date null, c int64, s decimal(22,2) null, a decimal(16,6) null, lo smallint null, hi float null (key: flag, day)"},
		{"SELECT raw, amount, sum(n) AS s FROM t GROUP BY raw, amount",
			"raw binary null, amount decimal(12,2) null, s int64 null (key: raw, amount)"},
		{"SELECT amount > 10 AS big, sum(amount * 2) AS s FROM t GROUP BY amount > 10",
			"big boolean null, s decimal(24,2) null (key: big)"}, // amount * 2 is decimal(14,2): the literal 2 is decimal(1,0)
	} {
		cq, err := Compile(c.q, o)
		if err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		op, err := agg.New(cq.Spec)
		if err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		if got := op.OutputSchema().String(); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.q, got, c.want)
		}
	}
}
