package session

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/stream"
)

// keyCell is a group value of a key-type test: the column storage's value,
// or null.
type keyCell struct {
	null bool
	i    int64
	f    float64
	s    string
	d    stream.Dec128
}

// keyTypeCases give each group key type the windowed aggregation takes two
// values and, for the same group under another spelling, a third (-0.0
// and 0.0 are one FLOAT/DOUBLE group, as Spark's NormalizeFloatingNumbers
// makes them); "" and a NUL byte check the string key's escapes.
var keyTypeCases = []struct {
	t        stream.Type
	a, b, a2 keyCell
}{
	{stream.Int8, keyCell{i: 127}, keyCell{i: -128}, keyCell{i: 127}},
	{stream.Int16, keyCell{i: -3}, keyCell{i: 300}, keyCell{i: -3}},
	{stream.Int32, keyCell{i: 1 << 30}, keyCell{i: -7}, keyCell{i: 1 << 30}},
	{stream.Boolean, keyCell{i: 1}, keyCell{i: 0}, keyCell{i: 1}},
	{stream.Date, keyCell{i: 19000}, keyCell{i: -1}, keyCell{i: 19000}},
	{stream.TimestampNTZ, keyCell{i: 1e15}, keyCell{i: 0}, keyCell{i: 1e15}},
	{stream.Float64, keyCell{f: math.Copysign(0, -1)}, keyCell{f: 1.5}, keyCell{f: 0}},
	{stream.Float32, keyCell{f: 2.5}, keyCell{f: -1}, keyCell{f: 2.5}},
	{stream.DecimalOf(12, 2), keyCell{d: stream.Dec128Of(-12345)}, keyCell{d: stream.Dec128Of(1)}, keyCell{d: stream.Dec128Of(-12345)}},
	{stream.DecimalOf(38, 0), keyCell{d: stream.Dec128Of(math.MaxInt64)}, keyCell{d: stream.Dec128Of(0)}, keyCell{d: stream.Dec128Of(math.MaxInt64)}},
	{stream.Binary, keyCell{s: "\x00\x01"}, keyCell{s: ""}, keyCell{s: "\x00\x01"}},
	{stream.Int64, keyCell{i: -1}, keyCell{i: 1}, keyCell{i: -1}},
	{stream.String, keyCell{s: "a\x00"}, keyCell{s: ""}, keyCell{s: "a\x00"}},
}

// keyBatch is rows (ts in seconds, group value) of a ts, k batch.
func keyBatch(t stream.Type, ts []int64, ks []keyCell) *stream.Batch {
	k := stream.Column{Name: "k", Type: t, Valid: make([]bool, len(ks))}
	for i, c := range ks {
		k.Valid[i] = !c.null
		switch {
		case t.Kind() == stream.Decimal:
			k.Decimals = append(k.Decimals, c.d)
		case t.Storage() == stream.String:
			k.Strings = append(k.Strings, c.s)
		case t.Storage() == stream.Float64:
			k.Float64s = append(k.Float64s, c.f)
		default:
			k.Int64s = append(k.Int64s, c.i)
		}
	}
	us := make([]int64, len(ts))
	for i, s := range ts {
		us[i] = s * 1e6
	}
	return &stream.Batch{Len: len(ts), Columns: []stream.Column{{Name: "ts", Type: stream.Timestamp, Int64s: us}, k}}
}

// keyText renders row i of group column c as the test expects it.
func keyCellText(c *stream.Column, i int) string {
	switch {
	case c.IsNull(i):
		return "NULL"
	case c.Type.Kind() == stream.Decimal:
		return c.Decimals[i].Text(c.Type.Scale())
	case c.Type.Storage() == stream.String:
		return fmt.Sprintf("%q", c.Strings[i])
	case c.Type.Storage() == stream.Float64:
		return fmt.Sprint(c.Float64s[i])
	}
	return fmt.Sprint(c.Int64s[i])
}

// TestGroupKeyTypes: a session window groups by every type the windowed
// aggregation's group keys take. Per type, batch 0 opens sessions of two
// values and a null; after a restart (the operator reopened at version 0),
// batch 1's row of the first value merges with its stored session, in its
// own storage spelling (0.0 after -0.0), and each group's key comes back
// out of the state as it went in.
func TestGroupKeyTypes(t *testing.T) {
	for _, c := range keyTypeCases {
		t.Run(c.t.String(), func(t *testing.T) {
			spec := Spec{Column: "ts", Gap: time.Minute, GroupBy: []string{"k"}, Mode: agg.Complete,
				Aggregates:  []agg.Aggregate{{Kind: agg.Count, As: "n"}, {Kind: agg.Max, Column: "ts", As: "last"}},
				ColumnTypes: map[string]stream.Type{"ts": stream.Timestamp, "k": c.t}}
			out, err := runReopened(t, spec, []*stream.Batch{
				keyBatch(c.t, []int64{0, 10, 20}, []keyCell{c.a, c.b, {null: true}}),
				keyBatch(c.t, []int64{30, 200}, []keyCell{c.a2, {null: true}}),
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := out.Column("k").Type; got != c.t {
				t.Fatalf("output key column is %s", got)
			}
			var got []string
			for i := range out.Len {
				got = append(got, fmt.Sprintf("%d-%d %s n=%d", out.Column(ColStart).Int64s[i]/1e6, out.Column(ColEnd).Int64s[i]/1e6,
					keyCellText(out.Column("k"), i), out.Column("n").Int64s[i]))
			}
			sort.Strings(got)
			ka := keyCellText(keyBatch(c.t, []int64{0}, []keyCell{c.a2}).Column("k"), 0)
			kb := keyCellText(keyBatch(c.t, []int64{0}, []keyCell{c.b}).Column("k"), 0)
			want := []string{"0-90 " + ka + " n=2", "10-70 " + kb + " n=1", "20-80 NULL n=1", "200-260 NULL n=1"}
			sort.Strings(want)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}
