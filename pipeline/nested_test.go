package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/shape"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/stream"
)

// The query shapes of query/nested.go end to end: SQL through the
// compiler, flow and the engine, checked against answers computed here
// from the rows themselves.

// blk is one test block.
type blk struct {
	number int64
	at     time.Time
	miner  string
}

func blockBatch(bs []blk) *stream.Batch {
	b := &stream.Batch{Len: len(bs)}
	nums, ts, miners := make([]int64, len(bs)), make([]int64, len(bs)), make([]string, len(bs))
	for i, x := range bs {
		nums[i], ts[i], miners[i] = x.number, x.at.UnixMicro(), x.miner
	}
	b.Columns = []stream.Column{
		{Name: ethblock.ColNumber, Type: stream.Int64, Int64s: nums},
		{Name: ethblock.ColBlockTS, Type: stream.Timestamp, Int64s: ts},
		{Name: ethblock.ColMiner, Type: stream.String, Strings: miners},
	}
	return b
}

// collectSink keeps every batch's rows, rendered col=value in the batch's
// column order.
type collectSink struct{ batches [][]string }

func (s *collectSink) Open(context.Context, stream.SinkEnv) error { return nil }
func (s *collectSink) Description() string                        { return "collectSink" }
func (s *collectSink) Close() error                               { return nil }
func (s *collectSink) AddBatch(_ context.Context, _ int64, out *stream.Batch) (stream.SinkProgress, error) {
	var rows []string
	for r := 0; r < out.Len; r++ {
		var cells []string
		for _, c := range out.Columns {
			v := "null"
			if !c.IsNull(r) {
				switch {
				case c.Type == stream.Timestamp:
					v = time.UnixMicro(c.Int64s[r]).UTC().Format("15:04")
				case c.Type.Storage() == stream.String:
					v = c.Strings[r]
				case c.Type.Storage() == stream.Float64:
					v = fmt.Sprint(c.Float64s[r])
				case c.Type.Kind() == stream.Decimal:
					v = c.Decimals[r].Text(c.Type.Scale())
				default:
					v = fmt.Sprint(c.Int64s[r])
				}
			}
			cells = append(cells, c.Name+"="+v)
		}
		rows = append(rows, strings.Join(cells, " "))
	}
	if out.Len > 0 {
		s.batches = append(s.batches, rows)
	}
	return stream.SinkProgress{NumOutputRows: int64(out.Len)}, nil
}

func (s *collectSink) all() []string {
	var out []string
	for _, b := range s.batches {
		out = append(out, b...)
	}
	sort.Strings(out)
	return out
}

// runSQL compiles text over the named sources and runs it to the end of
// their chunks on the checkpoint in fs.
func runSQL(t *testing.T, fs vfs.FS, text, watermark, mode string, srcs map[string]*listSource, order ...string) (*collectSink, *engine.Query, error) {
	t.Helper()
	conf := map[string]string{"spark.sql.shuffle.partitions": "2", "spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"}
	cfg := Config{Table: "t", Query: text, WithWatermark: watermark, OutputMode: mode, Conf: conf}
	q := engine.Query{Name: "q", Trigger: engine.Trigger{Kind: engine.AvailableNow}, Conf: conf}
	for _, name := range order {
		cfg.Sources = append(cfg.Sources, SourceSpec{Name: name, Format: "s3archive", URI: "file:///unused/" + name})
		q.Sources = append(q.Sources, engine.NamedSource{Name: name, Source: srcs[name]})
	}
	c, err := CompileQuery(cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := c.plan(&q); err != nil {
		return nil, nil, err
	}
	sink := &collectSink{}
	q.Sink = sink
	opts := engine.Options{CheckpointDir: "/ck", FS: fs, LocalDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)}
	_, err = engine.Run(context.Background(), q, opts)
	return sink, &q, err
}

func at(hhmm string) time.Time {
	t, err := time.Parse("2006-01-02 15:04", "2024-01-01 "+hhmm)
	if err != nil {
		panic(err)
	}
	return t
}

