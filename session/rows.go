package session

import (
	"github.com/ethstream/ethstream/filter"
	"github.com/ethstream/ethstream/stream"
)

var _ filter.RowGuard = (*Operator)(nil)

// RowsAggregated reports which rows of b have a session: an event time and
// a valid gap (Process skips the others, counting them as
// numNullEventTimeRows and numInvalidGapRows). Spark's SessionWindowing
// filters those rows out before its aggregation, so a query's aggregate
// inputs are computed only for these (filter.RowGuard): sum(a / b) raises
// no DIVIDE_BY_ZERO for a row without a session. A late row has a session
// and is aggregated by Spark's partial aggregation before its state
// restore drops it, so it counts here. Missing or mistyped columns are
// Process's to report: such a row is kept.
func (o *Operator) RowsAggregated(b *stream.Batch) ([]bool, error) {
	use := make([]bool, b.Len)
	ts := b.Column(o.p.spec.Column)
	var gapCol *stream.Column
	if o.p.spec.GapColumn != "" {
		if gapCol = b.Column(o.p.spec.GapColumn); gapCol != nil && gapCol.Type != stream.String {
			gapCol = nil
		}
	}
	for i := range use {
		switch {
		case ts != nil && ts.Type == stream.Timestamp && ts.IsNull(i):
		case gapCol != nil && o.rowGap(gapCol, i) <= 0:
		default:
			use[i] = true
		}
	}
	return use, nil
}
