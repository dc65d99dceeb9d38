package query

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/agg"
)

// TestApproxCountDistinctForms: the column form, relativeSD, an expression
// input with FILTER, and approx_count_distinct inside HAVING and a SELECT
// expression compile to agg's ApproxCountDistinct; a relativeSD that is
// not a constant number, or out of range, is refused before the run.
func TestApproxCountDistinctForms(t *testing.T) {
	o := testOptions()
	o.WatermarkColumn, o.WatermarkDelay = "", 0
	for _, c := range []struct{ q, want string }{
		{"SELECT source, approx_count_distinct(miner) AS m FROM blocks GROUP BY source", "{approx_count_distinct miner m 0}"},
		{"SELECT source, approx_count_distinct(miner, 0.01) AS m FROM blocks GROUP BY source", "{approx_count_distinct miner m 0.01}"},
		{"SELECT source, approx_count_distinct(lower(miner)) FILTER (WHERE gas_used > 0) AS m FROM blocks GROUP BY source",
			"{approx_count_distinct __in_m m 0}"},
		{"SELECT source, approx_count_distinct(miner) * 2 AS twice FROM blocks GROUP BY source HAVING approx_count_distinct(miner) > 1",
			"approx_count_distinct"},
	} {
		cq, err := Compile(c.q, o)
		if err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		if got := fmt.Sprint(cq.Spec.Aggregates); !strings.Contains(got, c.want) {
			t.Errorf("%s: aggregates %s, want %s", c.q, got, c.want)
		}
		if _, err := agg.New(cq.Spec); err != nil {
			t.Errorf("%s: %v", c.q, err)
		}
	}
	for _, q := range []string{
		"SELECT source, approx_count_distinct(miner, gas_used) AS m FROM blocks GROUP BY source",
		"SELECT source, approx_count_distinct(miner, 'x') AS m FROM blocks GROUP BY source",
	} {
		if _, err := Compile(q, o); err == nil {
			t.Errorf("%s: accepted", q)
		}
	}
	cq, err := Compile("SELECT source, approx_count_distinct(miner, 0.5) AS m FROM blocks GROUP BY source", o)
	if err == nil {
		_, err = agg.New(cq.Spec)
	}
	if err == nil || !strings.Contains(err.Error(), "relativeSD") {
		t.Errorf("relativeSD 0.5: %v", err)
	}
}
