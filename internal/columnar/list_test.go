package columnar

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/stream"
	"github.com/parquet-go/parquet-go"
)

// legacyList is a LIST-annotated group with any children, for the
// shapes parquet-go's List does not write (two-level lists, lists of
// structs).
type legacyList struct{ parquet.Group }

func (legacyList) Type() parquet.Type { return parquet.List(parquet.Int(64)).Type() }

// listShapeCase is one way a writer lays out a list of int64 or strings.
type listShapeCase struct {
	name     string
	node     parquet.Node // the list column "l"
	leaf     []string     // its leaf below l
	listOpt  bool         // a list may be null
	elemOpt  bool         // an element may be null
	str      bool         // string elements (else int64)
	dictPage bool
}

var listShapes = []listShapeCase{
	{name: "three-level optional", node: parquet.Optional(parquet.List(parquet.Optional(parquet.String()))), leaf: []string{"list", "element"}, listOpt: true, elemOpt: true, str: true},
	{name: "three-level dictionary", node: parquet.Optional(parquet.List(parquet.Optional(parquet.Encoded(parquet.String(), &parquet.RLEDictionary)))), leaf: []string{"list", "element"}, listOpt: true, elemOpt: true, str: true, dictPage: true},
	{name: "three-level required", node: parquet.List(parquet.Int(64)), leaf: []string{"list", "element"}},
	{name: "two-level", node: parquet.Optional(legacyList{parquet.Group{"array": parquet.Repeated(parquet.Int(64))}}), leaf: []string{"array"}, listOpt: true},
	{name: "bare repeated", node: parquet.Repeated(parquet.Int(64)), leaf: nil},
}

// randomLists draws n rows of lists: nil is a null list, a nil element
// a null one, as the shape allows.
func randomLists(r *rand.Rand, n int, c listShapeCase) [][]any {
	out := make([][]any, n)
	for i := range out {
		if c.listOpt && r.IntN(6) == 0 {
			continue // null
		}
		l := make([]any, r.IntN(5)) // some empty
		for k := range l {
			switch {
			case c.elemOpt && r.IntN(4) == 0:
			case c.str:
				l[k] = fmt.Sprintf("v%d", r.IntN(30))
			default:
				l[k] = r.Int64N(2000) - 1000
			}
		}
		out[i] = l
	}
	return out
}

