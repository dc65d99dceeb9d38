package engine

import (
	"strings"
	"testing"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/shape"
)

// TestRestartRulesJoinWatermarks: a join's sides' watermarks in the shape
// (a join followed by an aggregation, operators 0 and 1): a delay change is
// allowed as Spark allows it, another event-time column or a watermark
// added or removed is WATERMARK_CHANGED, and a record written before the
// sides' watermarks were recorded compares none.
func TestRestartRulesJoinWatermarks(t *testing.T) {
	sp := &startPlan{NextID: 10, PendingID: -1}
	base := func(marks ...*shape.Watermark) shape.Shape {
		s := joinShape()
		ops := s.OperatorList()
		ops[0].Watermarks = marks
		ops = append(ops, shape.Operator{Kind: shape.KindAggregate, Keys: []string{"miner"}, Aggregates: []string{"count(*) as n"},
			Window: &shape.Window{Column: "x_block_ts", Size: "1 hour"}, StateSchema: "stateStoreSave ..."})
		return s.WithOperators(ops)
	}
	hour := int64(3600e6)
	wm := func(col string, us int64) *shape.Watermark { return &shape.Watermark{Column: col, DelayUs: us} }
	for _, tc := range []struct {
		name      string
		old, cur  shape.Shape
		code, chg string
	}{
		{"left delay down", base(wm("block_ts", hour), wm("block_ts", hour)), base(wm("block_ts", hour/2), wm("block_ts", hour)),
			"", "watermark of the left side of operator 0 delay"},
		{"right delay up", base(wm("block_ts", hour), wm("block_ts", hour)), base(wm("block_ts", hour), wm("block_ts", 2*hour)),
			"", "watermark of the right side of operator 0 delay"},
		{"right column", base(wm("block_ts", hour), wm("block_ts", hour)), base(wm("block_ts", hour), wm("ts", hour)),
			errcode.WatermarkChanged, "watermark of the right side of operator 0"},
		{"left removed", base(wm("block_ts", hour), wm("block_ts", hour)), base(nil, wm("block_ts", hour)),
			errcode.WatermarkChanged, "watermark of the left side of operator 0"},
		{"recorded before", base(), base(wm("block_ts", hour), wm("block_ts", hour)), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &shape.Record{Seq: 1, Shape: tc.old}
			cur := tc.cur
			d, err := decideShape("/ck", rec, &cur, sp, true, sinkSeen{}, nil)
			var names []string
			for _, c := range d.Changes {
				names = append(names, c.Change)
			}
			if got := strings.Join(names, ","); got != tc.chg {
				t.Errorf("changes %q, want %q", got, tc.chg)
			}
			if errcode.Code(err) != tc.code {
				t.Fatalf("error %v, want code %q", err, tc.code)
			}
		})
	}
}
