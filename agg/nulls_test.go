package agg

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// runBatches drives an operator over batches (one chunk each) on a fresh
// in-memory checkpoint, committing each, and returns every output row as
// text (nulls as "null") and the first error.
func runBatches(t *testing.T, spec Spec, batches ...*stream.Batch) ([]string, error) {
	t.Helper()
	op, err := New(spec)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := op.Open(ctx, stream.OperatorEnv{StateDir: "/ck/state/0", FS: vfs.NewMem(), LocalDir: t.TempDir(), Partitions: 2, Version: -1}); err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	var rows []string
	for id, b := range batches {
		if err := op.Process(ctx, int64(id), 0, b); err != nil {
			op.Abort()
			return rows, err
		}
		out, _, err := op.Finish(ctx, int64(id), 0)
		if err != nil {
			op.Abort()
			return rows, err
		}
		for r := 0; r < out.Len; r++ {
			var f []string
			for _, c := range out.Columns {
				switch {
				case c.IsNull(r):
					f = append(f, c.Name+"=null")
				case c.Type == stream.String:
					f = append(f, c.Name+"="+c.Strings[r])
				case c.Type == stream.Timestamp:
					f = append(f, c.Name+"="+time.UnixMicro(c.Int64s[r]).UTC().Format("15:04"))
				case c.Type == stream.Float64:
					f = append(f, fmt.Sprintf("%s=%g", c.Name, c.Float64s[r]))
				default:
					f = append(f, fmt.Sprintf("%s=%d", c.Name, c.Int64s[r]))
				}
			}
			rows = append(rows, fmt.Sprintf("b%d %s", id, strings.Join(f, " ")))
		}
		// Complete mode scans the state partitions: order rows by text.
		slices.Sort(rows[len(rows)-out.Len:])
		if err := op.Commit(ctx, int64(id)); err != nil {
			t.Fatal(err)
		}
	}
	return rows, nil
}

func minerBatch(miners []string, valid []bool, gas []int64, gasValid []bool) *stream.Batch {
	return &stream.Batch{Len: len(miners), Columns: []stream.Column{
		{Name: "miner", Type: stream.String, Strings: miners, Valid: valid},
		{Name: "gas_used", Type: stream.Int64, Int64s: gas, Valid: gasValid},
	}}
}

var nullSpec = Spec{GroupBy: []string{"miner"}, Mode: Complete,
	Aggregates: []Aggregate{{Kind: Count, As: "n"}, {Kind: Count, Column: "gas_used", As: "c"}, {Kind: Sum, Column: "gas_used", As: "s"},
		{Kind: Min, Column: "gas_used", As: "lo"}, {Kind: Max, Column: "gas_used", As: "hi"}, {Kind: Avg, Column: "gas_used", As: "a"}},
	ColumnTypes: map[string]stream.Type{"miner": stream.String, "gas_used": stream.Int64}}

// TestNullGroupKeyIsAGroup: Spark groups null keys together (a null group,
// first in key order, NULLS FIRST), it is kept in state across batches and
// read back null; count(col), sum, min, max and avg skip nulls, and a group
// that saw only nulls gives null (count(col) gives 0).
func TestNullGroupKeyIsAGroup(t *testing.T) {
	rows, err := runBatches(t, nullSpec,
		minerBatch([]string{"0xaa", "", "garbage", "0xaa"}, []bool{true, false, false, true}, []int64{1, 5, 7, 0}, []bool{true, true, true, false}),
		minerBatch([]string{"", "0xbb"}, []bool{false, true}, []int64{0, 9}, []bool{true, false}))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"b0 miner=0xaa n=2 c=1 s=1 lo=1 hi=1 a=1",
		"b0 miner=null n=2 c=2 s=12 lo=5 hi=7 a=6",
		"b1 miner=0xaa n=2 c=1 s=1 lo=1 hi=1 a=1",
		"b1 miner=0xbb n=1 c=0 s=null lo=null hi=null a=null",
		"b1 miner=null n=3 c=3 s=12 lo=0 hi=7 a=4",
	}
	if got := strings.Join(rows, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
	// A null BIGINT or TIMESTAMP key is a group too (state format 2: a
	// nullable key field), first in key order, kept across batches.
	spec := Spec{GroupBy: []string{"gas_used"}, Mode: Complete, Aggregates: []Aggregate{{Kind: Count, As: "n"}}, ColumnTypes: nullSpec.ColumnTypes}
	rows, err = runBatches(t, spec, minerBatch([]string{"a", "b", "c"}, nil, []int64{1, 0, 1}, []bool{true, false, true}),
		minerBatch([]string{"d"}, nil, []int64{0}, []bool{false}))
	if got := strings.Join(rows, ";"); err != nil || got != "b0 gas_used=1 n=2;b0 gas_used=null n=1;b1 gas_used=1 n=2;b1 gas_used=null n=2" {
		t.Errorf("null int64 key: %s %v", got, err)
	}
	ts := Spec{GroupBy: []string{"ts"}, Aggregates: []Aggregate{{Kind: Count, As: "n"}}, ColumnTypes: map[string]stream.Type{"ts": stream.Timestamp}}
	rows, err = runBatches(t, ts, &stream.Batch{Len: 3, Columns: []stream.Column{{Name: "ts", Type: stream.Timestamp, Int64s: []int64{0, 60e6, 0}, Valid: []bool{false, true, false}}}})
	if got := strings.Join(rows, ";"); err != nil || got != "b0 ts=00:01 n=1;b0 ts=null n=2" {
		t.Errorf("null timestamp key: %s %v", got, err)
	}
	// State format 1 (checkpoints written before format 2) has no null
	// for a non-string key: refused, by name.
	spec.StateFormat = StateFormat1
	_, err = runBatches(t, spec, minerBatch([]string{"a"}, nil, []int64{1}, []bool{false}))
	if errcode.Code(err) != CodeNullGroupKey || !strings.Contains(err.Error(), "gas_used") {
		t.Errorf("null int64 key: %v", err)
	}
}

