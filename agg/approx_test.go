package agg

import (
	"fmt"
	"testing"

	"github.com/ethstream/ethstream/agg/hllpp"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/stream"
)

// sketchOf is the oracle's approx_count_distinct: every non-null value of
// the group's rows folded into one sketch at once, in row order (merging
// is order-free, so the operator's batches, shards and restarts must give
// the same registers), and its stored value (the registers' bytes).
func sketchOf(a resolvedAgg, rows []testRow) (string, []any) {
	p := 9
	if a.RelativeSD != 0 {
		p, _ = hllpp.Precision(a.RelativeSD)
	}
	ps := hllpp.New(p)
	s := ps.NewSketch()
	h := hllpp.NewHasher(a.in)
	for _, r := range rows {
		c := &stream.Column{Type: a.in}
		switch a.Column {
		case ethblock.ColMiner:
			c.Strings = []string{r.miner}
		case ethblock.ColGasUsed:
			if r.gasNull {
				continue
			}
			c.Int64s = []int64{r.gas}
		case ethblock.ColBlockTS:
			if r.tsNull {
				continue
			}
			c.Int64s = []int64{r.ts}
		case "fee":
			if r.feeNull {
				continue
			}
			c.Float64s = []float64{r.fee}
		case "shard":
			c.Int64s = []int64{r.shard}
		default:
			panic("sketchOf: column " + a.Column)
		}
		ps.Add(s, h.Row(c, 0))
	}
	return fmt.Sprint(ps.Estimate(s)), []any{string(s.Encode(nil))}
}

func TestApproxCountDistinctSpec(t *testing.T) {
	spec := Spec{GroupBy: []string{"shard"}, Aggregates: []Aggregate{{Kind: ApproxCountDistinct, Column: ethblock.ColMiner, As: "m"},
		{Kind: ApproxCountDistinct, Column: "fee", As: "f", RelativeSD: 0.01}}, ColumnTypes: testColumnTypes}
	p, err := newPlan(spec)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.schema.Spec, "agg/v2 window=none groupBy=shard aggs=approx_count_distinct(miner,p=9):m,approx_count_distinct(fee,p=14):f"; got != want {
		t.Errorf("spec text %q, want %q", got, want)
	}
	if got := fmt.Sprint(p.schema.Value); got != fmt.Sprint([]any{}) && len(p.schema.Value) != 2 {
		t.Errorf("value fields %s", got)
	}
	for _, f := range p.schema.Value {
		if f.Type != stream.Binary {
			t.Errorf("value field %s is %s, want binary (the registers)", f.Name, f.Type)
		}
	}
	for _, bad := range []Spec{
		{Aggregates: []Aggregate{{Kind: ApproxCountDistinct, Column: "fee", RelativeSD: 0.5}}, ColumnTypes: testColumnTypes},
		{Aggregates: []Aggregate{{Kind: ApproxCountDistinct}}, ColumnTypes: testColumnTypes},
		{Aggregates: []Aggregate{{Kind: ApproxCountDistinct, Column: "fee"}}, ColumnTypes: testColumnTypes, Retractions: true},
	} {
		if _, err := newPlan(bad); err == nil {
			t.Errorf("accepted %+v", bad.Aggregates)
		}
	}
	if _, err := NewBuffers([]Aggregate{{Kind: ApproxCountDistinct, Column: "fee"}}, testColumnTypes, false); err == nil {
		t.Error("session buffers accepted approx_count_distinct")
	}
}
