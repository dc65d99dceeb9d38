package streamtest

import (
	"context"
	"testing"

	"github.com/ethstream/ethstream/stream"
)

// RunBatch runs batch id of in through op as the engine runs a batch of one
// chunk at watermark wm: Process, Finish, Commit. It returns what Finish
// emitted and fails t on any error. The operator tests' one copy of it.
func RunBatch(t testing.TB, op stream.Operator, id, wm int64, in *stream.Batch) *stream.Batch {
	t.Helper()
	ctx := context.Background()
	if err := op.Process(ctx, id, wm, in); err != nil {
		t.Fatal(err)
	}
	out, _, err := op.Finish(ctx, id, wm)
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Commit(ctx, id); err != nil {
		t.Fatal(err)
	}
	return out
}