// TestSumOverflow: under spark.sql.ansi.enabled (Spark 4's default) a long
// sum that leaves BIGINT fails the batch with ARITHMETIC_OVERFLOW naming
// the aggregate and the batch, within a batch or against the stored sum;
// with ansi off it wraps as Spark 3's. avg sums in a double in both modes,
// as Spark's Average; state format 1's long avg sum fails in both.
func TestSumOverflow(t *testing.T) {
	big := func(vs ...int64) *stream.Batch {
		m := make([]string, len(vs))
		for i := range m {
			m[i] = "0xaa"
		}
		return minerBatch(m, nil, vs, nil)
	}
	sum := Spec{GroupBy: []string{"miner"}, Aggregates: []Aggregate{{Kind: Sum, Column: "gas_used", As: "s"}}, ColumnTypes: nullSpec.ColumnTypes}
	for name, batches := range map[string][]*stream.Batch{
		"within a batch": {big(math.MaxInt64, 1)},
		"across batches": {big(math.MaxInt64), big(1)},
		"negative":       {big(math.MinInt64), big(-1)},
	} {
		_, err := runBatches(t, sum, batches...)
		if errcode.Code(err) != CodeArithmeticOverflow || !strings.Contains(err.Error(), fmt.Sprintf("batch %d: sum(gas_used) as s", len(batches)-1)) {
			t.Errorf("%s: %v", name, err)
		}
	}
	wrap := sum
	wrap.NonANSI = true
	rows, err := runBatches(t, wrap, big(math.MaxInt64), big(1))
	if err != nil || rows[len(rows)-1] != fmt.Sprintf("b1 miner=0xaa s=%d", int64(math.MinInt64)) {
		t.Errorf("non-ANSI: %v %v", rows, err)
	}
	for _, ansi := range []bool{true, false} {
		avg := sum
		avg.NonANSI = !ansi
		avg.Aggregates = []Aggregate{{Kind: Avg, Column: "gas_used", As: "a"}}
		rows, err := runBatches(t, avg, big(math.MaxInt64/2+1, math.MaxInt64/2+1), big(math.MaxInt64))
		if want := fmt.Sprintf("b1 miner=0xaa a=%g", (2*float64(math.MaxInt64/2+1)+float64(math.MaxInt64))/3); err != nil || len(rows) != 2 || rows[1] != want {
			t.Errorf("avg (ansi %v): %v %v, want %s", ansi, rows, err, want)
		}
		avg.StateFormat = StateFormat1
		if _, err := runBatches(t, avg, big(math.MaxInt64/2+1, math.MaxInt64/2+1)); errcode.Code(err) != CodeArithmeticOverflow {
			t.Errorf("avg (state format 1, ansi %v): %v", ansi, err)
		}
	}
	// No overflow at the edge.
	if rows, err := runBatches(t, sum, big(math.MaxInt64-1), big(1)); err != nil || rows[1] != fmt.Sprintf("b1 miner=0xaa s=%d", int64(math.MaxInt64)) {
		t.Errorf("edge: %v %v", rows, err)
	}
}

// TestGlobalAggregation: no GROUP BY and no window is one group (Spark's
// global aggregation), in update and complete mode.
func TestGlobalAggregation(t *testing.T) {
	for _, mode := range []OutputMode{Update, Complete} {
		spec := Spec{Mode: mode, Aggregates: []Aggregate{{Kind: Count, As: "n"}, {Kind: Sum, Column: "gas_used", As: "s"}}, ColumnTypes: nullSpec.ColumnTypes}
		rows, err := runBatches(t, spec, minerBatch([]string{"a", "b"}, nil, []int64{1, 2}, nil), minerBatch([]string{"c"}, nil, []int64{4}, nil))
		if err != nil || strings.Join(rows, ";") != "b0 n=2 s=3;b1 n=3 s=7" {
			t.Errorf("%s: %v %v", mode, rows, err)
		}
	}
}

// TestStartTime: window(ts, 1 hour, 1 hour, 15 minutes) starts windows at
// hh:15, as Spark's startTime does.
func TestStartTime(t *testing.T) {
	spec := Spec{Window: &Window{Column: "ts", Size: time.Hour, Start: 15 * time.Minute}, Mode: Update,
		Aggregates: []Aggregate{{Kind: Count, As: "n"}}, ColumnTypes: map[string]stream.Type{"ts": stream.Timestamp}}
	at := func(hhmm ...string) *stream.Batch {
		b := &stream.Batch{Len: len(hhmm), Columns: []stream.Column{{Name: "ts", Type: stream.Timestamp}}}
		for _, s := range hhmm {
			tm, _ := time.Parse("15:04", s)
			b.Columns[0].Int64s = append(b.Columns[0].Int64s, tm.UnixMicro())
		}
		return b
	}
	rows, err := runBatches(t, spec, at("00:10", "00:15", "01:14", "01:15"))
	if err != nil {
		t.Fatal(err)
	}
	want := "b0 window_start=00:15 window_end=01:15 n=2;b0 window_start=01:15 window_end=02:15 n=1;b0 window_start=23:15 window_end=00:15 n=1"
	if got := strings.Join(rows, ";"); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
