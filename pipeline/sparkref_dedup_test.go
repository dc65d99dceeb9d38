package pipeline

import (
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/flow"
	"github.com/ethstream/ethstream/internal/sparkref"
)

// sparkRefPlan sets eq's plan for a generated query: the compiled plan
// (plan), or with a deduplication before it, the plan Build makes for
// --drop-duplicates(-within-watermark) (dedupPlan, then the query's steps).
func sparkRefPlan(c *compiled, q *sparkref.Query, eq *engine.Query) error {
	if q.Dedup == nil {
		return c.plan(eq)
	}
	dups, within := q.Flags()
	fq := flow.New(eq.Name)
	for _, ns := range eq.Sources {
		fq.Read(ns.Name, ns.Source)
	}
	cols, pre := c.dedupPlan(fq, dedupColumns(dups), dedupColumns(within))
	c.addSteps(fq)
	c.selectAfterDedup(fq, pre)
	b, err := fq.Shape(nil).Build()
	if err != nil {
		return err
	}
	eq.Operator, eq.Stages = b.Operator, b.Stages
	c.apply(eq)
	eq.Columns = cols
	return nil
}
