package query

import (
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/expr"
	"github.com/ethstream/ethstream/stream"
)

// testOptions registers what the ethereum app registers: the view blocks
// over both sources, then each source by name.
func testOptions() Options {
	return Options{Sources: []string{"s3_backfill", "eth_live"}, Schemas: []stream.Schema{ethblock.StreamSchema(), ethblock.StreamSchema()},
		Relations:       []Relation{{Name: "blocks", Sources: []int{0, 1}}, {Name: "s3_backfill", Sources: []int{0}}, {Name: "eth_live", Sources: []int{1}}},
		WatermarkColumn: "block_ts", WatermarkDelay: 48 * time.Hour}
}

const reference = "SELECT window(block_ts, '5 minutes') AS window, source, miner, count(*) AS count FROM blocks GROUP BY window(block_ts, '5 minutes'), source, miner"

func TestCompileReference(t *testing.T) {
	c, err := Compile(reference, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	s := c.Spec
	if s.Window == nil || s.Window.Size != 5*time.Minute || s.Window.Slide != 0 || s.WatermarkDelay != 48*time.Hour ||
		strings.Join(s.GroupBy, ",") != "source,miner" || len(s.Aggregates) != 1 || s.Aggregates[0].Kind != agg.Count || s.Mode != agg.Update {
		t.Fatalf("spec %+v", s)
	}
	if strings.Join(c.Columns, ",") != "block_ts,source,miner" || len(c.Sources) != 2 || c.Where != nil {
		t.Fatalf("columns %v sources %v", c.Columns, c.Sources)
	}
	if c.Text != "select window(block_ts, '5 minutes') as window, source, miner, count(*) as count from blocks group by window(block_ts, '5 minutes'), source, miner" {
		t.Fatalf("canonical %q", c.Text)
	}
}

// TestCorpusValid compiles queries a Spark user would write and checks the
// essentials of what they resolve to.
func TestCorpusValid(t *testing.T) {
	for _, tc := range []struct {
		q       string
		mode    string
		columns string // projection
		aggs    string // output names
		where   string // canonical filter
		sources int
	}{
		{q: reference, columns: "block_ts,source,miner", aggs: "count", sources: 2},
		{q: "select window, miner, sum(gas_used) as gas from blocks where transaction_count > 0 group by window(block_ts, '1 hour'), miner",
			columns: "block_ts,miner,gas_used,transaction_count", aggs: "gas", where: "(transaction_count > 0)", sources: 2},
		{q: "SELECT window(block_ts,'10 minutes','5 minutes'), source, count(*), avg(gas_used), min(gas_used), max(block_ts) FROM s3_backfill GROUP BY window(block_ts,'10 minutes','5 minutes'), source;",
			columns: "block_ts,source,gas_used", aggs: "count,avg_gas_used,min_gas_used,max_block_ts", sources: 1},
		{q: "select miner, count(1) n from eth_live group by miner", columns: "miner", aggs: "n", sources: 1},
		{q: "select `miner`, COUNT(*) AS `blocks` FROM `eth_live` GROUP BY `MINER`", columns: "miner", aggs: "blocks", sources: 1},
		{q: "select source, miner, window, count(*) as count from blocks group by window(block_ts, '5 minutes'), source, miner",
			columns: "block_ts,source,miner", aggs: "count", sources: 2},
		{q: "select window, count(number) from blocks where miner in ('0xaa', '0xbb') and not (gas_used is null or gas_used between 1 and 5) group by window(block_ts, 'interval 2 hours')",
			columns: "block_ts,number,miner,gas_used", aggs: "count_number", where: "((miner in ('0xaa', '0xbb')) and (not ((gas_used is null) or ((gas_used >= 1) and (gas_used <= 5)))))", sources: 2},
		{q: "select window, count(*) from blocks where block_ts >= timestamp '2024-01-01 00:00:00' and miner <> '0xaa' or number != -1 group by window(block_ts, '1 day')",
			columns: "block_ts,miner,number", aggs: "count", where: "(((block_ts >= '2024-01-01 00:00:00') and (miner <> '0xaa')) or (number <> -1))", sources: 2},
		{q: "select window, miner, max(gas_used) from blocks group by window(block_ts, '15 minutes'), miner -- trailing comment", mode: "append",
			columns: "block_ts,miner,gas_used", aggs: "max_gas_used", sources: 2},
		{q: "/* c */ select window, miner, mean(transaction_count) from blocks where miner not in ('0x00') group by window(block_ts, '5minutes'), miner", mode: "complete",
			columns: "block_ts,miner,transaction_count", aggs: "avg_transaction_count", where: "(miner not in ('0x00'))", sources: 2},
	} {
		o := testOptions()
		o.OutputMode = tc.mode
		if !strings.Contains(tc.q, "window") {
			o.WatermarkColumn = ""
		}
		c, err := Compile(tc.q, o)
		if err != nil {
			t.Errorf("%s: %v", tc.q, err)
			continue
		}
		var names []string
		for _, a := range c.Spec.Aggregates {
			n := a.As
			if n == "" {
				if a.Column == "" {
					n = "count"
				} else {
					n = a.Kind.String() + "_" + a.Column
				}
			}
			names = append(names, n)
		}
		where := ""
		if c.Where != nil {
			where = c.Where.String()
		}
		if got := strings.Join(c.Columns, ","); got != tc.columns {
			t.Errorf("%s: columns %s, want %s", tc.q, got, tc.columns)
		}
		if got := strings.Join(names, ","); got != tc.aggs {
			t.Errorf("%s: aggregates %s, want %s", tc.q, got, tc.aggs)
		}
		if where != tc.where {
			t.Errorf("%s: where %s, want %s", tc.q, where, tc.where)
		}
		if len(c.Sources) != tc.sources {
			t.Errorf("%s: %d sources, want %d", tc.q, len(c.Sources), tc.sources)
		}
		if _, err := agg.New(c.Spec); err != nil {
			t.Errorf("%s: agg refuses the spec: %v", tc.q, err)
		}
		// The canonical text is a fixed point.
		c2, err := Compile(c.Text, o)
		if err != nil || c2.Text != c.Text {
			t.Errorf("%s: canonical %q does not recompile to itself: %v", tc.q, c.Text, err)
		}
	}
}

// TestCorpusInvalid checks that each refused query gets the right code and
// a message naming what is wrong.
func TestCorpusInvalid(t *testing.T) {
	const win = " group by window(block_ts, '5 minutes'), miner"
	for _, tc := range []struct {
		q, code, says string
	}{
		{"", CodeParseSyntax, "expected SELECT"},
		{"selec window from blocks", CodeParseSyntax, "expected SELECT"},
		{"select window, miner, count(*) from blocks" + win + " having sum(hash) > 1", CodeInvalidQuery, "the input is a string"},
		{"select window, miner, count(*) from blocks" + win + " having number > 1", CodeInvalidQuery, "number is neither in GROUP BY nor aggregated"},
		{"select window, miner, count(*) from blocks" + win + " having count(*)", CodeInvalidQuery, "not a condition"},
		{"select window, miner, count(*) / 2 from blocks" + win, CodeInvalidQuery, "needs a name"},
		{"select window, miner, count(*) from blocks" + win + " order by miner", CodeUnsupported, "Sorting is not supported on streaming DataFrames/Datasets, unless it is on aggregated DataFrame/Dataset in Complete output mode (at 1:90)"},
		{"select window, miner, count(*) from blocks" + win + " limit 10", CodeUnsupported, "Limits are not supported on streaming DataFrames/Datasets in Update output mode (at 1:90)"},
		{"select *, number from blocks", CodeUnsupported, "SELECT * (name"},
		{"select distinct miner, count(*) from blocks group by miner", CodeUnsupported, "SELECT DISTINCT with GROUP BY"},
		{"select distinct miner, count(*) from blocks", CodeUnsupported, "SELECT DISTINCT over an aggregate"},
		{"select window, miner, count(*) from blocks join other on a = b" + win, CodeUnsupported, "JOIN"},
		{"select window, miner, count(*) from blocks b" + win, CodeUnsupported, "table alias"},
		{"select window, miner, count(distinct hash) from blocks" + win, CodeUnsupported, "DISTINCT"},
		{"select window, miner, sum(gas_used * 2) from blocks" + win, CodeInvalidQuery, "needs a name"},
		{"select window, miner, stddev(gas_used) from blocks" + win, CodeUnsupported, "stddev"},
		{"select window, miner, lower(hash) as h, count(*) from blocks" + win, CodeInvalidQuery, "hash is neither in GROUP BY nor aggregated"},
		{"select window, miner, levenshtein(miner, 'a') as l, count(*) from blocks" + win + ", levenshtein(miner, 'a')", expr.CodeUnresolvedRoutine, "date_trunc"},
		{"select window, miner, sum(gas_used / 0) as s from blocks where gas_used = 'x'" + win, "CAST_INVALID_INPUT", "malformed"},
		{"select window, miner, sum(miner || 'x') as s from blocks" + win, CodeInvalidQuery, "the input is a string"},
		{"select window, miner, count(distinct gas_used) from blocks" + win, CodeUnsupported, "distinct aggregations are not supported on streaming"},
		{"select window, miner, count(*) from blocks where miner in (select x from y)" + win, CodeUnsupported, "subquery"},
		{"select window, sum(n) as n from (select window, miner, count(*) as n from blocks" + win + ") group by window(window_time(window), '1 hour')", agg.CodeUnsupportedOutputMode, "Multiple streaming aggregations are not supported with streaming DataFrames/Datasets in update output mode"},
		{"select window, miner, count(*) from (select * from blocks order by number)" + win, CodeUnsupported, "ORDER in a subquery"},
		{"select * from (select number from blocks union all select hash from blocks)", CodeInvalidQuery, "read by branches 1 and 2"},
		{"with t as (select 1) select * from t", CodeUnsupported, "WITH"},
		{"select window, miner, count(*) from blocks" + win + "; select 1", CodeUnsupported, "more than one statement"},
		{"select window, miner, count(*) from blocks where count(*) > 1" + win, CodeUnsupported, "aggregate in WHERE"},
		{"select window, miner, count(*) from blocks group by session_window(block_ts, '5 minutes'), miner", CodeInvalidQuery, "SELECT window without GROUP BY window(...)"},
		// startTime runs now (spark_test.go); one at or beyond the slide is refused as Spark refuses it.
		{"select window, miner, count(*) from blocks group by window(block_ts, '5 minutes', '5 minutes', '5 minutes'), miner", CodeInvalidQuery, "startTime"},
		{"select window, miner, count(*) from blocks group by window(block_ts, 5), miner", CodeParseSyntax, "durations are strings"},
		{"select window, miner, count(*) from blocks group by window(block_ts, '1 month'), miner", CodeParseSyntax, "fixed length"},
		{"select window, miner, count(*) from blocks group by window(block_ts, '5 fortnights'), miner", CodeParseSyntax, "unknown unit"},
		{"select window, miner, count(*) from blocks group by window(block_ts, '5 minutes', '10 minutes'), miner", CodeInvalidQuery, "slide"},
		{"select window, miner, count(*) from blocks group by window(miner, '5 minutes'), miner", CodeInvalidQuery, "not a timestamp"},
		{"select window, miner, count(*) from nowhere" + win, CodeTableNotFound, "FROM nowhere"},
		{"select window, coinbase, count(*) from blocks" + win, CodeUnresolvedColumn, "coinbase"},
		{"select window, miner, sum(fee) from blocks" + win, CodeUnresolvedColumn, "fee"},
		// An unknown column in WHERE is refused as in SELECT: its position and the columns there are.
		{"select window, miner, count(*) from blocks where fee > 1" + win, CodeUnresolvedColumn, `column "fee" does not exist (at 1:50). To fix: use one of: number, hash,`},
		{"select window, miner, count(*) from blocks where number > 1 and `Fee` < 2" + win, CodeUnresolvedColumn, `column "fee" does not exist (at 1:65)`},
		// Columns only: the remedy names both intents (GROUP BY alone would lead to "no aggregate").
		{"select number, miner from blocks where gas_used > 1", CodeInvalidQuery, "number is selected without an aggregate: the query selects columns only (at 1:8). To fix: to aggregate per number, add an aggregate and GROUP BY number (SELECT number, count(*) ... GROUP BY number); to stream the rows themselves, a stateless query, select them with --output-mode append"},
		// A join's qualified column is named as such, not as a field access.
		{"select a.number, count(*) from blocks a join blocks b on a.number = b.number group by a.number", CodeUnsupported, "a qualified column a.number (a query reads one relation, without joins or table aliases: write number) is not supported (at 1:8)"},
		{"select window, miner, count(*) from blocks where miner > 1" + win, "FILTER_INVALID", "string column"},
		{"select window, miner, count(*) from blocks where block_ts > 'soon'" + win, "FILTER_INVALID", "not a timestamp"},
		{"select miner, count(*) from blocks", CodeInvalidQuery, "without GROUP BY"},
		{"select window, miner, hash, count(*) from blocks" + win, CodeInvalidQuery, "neither in GROUP BY"},
		{"select window, count(*) from blocks" + win, CodeInvalidQuery, "miner is not selected"},
		{"select miner, count(*) from blocks" + win, CodeInvalidQuery, "window is not selected"},
		{"select window, miner from blocks" + win, CodeInvalidQuery, "no aggregate"},
		{"select window, miner, sum(miner) from blocks" + win, CodeInvalidQuery, "string"},
		{"select window, miner, avg(block_ts) from blocks" + win, CodeInvalidQuery, "timestamp"},
		{"select window, miner, count(*) as c, sum(gas_used) as c from blocks" + win, CodeInvalidQuery, "appears twice"},
		{"select window as w, miner, count(*) from blocks" + win, CodeUnsupported, "renaming the window"},
		{"select window, miner as m, count(*) from blocks" + win, CodeUnsupported, "renaming a group key"},
		{"select window(block_ts, '10 minutes'), miner, count(*) from blocks" + win, CodeInvalidQuery, "differs from GROUP BY"},
		{"select window, miner, count(*) from blocks where miner = 'unterminated" + win, CodeParseSyntax, "unterminated string"},
		// 99999999999999999999 is a DECIMAL literal (spark_test.go); as a BIGINT it is out of range.
		{"select window, miner, count(*) from blocks where number > 99999999999999999999L" + win, CodeParseSyntax, "out of range"},
		{"select window, miner, count(*) from blocks where" + win, CodeParseSyntax, "expected a column or a value"},
		// GROUP BY 1 is an ordinal (spark.sql.groupByOrdinal, spark_test.go); one past the SELECT list is refused.
		{"select window, miner, count(*) from blocks group by 4", CodeInvalidQuery, "GROUP BY position 4 is not in select list"},
		{"select window, miner, count(*) from blocks group by window(block_ts, '5 minutes'), miner with rollup", CodeUnsupported, "ROLLUP"},
		{"select window, miner, count(*) over () from blocks" + win, CodeUnsupported, "OVER"},
		{"select window, miner, count(*) from blocks" + win + " union select 1", CodeUnsupported, "UNION"},
		{"select window, miner, count(*) from blocks where case when 1 then 2 end" + win, expr.CodeDatatypeMismatch, "not BOOLEAN"},
		{"select window, miner, count(*) from blocks where gas_used is true" + win, CodeUnsupported, "IS TRUE"},
		{"select window, miner, count(*) from blocks where gas_used" + win, "FILTER_INVALID", "not a condition"},
		{"select window, miner, count(*) from blocks ~" + win, CodeParseSyntax, "unexpected character"},
		{"select window, miner, count(*) from blocks where " + strings.Repeat("(", 500) + "number > 1" + strings.Repeat(")", 500) + win, CodeParseSyntax, "nested deeper"},
	} {
		_, err := Compile(tc.q, testOptions())
		if err == nil {
			t.Errorf("%s: compiled, want %s", tc.q, tc.code)
			continue
		}
		if errcode.Code(err) != tc.code || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s:\n  error %v\n  want code %s saying %q", tc.q, err, tc.code, tc.says)
		}
		if strings.Contains(err.Error(), "strconv") || strings.Contains(err.Error(), "runtime") {
			t.Errorf("%s: error leaks Go internals: %v", tc.q, err)
		}
	}
}

