package shape

import (
	"bytes"
	"strings"
	"testing"
)

// TestSideWatermarksVersion4: a join that records its sides' watermarks is
// written as v4 and reads back equal; the same record labelled v3 is
// corrupt, and a join without them stays v3, byte for byte.
func TestSideWatermarksVersion4(t *testing.T) {
	s := Shape{OutputMode: "append", OutputSchema: "a_k string"}.WithOperators([]Operator{
		{Kind: KindJoin, JoinType: "LeftOuter", Keys: []string{"k=k"}, StateSchema: "symmetricHashJoin ...",
			Watermarks: []*Watermark{{Column: "ts", DelayUs: 60e6}, nil}},
		{Kind: KindAggregate, Keys: []string{"k"}, StateSchema: "stateStoreSave ..."}})
	b, err := Encode(Record{FirstBatchID: 3, Shape: s})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("v4\n")) || !bytes.Contains(b, []byte(`"watermarks":[{"column":"ts","delayUs":60000000},null]`)) {
		t.Fatalf("encoded %s", b)
	}
	r, err := Parse("p", b)
	if err != nil || !r.Shape.Equal(s) {
		t.Fatalf("parse: %v %+v", err, r.Shape)
	}
	if _, err := Parse("p", append([]byte("v3\n"), b[3:]...)); err == nil || !strings.Contains(err.Error(), "v4 records") {
		t.Fatalf("v3 with watermarks: %v", err)
	}
	ops := s.OperatorList()
	ops[0].Watermarks = nil
	b, _ = Encode(Record{FirstBatchID: 3, Shape: s.WithOperators(ops)})
	if !bytes.HasPrefix(b, []byte("v3\n")) || bytes.Contains(b, []byte("watermarks")) {
		t.Fatalf("a join without side watermarks: %s", b)
	}
}
