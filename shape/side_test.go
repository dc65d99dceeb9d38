package shape

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/errcode"
)

// TestSideVersion6: a plan with a deduplication on a join's side is written
// as v6, with Spark's numbering or none (flow order), and reads back
// equal; a v6 record without a side, an older one with one, and an unknown
// side are corrupt; the same plan without a side is still v5.
func TestSideVersion6(t *testing.T) {
	ops := []Operator{
		{Kind: KindJoin, JoinType: "Inner", Keys: []string{"k=k"}, StateSchema: "symmetricHashJoin ..."},
		{Kind: KindDeduplicate, Keys: []string{"k"}, StateSchema: "dedupe ...", Side: SideLeft},
	}
	s := Shape{OutputMode: "append", OutputSchema: "a_k string", Numbering: NumberingPreOrder}.WithOperators(ops)
	b, err := Encode(Record{Shape: s})
	if err != nil || !bytes.HasPrefix(b, []byte("v6\n")) || !bytes.Contains(b, []byte(`"side":"left"`)) {
		t.Fatalf("a side's operator: %s %v", b, err)
	}
	r, err := Parse("p", b)
	if err != nil || !r.Shape.Equal(s) || r.Shape.Operators[1].Side != SideLeft {
		t.Fatalf("v6 round trip: %+v %v", r.Shape, err)
	}
	flow := s
	flow.Numbering = ""
	fb, err := Encode(Record{Shape: flow})
	if err != nil || !bytes.HasPrefix(fb, []byte("v6\n")) {
		t.Fatalf("flow order: %s %v", fb, err)
	}
	if _, err := Parse("p", fb); err != nil {
		t.Fatalf("v6 in flow order: %v", err)
	}
	main := s.WithOperators([]Operator{ops[0], {Kind: KindDeduplicate, Keys: []string{"k"}, StateSchema: "dedupe ..."}})
	mb, err := Encode(Record{Shape: main})
	if err != nil || !bytes.HasPrefix(mb, []byte("v5\n")) || bytes.Contains(mb, []byte(`"side"`)) {
		t.Fatalf("no side: want v5 as before, %s %v", mb, err)
	}
	text := string(b)
	for _, bad := range []string{
		"v5" + text[2:], "v3" + text[2:], // a side in an older version
		"v6" + string(mb)[2:], // v6 without a side
		strings.Replace(text, `"side":"left"`, `"side":"middle"`, 1),
	} {
		if _, err := Parse("p", []byte(bad)); errcode.Code(err) != errcode.CheckpointCorrupt {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
