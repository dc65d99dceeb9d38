package pipeline

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
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
		for i := range 30 {
			rows = append(rows, e2eOrder{OrderID: fmt.Sprintf("%d-%d", f, i), Customer: fmt.Sprintf("c%d", i%3),
				Amount:    amounts[(i*7+f)%len(amounts)],
				EventTime: time.Date(2026, 3, 1, f, 0, 0, 0, time.UTC).Add(time.Duration(i*i%50) * time.Minute)})
		}
		all = append(all, rows...)
		writeE2EOrders(t, filepath.Join(dir, fmt.Sprintf("part-%d.parquet", f)), rows)
	}
	cfg := sessionOrdersConfig(root, dir,
		"SELECT session_window.start AS session_start, session_window.end AS session_end, customer, count(*) AS orders, "+
			"sum(10 / amount) AS amount FROM orders "+
			"GROUP BY session_window(event_time, CASE WHEN amount > 0 THEN '3 minutes' ELSE '0 minutes' END), customer")
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	checkSessionsOf(t, cfg.Table, all, func(o e2eOrder) time.Duration {
		if o.Amount > 0 {
			return 3 * time.Minute
		}
		return 0
	}, func(o e2eOrder) float64 { return 10 / o.Amount }, 10*time.Minute)
}
