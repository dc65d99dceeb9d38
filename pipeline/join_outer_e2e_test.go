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
)

// writeTicks writes files[rel][f] as rel/f=<f>/part-0.parquet under root.
func writeTicks(t *testing.T, root string, files map[string][][]e2eTick) {
	t.Helper()
	for rel, fs := range files {
		for f, rows := range fs {
			p := filepath.Join(root, rel, fmt.Sprintf("f=%d/part-0.parquet", f))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			fh, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			w := parquet.NewGenericWriter[e2eTick](fh)
			if _, err := w.Write(rows); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			fh.Close()
		}
	}
}

// TestJoinGroupBySQL: WHERE and GROUP BY over a stream-stream left outer
// join in SQL (query/join_outer.go): per pair and 10-minute window of the
// quote's time, the quotes with an even number and the trades that followed
// them within 2 minutes, in append mode, over Parquet files read one per
// batch. The aggregation after the join closes its windows by the join's
// output watermark; the Delta table equals a brute-force recount (quotes
// no trade followed count once, with no trade), and the recorded shape
// names both operators.
func TestJoinGroupBySQL(t *testing.T) {
	root := t.TempDir()
	r := rand.New(rand.NewPCG(41, 3))
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	files := map[string][][]e2eTick{}
	for _, rel := range []string{"quotes", "trades"} {
		for f := range 5 {
			var rows []e2eTick
			for i := range 14 {
				rows = append(rows, e2eTick{Pair: fmt.Sprintf("p%d", r.IntN(3)), N: int64(100*f + i), At: t0.Add(time.Duration(f*600+r.IntN(600)) * time.Second)})
			}
			if f == 4 { // past every row: both watermarks pass them all
				// Even: the WHERE on q.n runs below the join and the
				// quotes' watermark (Spark's pushdown), so an odd
				// sentinel would not move the watermark.
				rows = []e2eTick{{Pair: "sentinel-" + rel, N: -2, At: t0.Add(5 * time.Hour)}}
			}
			files[rel] = append(files[rel], rows)
		}
	}
	writeTicks(t, root, files)
	spec := func(rel string) SourceSpec {
		return SourceSpec{Name: rel, Format: "parquet", URI: "file://" + filepath.ToSlash(filepath.Join(root, rel)) + "?maxFilesPerTrigger=1&schema=" +
			url.QueryEscape("pair STRING, n BIGINT, at TIMESTAMP")}
	}
	cfg := Config{Checkpoint: filepath.Join(root, "ckpt"), Table: filepath.Join(root, "table"), LocalDir: filepath.Join(root, "local"),
		Sources: []SourceSpec{spec("quotes"), spec("trades")}, Trigger: engine.Trigger{Kind: engine.AvailableNow}, Logger: slog.New(slog.DiscardHandler),
		OutputMode: "append",
		Conf:       map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true", "spark.sql.shuffle.partitions": "4"},
		Query: "SELECT q.pair, window(q.at, '10 minutes'), count(*) AS quotes, count(t.n) AS trades " +
			"FROM quotes WATERMARK at DELAY OF INTERVAL 5 MINUTES AS q " +
			"LEFT OUTER JOIN trades WATERMARK at DELAY OF INTERVAL 5 MINUTES AS t " +
			"ON q.pair = t.pair AND t.at BETWEEN q.at AND q.at + INTERVAL 2 MINUTES " +
			"WHERE q.n % 2 = 0 GROUP BY q.pair, window(q.at, '10 minutes')"}
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	type key struct {
		pair string
		win  string
	}
	counts := map[key][2]int{}
	for _, qs := range files["quotes"] {
		for _, q := range qs {
			if q.N < 0 || q.N%2 != 0 {
				continue
			}
			k := key{q.Pair, q.At.Truncate(10 * time.Minute).Format("15:04")}
			matched := false
			for _, ts := range files["trades"] {
				for _, tr := range ts {
					if q.Pair == tr.Pair && !tr.At.Before(q.At) && !tr.At.After(q.At.Add(2*time.Minute)) {
						c := counts[k]
						c[0]++
						c[1]++
						counts[k] = c
						matched = true
					}
				}
			}
			if !matched {
				c := counts[k]
				c[0]++
				counts[k] = c
			}
		}
	}
	var want []string
	for k, c := range counts {
		want = append(want, fmt.Sprintf("%s %s %d %d", k.pair, k.win, c[0], c[1]))
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
		if _, ok := row["window"].(map[string]any); !ok {
			return fmt.Errorf("row %v has no window_start", row)
		}
		got = append(got, fmt.Sprintf("%s %s %v %v", row["pair"], row["window"].(map[string]any)["start"].(time.Time).UTC().Format("15:04"), row["quotes"], row["trades"]))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) || len(want) < 8 {
		t.Fatalf("table (%d rows)\n%s\nrecount (%d rows)\n%s", len(got), strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
	}
}
