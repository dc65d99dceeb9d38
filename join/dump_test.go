package join

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// TestDumpTextIsJSON: state dump's text of a stored row (rowText, format
// 1's text) is JSON whatever the column names hold: DEL and other control
// characters, quotes, a backslash, U+2028. Format 1 quoted names with
// strconv.Quote, whose \x7f for DEL no JSON reader takes. The text reads
// back to the row (decodeRowJSON, by position), repeated names included.
func TestDumpTextIsJSON(t *testing.T) {
	fields := []stream.Field{{Name: "del\x7f", Type: stream.Int64}, {Name: "ctl\x01\x1f", Type: stream.String},
		{Name: `q"\`, Type: stream.Float64}, {Name: "ls\u2028", Type: stream.Timestamp}, {Name: "dup", Type: stream.Int64},
		{Name: "dup", Type: stream.Int64}}
	r := vals(int64(-7), "a\x00\"b", 0.5, nil, int64(1), int64(2))
	text := rowText(fields, r, true)
	if !json.Valid(text) {
		t.Fatalf("rowText %q is not JSON", text)
	}
	got, matched, err := decodeRowJSON(fields, state.AppendStringValue(nil, string(text)))
	if err != nil || !sameRow(got, r) || !matched {
		t.Fatalf("decodeRowJSON(%q) = %v %v %v, want %v true", text, boxed(got), matched, err, boxed(r))
	}
}

// TestRenderValue: state dump renders a format-2 value (binary) as the
// text format 1 stored, by the columns the state schema's spec records,
// and leaves a format-1 value's text as it is.
func TestRenderValue(t *testing.T) {
	side := func(alias string) Side {
		return Side{Alias: alias, Keys: []string{"k"}, Schema: stream.Schema{Fields: []stream.Field{
			{Name: "k", Type: stream.String}, {Name: "n\x7f", Type: stream.Int32}, {Name: "f", Type: stream.Float32},
			{Name: "b", Type: stream.Binary}, {Name: "ok", Type: stream.Boolean}}}}
	}
	p, err := newPlan(Spec{Type: Inner, Left: side("a"), Right: side("b")})
	if err != nil {
		t.Fatal(err)
	}
	fields := p.sides[stream.RightSide].Schema.Fields
	r := vals("key", int64(-3), 2.5, "\xff\x00bin", int64(1))
	stored := func(val []byte) []any {
		v, err := state.DecodeValue(p.schema.Value, val)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		store string
		val   []byte
		want  string
	}{
		{StoreKeyWithIndexToValue, encodeRow(nil, fields, r, false), string(rowText(fields, r, false))},
		{StoreKeyWithIndexToValue, encodeRowV1(fields, vals("key", int64(-3), 2.5, "x", int64(1)), true),
			string(rowText(fields, vals("key", int64(-3), 2.5, "x", int64(1)), true))},
		{StoreKeyToNumValues, encodeCount(3), `{"value":3}`},
		{StoreKeyToNumValues, encodeCountV1(4), `{"value":4}`},
	} {
		got, err := renderValue(p.schema, []any{"right", c.store, "key", nil}, stored(c.val))
		if err != nil || !slices.Equal(got, []any{c.want}) {
			t.Errorf("%s %q: rendered %q %v, want %q", c.store, c.val, got, err, c.want)
		}
		if !json.Valid([]byte(got[0].(string))) {
			t.Errorf("%s %q: rendered %q is not JSON", c.store, c.val, got[0])
		}
	}
	// The binary column keeps its bytes in format 2 (format 1 refused a
	// string that is not UTF-8).
	if back, _, err := decodeRow(fields, true, encodeRow(nil, fields, r, false)); err != nil || !sameRow(back, r) {
		t.Fatalf("binary column: %v %v, want %v", boxed(back), err, boxed(r))
	}
}

// TestFormat2Example: the example of doc.go's State layout.
func TestFormat2Example(t *testing.T) {
	fields := []stream.Field{{Name: "k", Type: stream.String}, {Name: "ts", Type: stream.Timestamp}, {Name: "n", Type: stream.Int64}}
	val := encodeRow(nil, fields, vals("a", int64(1709294405000000), nil), false)
	if got := fmt.Sprintf("% x", val[1:]); got != "02 00 04 01 61 80 ed 9c dd 83 a6 89 06" {
		t.Fatalf("encoded % x", val)
	}
}