// writeLists writes the rows (id, l) with levels computed from the spec
// (not from the decoder): definition 0..maxDef along the path, repetition 0
// for a row's first level.
func writeLists(t *testing.T, c listShapeCase, lists [][]any, pageSize int) []byte {
	t.Helper()
	schema := parquet.NewSchema("t", parquet.Group{"id": parquet.Int(64), "l": c.node})
	idCol, _ := schema.Lookup("id")
	lc, ok := schema.Lookup(append([]string{"l"}, c.leaf...)...)
	if !ok {
		t.Fatalf("no leaf %v", c.leaf)
	}
	nullDef := 0
	if c.listOpt {
		nullDef = 1
	}
	elemDef := nullDef + 1
	var buf bytes.Buffer
	w := parquet.NewWriter(&buf, schema, parquet.PageBufferSize(pageSize))
	for i, l := range lists {
		row := parquet.Row{parquet.ValueOf(int64(i)).Level(0, 0, idCol.ColumnIndex)}
		var vals []parquet.Value
		switch {
		case l == nil && c.listOpt:
			vals = append(vals, parquet.NullValue().Level(0, nullDef-1, lc.ColumnIndex))
		case len(l) == 0:
			vals = append(vals, parquet.NullValue().Level(0, nullDef, lc.ColumnIndex))
		}
		for k, e := range l {
			rep := 1
			if k == 0 {
				rep = 0
			}
			if e == nil {
				vals = append(vals, parquet.NullValue().Level(rep, elemDef, lc.ColumnIndex))
				continue
			}
			vals = append(vals, parquet.ValueOf(e).Level(rep, lc.MaxDefinitionLevel, lc.ColumnIndex))
		}
		if idCol.ColumnIndex < lc.ColumnIndex {
			row = append(row, vals...)
		} else {
			row = append(vals, row...)
		}
		if _, err := w.WriteRows([]parquet.Row{row}); err != nil {
			t.Fatal(err)
		}
		if i%700 == 699 {
			if err := w.Flush(); err != nil { // a new row group
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// decodeLists reads (id, l) back through Open/DecodeRowGroup.
func decodeLists(data []byte, elem stream.Type) ([]int64, [][]any, error) {
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)), readerOptions...)
	if err != nil {
		return nil, nil, err
	}
	dec, err := Open(f, []Field{{Name: "id", Type: stream.Int64}, {Name: "l", Type: stream.ArrayOf(elem)}}, nil)
	if err != nil {
		return nil, nil, err
	}
	var ids []int64
	var lists [][]any
	for g := range f.RowGroups() {
		rg, err := dec.DecodeRowGroup(g)
		if err != nil {
			return nil, nil, err
		}
		if err := rg.Batch.Validate(); err != nil {
			panic(fmt.Sprintf("decoded an invalid batch: %v", err))
		}
		ids = append(ids, rg.Batch.Columns[0].Int64s...)
		c := &rg.Batch.Columns[1]
		for r := 0; r < rg.Batch.Len; r++ {
			if c.IsNull(r) {
				lists = append(lists, nil)
				continue
			}
			l := []any{}
			for e := c.Offsets[r]; e < c.Offsets[r+1]; e++ {
				switch {
				case c.Elems.IsNull(int(e)):
					l = append(l, nil)
				case elem == stream.String:
					l = append(l, c.Elems.Strings[e])
				default:
					l = append(l, c.Elems.Int64s[e])
				}
			}
			lists = append(lists, l)
		}
	}
	return ids, lists, nil
}

// TestDecodeListShapes reads random lists, with null lists, empty lists
// and null elements where the shape allows them, in every list layout the
// spec names, across pages and row groups, against the lists written.
func TestDecodeListShapes(t *testing.T) {
	for _, c := range listShapes {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, uint64(len(c.name))))
			want := randomLists(r, 2500, c)
			data := writeLists(t, c, want, 512)
			elem := stream.Int64
			if c.str {
				elem = stream.String
			}
			ids, got, err := decodeLists(data, elem)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d rows, want %d", len(got), len(want))
			}
			nulls, empties, nullElems := 0, 0, 0
			for i := range want {
				if ids[i] != int64(i) {
					t.Fatalf("row %d: id %d", i, ids[i])
				}
				w := want[i]
				if w != nil && len(w) == 0 {
					empties++
					w = []any{}
				}
				if w == nil {
					nulls++
				}
				for _, e := range w {
					if e == nil {
						nullElems++
					}
				}
				if !reflect.DeepEqual(got[i], w) {
					t.Fatalf("row %d: %#v, want %#v", i, got[i], w)
				}
			}
			if empties == 0 || c.listOpt && nulls == 0 || c.elemOpt && nullElems == 0 {
				t.Fatalf("the case covers %d null lists, %d empty, %d null elements", nulls, empties, nullElems)
			}
		})
	}
}

// TestDecodeListRefusals: lists of structs, a list read as a scalar and a
// scalar read as a list are refused when the file is opened.
func TestDecodeListRefusals(t *testing.T) {
	write := func(n parquet.Node) *parquet.File {
		var buf bytes.Buffer
		w := parquet.NewWriter(&buf, parquet.NewSchema("t", parquet.Group{"l": n}))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, c := range []struct {
		name string
		node parquet.Node
		typ  stream.Type
		want string
	}{
		{"array struct", legacyList{parquet.Group{"array": parquet.Repeated(parquet.Group{"x": parquet.Int(64)})}}, stream.ArrayOf(stream.Int64), "a list of structs"},
		{"struct of two", legacyList{parquet.Group{"list": parquet.Repeated(parquet.Group{"x": parquet.Int(64), "y": parquet.Int(64)})}}, stream.ArrayOf(stream.Int64), "a list of structs"},
		{"list of lists", parquet.List(parquet.List(parquet.Int(64))), stream.ArrayOf(stream.Int64), "nested"},
		{"list as scalar", parquet.List(parquet.Int(64)), stream.Int64, "not a flat primitive"},
		{"scalar as list", parquet.Int(64), stream.ArrayOf(stream.Int64), "not a list"},
		{"struct as list", parquet.Group{"x": parquet.Int(64)}, stream.ArrayOf(stream.Int64), "not a LIST"},
		{"wrong element type", parquet.List(parquet.String()), stream.ArrayOf(stream.Int64), "cannot be read as"},
	} {
		_, err := Open(write(c.node), []Field{{Name: "l", Type: c.typ}}, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
}
