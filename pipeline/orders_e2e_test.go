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
	"strings"
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

// TestOrdersUnionToDelta is the source-evolution article's "Get started":
// orders_us and orders_eu, as two Parquet directories and as two Delta
// tables (a log another writer made over the same files), read as named
// sources, unioned (the query's FROM over every source), counted and
// summed per 30-minute window and customer under a 20-minute watermark,
// written to a Delta table one file of each source per batch; file f holds
// the events of minutes [80f, 80f+80), so no row is late, and the table is
// checked against a brute-force recount of the files written.
func TestOrdersUnionToDelta(t *testing.T) {
	for _, format := range []string{"parquet", "delta"} {
		t.Run(format, func(t *testing.T) { testOrdersUnion(t, format, "blocks") })
	}
	// The article's union as a Spark SQL user writes it (issue 40, 4).
	t.Run("union-all", func(t *testing.T) {
		testOrdersUnion(t, "parquet", "(SELECT * FROM orders_us UNION ALL SELECT * FROM orders_eu)")
	})
}

// deltaLog writes _delta_log/00000000000000000000.json over dir's data
// files (rel paths, in order, modification times ascending): the table
// another writer would have made of them.
func deltaLog(t *testing.T, dir string, rels []string) {
	t.Helper()
	schema := `{"type":"struct","fields":[{"name":"order_id","type":"string","nullable":true,"metadata":{}},` +
		`{"name":"customer","type":"string","nullable":true,"metadata":{}},{"name":"amount","type":"double","nullable":true,"metadata":{}},` +
		`{"name":"event_time","type":"timestamp","nullable":true,"metadata":{}}]}`
	lines := []string{`{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}`,
		fmt.Sprintf(`{"metaData":{"id":"%s","format":{"provider":"parquet","options":{}},"schemaString":%q,"partitionColumns":[],"configuration":{},"createdTime":1}}`,
			filepath.Base(dir), schema)}
	for i, rel := range rels {
		st, err := os.Stat(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf(`{"add":{"path":%q,"partitionValues":{},"size":%d,"modificationTime":%d,"dataChange":true}}`, rel, st.Size(), 1000+i))
	}
	if err := os.MkdirAll(filepath.Join(dir, "_delta_log"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "_delta_log", "00000000000000000000.json"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func testOrdersUnion(t *testing.T, format, from string) {
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
		var rels []string
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
			rel := fmt.Sprintf("day=%d/part-0.parquet", f)
			if format == "delta" {
				rel = fmt.Sprintf("part-%d.parquet", f) // unpartitioned: the log names the files
			}
			rels = append(rels, rel)
			p := filepath.Join(dir, rel)
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
		spec := SourceSpec{Name: "orders_" + region, Format: "parquet",
			URI: "file://" + filepath.ToSlash(dir) + "?maxFilesPerTrigger=1&schema=" +
				url.QueryEscape("order_id STRING, customer STRING, amount DOUBLE, event_time TIMESTAMP")}
		if format == "delta" {
			deltaLog(t, dir, rels)
			spec = SourceSpec{Name: "orders_" + region, Format: "delta", URI: "file://" + filepath.ToSlash(dir) + "?maxFilesPerTrigger=1"}
		}
		specs = append(specs, spec)
	}
	cfg := Config{Checkpoint: filepath.Join(root, "ckpt"), Table: filepath.Join(root, "table"), LocalDir: filepath.Join(root, "local"),
		Sources: specs, Trigger: engine.Trigger{Kind: engine.AvailableNow}, Logger: slog.New(slog.DiscardHandler),
		Conf: map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
		Query: "SELECT window(event_time, '30 minutes') AS window, customer, count(*) AS orders, sum(amount) AS amount " +
			"FROM " + from + " GROUP BY window(event_time, '30 minutes'), customer",
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
	want := []string{`orders_us={"logOffset":0}/40`, `orders_eu={"logOffset":0}/40`, `orders_us={"logOffset":1}/40`, `orders_eu={"logOffset":1}/40`,
		`orders_us={"logOffset":2}/40`, `orders_eu={"logOffset":2}/40`}
	if format == "delta" { // Delta's offsets: the snapshot at version 0, file by file
		want = nil
		for _, end := range []string{`"reservoirVersion":0,"index":0,"isStartingVersion":true}`, `"reservoirVersion":0,"index":1,"isStartingVersion":true}`,
			`"reservoirVersion":1,"index":-1,"isStartingVersion":false}`} {
			for _, region := range []string{"us", "eu"} {
				want = append(want, fmt.Sprintf(`orders_%s={"sourceVersion":1,"reservoirId":"orders_%s",%s/40`, region, region, end))
			}
		}
	}
	if !slices.Equal(ends, want) {
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
	var recount []string
	for k, n := range count {
		recount = append(recount, fmt.Sprintf("%s %s %d %.2f", k.w.Format("15:04"), k.customer, n, sum[k]))
	}
	slices.Sort(got)
	slices.Sort(recount)
	if !slices.Equal(got, recount) {
		t.Fatalf("table\n%v\nrecount\n%v", got, recount)
	}
}
