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
	"github.com/ethstream/ethstream/stream"
)

type e2eOrder struct {
	OrderID   string    `parquet:"order_id"`
	Customer  string    `parquet:"customer"`
	Amount    float64   `parquet:"amount"`
	EventTime time.Time `parquet:"event_time,timestamp(microsecond)"`
}

// TestOrdersUnionToDelta is the source-evolution article's "Get started"
// on files: two Parquet directories, orders_us and orders_eu, read as named
// sources, unioned (the query's FROM over every source), counted and
// summed per 30-minute window and customer under a 20-minute watermark,
// written to a Delta table one file of each source per batch; file f holds
// the events of minutes [80f, 80f+80), so no row is late, and the table is
// checked against a brute-force recount of the files written.
func TestOrdersUnionToDelta(t *testing.T) {
	root := t.TempDir()
	r := rand.New(rand.NewPCG(40, 1))
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	type key struct {
		w        time.Time
		customer string
	}
	count, sum := map[key]int64{}, map[key]float64{}
	var specs []SourceSpec
	for _, region := range []string{"us", "eu"} {
		dir := filepath.Join(root, "orders_"+region)
		for f := range 3 {
			var rows []e2eOrder
			for i := range 40 {
				o := e2eOrder{OrderID: fmt.Sprintf("%s-%d-%d", region, f, i), Customer: fmt.Sprintf("c%d", r.IntN(4)),
					Amount: float64(r.IntN(10000)) / 100, EventTime: t0.Add(time.Duration(f*80*60+r.IntN(80*60)) * time.Second)}
				rows = append(rows, o)
				k := key{o.EventTime.Truncate(30 * time.Minute), o.Customer}
				count[k]++
				sum[k] += o.Amount
			}
			p := filepath.Join(dir, fmt.Sprintf("day=%d", f), "part-0.parquet")
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
		specs = append(specs, SourceSpec{Name: "orders_" + region, Format: "parquet",
			URI: "file://" + filepath.ToSlash(dir) + "?maxFilesPerTrigger=1&schema=" +
				url.QueryEscape("order_id STRING, customer STRING, amount DOUBLE, event_time TIMESTAMP")})
	}
	cfg := Config{Checkpoint: filepath.Join(root, "ckpt"), Table: filepath.Join(root, "table"), LocalDir: filepath.Join(root, "local"),
		Sources: specs, Trigger: engine.Trigger{Kind: engine.AvailableNow}, Logger: slog.New(slog.DiscardHandler),
		Conf: map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
		Query: "SELECT window(event_time, '30 minutes') AS window, customer, count(*) AS orders, sum(amount) AS amount " +
			"FROM blocks GROUP BY window(event_time, '30 minutes'), customer",
		WithWatermark: "event_time, 20 minutes"}
	var progress []*stream.Progress
	cfg.Listeners = []engine.Listener{engine.ListenerFunc(func(p *stream.Progress) { progress = append(progress, p) })}
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	// Three data batches, each one file of each source: the file sources'
	// offsets are Spark's {"logOffset":n}, per source name.
	var ends []string
	for _, p := range progress {
		if p.Kind() != stream.KindData {
			continue
		}
		for _, sp := range p.Sources {
			ends = append(ends, fmt.Sprintf("%s=%s/%d", *sp.Name, sp.EndOffset, sp.NumInputRows))
		}
	}
	if want := []string{`orders_us={"logOffset":0}/40`, `orders_eu={"logOffset":0}/40`, `orders_us={"logOffset":1}/40`, `orders_eu={"logOffset":1}/40`,
		`orders_us={"logOffset":2}/40`, `orders_eu={"logOffset":2}/40`}; !slices.Equal(ends, want) {
		t.Fatalf("progress %v, want %v", ends, want)
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
		w := row["window"].(map[string]any)
		got = append(got, fmt.Sprintf("%s %s %v %.2f", w["start"].(time.Time).UTC().Format("15:04"), row["customer"], row["orders"], row["amount"]))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var want []string
	for k, n := range count {
		want = append(want, fmt.Sprintf("%s %s %d %.2f", k.w.Format("15:04"), k.customer, n, sum[k]))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("table\n%v\nrecount\n%v", got, want)
	}
}
