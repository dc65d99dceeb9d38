package stream

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Offset is a source's position as compact JSON, opaque to the engine. A nil
// Offset means "no offset": before the first batch of a source. Sources must
// render equal positions as byte-identical JSON, because the engine decides
// "new data?" by comparing bytes.
type Offset = json.RawMessage

// SourceEnv is what the engine hands a source when a query starts.
type SourceEnv struct {
	// Name is the source's stable name, or "" for an unnamed source.
	Name string
	// MetadataDir is <checkpoint>/sources/<key>, where key is the name (offset
	// log V2) or the plan position (V1). It exists when Open is called. The
	// source keeps its private logs there (e.g. the file source's file log).
	MetadataDir string
	// FS is the file system of the checkpoint; all checkpoint I/O goes through it.
	FS vfs.FS
	// Columns is the projection: the columns the query reads, never ColSource
	// (the engine adds it), each a field of the source's Schema (the engine
	// refuses a query that reads any other before it writes anything). Nil
	// means every column of Schema. A source must not decode columns outside
	// the projection.
	Columns []string
	// Committed is the end offset of the source's last committed batch, nil if
	// the name was never committed; a source honours start options such as
	// start_block only when it is nil.
	Committed Offset
	// MinBatchesToRetain is the query's spark.sql.streaming.minBatchesToRetain
	// (0: Spark's default, 100): a source that prunes its own log keeps at
	// least the entries the retained offset log can name.
	MinBatchesToRetain int
	Clock              Clock
	Logger             *slog.Logger
}

// Source is a named streaming input producing columnar batches, in the
// manner of Spark's MicroBatchStream with admission control. The engine calls
// its methods from one goroutine at a time.
type Source interface {
	// Schema declares the rows the source produces, as Spark's Source
	// starts with `def schema: StructType`: every column a batch may carry,
	// its type and nullability (Key is empty). It is known before Open,
	// from the source's configuration alone, and never changes: the
	// engine resolves the query against it, and refuses, before anything
	// is written, a query that reads a column it lacks. Never ColSource,
	// which the engine adds.
	Schema() Schema
	// Open prepares the source for a run.
	Open(ctx context.Context, env SourceEnv) error
	// Description names the source for progress reports, e.g.
	// "FileStreamSource[s3://bucket/v1.0/eth/blocks]".
	Description() string
	// LatestOffset returns the end offset of the next batch, given start (the
	// end of the last planned batch, nil if none), applying the source's read
	// limit (maxFilesPerTrigger, maxBlocksPerTrigger). Returning start (or nil
	// when start is nil) means no new data. A source may persist metadata here
	// (the file source logs the files it admits), so the call must be
	// idempotent for the same start when repeated after a crash.
	LatestOffset(ctx context.Context, start Offset) (Offset, error)
	// ReadBatch delivers the rows in (start, end] to emit, in chunks, in a
	// deterministic order: a re-run with the same offsets yields the same rows.
	// emit is never called concurrently and must not retain the Batch.
	ReadBatch(ctx context.Context, start, end Offset, emit func(*Batch) error) error
	// Commit tells the source that every batch up to end is committed, so it
	// may forget what precedes it.
	Commit(ctx context.Context, end Offset) error
	// Close releases the source's resources.
	Close() error
}

// AvailableNowSource is implemented by sources that support trigger
// availableNow: at the start of the run the engine calls PrepareAvailableNow,
// after which LatestOffset never goes past what was available at that moment.
type AvailableNowSource interface {
	PrepareAvailableNow(ctx context.Context) error
}

// ReportingSource is implemented by sources that report more in progress events.
type ReportingSource interface {
	// ReportLatestOffset is the newest offset available ignoring read limits,
	// reported as sources[].latestOffset; nil if unknown.
	ReportLatestOffset() Offset
	// Metrics are reported as sources[].metrics (requests, retries, bytes ...).
	Metrics() map[string]string
}

// RetractingSource is implemented by sources that may emit retractions
// (Batch.Signs); Retracts reports whether this one will, as configured. A
// query builder declares it to its operator (e.g. agg.Spec.Retractions), so
// a query that cannot undo a row is refused before the first batch.
type RetractingSource interface {
	Retracts() bool
}

// DataNotifier is implemented by sources that can tell, without being
// asked, that new data may be readable (a head subscription). Trigger
// realTime waits on it between batches instead of polling on a timer.
type DataNotifier interface {
	// DataReady returns a channel that receives a value when data newer
	// than the last LatestOffset call may be readable. It is a hint, never
	// a promise: the engine still asks LatestOffset, and a source must
	// not count on being woken (a dropped notification only delays a batch
	// to the trigger's fallback poll). Nil: the source cannot notify now.
	// Called after Open.
	DataReady() <-chan struct{}
}

// OffsetAuditor is implemented by sources that keep a log of their own in
// their metadata directory (SourceEnv.MetadataDir) which their offsets
// name, as the file source's log of admitted files. Before a start writes
// anything, and before the source is opened, the engine hands it the
// offset offsets/<id> records for it (offsetsPath names that file):
// AuditOffset checks, reading only, that the log in metadataDir holds what
// the offset names, and returns a CHECKPOINT_CORRUPT error naming both
// files when it does not. An offset it cannot read, or a directory without
// its log, is left to Open.
type OffsetAuditor interface {
	AuditOffset(ctx context.Context, fs vfs.FS, metadataDir string, offset Offset, offsetsPath string) error
}
