package streamtest

import (
	"context"
	"fmt"
	"sync"

	"github.com/ethstream/ethstream/stream"
)

// PassThrough is a stateless stream.Operator: Finish returns every input row
// of the batch (copied, retractions included) for the sink, so that a test
// of a source sees through the sink exactly what the engine read. It keeps
// no state, so a restart re-reads nothing but the uncommitted batch. Safe
// for concurrent use.
type PassThrough struct {
	// Points, when set, is hit at operator-commit before a commit.
	Points *Points

	mu      sync.Mutex
	pending stream.Batch
	commits []int64
}

// Open does nothing: there is no state to load.
func (o *PassThrough) Open(context.Context, stream.OperatorEnv) error { return nil }

// Process keeps the chunk for Finish.
func (o *PassThrough) Process(_ context.Context, id, _ int64, in *stream.Batch) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := appendRows(&o.pending, in, 0, in.Len); err != nil {
		return fmt.Errorf("pass-through: batch %d: %w", id, err)
	}
	return nil
}

// Finish returns the batch's rows.
func (o *PassThrough) Finish(context.Context, int64, int64) (*stream.Batch, stream.OperatorProgress, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := &stream.Batch{}
	_ = appendRows(out, &o.pending, 0, o.pending.Len) // same columns: cannot fail
	return out, stream.OperatorProgress{OperatorName: "passThrough", NumRowsUpdated: int64(out.Len)}, nil
}

// Commit forgets the batch's rows.
func (o *PassThrough) Commit(_ context.Context, id int64) error {
	if err := o.Points.Hit("operator-commit"); err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pending = stream.Batch{}
	o.commits = append(o.commits, id)
	return nil
}

// Commits returns the batch ids committed, in order.
func (o *PassThrough) Commits() []int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]int64(nil), o.commits...)
}

// Abort forgets the batch's rows.
func (o *PassThrough) Abort() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pending = stream.Batch{}
}

// NeedsNoDataBatch is false: nothing waits for a watermark.
func (o *PassThrough) NeedsNoDataBatch(int64) (bool, error) { return false, nil }

// Repartition has nothing to move.
func (o *PassThrough) Repartition(_ context.Context, _, _ int64, n int) (stream.RepartitionStats, error) {
	return stream.RepartitionStats{To: n}, nil
}

// Close does nothing.
func (o *PassThrough) Close() error { return nil }
