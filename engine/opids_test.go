package engine

import (
	"bytes"
	"slices"
	"testing"

	"github.com/ethstream/ethstream/shape"
)

// TestOperatorNumbering: which ids a start gives the operators of a plan
// listed in flow order. A new checkpoint, or one whose record holds at
// most one operator, takes Spark's pre-order ids (the sink side's
// operator 0); a record of several operators pins its own numbering (v3
// and v4: flow order, as main wrote them); a query that records no shape
// keeps flow order, having no record to pin another, and so does one that
// records its shape on a checkpoint whose earlier runs recorded none.
func TestOperatorNumbering(t *testing.T) {
	one, two := baseShape(), dedupShape("dedupe", "hash")
	for _, tc := range []struct {
		name    string
		rec     *shape.Shape
		cur     *shape.Shape
		started bool // the checkpoint has batches
		ids     []int
	}{
		{"new checkpoint", nil, &two, false, []int{1, 0}},
		{"after a record of one operator", &one, &two, true, []int{1, 0}},
		{"record in flow order (main's v3)", &two, &two, true, []int{0, 1}},
		{"record with Spark's ids (v5)", ptr(sparkIDs(two)), &two, true, []int{1, 0}},
		{"record in flow order, query without a shape", &two, nil, true, []int{0, 1}},
		{"record with Spark's ids, query without a shape", ptr(sparkIDs(two)), nil, true, []int{1, 0}},
		{"no record, query without a shape", nil, nil, false, []int{0, 1}},
		// Earlier runs recorded no shape: their state is in flow order
		// (flow.TestShapeAfterRunsWithoutOne runs it).
		{"no record, batches run without a shape", nil, &two, true, []int{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec *shape.Record
			if tc.rec != nil {
				rec = &shape.Record{Shape: *tc.rec}
			}
			if got := numberingOf(rec, tc.cur, tc.started).ids(2); !slices.Equal(got, tc.ids) {
				t.Fatalf("ids %v, want %v", got, tc.ids)
			}
		})
	}
	// A plan of one operator is id 0 either way, and its shape is recorded
	// byte for byte as before.
	if got := numberedBySpark.ids(1); !slices.Equal(got, []int{0}) {
		t.Fatalf("one operator: %v", got)
	}
	a, _ := shape.Encode(shape.Record{Shape: one})
	b, _ := shape.Encode(shape.Record{Shape: numberShape(one, numberedBySpark)})
	if !bytes.Equal(a, b) {
		t.Fatalf("one operator's record changed:\n%s\nwas\n%s", b, a)
	}
	// Two: listed by id, the aggregation (nearest the sink) first.
	ops := sparkIDs(two).OperatorList()
	if len(ops) != 2 || ops[0].Kind != shape.KindAggregate || ops[1].Kind != shape.KindDeduplicate || ops[1].ID != 1 {
		t.Fatalf("Spark's ids: %+v", ops)
	}
	if again := numberShape(sparkIDs(two), numberedBySpark); !again.Equal(sparkIDs(two)) {
		t.Fatal("numbering a numbered shape again changed it")
	}
}

func ptr[T any](v T) *T { return &v }
