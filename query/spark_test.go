package query

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/filter"
	"github.com/ethstream/ethstream/stream"
)

// Each test here states the Spark behaviour it pins (Spark 4: SqlBaseLexer,
// SparkParserUtils.unescapeSQLString, AstBuilder's literals,
// AnsiStringPromotionTypeCoercion, the groupByAliases/groupByOrdinal
// analyzer rules, PushPredicateThroughNonJoin); issue 26 lists where
// ethstream differed.

const winMiner = " group by window(block_ts, '5 minutes'), miner"

func mustCompile(t *testing.T, q string, o Options) *Compiled {
	t.Helper()
	c, err := Compile(q, o)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if _, err := agg.New(c.Spec); err != nil {
		t.Fatalf("%s: agg refuses the spec: %v", q, err)
	}
	c2, err := Compile(c.Text, o)
	if err != nil || c2.Text != c.Text {
		t.Fatalf("%s: canonical %q does not recompile to itself: %v", q, c.Text, err)
	}
	return c
}

// TestStringLiterals: Spark's lexer ends a literal at its first unescaped
// quote, unescapeSQLString decodes the escapes, and adjacent literals are
// one (stringLit+).
func TestStringLiterals(t *testing.T) {
	for in, want := range map[string]string{
		`'\u0062'`: "b", `'\n'`: "\n", `'\t'`: "\t", `'\\'`: `\`, `'\''`: "'", `"\""`: `"`,
		`'\101'`: "A", `'\0'`: "\x00", `'\Z'`: "\x1a", `'\%'`: `\%`, `'\_'`: `\_`, `'\q'`: "q",
		`'a' 'b'`: "ab", `'a''b'`: "ab", `'a' /* c */ "b"`: "ab", `r'\n'`: `\n`, `R"a\"`: `a\`,
		`'\U0001F600'`: "😀", `'\uD83D\uDE00'`: "😀", `'é\u00e9'`: "éé", `'\u12'`: "u12",
	} {
		toks, err := lex(in)
		if err != nil || len(toks) != 2 || toks[0].kind != tString || toks[0].text != want {
			t.Errorf("lex(%s) = %v %v, want one string %q", in, toks, err, want)
		}
	}
	c := mustCompile(t, `select window, miner, count(*) from blocks where miner = '\u0062\t'`+winMiner, testOptions())
	if got := c.Where.String(); got != "(miner = 'b\t')" {
		t.Errorf("where %q", got)
	}
}

// TestComments: bracketed comments nest (BRACKETED_COMMENT), and an
// unclosed one is an error, not the rest of the query.
func TestComments(t *testing.T) {
	mustCompile(t, "/* a /* b */ c */ select window, miner, count(*) from blocks /* x /* y /* z */ */ */"+winMiner+" -- done", testOptions())
	for _, q := range []string{"/* a /* b */ select 1", "select /* open"} {
		if _, err := Compile(q, testOptions()); errcode.Code(err) != CodeParseSyntax || !strings.Contains(err.Error(), "unclosed") {
			t.Errorf("%s: %v", q, err)
		}
	}
}

// TestNames: aliases keep their case (the output column is AVG_TX), column
// and source names resolve case-insensitively.
func TestNames(t *testing.T) {
	c := mustCompile(t, "SELECT Window, MINER, avg(Transaction_Count) AS AVG_TX FROM S3_Backfill GROUP BY WINDOW(Block_TS, '5 minutes'), Miner", testOptions())
	if c.Spec.Aggregates[0].As != "AVG_TX" || c.Spec.Aggregates[0].Column != "transaction_count" || !slices.Equal(c.Sources, []int{0}) || c.From != "s3_backfill" {
		t.Fatalf("compiled %+v from %s %v", c.Spec.Aggregates, c.From, c.Sources)
	}
	a, _ := agg.New(c.Spec)
	if sch := a.OutputSchema(); sch.Field("AVG_TX") == nil {
		t.Errorf("output schema %s has no AVG_TX", sch)
	}
	o := testOptions()
	o.Sources = []string{"a"}
	o.Relations = nil // each source under its own name
	if c := mustCompile(t, "select miner, count(*) from A group by miner", o); c.From != "a" {
		t.Errorf("FROM A read %q", c.From)
	}
	if _, err := Compile("select window, miner, count(*) as n, sum(gas_used) as N from blocks"+winMiner, testOptions()); errcode.Code(err) != CodeInvalidQuery {
		t.Errorf("n and N: %v (Delta column names are case-insensitive)", err)
	}
}

// TestWindowSpellings: every duration Spark's window() accepts, and equal
// windows written differently are the same window.
func TestWindowSpellings(t *testing.T) {
	for _, d := range []string{"'1 hour'", "'60 minutes'", "'interval 1 hour'", "INTERVAL 1 HOUR", "interval '1' hour", "INTERVAL '1 hour'", "INTERVAL 30 MINUTES 30 MINUTES", "'3600 seconds'"} {
		q := "select window(block_ts, '1 hour') as window, miner, count(*) from blocks group by window(block_ts, " + d + "), miner"
		c := mustCompile(t, q, testOptions())
		if w := c.Spec.Window; w.Size != time.Hour || w.Slide != 0 || w.Start != 0 {
			t.Errorf("%s: window %+v", d, w)
		}
	}
	c := mustCompile(t, "select window, count(*) from blocks group by window(block_ts, '1 hour', '15 minutes', '5 minutes')", testOptions())
	if w := c.Spec.Window; w.Size != time.Hour || w.Slide != 15*time.Minute || w.Start != 5*time.Minute {
		t.Errorf("startTime: window %+v", w)
	}
	if _, err := Compile("select window, count(*) from blocks group by window(block_ts, INTERVAL '1:30' HOUR TO MINUTE)", testOptions()); errcode.Code(err) != CodeUnsupported {
		t.Errorf("HOUR TO MINUTE: %v", err)
	}
}

// TestLiteralTypes: an integer literal is INT/BIGINT when it fits, else
// DECIMAL; a fraction is DECIMAL; an exponent DOUBLE; suffixes force the
// type (AstBuilder). Integer columns compare with decimals exactly.
func TestLiteralTypes(t *testing.T) {
	big := &stream.Batch{Len: 4, Columns: []stream.Column{
		{Name: "gas_used", Type: stream.Int64, Int64s: []int64{math.MaxInt64, 200, 201, math.MinInt64}},
		{Name: "transaction_count", Type: stream.Int64, Int64s: []int64{200, 201, 202, 0}, Valid: []bool{true, true, true, false}},
	}}
	for _, tc := range []struct {
		where string
		keep  []bool
	}{
		{"gas_used < 9223372036854775808", []bool{true, true, true, true}},
		{"gas_used >= 9223372036854775808", []bool{false, false, false, false}},
		{"gas_used > -9223372036854775809", []bool{true, true, true, true}},
		{"gas_used = 9223372036854775807L", []bool{true, false, false, false}},
		{"gas_used < 200.5", []bool{false, true, false, true}},
		{"gas_used <= 200.5", []bool{false, true, false, true}},
		{"gas_used > 200.5", []bool{true, false, true, false}},
		{"gas_used = 200.5", []bool{false, false, false, false}},
		{"gas_used <> 200.5", []bool{true, true, true, true}},
		{"200.5 > gas_used", []bool{false, true, false, true}},
		{"gas_used = 2.01E2", []bool{false, false, true, false}},
		{"gas_used = 201D", []bool{false, false, true, false}},
		{"gas_used = 201BD", []bool{false, false, true, false}},
		{"transaction_count = '200'", []bool{true, false, false, false}},
		{"transaction_count in (200.0, 201)", []bool{true, true, false, false}},
		{"transaction_count in (200.5, 202)", []bool{false, false, true, false}},
		{"transaction_count not in (200.5)", []bool{true, true, true, false}},
		{"transaction_count in (2E2)", []bool{true, false, false, false}},
		{"transaction_count = ' 201 '", []bool{false, true, false, false}},
	} {
		c := mustCompile(t, "select window, miner, count(*) from blocks where "+tc.where+winMiner, testOptions())
		keep, err := c.Where.Keep(big)
		if err != nil || !slices.Equal(keep, tc.keep) {
			t.Errorf("%s: keep %v %v, want %v", tc.where, keep, err, tc.keep)
		}
	}
	// TIMESTAMP and DATE literals are values wherever a literal is, an IN
	// list too (a DATE is midnight UTC, as Spark casts it).
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	ts := &stream.Batch{Len: 3, Columns: []stream.Column{{Name: "block_ts", Type: stream.Timestamp, Int64s: []int64{t0, t0 + 60e6, t0 + 86400e6}}}}
	c := mustCompile(t, "select window, miner, count(*) from blocks where block_ts in (TIMESTAMP '2024-01-01 00:01:00', DATE '2024-01-02')"+winMiner, testOptions())
	if keep, err := c.Where.Keep(ts); err != nil || !slices.Equal(keep, []bool{false, true, true}) {
		t.Errorf("IN (TIMESTAMP, DATE): keep %v %v", keep, err)
	}
	for where, code := range map[string]string{
		"transaction_count = 'abc'":              filter.CodeCastInvalidInput,
		"transaction_count = '1.5'":              filter.CodeCastInvalidInput,
		"gas_used > 128Y":                        CodeParseSyntax,
		"gas_used > 1" + strings.Repeat("0", 38): CodeParseSyntax,
		"gas_used > 1.5L":                        CodeParseSyntax,
		"gas_used > 9223372036854775808L":        CodeParseSyntax,
		"gas_used > 12abc":                       CodeParseSyntax,
		"block_ts > 1.5":                         filter.CodeFilterInvalid,
	} {
		if _, err := Compile("select window, miner, count(*) from blocks where "+where+winMiner, testOptions()); errcode.Code(err) != code {
			t.Errorf("%s: %v, want %s", where, err, code)
		}
	}
	// spark.sql.ansi.enabled=false: the failed cast is null, so nothing matches.
	o := testOptions()
	o.NonANSI = true
	c = mustCompile(t, "select window, miner, count(*) from blocks where transaction_count = 'abc' or transaction_count <> 'abc'"+winMiner, o)
	if keep, _ := c.Where.Keep(big); slices.Contains(keep, true) {
		t.Errorf("non-ANSI 'abc': keep %v", keep)
	}
}

// TestGroupByShapes: GROUP BY a SELECT alias (spark.sql.groupByAliases) or
// an ordinal (spark.sql.groupByOrdinal); a global aggregation; a watermark
// without a window.
func TestGroupByShapes(t *testing.T) {
	c := mustCompile(t, "SELECT window(block_ts, '1 hour') AS window, miner, count(*) FROM blocks GROUP BY window, miner", testOptions())
	if c.Spec.Window == nil || c.Spec.Window.Size != time.Hour || !slices.Equal(c.Spec.GroupBy, []string{"miner"}) {
		t.Fatalf("alias: %+v", c.Spec)
	}
	c = mustCompile(t, "select window(block_ts, '1 hour'), miner, count(*) from blocks group by 1, 2", testOptions())
	if c.Spec.Window == nil || !slices.Equal(c.Spec.GroupBy, []string{"miner"}) {
		t.Fatalf("ordinal: %+v", c.Spec)
	}
	for q, says := range map[string]string{
		"select miner, count(*) from blocks group by 2":                     "refers to an expression count(*) that contains an aggregate function",
		"select miner, count(*) from blocks group by 0":                     "GROUP BY position 0 is not in select list (valid range is [1, 2])",
		"select miner, count(*) as c from blocks group by miner, c":         "refers to an expression count(*) as c that contains an aggregate function",
		"select window, miner, count(*) from blocks group by window, miner": "GROUP BY window needs its arguments",
	} {
		if _, err := Compile(q, testOptions()); errcode.Code(err) != CodeInvalidQuery || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: %v, want %q", q, err, says)
		}
	}
	o := testOptions()
	o.NoGroupByAliases, o.NoGroupByOrdinal = true, true
	if _, err := Compile("SELECT window(block_ts, '1 hour') AS window, miner, count(*) FROM blocks GROUP BY window, miner", o); errcode.Code(err) != CodeInvalidQuery {
		t.Errorf("groupByAliases=false: %v", err)
	}
	if _, err := Compile("select miner, count(*) from blocks group by 1", o); errcode.Code(err) != CodeUnsupported {
		t.Errorf("groupByOrdinal=false: %v", err)
	}
	// A global aggregation runs in update and complete mode; append needs a
	// watermark on a grouping key (Spark's UnsupportedOperationChecker).
	for _, mode := range []string{"update", "complete"} {
		o := testOptions()
		o.OutputMode = mode
		c := mustCompile(t, "select count(*), sum(gas_used) from blocks", o)
		if c.Spec.Window != nil || len(c.Spec.GroupBy) != 0 {
			t.Errorf("%s: %+v", mode, c.Spec)
		}
	}
	o = testOptions()
	o.OutputMode = "append"
	c, err := Compile("select count(*) from blocks", o)
	if err == nil {
		_, err = agg.New(c.Spec)
	}
	if errcode.Code(err) != agg.CodeUnsupportedOutputMode {
		t.Errorf("append global: %v", err)
	}
	// A watermark without a window: allowed (it closes nothing), and the
	// engine still computes and reports it.
	c = mustCompile(t, "select miner, count(*) from blocks group by miner", testOptions())
	if col, d, ok := c.Spec.Watermark(); !ok || col != "block_ts" || d != 48*time.Hour || !slices.Contains(c.Columns, "block_ts") {
		t.Errorf("watermark without window: %s %s %v, columns %v", col, d, ok, c.Columns)
	}
	o = testOptions()
	o.WatermarkColumn = "miner"
	if _, err := Compile("select miner, count(*) from blocks group by miner", o); errcode.Code(err) != CodeUnsupported || !strings.Contains(err.Error(), `expected "TIMESTAMP"`) {
		t.Errorf("watermark on a string: %v", err)
	}
}

// TestPushDown: the deterministic conjuncts that do not read the
// event-time column run below the watermark (PushPredicateThroughNonJoin);
// the others, and every conjunct under an OR with one, stay above.
func TestPushDown(t *testing.T) {
	for where, pre := range map[string]string{
		"number < 10": "(number < 10)",
		"number < 10 and block_ts > '2024-01-01'":                "(number < 10)",
		"block_ts > '2024-01-01' and miner = 'a' and number > 1": "((miner = 'a') and (number > 1))",
		"number < 10 or block_ts > '2024-01-01'":                 "",
		"block_ts > '2024-01-01'":                                "",
		"source = 'eth_live' and (number < 1 or gas_used > 2)":   "((source = 'eth_live') and ((number < 1) or (gas_used > 2)))",
	} {
		c := mustCompile(t, "select window, miner, count(*) from blocks where "+where+winMiner, testOptions())
		got := ""
		if c.PreWatermark != nil {
			got = c.PreWatermark.String()
		}
		if got != pre {
			t.Errorf("%s: pushed %q, want %q", where, got, pre)
		}
	}
	o := testOptions()
	o.WatermarkColumn = ""
	if c := mustCompile(t, "select window, miner, count(*) from blocks where number < 10"+winMiner, o); c.PreWatermark != nil {
		t.Errorf("no watermark, pushed %s", c.PreWatermark)
	}
}

// TestQueryErrors: issue 25 row 5. A JOIN is named as a JOIN, also after
// a table alias; an unknown FROM name is TABLE_OR_VIEW_NOT_FOUND naming
// it; non-ASCII text is shown as written.
func TestQueryErrors(t *testing.T) {
	for q, want := range map[string]struct{ code, says string }{
		"select miner, count(*) from s3_backfill a join eth_live b on a.number = b.number group by miner": {CodeUnsupported, "JOIN"},
		"select miner, count(*) from s3_backfill as a left join eth_live group by miner":                  {CodeUnsupported, "JOIN"},
		"select miner, count(*) from s3_backfill, eth_live group by miner":                                {CodeUnsupported, "a join"},
		"select miner, count(*) from unknown_source group by miner":                                       {CodeTableNotFound, "unknown_source cannot be found"},
		"select miner, count(*) from blocks where miner = 'é' ¶ group by miner":                           {CodeParseSyntax, `"¶"`},
		"select müll, count(*) from blocks group by müll":                                                 {CodeUnresolvedColumn, `"müll"`},
		"select miner, count(*) from blocks where miner = 'é' ¶":                                          {CodeParseSyntax, "1:54"}, // columns count characters
	} {
		_, err := Compile(q, testOptions())
		if errcode.Code(err) != want.code || !strings.Contains(err.Error(), want.says) {
			t.Errorf("%s:\n  %v\n  want %s saying %q", q, err, want.code, want.says)
		}
		if strings.Contains(err.Error(), "Ã") || strings.Contains(err.Error(), `\u`) {
			t.Errorf("%s: mojibake in %v", q, err)
		}
	}
}
