package shape

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/errcode"
)

// TestNumberingVersion5: a plan whose operators have Spark's ids is
// written as v5 with its numbering, with or without a join's sides'
// watermarks, and reads back equal; a v5 record without the numbering, or
// of one operator, and an older record with a numbering, are corrupt; the
// same plan without a numbering is still v3, byte for byte.
func TestNumberingVersion5(t *testing.T) {
	ops := chained()
	flow, err := Encode(Record{FirstBatchID: 2, Shape: sample().WithOperators(ops)})
	if err != nil || !bytes.HasPrefix(flow, []byte("v3\n")) || bytes.Contains(flow, []byte("numbering")) {
		t.Fatalf("flow order: %s %v", flow, err)
	}
	s := sample().WithOperators([]Operator{ops[1], ops[0]})
	s.Numbering = NumberingPreOrder
	b, err := Encode(Record{FirstBatchID: 2, Shape: s})
	if err != nil || !bytes.HasPrefix(b, []byte("v5\n")) || !bytes.Contains(b, []byte(`"numbering":"preOrder"`)) {
		t.Fatalf("Spark's ids: %s %v", b, err)
	}
	r, err := Parse("p", b)
	if err != nil || !r.Shape.Equal(s) || r.Shape.Numbering != NumberingPreOrder {
		t.Fatalf("v5 round trip: %+v %v", r.Shape, err)
	}
	if got := r.Shape.OperatorList(); got[0].ID != 0 || got[0].StateSchema != "b" || got[1].StateSchema != "a" {
		t.Fatalf("v5 operators by id: %+v", got)
	}
	if s.Equal(sample().WithOperators(ops)) {
		t.Fatal("a plan numbered by Spark equals the same plan in flow order")
	}
	text := string(b)
	oneB, _ := Encode(Record{Shape: sample().WithOperators(ops[1:])}) // a list of one (it has input steps): v3
	for _, bad := range []string{
		"v3" + text[2:], "v4" + text[2:], // a numbering in an older version
		strings.Replace(text, `,"numbering":"preOrder"`, "", 1),                                            // v5 without it
		strings.Replace(text, `"numbering":"preOrder"`, `"numbering":"x"`, 1),                              // an unknown one
		"v5" + strings.Replace(string(oneB)[2:], `"operators":`, `"numbering":"preOrder","operators":`, 1), // one operator
	} {
		if _, err := Parse("p", []byte(bad)); errcode.Code(err) != errcode.CheckpointCorrupt {
			t.Errorf("%q: %v", bad, err)
		}
	}
	// A join's sides' watermarks ride in v5 too.
	j := Shape{OutputMode: "append", OutputSchema: "a_k string", Numbering: NumberingPreOrder}.WithOperators([]Operator{
		{Kind: KindAggregate, Keys: []string{"k"}, StateSchema: "stateStoreSave ..."},
		{Kind: KindJoin, JoinType: "Inner", Keys: []string{"k=k"}, StateSchema: "symmetricHashJoin ...",
			Watermarks: []*Watermark{{Column: "ts", DelayUs: 60e6}, nil}}})
	jb, err := Encode(Record{Shape: j})
	if err != nil || !bytes.HasPrefix(jb, []byte("v5\n")) {
		t.Fatalf("a join with watermarks by Spark's ids: %s %v", jb, err)
	}
	if r, err := Parse("p", jb); err != nil || !r.Shape.Equal(j) {
		t.Fatalf("v5 join round trip: %v", err)
	}
}
