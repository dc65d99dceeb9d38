package stream

import "context"

// SinkProgress is the sink object of a progress event.
type SinkProgress struct {
	Description   string            `json:"description"`
	NumOutputRows int64             `json:"numOutputRows"`
	Metrics       map[string]string `json:"metrics,omitempty"`
}

// Sink receives each batch's output. It must be idempotent per (query id,
// batch id): the engine re-runs an uncommitted batch after a crash and hands
// the sink the same batch id and the same rows again.
type Sink interface {
	// Open binds the sink to a query id (the Delta txn appId).
	Open(ctx context.Context, queryID string) error
	Description() string
	// AddBatch writes batch batchID's output (out may have zero rows).
	AddBatch(ctx context.Context, batchID int64, out *Batch) (SinkProgress, error)
	Close() error
}