// A windowed aggregation over a windowed aggregation's output, written as
// Spark 3.4+ writes it in SQL (window_time(window)), runs as two stateful
// operators with their own state directories, in append mode: each hour
// once, with the count of its blocks and of the 5-minute windows they
// fell in, as a recount of the rows says.
func TestChainedWindowsSQL(t *testing.T) {
	var bs []blk
	n := int64(0)
	for m := 0; m < 200; m++ {
		for _, miner := range []string{"0xaa", "0xbb"} {
			if (m+len(miner))%3 == 0 && miner == "0xbb" {
				continue
			}
			n++
			bs = append(bs, blk{n, at("00:00").Add(time.Duration(m*50) * time.Second), miner})
		}
	}
	far := blk{n + 1, at("23:00"), "0xaa"} // closes every hour before it
	src := &listSource{}
	for i := 0; i < len(bs); i += 37 {
		src.chunks = append(src.chunks, blockBatch(bs[i:min(i+37, len(bs))]))
	}
	src.chunks = append(src.chunks, blockBatch([]blk{far}))
	const text = "SELECT window, miner, sum(n) AS blocks, count(*) AS windows FROM " +
		"(SELECT window, miner, count(*) AS n FROM blocks GROUP BY window(block_ts, '5 minutes'), miner) " +
		"GROUP BY window(window_time(window), '1 hour'), miner"
	fs := vfs.NewMem()
	sink, q, err := runSQL(t, fs, text, "block_ts, 10 minutes", "append", map[string]*listSource{"s": src}, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Stages) != 3 || q.Stages[0].Operator == nil || q.Stages[1].Transform == nil || q.Stages[2].Operator == nil {
		t.Fatalf("stages %+v, want aggregation, window_time, aggregation", q.Stages)
	}
	// The recount: per hour and miner, the blocks and their 5-minute windows.
	type key struct{ hour, miner string }
	blocks, windows := map[key]int{}, map[key]map[time.Time]bool{}
	for _, b := range bs {
		k := key{b.at.Truncate(time.Hour).Format("15:04"), b.miner}
		blocks[k]++
		if windows[k] == nil {
			windows[k] = map[time.Time]bool{}
		}
		windows[k][b.at.Truncate(5*time.Minute)] = true
	}
	var want []string
	for k, c := range blocks {
		end := at(k.hour).Add(time.Hour).Format("15:04")
		want = append(want, fmt.Sprintf("window_start=%s window_end=%s miner=%s blocks=%d windows=%d", k.hour, end, k.miner, c, len(windows[k])))
	}
	sort.Strings(want)
	if got := sink.all(); !slices.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, dir := range []string{"/ck/state/0", "/ck/state/1"} {
		if names, err := fs.List(dir); err != nil || len(names) == 0 {
			t.Fatalf("%s: %v %v, want the operator's state", dir, names, err)
		}
	}
	// In update mode Spark refuses the chain.
	_, _, err = runSQL(t, vfs.NewMem(), text, "block_ts, 10 minutes", "update", map[string]*listSource{"s": src}, "s")
	if errcode.Code(err) != "UNSUPPORTED_OUTPUT_MODE" || !strings.Contains(err.Error(), "Multiple streaming aggregations are not supported") {
		t.Fatalf("update mode: %v", err)
	}
}

