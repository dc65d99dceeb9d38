package parquettype

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/stream"
)

// TestAppendListLevels: a null array, an empty one and [null, 7, 8] are
// Spark's LIST levels, written out by hand (repetition, definition).
func TestAppendListLevels(t *testing.T) {
	v := &stream.Column{Type: stream.ArrayOf(stream.Int64), Valid: []bool{false, true, true},
		Offsets: []int32{0, 0, 0, 3},
		Elems:   &stream.Column{Type: stream.Int64, Int64s: []int64{0, 7, 8}, Valid: []bool{false, true, true}}}
	var got []string
	for r := range 3 {
		for _, x := range AppendList(nil, stream.Int64, v, r, 4) {
			s := fmt.Sprintf("r%d d%d c%d", x.RepetitionLevel(), x.DefinitionLevel(), x.Column())
			if !x.IsNull() {
				s += fmt.Sprintf(" %d", x.Int64())
			}
			got = append(got, s)
		}
	}
	want := "r0 d0 c4|r0 d1 c4|r0 d2 c4|r1 d3 c4 7|r1 d3 c4 8"
	if g := strings.Join(got, "|"); g != want {
		t.Fatalf("levels %s, want %s", g, want)
	}
}

// TestGoTypeRefuses: the types no writer writes have no Go type.
func TestGoTypeRefuses(t *testing.T) {
	for _, typ := range []stream.Type{stream.Decimal, stream.ArrayOf(stream.Date), stream.ArrayOf(stream.DecimalOf(10, 2))} {
		if _, _, ok := GoType(typ); ok {
			t.Errorf("%s has a Go type", typ)
		}
	}
	for _, typ := range []stream.Type{stream.Int8, stream.DecimalOf(38, 0), stream.ArrayOf(stream.Boolean)} {
		if _, _, ok := GoType(typ); !ok || !(typ.Kind() != stream.Array || ArrayElem(typ.Elem())) {
			t.Errorf("%s has no Go type", typ)
		}
	}
}
