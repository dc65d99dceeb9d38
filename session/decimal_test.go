package session

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// decRun runs batches (ts in seconds, key, amount; a nil amount is null)
// through a complete-mode session aggregation of gap 1 minute, the
// operator reopened before each batch; it returns the last output, or the
// first error.
func decRun(t *testing.T, amt stream.Type, aggs []agg.Aggregate, batches [][]decRow) (*stream.Batch, error) {
	t.Helper()
	spec := Spec{Column: "ts", Gap: time.Minute, GroupBy: []string{"k"}, Mode: agg.Complete, Aggregates: aggs,
		ColumnTypes: map[string]stream.Type{"ts": stream.Timestamp, "k": stream.String, "amt": amt}}
	ins := make([]*stream.Batch, len(batches))
	for b, rows := range batches {
		in := &stream.Batch{Len: len(rows), Columns: []stream.Column{{Name: "ts", Type: stream.Timestamp}, {Name: "k", Type: stream.String},
			{Name: "amt", Type: amt, Valid: make([]bool, len(rows))}}}
		for i, r := range rows {
			in.Columns[0].Int64s = append(in.Columns[0].Int64s, r.ts*1e6)
			in.Columns[1].Strings = append(in.Columns[1].Strings, r.k)
			var d stream.Dec128
			if r.amt != "" {
				var ok bool
				if d, ok = stream.ParseDecimal(r.amt, amt.Precision(), amt.Scale()); !ok {
					t.Fatalf("bad decimal %q", r.amt)
				}
			}
			in.Columns[2].Decimals = append(in.Columns[2].Decimals, d)
			in.Columns[2].Valid[i] = r.amt != ""
		}
		ins[b] = in
	}
	return runReopened(t, spec, ins)
}

type decRow struct {
	ts  int64
	k   string
	amt string
}

// TestDecimalAggregates: sum, min, max and avg of a DECIMAL(12,2) column
// in a session take Spark's types (sum DECIMAL(22,2), avg DECIMAL(16,6)
// rounded HALF_UP, min and max DECIMAL(12,2)) and keep their exact values
// through a restart: batch 1's row merges with the session batch 0 stored.
// A session of only nulls is null but for count.
func TestDecimalAggregates(t *testing.T) {
	aggs := []agg.Aggregate{{Kind: agg.Count, Column: "amt", As: "n"}, {Kind: agg.Sum, Column: "amt", As: "s"},
		{Kind: agg.Min, Column: "amt", As: "lo"}, {Kind: agg.Max, Column: "amt", As: "hi"}, {Kind: agg.Avg, Column: "amt", As: "mean"}}
	out, err := decRun(t, stream.DecimalOf(12, 2), aggs, [][]decRow{
		{{0, "a", "1.05"}, {10, "a", "-2.50"}, {20, "a", ""}, {5, "b", ""}},
		{{30, "a", "10.02"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		t    stream.Type
		a, b string
	}{
		"n": {stream.Int64, "3", "0"}, "s": {stream.DecimalOf(22, 2), "8.57", "NULL"},
		"lo": {stream.DecimalOf(12, 2), "-2.50", "NULL"}, "hi": {stream.DecimalOf(12, 2), "10.02", "NULL"},
		"mean": {stream.DecimalOf(16, 6), "2.856667", "NULL"},
	}
	if out.Len != 2 {
		t.Fatalf("%d sessions, want 2", out.Len)
	}
	for name, w := range want {
		c := out.Column(name)
		if c.Type != w.t {
			t.Errorf("%s is %s, want %s", name, c.Type, w.t)
			continue
		}
		for i := range out.Len {
			got := "NULL"
			switch {
			case c.IsNull(i):
			case c.Type.Kind() == stream.Decimal:
				got = c.Decimals[i].Text(c.Type.Scale())
			default:
				got = strconv.FormatInt(c.Int64s[i], 10)
			}
			exp := w.a
			if out.Column("k").Strings[i] == "b" {
				exp = w.b
			}
			if got != exp {
				t.Errorf("%s of %s: got %s, want %s", name, out.Column("k").Strings[i], got, exp)
			}
		}
	}
}

// TestDecimalOverflow: a DECIMAL(38,0) sum that leaves 38 digits (two
// sessions merged by a late row after a restart), and an avg whose
// DECIMAL(38,4) cannot hold one row's value, fail the batch with
// ARITHMETIC_OVERFLOW, as the grouped aggregation's do.
func TestDecimalOverflow(t *testing.T) {
	big := "90000000000000000000000000000000000000"
	_, err := decRun(t, stream.DecimalOf(38, 0), []agg.Aggregate{{Kind: agg.Sum, Column: "amt", As: "s"}},
		[][]decRow{{{0, "a", big}, {100, "a", big}}, {{50, "a", "1"}}})
	if errcode.Code(err) != agg.CodeArithmeticOverflow || !strings.Contains(err.Error(), "decimal(38,0)") {
		t.Fatalf("sum: got %v", err)
	}
	_, err = decRun(t, stream.DecimalOf(38, 0), []agg.Aggregate{{Kind: agg.Avg, Column: "amt", As: "m"}},
		[][]decRow{{{0, "a", big}}})
	if errcode.Code(err) != agg.CodeArithmeticOverflow {
		t.Fatalf("avg: got %v", err)
	}
}
