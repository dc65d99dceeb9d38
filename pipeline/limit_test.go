package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// rowsOf renders the rows every batch of sink received, in order.
func rowsOf(s *collectSink) []string {
	var out []string
	for _, b := range s.batches {
		out = append(out, b...)
	}
	return out
}

// TestLimitInAppendMode: LIMIT n in append mode is Spark's
// StreamingGlobalLimitExec: the first n rows of the stream, in order,
// counted in state across batches, a restart, an online repartition
// (2 -> 3 partitions) and an offline one (to 1), after which nothing more
// is emitted.
func TestLimitInAppendMode(t *testing.T) {
	var chunks []*stream.Batch
	n := int64(0)
	for _, size := range []int{2, 2, 3, 2} {
		var bs []blk
		for range size {
			n++
			bs = append(bs, blk{n, at("00:00").Add(time.Duration(n) * time.Minute), fmt.Sprintf("m%d", n%3)})
		}
		chunks = append(chunks, blockBatch(bs))
	}
	fs := vfs.NewMem()
	src := &listSource{}
	q := "SELECT number, miner FROM blocks WHERE number <> 3 LIMIT 5"
	var got []string
	for step, parts := range []string{"2", "2", "3", "1"} {
		src.chunks = chunks[:step+1]
		if step == 3 {
			if _, err := engine.RepartitionOffline(context.Background(), engine.Options{CheckpointDir: "/ck", FS: fs, LocalDir: t.TempDir(),
				Logger: slog.New(slog.DiscardHandler)}, state.Recorded{}, 1); err != nil {
				t.Fatal(err)
			}
		}
		got = append(got, rowsOf(runSQLParts(t, fs, q, "append", parts, src))...)
	}
	want := "number=1 miner=m1|number=2 miner=m2|number=4 miner=m1|number=5 miner=m2|number=6 miner=m0"
	if strings.Join(got, "|") != want {
		t.Fatalf("emitted\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}
	dirs, _ := fs.List("/ck/state")
	if len(dirs) != 1 {
		t.Fatalf("state directories %v, want the limit's one", dirs)
	}
}

// TestLimitAfterAppendAggregation: an append-mode aggregation followed by
// LIMIT keeps the first windows the watermark closes, two operators with
// their own state.
func TestLimitAfterAppendAggregation(t *testing.T) {
	src := &listSource{chunks: []*stream.Batch{
		blockBatch([]blk{{1, at("00:10"), "a"}, {2, at("01:10"), "a"}, {3, at("02:10"), "a"}}),
		blockBatch([]blk{{4, at("05:00"), "a"}}),
		blockBatch([]blk{{5, at("09:00"), "a"}}),
	}}
	sink, _, err := runSQL(t, vfs.NewMem(), "SELECT window, count(*) AS n FROM blocks GROUP BY window(block_ts, '1 hour') LIMIT 2",
		"block_ts, 10 minutes", "append", map[string]*listSource{"s": src}, "s")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rowsOf(sink), "|")
	if want := "window_start=00:00 window_end=01:00 n=1|window_start=01:00 window_end=02:00 n=1"; got != want {
		t.Fatalf("emitted %s, want %s", got, want)
	}
}

// TestLimitIntoDelta: LIMIT in append mode through Run into a Delta table
// (appended, one Parquet file a batch): the table holds the first n rows
// read, and a restart over more files adds none.
func TestLimitIntoDelta(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "orders")
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	write := func(f, n int) {
		var rows []e2eOrder
		for i := range n {
			rows = append(rows, e2eOrder{OrderID: fmt.Sprintf("%d-%d", f, i), Customer: "c", Amount: 1, EventTime: t0.Add(time.Duration(f*10+i) * time.Minute)})
		}
		writeE2EOrders(t, filepath.Join(dir, fmt.Sprintf("part-%d.parquet", f)), rows)
	}
	cfg := Config{Checkpoint: filepath.Join(root, "ckpt"), Table: filepath.Join(root, "table"), LocalDir: filepath.Join(root, "local"),
		Sources: []SourceSpec{{Name: "orders", Format: "parquet", URI: "file://" + filepath.ToSlash(dir) + "?maxFilesPerTrigger=1&schema=" +
			url.QueryEscape("order_id STRING, customer STRING, amount DOUBLE, event_time TIMESTAMP")}},
		Trigger: engine.Trigger{Kind: engine.AvailableNow}, Logger: slog.New(slog.DiscardHandler),
		Conf:  map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
		Query: "SELECT order_id FROM orders LIMIT 3", OutputMode: "append"}
	write(0, 2)
	write(1, 2)
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	write(2, 2)
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	tb, err := delta.Open(context.Background(), cfg.Table)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tb.Snapshot(context.Background(), -1)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := snap.Rows(context.Background(), func(row map[string]any) error {
		got = append(got, fmt.Sprint(row["order_id"]))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if strings.Join(got, ",") != "0-0,0-1,1-0" {
		t.Fatalf("table rows %v, want the first 3 read", got)
	}
}

// TestOrderByEveryType: ORDER BY a DECIMAL output column in complete mode
// sorts by the column's value (the sort compared every column but DOUBLE
// and STRING as longs: an index out of range on a DECIMAL's empty Int64s;
// found by TestSparkRef with typed columns, which also sorts FLOAT and
// BINARY keys), FLOAT and BINARY keys as well.
func TestOrderByEveryType(t *testing.T) {
	src := &listSource{chunks: []*stream.Batch{
		blockBatch([]blk{{3, at("00:10"), "a"}, {10, at("00:20"), "b"}, {2, at("00:30"), "c"}, {10, at("00:40"), "d"}}),
	}}
	srcs := map[string]*listSource{"s": src}
	for _, c := range []struct{ key, want string }{
		{"CAST(number AS DECIMAL(10,2))", "k=10.00 c=2|k=3.00 c=1|k=2.00 c=1"},
		{"CAST(number AS DECIMAL(38,0)) * 2", "k=20 c=2|k=6 c=1|k=4 c=1"},
		{"CAST(number AS FLOAT)", "k=10 c=2|k=3 c=1|k=2 c=1"},
		{"CAST(CAST(number AS STRING) AS BINARY)", "k=3 c=1|k=2 c=1|k=10 c=2"}, // bytes, unsigned
	} {
		q := "SELECT " + c.key + " AS k, count(*) AS c FROM blocks GROUP BY " + c.key + " ORDER BY k DESC"
		sink, _, err := runSQL(t, vfs.NewMem(), q, "", "complete", srcs, "s")
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		last := sink.batches[len(sink.batches)-1]
		if got := strings.Join(last, "|"); got != c.want {
			t.Errorf("%s: %s, want %s", q, got, c.want)
		}
	}
}
