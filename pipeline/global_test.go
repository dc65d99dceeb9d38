package pipeline

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/stream"
)

// TestGlobalAggregationRuns: a query without GROUP BY (Spark's global
// aggregation) runs end to end into a Delta table in update mode.
func TestGlobalAggregationRuns(t *testing.T) {
	archive, err := faultArchive()
	if err != nil {
		t.Fatal(err)
	}
	fs := vfs.NewMem()
	cfg := Config{
		Checkpoint: "/ck", Table: "/table", LocalDir: t.TempDir(), FS: fs,
		Sources: []SourceSpec{{Name: "arch", Format: "s3archive", URI: "file://" + filepath.ToSlash(archive) + "/v1.0/eth/blocks?maxFilesPerTrigger=1"}},
		Conf:    map[string]string{"spark.sql.shuffle.partitions": "2", "spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
		Query:   "SELECT count(*) AS n, sum(gas_used) AS gas FROM blocks",
		Trigger: engine.Trigger{Kind: engine.AvailableNow},
		Logger:  slog.New(slog.DiscardHandler),
		Clock:   stream.SystemClock{},
	}
	q, opts, err := Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Run(context.Background(), q, opts); err != nil {
		t.Fatal(err)
	}
	// One row, holding every block of the two batches: the recount.
	var total int64
	for _, n := range recount(t, archive) {
		total += n
	}
	tbl, err := delta.OpenFS(context.Background(), fs, "/table")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(context.Background(), -1)
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := snap.Rows(context.Background(), func(r map[string]any) error { rows = append(rows, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0]["n"] != total || rows[0]["gas"] == nil {
		t.Fatalf("table rows %v, want one with n=%d", rows, total)
	}
}
