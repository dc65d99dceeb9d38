package engine

import (
	"fmt"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/shape"
)

// Spark's rule for a side's watermark delay, as the restart-compatibility
// notes state it for withWatermark: the delay may change, the event-time
// column may not.
const sparkSideWatermark = "allowed: the watermark delay may change; another event-time column requires a full refresh"

// sideWatermarks compares a join's sides' watermarks (shape.Operator.
// Watermarks), when both records hold them: a side whose event-time column
// changed, or that gained or lost its watermark, is refused
// (WATERMARK_CHANGED: the rows the state holds were stored, evicted and
// emitted by the old one, and Spark's checker decides on the new one
// which outer rows exist at all); a changed delay is allowed, as Spark
// allows it, from the next newly planned batch (the sides' watermarks are
// in memory only, so a restart recomputes them with the new delay).
func (c *shapeCheck) sideWatermarks(old, cur shape.Operator) bool {
	if len(old.Watermarks) != 2 || len(cur.Watermarks) != 2 {
		return false
	}
	for i, side := range []string{"left", "right"} {
		ow, nw := old.Watermarks[i], cur.Watermarks[i]
		change := fmt.Sprintf("watermark of the %s side of operator %d", side, cur.ID)
		switch {
		case ow == nil && nw == nil:
		case ow == nil || nw == nil || ow.Column != nw.Column:
			c.refuse(change, watermarkText(ow), watermarkText(nw), sparkSideWatermark,
				"refused: the join's state was stored and evicted by the old event time",
				errcode.WatermarkChanged, newCkpt+", or restore the previous WATERMARK clause",
				"the %s changed from %s to %s: the rows the join holds were stored and evicted by the old one", change, watermarkText(ow), watermarkText(nw))
			return true
		case ow.DelayUs != nw.DelayUs:
			c.allow(change+" delay", watermarkText(ow), watermarkText(nw), sparkSideWatermark,
				"allowed: the side's watermark is recomputed with the new delay from the next newly planned batch (logged)", c.next)
			c.warn("the %s delay changed from %s to %s: it applies from batch %d on", change, durText(ow.DelayUs), durText(nw.DelayUs), c.next)
		}
	}
	return false
}
