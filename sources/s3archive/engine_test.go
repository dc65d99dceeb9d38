package s3archive

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/internal/streamtest"
)

// TestEngineBackfill runs the source under engine.Run with trigger
// availableNow: 60 daily files at maxFilesPerTrigger 5 are 12 data batches;
// a run stopped after 5 batches and restarted resumes at the next file, and
// every block is processed exactly once.
func TestEngineBackfill(t *testing.T) {
	root := t.TempDir()
	want := writeDays(t, root, day0, 60, 3, "modern")
	sink := streamtest.NewSink()
	fs := vfs.NewMem()
	run := func(maxBatches int) *engine.RunSummary {
		s, err := NewFromURI(fileURI(filepath.Join(root, "v1.0/eth/blocks"))+"?maxFilesPerTrigger=5", blockColumns())
		if err != nil {
			t.Fatal(err)
		}
		q := engine.Query{
			Name:           "backfill",
			Sources:        []engine.NamedSource{{Name: "s3_backfill", Source: s}},
			Columns:        ethblock.Columns,
			Operator:       &streamtest.PassThrough{},
			Sink:           sink,
			Trigger:        engine.Trigger{Kind: engine.AvailableNow},
			MaxDataBatches: maxBatches,
			Conf:           map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
		}
		sum, err := engine.Run(context.Background(), q, engine.Options{CheckpointDir: "/ckpt", FS: fs, LocalDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		return sum
	}
	first := run(5)
	second := run(0)
	if first.DataBatches != 5 || second.DataBatches != 7 || second.FirstBatchID != 5 || second.LastBatchID != 11 {
		t.Fatalf("runs: %+v then %+v; want 5 + 7 data batches, ids 0-11", first, second)
	}
	// Every block reached the sink once, in the batch of its file.
	seen, dups := map[int64]int64{}, 0 // block number -> batch id
	for _, a := range sink.Applied() {
		for _, n := range a.Rows.Column(ethblock.ColNumber).Int64s {
			if _, ok := seen[n]; ok {
				dups++
			}
			seen[n] = a.BatchID
		}
	}
	if dups != 0 || len(seen) != len(want) {
		t.Fatalf("%d blocks processed (%d twice), want %d once", len(seen), dups, len(want))
	}
	for i, b := range want {
		if id := seen[b.Number]; id != int64(i/15) {
			t.Fatalf("block %d in batch %d, want %d (5 files of 3 blocks per batch)", b.Number, id, i/15)
		}
	}
	// Nothing new: a third run plans nothing.
	if third := run(0); third.DataBatches != 0 {
		t.Fatalf("third run: %+v", third)
	}
}
