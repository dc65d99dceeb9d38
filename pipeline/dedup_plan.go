package pipeline

import (
	"slices"

	"github.com/ethstream/ethstream/flow"
	"github.com/ethstream/ethstream/shape"
)

// dedupPlan sets fq's read projection and watermark and appends the
// deduplications (--drop-duplicates, then --drop-duplicates-within-
// watermark) as the plan's first operators, Spark's df.dropDuplicates on
// the unioned frame: they read the query's columns, their own and the
// event-time column (so that they drop late rows and evict by it). It
// returns the columns read and the deduplications' shapes (none without
// one: the query's own columns).
func (c *compiled) dedupPlan(fq *flow.Query, dups, within []string) (cols []string, pre []shape.Operator) {
	cols = c.q.Columns
	col, delay, wm := c.q.Spec.Watermark()
	if len(dups)+len(within) > 0 {
		cols = slices.Clone(cols)
		extra := append(slices.Clone(dups), within...)
		if wm {
			extra = append(extra, col)
		}
		for _, x := range extra {
			if !slices.Contains(cols, x) {
				cols = append(cols, x)
			}
		}
	}
	fq.Columns(cols...)
	if wm {
		fq.WithWatermark(col, delay)
	}
	if len(dups) > 0 {
		fq.DropDuplicates(dups...)
	}
	if len(within) > 0 {
		fq.DropDuplicatesWithinWatermark(within...)
	}
	return cols, fq.OperatorShapes()
}

// selectAfterDedup appends, to the plan of a query without an aggregation
// and with deduplications (pre), its SELECT list: the deduplications read
// their own columns too, and the list is taken after them (Spark's Project
// over Deduplicate); the rows they keep are appended.
func (c *compiled) selectAfterDedup(fq *flow.Query, pre []shape.Operator) {
	if c.agg != nil || c.sess != nil || len(pre) == 0 {
		return
	}
	sel := make([]flow.Column, len(c.q.Select))
	for i, col := range c.q.Select {
		sel[i] = flow.Col(col)
	}
	fq.Select(sel...)
}
