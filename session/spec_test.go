package session

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// TestSpecRefusals: Spark's refusals (update mode, append without a
// watermark, a global session aggregation) and malformed specs.
func TestSpecRefusals(t *testing.T) {
	ok := Spec{Column: "ts", Gap: time.Minute, GroupBy: []string{"k"}, Aggregates: testAggs, Mode: agg.Append,
		WatermarkDelay: time.Minute, ColumnTypes: testTypes}
	for _, c := range []struct {
		edit       func(*Spec)
		code, want string
	}{
		{func(s *Spec) { s.Mode = agg.Update }, agg.CodeUnsupportedOutputMode, "Update output mode not supported for session window on streaming DataFrames/DataSets"},
		{func(s *Spec) { s.Mode = 0 }, agg.CodeUnsupportedOutputMode, "Update output mode not supported for session window"},
		{func(s *Spec) { s.WatermarkDelay = 0 }, agg.CodeUnsupportedOutputMode, "without watermark"},
		{func(s *Spec) { s.GroupBy = nil }, errcode.InvalidArgument, "Global aggregation with session window in streaming query is not supported"},
		{func(s *Spec) { s.GapColumn = "gap" }, errcode.InvalidArgument, "one gap"},
		{func(s *Spec) { s.Gap = 0 }, errcode.InvalidArgument, "one gap"},
		{func(s *Spec) { s.Gap = -time.Second }, errcode.InvalidArgument, "positive"},
		{func(s *Spec) { s.Gap, s.GapColumn = 0, "v" }, agg.CodeDatatypeMismatch, "want string"},
		{func(s *Spec) { s.Column = "v" }, agg.CodeDatatypeMismatch, "want timestamp"},
		{func(s *Spec) { s.GroupBy = []string{"nope"} }, errcode.InvalidArgument, `"nope"`},
		{func(s *Spec) { s.Aggregates = []agg.Aggregate{{Kind: agg.Count, As: "k"}} }, errcode.InvalidArgument, `"k" appears twice`},
		{func(s *Spec) { s.Aggregates = []agg.Aggregate{{Kind: agg.Count, As: ColEnd}} }, errcode.InvalidArgument, "appears twice"},
		// A Buffer holds a long or a double: a DECIMAL sum is refused, not
		// read from the wrong storage (it panicked).
		{func(s *Spec) {
			s.ColumnTypes = maps.Clone(s.ColumnTypes)
			s.ColumnTypes["d"] = stream.DecimalOf(12, 2)
			s.Aggregates = []agg.Aggregate{{Kind: agg.Sum, Column: "d", As: "s"}}
		}, agg.CodeDatatypeMismatch, "do not take DECIMAL"},
	} {
		s := ok
		c.edit(&s)
		_, err := New(s)
		if errcode.Code(err) != c.code || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %s %q", err, c.code, c.want)
		}
	}
	if _, err := New(ok); err != nil {
		t.Fatal(err)
	}
}

// TestStateSchema: Spark's v1 layout, key (group columns, session start),
// value (session end, the aggregate buffers); the gap is in the spec text.
func TestStateSchema(t *testing.T) {
	op, err := New(Spec{Column: "ts", Gap: 10 * time.Minute, GroupBy: []string{"k", "n"}, Aggregates: testAggs, Mode: agg.Complete, ColumnTypes: testTypes})
	if err != nil {
		t.Fatal(err)
	}
	want := "sessionWindowStateStoreSaveExec key(k string, n int64 nullable, session_start timestamp) " +
		"value(session_end timestamp, count int64, sum int64, sum__nonnull int64, min int64, min__nonnull int64, max int64, max__nonnull int64, avg float64, avg__nonnull int64) " +
		"spec(session/v1 time=ts gap=10m0s groupBy=k,n aggs=count(*):count,sum(v):sum,min(v):min,max(v):max,avg(v):avg)"
	if got := op.Schema().String(); got != want {
		t.Errorf("schema\n %s\nwant\n %s", got, want)
	}
}
