package engine

import (
	"strings"
	"testing"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/shape"
)

// joinShape is the shape of a two-input query: one join, operator 0.
func joinShape() shape.Shape {
	s := shape.Shape{
		Sources:    []shape.Source{{Name: "blocks", Provider: "s3archive", Location: "s3://b/blocks"}, {Name: "txs", Provider: "s3archive", Location: "s3://b/txs"}},
		OutputMode: "append", OutputSchema: "a_hash string, ...", Sink: shape.Sink{Format: "delta", Location: "/t"}, Trigger: "available-now",
	}
	return s.WithOperators([]shape.Operator{{Kind: shape.KindJoin, JoinType: "LeftOuter", Keys: []string{"hash=block_hash"},
		StateSchema: "symmetricHashJoin ... type=LeftOuter ..."}})
}

// TestRestartRulesJoin: the join rows of the restart rules (Spark: "not
// allowed" for another join type or other equi-join columns), each refused
// as STATE_SCHEMA_MISMATCH naming the change; the sides' filters are
// allowed as any filter.
func TestRestartRulesJoin(t *testing.T) {
	sp := &startPlan{NextID: 10, PendingID: -1}
	for _, tc := range []struct {
		name, code, changes string
		change              func(o *shape.Operator, s *shape.Shape)
	}{
		{name: "join type", code: errcode.StateSchemaMismatch, changes: "join type",
			change: func(o *shape.Operator, _ *shape.Shape) { o.JoinType, o.StateSchema = "Inner", "other" }},
		{name: "equi-join columns", code: errcode.StateSchemaMismatch, changes: "equi-join columns",
			change: func(o *shape.Operator, _ *shape.Shape) { o.Keys = append(o.Keys, "miner=miner") }},
		{name: "join replaced by an aggregation", code: errcode.StateSchemaMismatch, changes: "stateful operator kind",
			change: func(o *shape.Operator, _ *shape.Shape) { o.Kind, o.JoinType = shape.KindAggregate, "" }},
		{name: "a side's filter", changes: "filter",
			change: func(_ *shape.Operator, s *shape.Shape) { s.Filter = "b: (value > 0)" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &shape.Record{Seq: 1, Shape: joinShape()}
			cur := joinShape()
			ops := cur.OperatorList()
			tc.change(&ops[0], &cur)
			cur = cur.WithOperators(ops)
			d, err := decideShape("/ck", rec, &cur, sp, true, sinkSeen{}, nil)
			var names []string
			for _, c := range d.Changes {
				names = append(names, c.Change)
				if c.Code != "" && c.SparkRule != sparkJoin {
					t.Errorf("change %+v: Spark's rule is %q", c, sparkJoin)
				}
			}
			if got := strings.Join(names, ","); got != tc.changes {
				t.Errorf("changes %q, want %q", got, tc.changes)
			}
			if errcode.Code(err) != tc.code {
				t.Fatalf("error %v, want code %q", err, tc.code)
			}
		})
	}
}
