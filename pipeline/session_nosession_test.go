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
)

// TestSessionAggregateInputSkipsRowsWithoutSession: sum(10 / amount) over
// sessions whose dynamic gap is '0 minutes' (no session: Spark's
// SessionWindowing filters the row) exactly where amount is 0. Spark never
// divides by that row's zero; ethstream computed the input for every row
// and failed the batch with DIVIDE_BY_ZERO. The table equals a recount of
// the rows with a session.
func TestSessionAggregateInputSkipsRowsWithoutSession(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "orders")
	amounts := []float64{0, 0.5, 1.25, 2, 4} // 10/amount is exact
	var all []e2eOrder
	for f := range 2 {
		var rows []e2eOrder
		for i := range 24 {
			rows = append(rows, e2eOrder{OrderID: fmt.Sprintf("%d-%d", f, i), Customer: fmt.Sprintf("c%d", i%2),
				Amount:    amounts[(i*7+f)%len(amounts)],
				EventTime: time.Date(2026, 3, 1, f, 0, 0, 0, time.UTC).Add(time.Duration(i*i%50) * time.Minute)})
		}
		all = append(all, rows...)
		writeE2EOrders(t, filepath.Join(dir, fmt.Sprintf("part-%d.parquet", f)), rows)
	}
	cfg := Config{Checkpoint: filepath.Join(root, "ckpt"), Table: filepath.Join(root, "table"), LocalDir: filepath.Join(root, "local"),
		Sources: []SourceSpec{{Name: "orders", Format: "parquet",
			URI: "file://" + filepath.ToSlash(dir) + "?maxFilesPerTrigger=1&schema=" +
				url.QueryEscape("order_id STRING, customer STRING, amount DOUBLE, event_time TIMESTAMP")}},
		Trigger: engine.Trigger{Kind: engine.AvailableNow}, Logger: slog.New(slog.DiscardHandler),
		Conf:          map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true", "spark.sql.shuffle.partitions": "2"},
		WithWatermark: "event_time, 10 minutes", OutputMode: "append",
		Query: "SELECT session_window.start AS session_start, session_window.end AS session_end, customer, count(*) AS orders, " +
			"sum(10 / amount) AS inv FROM orders " +
			"GROUP BY session_window(event_time, CASE WHEN amount > 0 THEN '3 minutes' ELSE '0 minutes' END), customer"}
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	// The recount: per customer, the rows with a session (amount > 0)
	// sorted by time; a session grows while the next row starts at or
	// before its end. Each file is a later hour, so the table holds the
	// sessions ending at or before the final watermark.
	by := map[string][]e2eOrder{}
	var maxTS time.Time
	for _, o := range all {
		if o.EventTime.After(maxTS) {
			maxTS = o.EventTime
		}
		if o.Amount > 0 {
			by[o.Customer] = append(by[o.Customer], o)
		}
	}
	wm := maxTS.Add(-10 * time.Minute)
	var want []string
	for k, os := range by {
		slices.SortFunc(os, func(a, b e2eOrder) int { return a.EventTime.Compare(b.EventTime) })
		for i := 0; i < len(os); {
			start, end, inv := os[i].EventTime, os[i].EventTime.Add(3*time.Minute), 10/os[i].Amount
			j := i + 1
			for ; j < len(os) && !os[j].EventTime.After(end); j++ {
				if e := os[j].EventTime.Add(3 * time.Minute); e.After(end) {
					end = e
				}
				inv += 10 / os[j].Amount
			}
			if !end.After(wm) {
				want = append(want, fmt.Sprintf("%s %s %s %d %g", start.Format(time.RFC3339), end.Format(time.RFC3339), k, j-i, inv))
			}
			i = j
		}
	}
	slices.Sort(want)
	tbl, err := delta.OpenFS(context.Background(), vfs.Default, cfg.Table)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(context.Background(), -1)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	err = snap.Rows(context.Background(), func(r map[string]any) error {
		got = append(got, fmt.Sprintf("%s %s %s %d %g", r["session_start"].(time.Time).UTC().Format(time.RFC3339),
			r["session_end"].(time.Time).UTC().Format(time.RFC3339), r["customer"], r["orders"], r["inv"]))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if len(want) < 5 || !slices.Equal(got, want) {
		t.Fatalf("table:\n%s\nrecount:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
