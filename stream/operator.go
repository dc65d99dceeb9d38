package stream

import (
	"context"
	"log/slog"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// OperatorEnv is what the engine hands a stateful operator when a query starts
// or before a repartition.
type OperatorEnv struct {
	// StateDir is <checkpoint>/state/<opId>; the operator's durable state lives
	// there and nowhere else (docs/contracts.md, State).
	StateDir string
	// FS is the checkpoint's file system.
	FS vfs.FS
	// LocalDir is a cache directory for local stores (Pebble), the
	// operator's own (the engine gives each operator of a plan another); it
	// may be empty or missing at any start, and the operator rebuilds it
	// from StateDir.
	LocalDir string
	// LocalFS is the file system of LocalDir; nil = the local disk, where
	// a store may keep a small cache in memory instead (state/memcache.go).
	// Tests set it to put the cache on a disk they damage or fail.
	LocalFS vfs.FS
	// Partitions is the state partition count in force: the checkpoint's, or
	// for a new checkpoint spark.sql.streaming.stateStore.partitions, else
	// spark.sql.shuffle.partitions, else 200.
	Partitions int
	// Version is the last committed batch id whose state to load, -1 for none.
	Version int64
	Logger  *slog.Logger
}

// OperatorProgress is the stateOperators[] entry of a progress event.
type OperatorProgress struct {
	OperatorName              string           `json:"operatorName"`
	NumRowsTotal              int64            `json:"numRowsTotal"`
	NumRowsUpdated            int64            `json:"numRowsUpdated"`
	AllUpdatesTimeMs          int64            `json:"allUpdatesTimeMs"`
	NumRowsRemoved            int64            `json:"numRowsRemoved"`
	AllRemovalsTimeMs         int64            `json:"allRemovalsTimeMs"`
	CommitTimeMs              int64            `json:"commitTimeMs"`
	MemoryUsedBytes           int64            `json:"memoryUsedBytes"`
	NumRowsDroppedByWatermark int64            `json:"numRowsDroppedByWatermark"`
	NumShufflePartitions      int64            `json:"numShufflePartitions"`
	NumStateStoreInstances    int64            `json:"numStateStoreInstances"`
	CustomMetrics             map[string]int64 `json:"customMetrics,omitempty"`
}

// RepartitionStats describes one state repartition.
type RepartitionStats struct {
	From, To                int   // partition counts
	KeysBefore, KeysAfter   int64 // keys read from the old partitions, written to the new
	BytesRead, BytesWritten int64
}

// Operator is the stateful operator hook (agg/ implements it over state/).
// The engine drives it from one goroutine at a time: per batch, Process for
// each input chunk, then Finish, then Commit (or Abort if anything failed);
// see CommitPreparer for the one call made on another goroutine.
type Operator interface {
	// Open loads the state committed at env.Version. It returns a
	// STATE_SCHEMA_MISMATCH error if the checkpoint's operator metadata
	// (keys, aggregates, window) differs from this operator's.
	Open(ctx context.Context, env OperatorEnv) error
	// Process consumes one chunk of batch batchID's input. Input that
	// watermarkMs (the operator's input watermark of the previous batch,
	// Spark 3.4+'s eventTimeWatermarkForLateEvents) has already closed is
	// dropped and counted: for a windowed aggregation, the window
	// instances whose end is at or before it. A late row whose window is
	// still open is kept.
	Process(ctx context.Context, batchID, watermarkMs int64, in *Batch) error
	// Finish ends the batch: it evicts state the watermark closed (the
	// operator's input watermark of this batch) and returns
	// the rows for the sink according to the output mode (may be empty).
	Finish(ctx context.Context, batchID, watermarkMs int64) (*Batch, OperatorProgress, error)
	// Commit makes state version batchID durable in the checkpoint.
	Commit(ctx context.Context, batchID int64) error
	// Abort discards the uncommitted changes of the current batch.
	Abort()
	// NeedsNoDataBatch reports whether a batch without input runs at input
	// watermark watermarkMs: Spark's shouldRunAnotherBatch. The engine asks
	// only when no source has new data and the operator's input watermark
	// moved past the one it ran the last batch with; an aggregation, a
	// deduplication and a session window then answer true whether or not
	// anything is evicted (in every output mode but complete), since the
	// batch after it drops late input by its watermark. An error fails the
	// run.
	NeedsNoDataBatch(watermarkMs int64) (bool, error)
	// Repartition writes the state committed at version base, redistributed
	// into n partitions, as version batchID, durably; the operator continues
	// with n partitions. Redoing it after a crash yields the same result.
	Repartition(ctx context.Context, base, batchID int64, n int) (RepartitionStats, error)
	// Close releases local resources; uncommitted changes are discarded.
	Close() error
}

// ProgressReporter is implemented by operators whose stateOperators entry is
// complete only after Commit (commit time, memory): the engine asks again then.
type ProgressReporter interface {
	Progress() OperatorProgress
}

// CommitPreparer is implemented by operators whose Commit splits in two:
// PrepareCommit(N) writes everything version N needs except what makes it
// the committed version (for the state store: the data file, not the
// metadata file that publishes it), then Commit(N) publishes it. After
// PrepareCommit, a crash or an Abort must leave only what a crash inside
// Commit may leave, which the next Open ignores and collects: a prepared,
// unpublished version is never loaded.
//
// The engine calls PrepareCommit(N) after Finish(N), then Commit(N), both on
// another goroutine while Sink.AddBatch(N) runs (no other method of the
// operator runs meanwhile; a sink failure cancels their context); if
// either or the sink failed it calls Abort once all returned, which must
// then be harmless for a version Commit published (the engine loads the
// last batch with commits/N at the next Open). Without this interface the
// engine calls Commit(N) after Sink.AddBatch(N) returned.
type CommitPreparer interface {
	PrepareCommit(ctx context.Context, batchID int64) error
}

// OutputRecycler is implemented by operators that build a batch's output
// in the memory of an earlier one: the engine hands the batch Finish
// returned back with Recycle once nothing holds it (the sink's AddBatch
// returned, and no other operator or transform saw it), and a later Finish
// may then overwrite it. A batch not handed back is never reused.
type OutputRecycler interface {
	Recycle(out *Batch)
}

// WatermarkLookahead is implemented by operators that use the watermark the
// next batch runs with, which the engine knows once a batch's input is read
// (the nextBatchWatermarkMs its commit records): the engine calls
// NextWatermark(N, ms) before Finish(N), with exactly that value. An
// operator may then leave out of state version N what that watermark
// closes, as long as its output, its progress figures and NeedsNoDataBatch
// stay what they would be had it stored them.
type WatermarkLookahead interface {
	NextWatermark(batchID, nextWatermarkMs int64)
}

// SchemaOperator is implemented by operators that declare the schema of their
// output before the first batch, so that the sink can create or check its
// table at Open.
type SchemaOperator interface {
	OutputSchema() Schema
}

// RowPasser is implemented by operators whose output rows are input rows
// passed through, each emitted once and never revised by a later batch (a
// deduplication): a plan whose last stateful operator passes rows appends
// to its sink as a plan with none does (SinkEnv.Append), Spark's append
// output mode of a query without an aggregation.
type RowPasser interface {
	PassesRows() bool
}

// StateRepartitioner is the part of a stateful operator that a REPARTITION
// control batch uses: Repartition as Operator.Repartition, then Close. An
// Operator is one; so is the state of a stopped query's operator opened
// from what its checkpoint recorded (RecordedStates).
type StateRepartitioner interface {
	Repartition(ctx context.Context, base, batchID int64, n int) (RepartitionStats, error)
	Close() error
}

// RecordedStates opens the state of a stopped query's stateful operators
// from what the checkpoint recorded alone (the state schema of the version
// env.Version), with no query definition: the offline repartition
// (`ethstream checkpoint repartition`), which, as Spark's offline runner,
// moves every stored row whatever the operator. An implementation may
// also be a PartitionLimiter.
type RecordedStates interface {
	OpenRecorded(ctx context.Context, env OperatorEnv) (StateRepartitioner, error)
}

// Transform is a stateless step of a query's plan (a filter, a projection,
// a derived column such as window_time): the engine applies it to every
// chunk on its way to the next stateful operator, or to the sink after the
// last one. It keeps nothing between calls, so it has no state directory,
// no operator id and nothing to commit or repartition.
type Transform interface {
	// Apply returns in's rows transformed. It must not modify or retain in;
	// the result may share in's column slices. A result column that keeps
	// in's Strings with other validity drops its Dict (Dict). A result
	// with no rows is dropped.
	Apply(in *Batch) (*Batch, error)
	// OutputSchema is the schema of Apply's result for rows of schema in,
	// or an error naming what in lacks (a column it reads).
	OutputSchema(in Schema) (Schema, error)
	// String renders the step for the query shape, e.g. "filter (v > 0)".
	String() string
}
