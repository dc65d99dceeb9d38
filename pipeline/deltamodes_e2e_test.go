package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/sink/delta"
)

// writeOrderFiles writes files Parquet files of orders under dir (file f
// holds event times in minutes [80f, 80f+80), so with a 20-minute watermark
// no row is late) and returns every row written.
func writeOrderFiles(t *testing.T, dir string, files, rows int, seed uint64) []e2eOrder {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 2))
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var all []e2eOrder
	for f := range files {
		var batch []e2eOrder
		for i := range rows {
			batch = append(batch, e2eOrder{OrderID: fmt.Sprintf("%d-%d", f, i), Customer: fmt.Sprintf("c%d", r.IntN(5)),
				Amount: float64(r.IntN(10000)) / 100, EventTime: t0.Add(time.Duration(f*80*60+r.IntN(80*60)) * time.Second)})
		}
		p := filepath.Join(dir, fmt.Sprintf("part-%03d.parquet", f))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		fh, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		w := parquet.NewGenericWriter[e2eOrder](fh)
		if _, err := w.Write(batch); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		fh.Close()
		all = append(all, batch...)
	}
	return all
}

// tableLines reads a Delta table's rows as "window-start customer n sum"
// lines (window start "-" for an unwindowed table), sorted, duplicates kept.
func tableLines(t *testing.T, path string) []string {
	t.Helper()
	ctx := context.Background()
	tb, err := delta.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tb.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := snap.Rows(ctx, func(row map[string]any) error {
		ws := "-"
		if w, ok := row["window"].(map[string]any); ok {
			ws = w["start"].(time.Time).UTC().Format("02T15:04")
		}
		got = append(got, fmt.Sprintf("%s %s %v %.2f", ws, row["customer"], row["orders"], row["amount"]))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	return got
}

// TestDeltaOutputModesEndToEnd runs an aggregation into a Delta table in
// Spark's three output modes, over three runs of a few batches each (a
// restart between runs), and checks the table against a recount of the
// files: append (30-minute windows per customer under a 20-minute
// watermark) holds each window the watermark closed exactly once, written
// by blind appends; complete (totals per customer) holds every customer's
// total, the last batch's files only; update MERGEs the same totals.
func TestDeltaOutputModesEndToEnd(t *testing.T) {
	for _, mode := range []string{"append", "complete", "update"} {
		t.Run(mode, func(t *testing.T) {
			root := t.TempDir()
			rows := writeOrderFiles(t, filepath.Join(root, "orders"), 6, 30, 40)
			query := "SELECT window(event_time, '30 minutes') AS window, customer, count(*) AS orders, sum(amount) AS amount " +
				"FROM orders GROUP BY window(event_time, '30 minutes'), customer"
			if mode != "append" {
				query = "SELECT customer, count(*) AS orders, sum(amount) AS amount FROM orders GROUP BY customer"
			}
			cfg := Config{Checkpoint: filepath.Join(root, "ckpt"), Table: filepath.Join(root, "table"), LocalDir: filepath.Join(root, "local"),
				Sources: []SourceSpec{{Name: "orders", Format: "parquet", URI: "file://" + filepath.ToSlash(filepath.Join(root, "orders")) +
					"?maxFilesPerTrigger=1&schema=" + url.QueryEscape("order_id STRING, customer STRING, amount DOUBLE, event_time TIMESTAMP")}},
				Trigger: engine.Trigger{Kind: engine.AvailableNow}, Logger: slog.New(slog.DiscardHandler),
				Conf:  map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
				Query: query, OutputMode: mode, MaxBatches: 3}
			if mode == "append" {
				cfg.WithWatermark = "event_time, 20 minutes"
			}
			for range 3 {
				if _, err := Run(context.Background(), cfg); err != nil {
					t.Fatal(err)
				}
			}
			// The recount.
			type key struct {
				ws       string
				customer string
			}
			count, sum := map[key]int64{}, map[key]float64{}
			var maxEvent time.Time
			for _, o := range rows {
				k := key{"-", o.Customer}
				if mode == "append" {
					k.ws = o.EventTime.Truncate(30 * time.Minute).Format("02T15:04")
				}
				count[k]++
				sum[k] += o.Amount
				if o.EventTime.After(maxEvent) {
					maxEvent = o.EventTime
				}
			}
			wm := maxEvent.Add(-20 * time.Minute)
			var want []string
			for k, n := range count {
				if mode == "append" {
					start, _ := time.Parse("02T15:04", k.ws)
					end := time.Date(2026, 3, start.Day(), start.Hour(), start.Minute(), 0, 0, time.UTC).Add(30 * time.Minute)
					if end.After(wm) {
						continue // not closed by the watermark: not yet emitted
					}
				}
				want = append(want, fmt.Sprintf("%s %s %d %.2f", k.ws, k.customer, n, sum[k]))
			}
			slices.Sort(want)
			if got := tableLines(t, cfg.Table); !slices.Equal(got, want) {
				t.Fatalf("table\n%v\nrecount\n%v", got, want)
			}
			tb, err := delta.Open(context.Background(), cfg.Table)
			if err != nil {
				t.Fatal(err)
			}
			hist, err := tb.History(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			ops := map[string]int{}
			for _, c := range hist {
				ops[fmt.Sprint(c.Operation, " ", c.OperationParameters["outputMode"])]++
			}
			wantOp := map[string]string{"append": "STREAMING UPDATE Append", "complete": "STREAMING UPDATE Complete", "update": "MERGE <nil>"}[mode]
			if ops[wantOp] < 6 || len(ops) != 2 {
				t.Fatalf("commits %v, want one %q per batch", ops, wantOp)
			}
		})
	}
}
