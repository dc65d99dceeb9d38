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
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/sink/delta"
)

type e2eTick struct {
	Pair string    `parquet:"pair"`
	N    int64     `parquet:"n"`
	At   time.Time `parquet:"at,timestamp(microsecond)"`
}

// TestJoinSQLToDelta: a stream-stream left outer join in SQL with
// Databricks' per-relation WATERMARK clauses, over two Parquet sources
// read one file per batch, appended to a Delta table: the table holds
// every pair within the time range and, once both watermarks passed them,
// the quotes no trade followed, with nulls; a brute-force recount over the
// files written.
func TestJoinSQLToDelta(t *testing.T) {
	root := t.TempDir()
	r := rand.New(rand.NewPCG(41, 2))
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	files := map[string][][]e2eTick{}
	for _, rel := range []string{"quotes", "trades"} {
		dir := filepath.Join(root, rel)
		for f := range 4 {
			var rows []e2eTick
			for i := range 12 {
				rows = append(rows, e2eTick{Pair: fmt.Sprintf("p%d", r.IntN(3)), N: int64(100*f + i), At: t0.Add(time.Duration(f*600+r.IntN(600)) * time.Second)})
			}
			if f == 3 { // past every row: both watermarks pass them all
				rows = []e2eTick{{Pair: "sentinel-" + rel, N: -1, At: t0.Add(5 * time.Hour)}}
			}
			files[rel] = append(files[rel], rows)
			p := filepath.Join(dir, fmt.Sprintf("f=%d/part-0.parquet", f))
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
	spec := func(rel string) SourceSpec {
		return SourceSpec{Name: rel, Format: "parquet", URI: "file://" + filepath.ToSlash(filepath.Join(root, rel)) + "?maxFilesPerTrigger=1&schema=" +
			url.QueryEscape("pair STRING, n BIGINT, at TIMESTAMP")}
	}
	cfg := Config{Checkpoint: filepath.Join(root, "ckpt"), Table: filepath.Join(root, "table"), LocalDir: filepath.Join(root, "local"),
		Sources: []SourceSpec{spec("quotes"), spec("trades")}, Trigger: engine.Trigger{Kind: engine.AvailableNow}, Logger: slog.New(slog.DiscardHandler),
		Conf: map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true", "spark.sql.shuffle.partitions": "4"},
		Query: "SELECT q.pair, q.n AS quote, q.at AS quote_at, t.n AS trade FROM quotes WATERMARK at DELAY OF INTERVAL 5 MINUTES AS q " +
			"LEFT OUTER JOIN trades WATERMARK at DELAY OF INTERVAL 5 MINUTES AS t " +
			"ON q.pair = t.pair AND t.at BETWEEN q.at AND q.at + INTERVAL 2 MINUTES"}
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, qs := range files["quotes"] {
		for _, q := range qs {
			matched := false
			for _, ts := range files["trades"] {
				for _, tr := range ts {
					if q.Pair == tr.Pair && !tr.At.Before(q.At) && !tr.At.After(q.At.Add(2*time.Minute)) {
						want = append(want, fmt.Sprintf("%s %d %s %d", q.Pair, q.N, q.At.Format("15:04:05"), tr.N))
						matched = true
					}
				}
			}
			if !matched && q.N >= 0 {
				want = append(want, fmt.Sprintf("%s %d %s null", q.Pair, q.N, q.At.Format("15:04:05")))
			}
		}
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
		trade := "null"
		if v := row["trade"]; v != nil {
			trade = fmt.Sprint(v)
		}
		got = append(got, fmt.Sprintf("%s %v %s %s", row["pair"], row["quote"], row["quote_at"].(time.Time).UTC().Format("15:04:05"), trade))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) || len(want) < 10 || !slices.ContainsFunc(want, func(s string) bool { return strings.HasSuffix(s, "null") }) {
		t.Fatalf("table (%d rows)\n%s\nrecount (%d rows)\n%s", len(got), strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
	}

	// Spark's checker: a left outer join without a watermark on the
	// right (the nullable side) is refused before anything is written.
	bad := cfg
	bad.Checkpoint, bad.Table = filepath.Join(root, "ckpt2"), filepath.Join(root, "table2")
	bad.Query = strings.Replace(cfg.Query, "trades WATERMARK at DELAY OF INTERVAL 5 MINUTES AS t", "trades AS t", 1)
	if _, err := Run(context.Background(), bad); errcode.Code(err) != "_LEGACY_ERROR_TEMP_3102" {
		t.Fatalf("left outer join without the right watermark: %v", err)
	}
	if _, err := os.Stat(bad.Checkpoint); !os.IsNotExist(err) {
		t.Fatalf("a refused join created its checkpoint: %v", err)
	}
}
