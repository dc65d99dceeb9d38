package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/dedup"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// statelessDedupRun runs SELECT number, miner, gas_used FROM blocks (no
// aggregation, append mode) over two sources reading the same archive, one
// file a batch, with set applied to the config, on root's checkpoint and
// table; it returns the rows the deduplication dropped as duplicates and
// the summary.
func statelessDedupRun(t *testing.T, root string, max int, set func(*Config)) (dropped int64, sum *engine.RunSummary, err error) {
	t.Helper()
	archive, err := faultArchive()
	if err != nil {
		t.Fatal(err)
	}
	uri := "file://" + filepath.ToSlash(archive) + "/v1.0/eth/blocks?maxFilesPerTrigger=1"
	cfg := Config{
		Checkpoint: filepath.Join(root, "ck"), Table: filepath.Join(root, "table"), LocalDir: filepath.Join(root, "cache"),
		MaxBatches: max, Query: "SELECT number, miner, gas_used FROM blocks", OutputMode: "append",
		Sources: []SourceSpec{{Name: "a", Format: "s3archive", URI: uri}, {Name: "b", Format: "s3archive", URI: uri}},
		Conf: map[string]string{"spark.sql.shuffle.partitions": "2",
			"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
		Trigger: engine.Trigger{Kind: engine.AvailableNow},
		Logger:  slog.New(slog.DiscardHandler),
		Listeners: []engine.Listener{engine.ListenerFunc(func(p *stream.Progress) {
			for _, op := range p.StateOperators {
				dropped += op.CustomMetrics[dedup.MetricDroppedDuplicates]
			}
		})},
	}
	set(&cfg)
	sum, err = Run(context.Background(), cfg)
	return dropped, sum, err
}

// TestDropDuplicatesStateless: --drop-duplicates 'hash' and
// --drop-duplicates-within-watermark 'hash' on a query with no aggregation
// (a SELECT of columns that do not include hash): every block of two
// sources reading the same archive is appended once, its second row
// dropped and counted, across a restart and a crash between the table's
// commit and commits/N; one table commit per batch. Checked against the
// archive's Parquet files read directly.
func TestDropDuplicatesStateless(t *testing.T) {
	archive, err := faultArchive()
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Number  int64  `parquet:"number"`
		Miner   string `parquet:"miner"`
		GasUsed int64  `parquet:"gas_used"`
	}
	var want []string
	archiveRows(t, archive, func(r row) { want = append(want, fmt.Sprintf("%d %s %d", r.Number, r.Miner, r.GasUsed)) })
	sort.Strings(want)
	if len(want) == 0 {
		t.Fatal("empty archive")
	}
	for _, c := range []struct {
		name string
		set  func(*Config)
	}{
		{"dropDuplicates", func(c *Config) { c.DropDuplicates = "hash" }},
		{"withinWatermark", func(c *Config) { c.DropDuplicatesWithinWatermark, c.WithWatermark = "hash", "block_ts, 1 hour" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			d1, sum, err := statelessDedupRun(t, root, 1, c.set)
			if err != nil || sum.DataBatches != 1 {
				t.Fatalf("first run: %+v %v", sum, err)
			}
			// A crash after the table's commit of batch 0, before commits/0.
			if err := os.Remove(filepath.Join(root, "ck", "commits", "0")); err != nil {
				t.Fatal(err)
			}
			d2, sum, err := statelessDedupRun(t, root, 0, c.set)
			if err != nil || sum.RerunBatchID != 0 {
				t.Fatalf("restart: %+v %v", sum, err)
			}
			got, ops := tableRows(t, filepath.Join(root, "table"))
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("table holds %d rows, the archive %d blocks: %v", len(got), len(want), got[:min(3, len(got))])
			}
			// Batch 0 twice (the re-run writes nothing), then the others
			// (data, and a no-data batch evicting within the watermark):
			// the table's commits are one per batch.
			if want := fmt.Sprintf("STREAMING UPDATE x%d", sum.LastBatchID+1); ops != want || sum.LastBatchID < 1 {
				t.Fatalf("table commits: %s, want %s", ops, want)
			}
			// The re-run batch 0 counts its duplicates again.
			if want := int64(len(want)); d2 < want || d2-d1 > want || d1 == 0 {
				t.Fatalf("dropped %d then %d as duplicates; %d blocks each read twice", d1, d2, want)
			}
		})
	}
}

// TestDropDuplicatesStatelessRestartRules: on a query with no aggregation,
// adding the deduplication to a checkpoint written without it, removing
// it, or changing its columns is refused with the checkpoint unchanged
// (the restart rules: an operator added or removed, or its state schema
// changed); the same flags restart.
func TestDropDuplicatesStatelessRestartRules(t *testing.T) {
	none := func(*Config) {}
	hash := func(c *Config) { c.DropDuplicates = "hash" }
	for _, c := range []struct {
		name        string
		first, then func(*Config)
		code        string
	}{
		{"added", none, hash, errcode.StateSchemaMismatch},
		{"removed", hash, none, errcode.StateSchemaMismatch},
		{"columns", hash, func(c *Config) { c.DropDuplicates = "hash, number" }, errcode.StateSchemaMismatch},
		{"withinWatermark", hash, func(c *Config) {
			c.DropDuplicatesWithinWatermark, c.WithWatermark = "hash", "block_ts, 1 hour"
		}, errcode.StateSchemaMismatch},
		{"same", hash, hash, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			if _, _, err := statelessDedupRun(t, root, 1, c.first); err != nil {
				t.Fatal(err)
			}
			before := treeHash(t, filepath.Join(root, "ck"), filepath.Join(root, "table"))
			_, _, err := statelessDedupRun(t, root, 1, c.then)
			if errcode.Code(err) != c.code || (c.code == "" && err != nil) {
				t.Fatalf("restart: %v, want %q", err, c.code)
			}
			if c.code == "" {
				return
			}
			if after := treeHash(t, filepath.Join(root, "ck"), filepath.Join(root, "table")); after != before {
				t.Fatal("a refused start changed files")
			}
		})
	}
}
