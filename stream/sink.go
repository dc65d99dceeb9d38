package stream

import "context"

// SinkProgress is the sink object of a progress event.
type SinkProgress struct {
	Description   string            `json:"description"`
	NumOutputRows int64             `json:"numOutputRows"`
	Metrics       map[string]string `json:"metrics,omitempty"`
}

// SinkEnv is what the engine hands a sink when a query starts.
type SinkEnv struct {
	// QueryID is the checkpoint's query id (the Delta txn appId).
	QueryID string
	// Schema is the operator's output schema (OutputSchema); its Key is what
	// identifies a row across batches. Empty when the operator declares none.
	// In a query with no stateful operator, the columns it selects as its
	// sources declare them.
	Schema Schema
	// Append says the query has no stateful operator, or its last one
	// passes rows through (RowPasser): each batch's rows are
	// new rows, to append (Spark's append output mode of a stateless
	// query); Schema has no key and a row never updates another.
	Append bool
	// Locked says the caller holds the checkpoint's lock (local) or lease
	// (S3) for QueryID: no other run of this query is alive, so what a dead
	// run of it left behind (temp files of a killed write) may be removed
	// now rather than after a grace period. The engine always sets it.
	Locked bool
}

// Sink receives each batch's output. It must be idempotent per (query id,
// batch id): the engine re-runs an uncommitted batch after a crash and hands
// the sink the same batch id and the same rows again.
type Sink interface {
	// Open binds the sink to a query and the schema of the rows it will
	// receive; a sink whose existing output has another schema refuses here,
	// before any batch runs.
	Open(ctx context.Context, env SinkEnv) error
	Description() string
	// AddBatch writes batch batchID's output (out may have zero rows).
	// out is the sink's during the call only: once it returns, the engine
	// may hand out back to the operator that built it (OutputRecycler),
	// which clears and overwrites its columns, so a sink that keeps rows
	// copies them.
	AddBatch(ctx context.Context, batchID int64, out *Batch) (SinkProgress, error)
	Close() error
}

// RecordingSink is a Sink that records, in its own output, which batch of
// which query it holds (a Delta table's txn actions). Before a start writes
// anything the engine compares that record with the checkpoint's commits,
// so a sink restored from an older backup is refused instead of silently
// missing batches.
type RecordingSink interface {
	Sink
	// RecordedBatches reads, writing and creating nothing, the newest batch
	// id the sink holds for each query id; nil when the sink's output does
	// not exist at all (a new table for an existing checkpoint is the
	// user's choice, not damage). Damage it can see cheaply (a missing data
	// file) is an error here.
	RecordedBatches(ctx context.Context) (map[string]int64, error)
}

// IdentifiedSink is a RecordingSink whose output has an identity of its
// own, independent of where it is stored (a Delta table's metadata id). The
// engine records that identity in the checkpoint's query shape and, on a
// restart, recognises the table by it and by the query id's record
// (RecordedBatches), not by its path: a checkpoint and table moved or
// copied together resume; another table is refused.
type IdentifiedSink interface {
	RecordingSink
	// OutputID reads, writing and creating nothing, the identity of the
	// sink's output; "" when the output does not exist.
	OutputID(ctx context.Context) (string, error)
}

// SinkProblem names a refusal a start raises about a sink's output, for
// the sink to word its remedy (SinkAdvisor). Values are never renumbered.
type SinkProblem int

// The refusals about a sink's output.
const (
	// SinkOutputInUse: a new checkpoint's output is written by another query.
	SinkOutputInUse SinkProblem = iota + 1
	// SinkOutputBehind: the output lacks batches the checkpoint committed.
	SinkOutputBehind
	// SinkOutputAhead: the output holds batches the checkpoint never committed.
	SinkOutputAhead
	// SinkOutputOther: the output is another than the one the checkpoint wrote.
	SinkOutputOther
	// SinkOutputMoved: the output moved to where there is none.
	SinkOutputMoved
)

// SinkRefusal is one refusal about a sink's output, with the facts a
// remedy may name.
type SinkRefusal struct {
	Problem SinkProblem
	// Batch (SinkOutputBehind) is the newest committed batch the output
	// lacks.
	Batch int64
	// ID and Location (SinkOutputOther, SinkOutputMoved) are the identity
	// ("" if none was recorded) and the last location of the output the
	// checkpoint wrote.
	ID, Location string
}

// SinkAdvisor is implemented by sinks that word, in their own terms (their
// options and files), how to fix a refusal about their output: Remedy
// returns the remedy for r, or "" to keep the engine's, which names no
// sink's options or files.
type SinkAdvisor interface {
	Remedy(r SinkRefusal) string
}
