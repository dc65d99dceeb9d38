package engine

import (
	"strings"
	"testing"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/shape"
)

// dedupShape is baseShape with dropDuplicates(hash) before the
// aggregation, listed in flow order as --drop-duplicates 'hash' builds it:
// operator 0 and 1 as a checkpoint of flow order (shape v3) numbers them;
// sparkIDs gives Spark's (v5: the aggregation 0, the deduplication 1).
func dedupShape(variant, cols string) shape.Shape {
	s := baseShape()
	agg := s.OperatorList()[0]
	d := shape.Operator{Kind: shape.KindDeduplicate, Keys: strings.Split(cols, ","),
		StateSchema: variant + " key(" + cols + ") value() spec(format=1)"}
	return s.WithOperators([]shape.Operator{d, agg})
}

// sparkIDs is s with its operators numbered as a new checkpoint records
// them (Spark's ids, shape v5).
func sparkIDs(s shape.Shape) shape.Shape { return numberShape(s, numberedBySpark) }

// TestRestartRulesDedup: the deduplication's rows of the restart rules,
// each refused STATE_SCHEMA_MISMATCH with Spark's rule beside ours and the
// deduplication named as the Spark API it is; the same deduplication
// restarts.
func TestRestartRulesDedup(t *testing.T) {
	sp := &startPlan{NextID: 10, PendingID: -1}
	for _, tc := range []struct {
		name     string
		old, cur shape.Shape
		change   string
		text     string // in the change's new value
	}{
		{"same", dedupShape("dedupe", "hash"), dedupShape("dedupe", "hash"), "", ""},
		{"columns", dedupShape("dedupe", "hash"), dedupShape("dedupe", "hash,miner"), "deduplication columns of operator 0", "dropDuplicates(hash, miner)"},
		{"variant", dedupShape("dedupe", "hash"), dedupShape("dedupeWithinWatermark", "hash"), "deduplication variant of operator 0",
			"dropDuplicatesWithinWatermark(hash)"},
		{"spark ids", sparkIDs(dedupShape("dedupe", "hash")), dedupShape("dedupe", "hash"), "", ""},
		{"spark ids columns", sparkIDs(dedupShape("dedupe", "hash")), dedupShape("dedupe", "hash,miner"), "deduplication columns of operator 1",
			"dropDuplicates(hash, miner)"},
		// A deduplication added to a one-operator checkpoint: the new plan is
		// numbered as Spark numbers it, the aggregation keeps id 0.
		{"added", baseShape(), dedupShape("dedupe", "hash"), "stateful operators", "0: group by window(block_ts, '5 minutes'), source, miner; count(*) as count | 1: dropDuplicates(hash)"},
		{"removed", dedupShape("dedupe", "hash"), baseShape(), "stateful operators", "0: group by"},
		{"removed spark ids", sparkIDs(dedupShape("dedupe", "hash")), baseShape(), "stateful operators", "0: group by"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := tc.cur
			d, err := decideShape("/ck", &shape.Record{Seq: 3, Shape: tc.old}, &cur, sp, true, sinkSeen{}, nil)
			if tc.change == "" {
				if err != nil || len(d.Changes) != 0 {
					t.Fatalf("%v %+v", err, d.Changes)
				}
				return
			}
			if errcode.Code(err) != errcode.StateSchemaMismatch || len(d.Changes) != 1 {
				t.Fatalf("%v %+v", err, d.Changes)
			}
			c := d.Changes[0]
			if c.Change != tc.change || !strings.Contains(c.New, tc.text) || c.Allowed || !strings.HasPrefix(c.SparkRule, "not allowed") {
				t.Fatalf("change %+v, want %q with %q", c, tc.change, tc.text)
			}
		})
	}
}
