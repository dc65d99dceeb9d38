package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/ethstream/ethstream/dedup"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/flow"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/sources/ethrpc"
	"github.com/ethstream/ethstream/stream"
)

// TestDedupRetractionsRefused: a deduplication over the live source at
// reorg=retract cannot stay exact (its state holds the first row's key,
// not the rows), so the query is refused RETRACTION_UNSUPPORTED naming
// the operator and the source, before anything is written. And a source
// that retracts without declaring it (Retracts hidden by a wrapper) is
// refused by the operator itself at the batch that carries the node's
// reorganisation: that batch commits nothing.
func TestDedupRetractionsRefused(t *testing.T) {
	m := testManifest(t)
	ctx := context.Background()
	n, err := ethnode.Start(ctx, ethnode.Options{Manifest: m, Seed: 5, Addr: "127.0.0.1:0", Manual: true, InitialBlocks: 30})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	dir := t.TempDir()
	live := SourceSpec{Name: "eth_live", Format: "ethrpc", URI: fmt.Sprintf(
		"%s?maxBlocksPerTrigger=50&start_block=%d&start_parent_hash=%s&confirmations=0&reorg=retract&reorgDepth=8",
		n.URL(), m.LastBlock+1, m.LastHash)}
	cfg := Config{
		Checkpoint: filepath.Join(dir, "ck"), Table: filepath.Join(dir, "table"), LocalDir: filepath.Join(dir, "cache"),
		Sources: []SourceSpec{live}, DropDuplicatesWithinWatermark: "hash",
		Conf:    map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true", "spark.sql.shuffle.partitions": "2"},
		Trigger: engine.Trigger{Kind: engine.AvailableNow}, Logger: slog.New(slog.DiscardHandler),
	}
	_, err = Run(ctx, cfg)
	if errcode.Code(err) != dedup.CodeRetractionUnsupported ||
		!strings.Contains(err.Error(), "the deduplication dropDuplicatesWithinWatermark(hash): source") || !strings.Contains(err.Error(), `"eth_live"`) {
		t.Fatalf("got %v, want RETRACTION_UNSUPPORTED naming the deduplication and eth_live", err)
	}
	for _, p := range []string{cfg.Checkpoint, cfg.Table} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("the refused start created %s: %v", p, err)
		}
	}

	// The Go API over a source that hides that it retracts.
	o, err := ethrpc.ParseURI(live.URI)
	if err != nil {
		t.Fatal(err)
	}
	run := func() error {
		src, err := ethrpc.New(o)
		if err != nil {
			t.Fatal(err)
		}
		sink, err := delta.NewMergeSink(delta.SinkOptions{Path: cfg.Table, Logger: cfg.Logger})
		if err != nil {
			t.Fatal(err)
		}
		_, err = flow.New("dedup").Read("eth_live", undeclared{src}).Columns("hash", "block_ts", "miner").
			WithWatermark("block_ts", 48*time.Hour).DropDuplicatesWithinWatermark("hash").WriteTo(sink).
			Trigger(engine.Trigger{Kind: engine.AvailableNow}).Confs(cfg.Conf).
			Run(ctx, engine.Options{CheckpointDir: cfg.Checkpoint, LocalDir: cfg.LocalDir})
		return err
	}
	if err := run(); err != nil {
		t.Fatal(err)
	}
	n.Reorg(3)
	n.Mine(2)
	err = run()
	if errcode.Code(err) != dedup.CodeRetractionUnsupported || !strings.Contains(err.Error(), "dropDuplicatesWithinWatermark(hash)") {
		t.Fatalf("after the reorg: %v, want RETRACTION_UNSUPPORTED naming the operator", err)
	}
	// The first run committed batch 0 and the no-data batch 1 its moved
	// watermark runs; the refused batch is 2.
	if _, err := os.Stat(filepath.Join(cfg.Checkpoint, "commits", "2")); !os.IsNotExist(err) {
		t.Fatalf("the refused batch committed: %v", err)
	}
}

// undeclared is a source that retracts rows without saying so
// (stream.RetractingSource is not promoted through the interface).
type undeclared struct{ stream.Source }
