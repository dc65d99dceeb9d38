package s3archive

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/stream"
)

// countingOperator records every block number the engine hands it, per
// batch, so a test can check that each block is processed exactly once.
type countingOperator struct {
	seen    map[int64]int64 // block number -> batch id
	dups    int
	pending map[int64]int64
}

func (o *countingOperator) Open(context.Context, stream.OperatorEnv) error { return nil }
func (o *countingOperator) Process(_ context.Context, id, _ int64, in *stream.Batch) error {
	for _, n := range in.Column(ethblock.ColNumber).Int64s {
		o.pending[n] = id
	}
	return nil
}
func (o *countingOperator) Finish(context.Context, int64, int64) (*stream.Batch, stream.OperatorProgress, error) {
	return &stream.Batch{}, stream.OperatorProgress{OperatorName: "count"}, nil
}
func (o *countingOperator) Commit(context.Context, int64) error {
	for n, id := range o.pending {
		if _, ok := o.seen[n]; ok {
			o.dups++
		}
		o.seen[n] = id
	}
	clear(o.pending)
	return nil
}
func (o *countingOperator) Abort()                               { clear(o.pending) }
func (o *countingOperator) NeedsNoDataBatch(int64) (bool, error) { return false, nil }
func (o *countingOperator) Repartition(context.Context, int64, int64, int) (stream.RepartitionStats, error) {
	return stream.RepartitionStats{}, nil
}
func (o *countingOperator) Close() error { return nil }

type nopSink struct{}

func (nopSink) Open(context.Context, stream.SinkEnv) error { return nil }
func (nopSink) Description() string                        { return "nop" }
func (nopSink) AddBatch(context.Context, int64, *stream.Batch) (stream.SinkProgress, error) {
	return stream.SinkProgress{Description: "nop"}, nil
}
func (nopSink) Close() error { return nil }

// TestEngineBackfill runs the source under engine.Run with trigger
// availableNow: 60 daily files at maxFilesPerTrigger 5 are 12 data batches;
// a run stopped after 5 batches and restarted resumes at the next file, and
// every block is processed exactly once.
func TestEngineBackfill(t *testing.T) {
	root := t.TempDir()
	want := writeDays(t, root, day0, 60, 3, "modern")
	op := &countingOperator{seen: map[int64]int64{}, pending: map[int64]int64{}}
	fs := vfs.NewMem()
	run := func(maxBatches int) *engine.RunSummary {
		s, err := NewFromURI(fileURI(filepath.Join(root, "v1.0/eth/blocks")) + "?maxFilesPerTrigger=5")
		if err != nil {
			t.Fatal(err)
		}
		q := engine.Query{
			Name:           "backfill",
			Sources:        []engine.NamedSource{{Name: "s3_backfill", Source: s}},
			Columns:        ethblock.Columns,
			Operator:       op,
			Sink:           nopSink{},
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
	if op.dups != 0 || len(op.seen) != len(want) {
		t.Fatalf("%d blocks processed (%d twice), want %d once", len(op.seen), op.dups, len(want))
	}
	for i, b := range want {
		if id := op.seen[b.Number]; id != int64(i/15) {
			t.Fatalf("block %d in batch %d, want %d (5 files of 3 blocks per batch)", b.Number, id, i/15)
		}
	}
	// Nothing new: a third run plans nothing.
	if third := run(0); third.DataBatches != 0 {
		t.Fatalf("third run: %+v", third)
	}
}
