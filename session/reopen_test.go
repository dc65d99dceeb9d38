package session

import (
	"context"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/stream"
)

// runReopened runs batches through an operator of spec, reopened from the
// state of the batch before each one (a restart per batch, 2 partitions);
// it returns the last batch's output, or the first error of Process or
// Finish.
func runReopened(t *testing.T, spec Spec, batches []*stream.Batch) (*stream.Batch, error) {
	t.Helper()
	ctx := context.Background()
	stateDir := t.TempDir()
	var out *stream.Batch
	for id, in := range batches {
		op, err := New(spec)
		if err != nil {
			t.Fatal(err)
		}
		env := stream.OperatorEnv{StateDir: stateDir, FS: vfs.Default, LocalDir: t.TempDir(), Partitions: 2, Version: int64(id - 1),
			Logger: slog.New(slog.DiscardHandler)}
		if err := op.Open(ctx, env); err != nil {
			t.Fatal(err)
		}
		err = op.Process(ctx, int64(id), 0, in)
		if err == nil {
			out, _, err = op.Finish(ctx, int64(id), 0)
		}
		if err != nil {
			op.Close()
			return nil, err
		}
		if err := op.Commit(ctx, int64(id)); err != nil {
			t.Fatal(err)
		}
		if err := op.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out, nil
}
