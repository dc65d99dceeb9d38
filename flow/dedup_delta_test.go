package flow_test

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/flow"
	"github.com/ethstream/ethstream/sink/delta"
)

// TestDropDuplicatesAppendsToDelta: a plan with a deduplication and no
// aggregation (DropDuplicates, then Select) appends the rows it keeps to a
// Delta table, over two runs on one checkpoint: the table holds the first
// occurrence of every (pair, price), once, against firstSeen's recount.
// (The sink merged them by the output's empty key, a table of one row,
// when only a plan without a stateful operator appended.)
func TestDropDuplicatesAppendsToDelta(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	opts := engine.Options{CheckpointDir: filepath.Join(dir, "checkpoint"), LocalDir: filepath.Join(dir, "local")}
	table := filepath.Join(dir, "table")
	feed := &Feed{}
	oracle := firstSeen(func(t Trade) string { return fmt.Sprint(t.Pair, t.Price) }, false)()
	var want []string
	for round := range 2 {
		var batch []Trade
		for i := range 30 {
			batch = append(batch, Trade{at("10:00").Add(time.Duration(round*30+i) * time.Second).UTC(),
				[]string{"ETH", "BTC"}[i%2], float64(1 + (i*7+round)%5)})
		}
		out, _, _ := oracle(batch, 0, 0)
		for _, tr := range out {
			want = append(want, fmt.Sprintf("%s %g", tr.Pair, tr.Price))
		}
		feed.Publish(batch...)
		sink, err := delta.NewMergeSink(delta.SinkOptions{Path: table, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		q := flow.New("dedup").Read("feed", feed).DropDuplicates("pair", "price").
			Select(flow.Col("pair"), flow.Col("price")).WriteTo(sink).
			Trigger(engine.Trigger{Kind: engine.AvailableNow}).
			Conf("spark.sql.streaming.queryEvolution.enableSourceEvolution", "true")
		if _, err := q.Run(ctx, opts); err != nil {
			t.Fatal(err)
		}
	}
	tbl, err := delta.OpenFS(ctx, vfs.Default, table)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := snap.Rows(ctx, func(r map[string]any) error {
		got = append(got, fmt.Sprintf("%s %g", r["pair"], r["price"]))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	slices.Sort(want)
	if len(want) < 3 || strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("table holds %q, want the first occurrences %q", got, want)
	}
}