// UNION ALL of named sources, each branch with its own WHERE, through
// source evolution: each source keeps its own offsets; a source the query
// drops is tombstoned (its rows stop, the other's continue from its
// offset); a tombstoned name is refused; a new source is read from its
// start.
func TestUnionAllEvolution(t *testing.T) {
	us, eu, ap := &listSource{}, &listSource{}, &listSource{}
	add := func(s *listSource, from, to int64, miner string) {
		var bs []blk
		for n := from; n <= to; n++ {
			bs = append(bs, blk{n, at("00:00").Add(time.Duration(n) * time.Minute), miner})
		}
		s.chunks = append(s.chunks, blockBatch(bs))
	}
	both := "SELECT number AS n, miner FROM (SELECT number, miner FROM us WHERE number % 2 = 0 " +
		"UNION ALL SELECT number, miner FROM eu WHERE number > 5) WHERE miner <> 'none'"
	srcs := map[string]*listSource{"us": us, "eu": eu, "ap": ap}
	fs := vfs.NewMem()
	want := func(from, to int64, miner string, keep func(int64) bool) []string {
		var out []string
		for n := from; n <= to; n++ {
			if keep(n) {
				out = append(out, fmt.Sprintf("n=%d miner=%s", n, miner))
			}
		}
		return out
	}
	even := func(n int64) bool { return n%2 == 0 }
	above5 := func(n int64) bool { return n > 5 }
	check := func(step string, sink *collectSink, err error, want ...[]string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		var all []string
		for _, w := range want {
			all = append(all, w...)
		}
		sort.Strings(all)
		if got := sink.all(); !slices.Equal(got, all) {
			t.Fatalf("%s: got\n%s\nwant\n%s", step, strings.Join(got, "\n"), strings.Join(all, "\n"))
		}
	}

	add(us, 1, 10, "us")
	add(eu, 1, 10, "eu")
	sink, _, err := runSQL(t, fs, both, "", "append", srcs, "us", "eu")
	check("both", sink, err, want(1, 10, "us", even), want(1, 10, "eu", above5))

	// eu leaves the query: tombstoned; us continues from its offset.
	add(us, 11, 14, "us")
	add(eu, 11, 14, "eu")
	sink, _, err = runSQL(t, fs, "SELECT number AS n, miner FROM (SELECT number, miner FROM us WHERE number % 2 = 0)", "", "append", srcs, "us")
	check("us only", sink, err, want(11, 14, "us", even))

	// eu again under its old name: refused, nothing read.
	_, _, err = runSQL(t, fs, both, "", "append", srcs, "us", "eu")
	if !strings.Contains(errcode.Code(err), "TOMBSTONE_SOURCE_NAME_REUSE") || !strings.Contains(err.Error(), "'eu'") {
		t.Fatalf("re-adding eu: %v, want the tombstone's refusal", err)
	}

	// A new source ap joins the union: read from its start; us continues.
	add(us, 15, 16, "us")
	add(ap, 1, 3, "ap")
	sink, _, err = runSQL(t, fs, "SELECT number AS n, miner FROM (SELECT number, miner FROM us WHERE number % 2 = 0 UNION ALL SELECT number, miner FROM ap)",
		"", "append", srcs, "us", "ap")
	check("us and ap", sink, err, want(15, 16, "us", even), want(1, 3, "ap", func(int64) bool { return true }))
}

// UNION ALL resolves by position, as Spark's: branches of other widths or
// types are refused with Spark's error classes, and branches that select
// other columns at one position are refused (one projection reads every
// source).
func TestUnionAllRefusals(t *testing.T) {
	srcs := map[string]*listSource{"us": {}, "eu": {}}
	for _, c := range []struct{ q, code, says string }{
		{"SELECT * FROM (SELECT number, miner FROM us UNION ALL SELECT number FROM eu)", "NUM_COLUMNS_MISMATCH", "the first input has 2 columns and the second input has 1 columns"},
		{"SELECT * FROM (SELECT number FROM us UNION ALL SELECT miner FROM eu)", "INCOMPATIBLE_COLUMN_TYPE", "Column 1 of the second input is string"},
		{"SELECT * FROM (SELECT number FROM us UNION ALL SELECT gas_used FROM eu)", "UNSUPPORTED_SQL", "number against gas_used"},
		{"SELECT * FROM (SELECT number FROM us UNION ALL SELECT number FROM us)", "INVALID_STREAMING_QUERY", "read by branches 1 and 2"},
		{"SELECT * FROM (SELECT miner, count(*) AS c FROM us GROUP BY miner UNION ALL SELECT miner, 1 AS c FROM eu)", "UNSUPPORTED_SQL", "aggregate over the union"},
	} {
		_, _, err := runSQL(t, vfs.NewMem(), c.q, "", "append", srcs, "us", "eu")
		if errcode.Code(err) != c.code || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s:\n  %v\n  want %s saying %q", c.q, err, c.code, c.says)
		}
	}
}

