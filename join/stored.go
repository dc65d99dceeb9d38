package join

import (
	"fmt"
	"strings"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// A state recorded with other columns than the query's plan stores.
//
// The state schema's spec records each side's stored columns (spec.go,
// stateSchema). A query reading fewer columns than a state stores (every
// column before Side.Columns pruned a side, or a query that read more)
// keeps the recorded layout: the join decodes and writes the rows as
// recorded and its rows carry the columns the query reads. A query reading
// a column the state lacks is refused at Open with STATE_SCHEMA_MISMATCH,
// before anything is written: the rows stored before hold no value for it
// (Spark's state schema check refuses a value schema that changed;
// ethstream accepts a narrower read, docs/contracts.md).

// storing is the plan of p's spec that stores the columns the state
// schema spec recorded records, when they cover the columns p stores;
// nil (and no error) when recorded is not this join's (another type or
// keys, an unreadable spec: Open's own mismatch stands). The error is
// the refusal of a state that lacks a column p needs, naming them.
func (p *plan) storing(recorded, dir string) (*plan, error) {
	var stored [2][]stream.Field
	switch {
	case strings.HasPrefix(recorded, specFormat1+" "):
		// Format 1 stored every column (no pruning then).
		for i := range p.sides {
			stored[i] = p.sides[i].full.Fields
		}
	default:
		var err error
		if stored, err = specSideFields(recorded); err != nil {
			return nil, nil
		}
	}
	var missing []string
	for i, sp := range p.sides {
		for _, f := range sp.Schema.Fields {
			j := -1
			for k, g := range stored[i] {
				if g.Name == f.Name {
					j = k
				}
			}
			switch {
			case j < 0:
				missing = append(missing, sp.Alias+"."+f.Name)
			case stored[i][j].Type != f.Type:
				missing = append(missing, fmt.Sprintf("%s.%s as %v (stored as %v)", sp.Alias, f.Name, f.Type, stored[i][j].Type))
			}
		}
	}
	if len(missing) > 0 {
		if !strings.Contains(recorded, fmt.Sprintf(" type=%s ", p.spec.Type)) {
			return nil, nil
		}
		return nil, errcode.New(errcode.StateSchemaMismatch, dir,
			"read only the columns the join's state stores, or start the changed query on a new checkpoint",
			"the query reads %s, which the join's state does not store (it stores %s): the rows stored before hold no value for it",
			strings.Join(missing, ", "), storedText(p, stored))
	}
	w, err := buildPlan(p.spec, &stored)
	if err != nil || (w.schema.Spec != recorded && !w.compatibleSpec(recorded)) {
		return nil, nil
	}
	return w, nil
}

// storedText names each side's stored columns in a refusal.
func storedText(p *plan, stored [2][]stream.Field) string {
	var sides []string
	for i, fs := range stored {
		names := make([]string, len(fs))
		for j, f := range fs {
			names[j] = f.Name
		}
		sides = append(sides, fmt.Sprintf("%s: %s", p.sides[i].Alias, strings.Join(names, ", ")))
	}
	return strings.Join(sides, "; ")
}
