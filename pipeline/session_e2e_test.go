package pipeline

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/sink/delta"
)

// TestSessionWindowSQL runs GROUP BY session_window(event_time, '3
// minutes'), customer in append mode over three Parquet files, one per
// batch, with their orders out of order within each file: the Delta table
// holds the sessions the watermark closed, each once, as a recount from
// the orders (sorted by time per customer, cut where an order comes more
// than the gap after the running end) gives them. A restart with another
// gap is STATE_SCHEMA_MISMATCH, update mode Spark's refusal.
func TestSessionWindowSQL(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "orders")
	rng := rand.New(rand.NewPCG(41, 41))
	var all []e2eOrder
	for f := range 3 {
		var rows []e2eOrder
		for i := range 25 {
			rows = append(rows, e2eOrder{OrderID: fmt.Sprintf("%d-%d", f, i), Customer: fmt.Sprintf("c%d", rng.IntN(4)),
				Amount:    float64(rng.IntN(100)),
				EventTime: time.Date(2026, 3, 1, f, 0, 0, 0, time.UTC).Add(time.Duration(rng.IntN(50*60)) * time.Second)})
		}
		all = append(all, rows...)
		writeE2EOrders(t, filepath.Join(dir, fmt.Sprintf("part-%d.parquet", f)), rows)
	}
	const gap, delay = 3 * time.Minute, 10 * time.Minute
	cfg := sessionOrdersConfig(root, dir, "SELECT session_window.start AS session_start, session_window.end AS session_end, customer, count(*) AS orders, "+
		"sum(amount) AS amount FROM orders GROUP BY session_window(event_time, '3 minutes'), customer")
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	gapOf := func(e2eOrder) time.Duration { return gap }
	checkSessions(t, cfg.Table, all, gapOf, delay)
	// A dynamic gap (Spark 3.2+): a string expression per row.
	dyn := cfg
	dyn.Checkpoint, dyn.Table = filepath.Join(root, "ckpt-dyn"), filepath.Join(root, "table-dyn")
	dyn.Query = "SELECT session_window.start AS session_start, session_window.end AS session_end, customer, count(*) AS orders, " +
		"sum(amount) AS amount FROM orders GROUP BY session_window(event_time, CASE WHEN amount > 50 THEN '5 minutes' ELSE '1 minute' END), customer"
	if _, err := Run(context.Background(), dyn); err != nil {
		t.Fatal(err)
	}
	checkSessions(t, dyn.Table, all, func(o e2eOrder) time.Duration {
		if o.Amount > 50 {
			return 5 * time.Minute
		}
		return time.Minute
	}, delay)

	// Another gap on the same checkpoint: refused before anything is
	// written (the stored sessions were merged under the old gap).
	c2 := cfg
	c2.Query = "SELECT session_window.start AS session_start, session_window.end AS session_end, customer, count(*) AS orders, " +
		"sum(amount) AS amount FROM orders GROUP BY session_window(event_time, '5 minutes'), customer"
	if _, err := Run(context.Background(), c2); errcode.Code(err) != errcode.StateSchemaMismatch {
		t.Fatalf("another gap: got %v, want STATE_SCHEMA_MISMATCH", err)
	}
	c3 := cfg
	c3.OutputMode = "update"
	if _, err := Run(context.Background(), c3); err == nil || !strings.Contains(err.Error(), "Update output mode not supported for session window") {
		t.Fatalf("update mode: got %v", err)
	}
}

// sessionOrdersConfig runs query in append mode over the orders Parquet
// files in dir (one a batch, event_time watermarked by 10 minutes) into a
// Delta table, checkpoint and table under root.
func sessionOrdersConfig(root, dir, query string) Config {
	return Config{Checkpoint: filepath.Join(root, "ckpt"), Table: filepath.Join(root, "table"), LocalDir: filepath.Join(root, "local"),
		Sources: []SourceSpec{{Name: "orders", Format: "parquet",
			URI: "file://" + filepath.ToSlash(dir) + "?maxFilesPerTrigger=1&schema=" +
				url.QueryEscape("order_id STRING, customer STRING, amount DOUBLE, event_time TIMESTAMP")}},
		Trigger: engine.Trigger{Kind: engine.AvailableNow}, Logger: slog.New(slog.DiscardHandler),
		Conf:          map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true", "spark.sql.shuffle.partitions": "3"},
		WithWatermark: "event_time, 10 minutes", OutputMode: "append", Query: query}
}

// checkSessions compares the table's sessions with a recount from the
// orders: per customer, sorted by time, a session grows while the next
// order comes at or before its running end (each order's time plus its
// gap); every order is on time (each file is a later hour), so the table
// holds the sessions ending at or before the final watermark. Its column
// amount is the sum of the orders' amounts.
func checkSessions(t *testing.T, table string, all []e2eOrder, gapOf func(e2eOrder) time.Duration, delay time.Duration) {
	t.Helper()
	checkSessionsOf(t, table, all, gapOf, func(o e2eOrder) float64 { return o.Amount }, delay)
}

// checkSessionsOf is checkSessions with the table's column amount the sum
// of value over a session's orders. An order whose gap is not positive
// has no session (Spark filters it before the aggregation); its event
// time still moves the watermark.
func checkSessionsOf(t *testing.T, table string, all []e2eOrder, gapOf func(e2eOrder) time.Duration, value func(e2eOrder) float64, delay time.Duration) {
	t.Helper()
	var maxTS time.Time
	by := map[string][]e2eOrder{}
	for _, o := range all {
		if o.EventTime.After(maxTS) {
			maxTS = o.EventTime
		}
		if gapOf(o) > 0 {
			by[o.Customer] = append(by[o.Customer], o)
		}
	}
	wm := maxTS.Add(-delay)
	var want []string
	for c, os := range by {
		slices.SortFunc(os, func(a, b e2eOrder) int { return cmp.Compare(a.EventTime.UnixMicro(), b.EventTime.UnixMicro()) })
		for i := 0; i < len(os); {
			start, end, sum := os[i].EventTime, os[i].EventTime.Add(gapOf(os[i])), value(os[i])
			j := i + 1
			for ; j < len(os) && !os[j].EventTime.After(end); j++ {
				if e := os[j].EventTime.Add(gapOf(os[j])); e.After(end) {
					end = e
				}
				sum += value(os[j])
			}
			if !end.After(wm) {
				want = append(want, fmt.Sprintf("%s %s %s %d %g", start.Format(time.RFC3339), end.Format(time.RFC3339), c, j-i, sum))
			}
			i = j
		}
	}
	slices.Sort(want)
	ctx := context.Background()
	tbl, err := delta.OpenFS(ctx, vfs.Default, table)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	err = snap.Rows(ctx, func(r map[string]any) error {
		got = append(got, fmt.Sprintf("%s %s %s %d %g", r["session_start"].(time.Time).UTC().Format(time.RFC3339),
			r["session_end"].(time.Time).UTC().Format(time.RFC3339), r["customer"], r["orders"], r["amount"]))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if len(want) < 10 || !slices.Equal(got, want) {
		t.Fatalf("table (%d rows)\n%q\nthe recount (%d)\n%q", len(got), got, len(want), want)
	}
}