func TestOptions(t *testing.T) {
	o := testOptions()
	o.WatermarkColumn = "number"
	if _, err := Compile(reference, o); errcode.Code(err) != CodeUnsupported {
		t.Fatalf("watermark on another column: %v", err)
	}
	o = testOptions()
	o.OutputMode = "upsert"
	if _, err := Compile(reference, o); errcode.Code(err) != errcode.InvalidArgument {
		t.Fatalf("bad mode: %v", err)
	}
	// A delay of 0 is a watermark (Spark's withWatermark requires only
	// that it not be negative).
	for in, want := range map[string]time.Duration{"block_ts, 48 hours": 48 * time.Hour, "BLOCK_TS,2 days": 48 * time.Hour,
		"block_ts, 1 hour 30 minutes": 90 * time.Minute, "block_ts, 0 seconds": 0, "block_ts, INTERVAL 0 SECONDS": 0} {
		col, d, err := ParseWatermark(in)
		if err != nil || col != "block_ts" || d != want {
			t.Errorf("ParseWatermark(%q) = %s %s %v", in, col, d, err)
		}
	}
	for _, in := range []string{"block_ts", "block_ts, soon", ", 1 hour"} {
		if _, _, err := ParseWatermark(in); err == nil {
			t.Errorf("ParseWatermark(%q): no error", in)
		}
	}
	for _, in := range []string{"block_ts, -1 hour", "block_ts, interval -5 minutes"} {
		if _, _, err := ParseWatermark(in); errcode.Code(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), "should not be negative") {
			t.Errorf("ParseWatermark(%q): %v, want Spark's refusal of a negative delay", in, err)
		}
	}
	// The compiled spec has a watermark of delay 0.
	o = testOptions()
	o.WatermarkColumn, o.WatermarkDelay = "block_ts", 0
	c, err := Compile(reference, o)
	if err != nil {
		t.Fatal(err)
	}
	if col, d, ok := c.Spec.Watermark(); !ok || col != "block_ts" || d != 0 {
		t.Errorf("delay 0: spec watermark %q %s %v, want block_ts 0s true", col, d, ok)
	}
	if col, _, ok := c.Watermark(); !ok || col != "block_ts" {
		t.Errorf("delay 0: read path watermark %q %v, want block_ts true", col, ok)
	}
	for _, d := range []time.Duration{time.Microsecond, 5 * time.Minute, 48 * time.Hour, 90 * time.Minute, 36*time.Hour + 1500*time.Millisecond} {
		back, err := ParseInterval(FormatInterval(d))
		if err != nil || back != d {
			t.Errorf("interval %s -> %q -> %s %v", d, FormatInterval(d), back, err)
		}
	}
}

// FuzzCompile: any text either compiles to a spec agg accepts, whose
// canonical text compiles to itself, or fails with a coded error; never a
// panic.
func FuzzCompile(f *testing.F) {
	f.Add(reference)
	f.Add("select window, miner, sum(gas_used) as gas from blocks where transaction_count > 0 and miner in ('a','b') group by window(block_ts, '1 hour', '30 minutes'), miner")
	f.Add("select miner, count(*) from eth_live where not gas_used is null or number between -1 and 2e3 group by miner")
	f.Add("select `x`, 'y' from `z` where a <> b /* c */ -- d")
	f.Fuzz(func(t *testing.T, q string) {
		c, err := Compile(q, testOptions())
		if err != nil {
			if errcode.Code(err) == "" {
				t.Fatalf("%q: uncoded error %v", q, err)
			}
			return
		}
		if _, err := agg.New(c.Spec); err != nil {
			t.Fatalf("%q: compiled, but agg refuses: %v", q, err)
		}
		c2, err := Compile(c.Text, testOptions())
		if err != nil || c2.Text != c.Text {
			t.Fatalf("%q: canonical %q does not recompile to itself: %v", q, c.Text, err)
		}
	})
}