// SELECT DISTINCT is an aggregation whose keys are the columns (Spark's
// ReplaceDistinctWithAggregate): in append mode over a window, each
// (window, miner) once, when the watermark closes it; ORDER BY and LIMIT
// over a complete mode aggregation order and cut what the sink receives
// each batch; AS renames the columns of a query without aggregation.
func TestDistinctOrderLimitRename(t *testing.T) {
	miners := []string{"0xcc", "0xaa", "0xbb", "0xaa", "0xdd", "0xaa", "0xbb"}
	src := &listSource{}
	var bs []blk
	for i, m := range miners {
		bs = append(bs, blk{int64(i + 1), at("00:00").Add(time.Duration(i*20) * time.Minute), m})
	}
	src.chunks = []*stream.Batch{blockBatch(bs[:4]), blockBatch(bs[4:]), blockBatch([]blk{{100, at("09:00"), "0xee"}})}
	srcs := map[string]*listSource{"s": src}

	sink, _, err := runSQL(t, vfs.NewMem(), "SELECT DISTINCT window(block_ts, '1 hour') AS window, miner FROM blocks",
		"block_ts, 10 minutes", "append", srcs, "s")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var want []string
	for _, b := range bs {
		h := b.at.Truncate(time.Hour)
		r := fmt.Sprintf("window_start=%s window_end=%s miner=%s", h.Format("15:04"), h.Add(time.Hour).Format("15:04"), b.miner)
		if !seen[r] {
			seen[r] = true
			want = append(want, r)
		}
	}
	sort.Strings(want)
	if got := sink.all(); !slices.Equal(got, want) {
		t.Fatalf("distinct: got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	sink, _, err = runSQL(t, vfs.NewMem(), "SELECT miner, count(*) AS c FROM blocks GROUP BY miner ORDER BY c DESC, 1 LIMIT 2",
		"", "complete", srcs, "s")
	if err != nil {
		t.Fatal(err)
	}
	// Each batch is the whole result, sorted, cut to 2 rows.
	wantBatches := [][]string{
		{"miner=0xaa c=2", "miner=0xbb c=1"},
		{"miner=0xaa c=3", "miner=0xbb c=2"},
		{"miner=0xaa c=3", "miner=0xbb c=2"},
	}
	if fmt.Sprint(sink.batches) != fmt.Sprint(wantBatches) {
		t.Fatalf("order by, limit: got %v, want %v", sink.batches, wantBatches)
	}

	sink, _, err = runSQL(t, vfs.NewMem(), "SELECT number AS n, miner AS who FROM blocks WHERE number < 3", "", "append", srcs, "s")
	if err != nil {
		t.Fatal(err)
	}
	if got := sink.all(); fmt.Sprint(got) != "[n=1 who=0xcc n=2 who=0xaa]" {
		t.Fatalf("rename: %v", got)
	}

	for _, c := range []struct{ q, mode, says string }{
		{"SELECT miner, count(*) AS c FROM blocks GROUP BY miner ORDER BY c", "update", "Sorting is not supported on streaming DataFrames/Datasets, unless it is on aggregated DataFrame/Dataset in Complete output mode"},
		{"SELECT number FROM blocks ORDER BY number", "append", "Sorting is not supported"},
		{"SELECT miner, count(*) AS c FROM blocks GROUP BY miner LIMIT 1", "update", "Limits are not supported on streaming DataFrames/Datasets in Update output mode"},
		{"SELECT DISTINCT miner FROM blocks", "append", "UNSUPPORTED_OUTPUT_MODE"},
	} {
		_, _, err := runSQL(t, vfs.NewMem(), c.q, "", c.mode, srcs, "s")
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s (%s): %v, want %q", c.q, c.mode, err, c.says)
		}
	}
}

// The WHERE of a query over a subquery is pushed below the watermark as
// Spark's optimizer pushes it through the projection (TestWhereBeforeWatermark's
// example, with the SELECT and its WHERE split around a subquery): block 3
// (00:20) is not late, so its window counts 2, not 1.
func TestWhereOverSubqueryBeforeWatermark(t *testing.T) {
	src := &listSource{chunks: []*stream.Batch{
		blockBatch([]blk{{1, at("00:10"), "a"}, {2, at("01:10"), "a"}, {1000, at("10:00"), "a"}}),
		blockBatch([]blk{{3, at("00:20"), "a"}}),
	}}
	for _, q := range []string{
		"SELECT window(block_ts, '1 hour') AS window, count(*) AS n FROM (SELECT number AS num, block_ts FROM blocks) WHERE num < 100 GROUP BY window",
		"SELECT window(block_ts, '1 hour') AS window, count(*) AS n FROM (SELECT number, block_ts FROM s UNION ALL SELECT number, block_ts FROM t) WHERE number < 100 GROUP BY window",
	} {
		srcs := map[string]*listSource{"s": src, "t": {}}
		order := []string{"s"}
		if strings.Contains(q, "UNION") {
			order = []string{"s", "t"}
		}
		sink, _, err := runSQL(t, vfs.NewMem(), q, "block_ts, 1 hour", "update", srcs, order...)
		if err != nil {
			t.Fatal(err)
		}
		last := map[string]string{}
		for _, b := range sink.batches {
			for _, r := range b {
				last[r[:strings.Index(r, " n=")]] = r
			}
		}
		if got := last["window_start=00:00 window_end=01:00"]; !strings.HasSuffix(got, " n=2") {
			t.Fatalf("%s: window 00:00 %q, want n=2 (rows %v)", q, got, sink.batches)
		}
	}
}

