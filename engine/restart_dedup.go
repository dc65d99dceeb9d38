package engine

import (
	"fmt"
	"strings"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/shape"
)

// The restart rule of a deduplication (Spark's dropDuplicates and
// dropDuplicatesWithinWatermark): its state is keyed by its columns, and
// dropDuplicatesWithinWatermark stores an expiry the other does not, so
// other columns, the other variant, or an aggregation in its place at the
// same operator id is a changed state schema, refused before anything is
// written (Spark's state schema check refuses the same).

// dedupState refuses a change of the deduplication at one operator id
// (operatorState found its state schema changed); it reports true.
func (c *shapeCheck) dedupState(old, cur shape.Operator, several bool) bool {
	change := "deduplication columns"
	switch {
	case old.Kind != cur.Kind:
		change = "operator kind"
	case dedupVariant(old) != dedupVariant(cur):
		change = "deduplication variant"
	}
	if several {
		change = fmt.Sprintf("%s of operator %d", change, cur.ID)
	}
	c.refuse(change, opStateText(old), opStateText(cur), sparkDedup,
		"refused: the state is keyed by the old columns (and holds the old variant's values)",
		errcode.StateSchemaMismatch, newCkpt+", or restore the previous query",
		"the %s changed, so the state schema changed: checkpoint has %s, query has %s", change, stateSchemaText(old.StateSchema), stateSchemaText(cur.StateSchema))
	return true
}

// dedupVariant is the Spark API a deduplication's recorded state schema
// names (its operator name: dedupe or dedupeWithinWatermark).
func dedupVariant(o shape.Operator) string {
	if strings.HasPrefix(o.StateSchema, "dedupeWithinWatermark ") {
		return "dropDuplicatesWithinWatermark"
	}
	return "dropDuplicates"
}

// dedupText renders a deduplication for the restart decision.
func dedupText(o shape.Operator) string {
	return dedupVariant(o) + "(" + strings.Join(o.Keys, ", ") + ")"
}
