package pipeline

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/parquet-go/parquet-go"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/sinklog"
	"github.com/ethstream/ethstream/sink/files"
)

type fileSinkRow struct {
	Window *struct {
		Start *time.Time `parquet:"start,optional,timestamp(microsecond:utc)"`
		End   *time.Time `parquet:"end,optional,timestamp(microsecond:utc)"`
	} `parquet:"window,optional"`
	Customer *string  `parquet:"customer,optional"`
	Orders   *int64   `parquet:"orders,optional"`
	Amount   *float64 `parquet:"amount,optional"`
}

// TestOrdersToFileSink: a Parquet directory of orders counted per
// 30-minute window and customer under a 20-minute watermark in append
// mode, written with --sink parquet: (Spark's file sink). What the
// _spark_metadata log lists is every window the final watermark closed,
// checked against a brute-force recount; a second run adds nothing; update
// mode is refused with Spark's error before anything is written.
func TestOrdersToFileSink(t *testing.T) {
	root := t.TempDir()
	r := rand.New(rand.NewPCG(40, 2))
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	type key struct {
		w        time.Time
		customer string
	}
	count, sum := map[key]int64{}, map[key]float64{}
	dir := filepath.Join(root, "orders")
	var maxTS time.Time
	for f := range 3 {
		var rows []e2eOrder
		for i := range 40 {
			o := e2eOrder{OrderID: fmt.Sprintf("%d-%d", f, i), Customer: fmt.Sprintf("c%d", r.IntN(4)),
				Amount: float64(r.IntN(10000)) / 100, EventTime: t0.Add(time.Duration(f*80*60+r.IntN(80*60)) * time.Second)}
			rows = append(rows, o)
			k := key{o.EventTime.Truncate(30 * time.Minute), o.Customer}
			count[k]++
			sum[k] += o.Amount
			if o.EventTime.After(maxTS) {
				maxTS = o.EventTime
			}
		}
		p := filepath.Join(dir, fmt.Sprintf("day=%d/part-0.parquet", f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		fh, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		w := parquet.NewGenericWriter[e2eOrder](fh)
		if _, err := w.Write(rows); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		fh.Close()
	}
	out := filepath.Join(root, "out")
	cfg := Config{Checkpoint: filepath.Join(root, "ckpt"), Sink: "parquet:file://" + filepath.ToSlash(out), LocalDir: filepath.Join(root, "local"),
		Sources: []SourceSpec{{Name: "orders", Format: "parquet",
			URI: "file://" + filepath.ToSlash(dir) + "?maxFilesPerTrigger=1&schema=" +
				url.QueryEscape("order_id STRING, customer STRING, amount DOUBLE, event_time TIMESTAMP")}},
		Trigger: engine.Trigger{Kind: engine.AvailableNow}, Logger: slog.New(slog.DiscardHandler),
		Conf: map[string]string{files.ConfCompactInterval: "2", "spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
		Query: "SELECT window(event_time, '30 minutes') AS window, customer, count(*) AS orders, sum(amount) AS amount " +
			"FROM orders GROUP BY window(event_time, '30 minutes'), customer",
		WithWatermark: "event_time, 20 minutes", OutputMode: "update"}

	_, err := Run(context.Background(), cfg)
	if !errcode.Is(err, files.UnsupportedOutputMode) {
		t.Fatalf("update mode: %v", err)
	}
	if _, serr := os.Stat(cfg.Checkpoint); !os.IsNotExist(serr) {
		t.Fatalf("a refused start created the checkpoint: %v", serr)
	}

	cfg.OutputMode = "append"
	read := func() []string {
		c, err := sinklog.ReadLog(vfs.Default, out)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range c.Files {
			fh, err := os.Open(strings.TrimPrefix(f.Path, "file:"))
			if err != nil {
				t.Fatal(err)
			}
			st, _ := fh.Stat()
			pf, err := parquet.OpenFile(fh, st.Size())
			if err != nil {
				t.Fatal(err)
			}
			rows := make([]fileSinkRow, pf.NumRows())
			if n, err := parquet.NewGenericReader[fileSinkRow](pf).Read(rows); n != len(rows) || (err != nil && err != io.EOF) {
				t.Fatalf("%s: %d rows: %v", f.Path, n, err)
			}
			fh.Close()
			for _, row := range rows {
				got = append(got, fmt.Sprintf("%s %s %d %.2f", row.Window.Start.UTC().Format("15:04"), *row.Customer, *row.Orders, *row.Amount))
			}
		}
		slices.Sort(got)
		return got
	}
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	got := read()
	// Append mode emits a window once the watermark (the newest event
	// time less 20 minutes) has passed its end.
	watermark := maxTS.Add(-20 * time.Minute)
	var recount []string
	for k, n := range count {
		if !k.w.Add(30 * time.Minute).After(watermark) {
			recount = append(recount, fmt.Sprintf("%s %s %d %.2f", k.w.Format("15:04"), k.customer, n, sum[k]))
		}
	}
	slices.Sort(recount)
	if len(got) == 0 || !slices.Equal(got, recount) {
		t.Fatalf("file sink\n%v\nrecount\n%v", got, recount)
	}
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if again := read(); !slices.Equal(again, got) {
		t.Fatalf("a second run changed the output:\n%v\nwas\n%v", again, got)
	}
	ents, _ := os.ReadDir(filepath.Join(out, sinklog.MetadataDir))
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	// Interval 2: every second batch is a compact file.
	if !slices.Contains(names, "1.compact") {
		t.Fatalf("_spark_metadata holds %v", names)
	}
	b, _ := os.ReadFile(filepath.Join(out, sinklog.MetadataDir, names[len(names)-1]))
	t.Logf("%d rows; _spark_metadata %v; %s:\n%s", len(got), names, names[len(names)-1], b)
}

type fileSinkOrder struct {
	OrderID  *string  `parquet:"order_id,optional"`
	Customer *string  `parquet:"customer,optional"`
	Amount   *float64 `parquet:"amount,optional"`
}

// TestPlainSelectToFileSink: a query without an aggregation (a SELECT of
// columns, append mode) copies every row of the source to the file sink
// exactly once, across a second run.
func TestPlainSelectToFileSink(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "orders")
	var want []string
	for f := range 3 {
		var rows []e2eOrder
		for i := range 10 {
			o := e2eOrder{OrderID: fmt.Sprintf("%d-%d", f, i), Customer: fmt.Sprintf("c%d", i%3), Amount: float64(f*10+i) / 4,
				EventTime: time.Date(2026, 3, 1, f, i, 0, 0, time.UTC)}
			rows = append(rows, o)
			want = append(want, fmt.Sprintf("%s %s %.2f", o.OrderID, o.Customer, o.Amount))
		}
		writeE2EOrders(t, filepath.Join(dir, fmt.Sprintf("part-%d.parquet", f)), rows)
	}
	out := filepath.Join(root, "out")
	cfg := Config{Checkpoint: filepath.Join(root, "ckpt"), Sink: "parquet:" + out, LocalDir: filepath.Join(root, "local"),
		Sources: []SourceSpec{{Name: "orders", Format: "parquet",
			URI: "file://" + filepath.ToSlash(dir) + "?maxFilesPerTrigger=1&schema=" +
				url.QueryEscape("order_id STRING, customer STRING, amount DOUBLE, event_time TIMESTAMP")}},
		Trigger: engine.Trigger{Kind: engine.AvailableNow}, Logger: slog.New(slog.DiscardHandler),
		Conf:  map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
		Query: "SELECT order_id, customer, amount FROM orders", OutputMode: "append"}
	read := func() []string {
		c, err := sinklog.ReadLog(vfs.Default, out)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range c.Files {
			fh, err := os.Open(strings.TrimPrefix(f.Path, "file:"))
			if err != nil {
				t.Fatal(err)
			}
			st, _ := fh.Stat()
			pf, err := parquet.OpenFile(fh, st.Size())
			if err != nil {
				t.Fatal(err)
			}
			rows := make([]fileSinkOrder, pf.NumRows())
			if n, err := parquet.NewGenericReader[fileSinkOrder](pf).Read(rows); n != len(rows) || (err != nil && err != io.EOF) {
				t.Fatalf("%s: %d rows: %v", f.Path, n, err)
			}
			fh.Close()
			for _, r := range rows {
				got = append(got, fmt.Sprintf("%s %s %.2f", *r.OrderID, *r.Customer, *r.Amount))
			}
		}
		slices.Sort(got)
		return got
	}
	slices.Sort(want)
	for run := range 2 {
		if _, err := Run(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		if got := read(); !slices.Equal(got, want) {
			t.Fatalf("run %d: file sink\n%v\nwant\n%v", run, got, want)
		}
	}
}

func writeE2EOrders(t *testing.T, p string, rows []e2eOrder) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	w := parquet.NewGenericWriter[e2eOrder](fh)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