// Chained windows through the CLI's path (Run, a Delta table): the shape
// records both operators (version 3) and a restart resumes them; the table
// holds each closed hour once, as a recount says. LIMIT is refused for the
// Delta table, which MERGEs each batch (a row past the limit would stay).
func TestChainedWindowsRestart(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "orders")
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	hours := map[string]int{}
	write := func(f int, from time.Duration, n int) {
		var rows []e2eOrder
		for i := range n {
			o := e2eOrder{OrderID: fmt.Sprintf("%d-%d", f, i), Customer: fmt.Sprintf("c%d", i%2), Amount: 1,
				EventTime: t0.Add(from + time.Duration(i)*7*time.Minute)}
			rows = append(rows, o)
			hours[o.EventTime.Truncate(time.Hour).Format("15:04")+" "+o.Customer]++
		}
		writeE2EOrders(t, filepath.Join(dir, fmt.Sprintf("part-%d.parquet", f)), rows)
	}
	cfg := Config{Checkpoint: filepath.Join(root, "ckpt"), Table: filepath.Join(root, "table"), LocalDir: filepath.Join(root, "local"),
		Sources: []SourceSpec{{Name: "orders", Format: "parquet", URI: "file://" + filepath.ToSlash(dir) + "?maxFilesPerTrigger=1&schema=" +
			url.QueryEscape("order_id STRING, customer STRING, amount DOUBLE, event_time TIMESTAMP")}},
		Trigger: engine.Trigger{Kind: engine.AvailableNow}, Logger: slog.New(slog.DiscardHandler),
		Conf: map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
		Query: "SELECT window, customer, sum(n) AS orders, count(*) AS windows FROM (SELECT window, customer, count(*) AS n FROM orders " +
			"GROUP BY window(event_time, '10 minutes'), customer) GROUP BY window(window_time(window), '1 hour'), customer",
		WithWatermark: "event_time, 5 minutes", OutputMode: "append"}
	write(0, 0, 20)
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	write(1, 3*time.Hour, 20)
	write(2, 10*time.Hour, 1) // closes every hour before it
	delete(hours, "10:00 c0")
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"0", "1"} {
		if _, err := os.Stat(filepath.Join(cfg.Checkpoint, "state", op)); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := shape.ReadLatest(vfs.Default, cfg.Checkpoint)
	if err != nil || rec == nil || len(rec.Shape.Operators) != 2 {
		t.Fatalf("shape %+v, %v: want two operators", rec, err)
	}
	tb, err := delta.Open(context.Background(), cfg.Table)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tb.Snapshot(context.Background(), -1)
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	if err := snap.Rows(context.Background(), func(row map[string]any) error {
		w := row["window"].(map[string]any)
		got = append(got, fmt.Sprintf("%s %s %v", w["start"].(time.Time).UTC().Format("15:04"), row["customer"], row["orders"]))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for k, n := range hours {
		want = append(want, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("table\n%v\nrecount\n%v", got, want)
	}

	lim := cfg
	lim.Checkpoint, lim.Table = filepath.Join(root, "ckpt2"), filepath.Join(root, "table2")
	lim.Query, lim.OutputMode, lim.WithWatermark = "SELECT customer, count(*) AS n FROM orders GROUP BY customer ORDER BY n DESC LIMIT 1", "complete", ""
	if _, err := Run(context.Background(), lim); errcode.Code(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), "MERGEs") {
		t.Fatalf("LIMIT into a Delta table: %v", err)
	}
	if _, err := os.Stat(lim.Checkpoint); !os.IsNotExist(err) {
		t.Fatalf("the refused start left %s: %v", lim.Checkpoint, err)
	}
}
