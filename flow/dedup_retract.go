package flow

import (
	"github.com/ethstream/ethstream/dedup"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// A deduplication cannot keep its answer exact under retractions (a source
// that retracts the rows of a reorganised chain): its state holds the key
// of the first row it emitted, as Spark's (and an expiry), neither that
// row nor the duplicates it dropped. A retraction of the emitted row could
// not say whether a dropped duplicate (from another source, with other
// values) should take its place, and a retraction of a dropped duplicate
// must not reach the next operator, which never saw it. Spark has no
// retractions; its dropDuplicates is append-only. So the plan is refused
// when it is built, before anything is read or written, naming the
// operator: RETRACTION_UNSUPPORTED (docs/contracts.md, State: Deduplication). The
// operator refuses a retraction it is handed anyway (a source that
// retracts without saying so).

// refuseRetractions refuses op, the plan's next stateful operator, when a
// source of the query retracts rows. It names the operator by its API, not
// its id: the id is given when the query starts (Spark's numbering on a
// new checkpoint counts from the sink, and the plan is not complete yet).
func (q *Query) refuseRetractions(op *dedup.Operator) error {
	return refuseRetracting(q.q.Sources, op)
}

// refuseRetracting refuses op, a deduplication of the rows of sources
// (the query's, or a join side's), when one of them retracts rows.
func refuseRetracting(sources []engine.NamedSource, op *dedup.Operator) error {
	for _, ns := range sources {
		rs, ok := ns.Source.(stream.RetractingSource)
		if !ok || !rs.Retracts() {
			continue
		}
		return errcode.New(dedup.CodeRetractionUnsupported, "",
			"read the source without retractions (e.g. reorg=fail with confirmations), or leave the deduplication out",
			"the deduplication %s: source %q retracts rows (a reorganised chain's), which a deduplication cannot undo: its state holds the first row's key, not the rows",
			op, ns.Name)
	}
	return nil
}
