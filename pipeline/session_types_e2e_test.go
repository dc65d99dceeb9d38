package pipeline

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/sink/delta"
)

// TestSessionWindowTypesSQL: a session window grouped by a DOUBLE column
// with the sum of a DECIMAL expression, in append mode to a Delta table:
// each session's bounds, key, count and exact decimal sum are a recount's.
func TestSessionWindowTypesSQL(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "orders")
	rng := rand.New(rand.NewPCG(41, 7))
	var all []e2eOrder
	for f := range 2 {
		var rows []e2eOrder
		for i := range 30 {
			rows = append(rows, e2eOrder{OrderID: fmt.Sprintf("%d-%d", f, i), Customer: "c",
				Amount:    float64(rng.IntN(3)) + 0.25,
				EventTime: time.Date(2026, 3, 1, f, 0, 0, 0, time.UTC).Add(time.Duration(rng.IntN(50*60)) * time.Second)})
		}
		all = append(all, rows...)
		writeE2EOrders(t, filepath.Join(dir, fmt.Sprintf("part-%d.parquet", f)), rows)
	}
	cfg := sessionOrdersConfig(root, dir, "SELECT session_window.start AS session_start, session_window.end AS session_end, amount, count(*) AS orders, "+
		"sum(CAST(amount AS DECIMAL(10,2))) AS total FROM orders GROUP BY session_window(event_time, '3 minutes'), amount")
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	// The recount: per amount, sorted by time, a session grows while the
	// next order comes at or before its end; every order is on time (each
	// file is a later hour), so the table holds the sessions ending at or
	// before the final watermark.
	by := map[float64][]e2eOrder{}
	var maxTS time.Time
	for _, o := range all {
		by[o.Amount] = append(by[o.Amount], o)
		if o.EventTime.After(maxTS) {
			maxTS = o.EventTime
		}
	}
	wm := maxTS.Add(-10 * time.Minute)
	var want []string
	for k, os := range by {
		slices.SortFunc(os, func(a, b e2eOrder) int { return a.EventTime.Compare(b.EventTime) })
		for i := 0; i < len(os); {
			start, end := os[i].EventTime, os[i].EventTime.Add(3*time.Minute)
			j := i + 1
			for ; j < len(os) && !os[j].EventTime.After(end); j++ {
				end = os[j].EventTime.Add(3 * time.Minute)
			}
			if !end.After(wm) {
				want = append(want, fmt.Sprintf("%s %s %g %d %.2f", start.Format(time.RFC3339), end.Format(time.RFC3339), k, j-i, k*float64(j-i)))
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
		got = append(got, fmt.Sprintf("%s %s %g %d %s", r["session_start"].(time.Time).UTC().Format(time.RFC3339),
			r["session_end"].(time.Time).UTC().Format(time.RFC3339), r["amount"], r["orders"], r["total"].(*big.Float).Text('f', 2)))
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
