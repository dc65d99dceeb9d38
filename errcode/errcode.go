// Package errcode defines ethstream's user-facing errors: a stable code from
// docs/contracts.md, Errors (or a component's own, such as ARCHIVE_FILE_UNREADABLE), the path
// it concerns, and what the user should do about it.
//
// Every package that can fail because of something a user did or has on disk
// returns an *Error; the CLI prints it as "error: <CODE>: <message>. To fix:
// <remedy>" on one line, the code once, and exits 2 for a usage error (one
// found in the command line alone before anything was read or done: always
// MISSING_REQUIRED_FLAG, and INVALID_ARGUMENT for a flag's syntax or value)
// and 1 for every other error (INVALID_ARGUMENT too when found by looking at
// a path, such as a directory that is not a checkpoint).
//
// Codes of the start validation and the CLI (besides the source-evolution
// codes below and each component's own):
//
//	INVALID_ARGUMENT                  a flag, conf, trigger, source URI or option value is malformed
//	                                  or out of range (partition counts 1..10000), or a path is not
//	                                  what the command needs
//	MISSING_REQUIRED_FLAG             a required flag (--checkpoint, --table, --source, --partitions) is missing
//	CHECKPOINT_NOT_FOUND              a command that reads a checkpoint was given a path that does not exist
//	OPEN_FILE_LIMIT_TOO_LOW           the state partitions asked for need more open files than
//	                                  RLIMIT_NOFILE allows (package state; the remedy names the ulimit -n to set)
//	ARCHIVE_NOT_FOUND                 a file:// archive directory does not exist (package s3archive)
//	ARCHIVE_EMPTY                     an archive location lists no block file (package s3archive)
//	DELTA_TABLE_PATH_NOT_A_DIRECTORY  --table (or a directory above it) is a file (package delta)
//	PROGRESS_FILE_NOT_FOUND           a progress log to read does not exist (package engine)
//	PROGRESS_FILE_CORRUPT             a line of a progress log is not a progress event (package engine)
//
// A start is validated before its first write (engine: checkStart), so every
// one of these leaves an existing checkpoint byte-identical and a refused
// first start creates nothing.
package errcode

import (
	"errors"
	"fmt"
	"strings"
)

// Codes shared across packages. Component-specific codes live beside their
// component but are spelled the same way.
const (
	InvalidSourceName       = "STREAMING_QUERY_EVOLUTION_ERROR.INVALID_SOURCE_NAME"
	UnnamedSources          = "STREAMING_QUERY_EVOLUTION_ERROR.UNNAMED_STREAMING_SOURCES_WITH_ENFORCEMENT"
	SourceNamingUnsupported = "STREAMING_QUERY_EVOLUTION_ERROR.SOURCE_NAMING_NOT_SUPPORTED"
	DuplicateSourceNames    = "STREAMING_QUERY_EVOLUTION_ERROR.DUPLICATE_SOURCE_NAMES"
	NamedSourcesRequireV2   = "STREAMING_QUERY_EVOLUTION_ERROR.NAMED_SOURCES_REQUIRE_OFFSET_LOG_V2"
	ConfigMismatch          = "STREAMING_QUERY_EVOLUTION_ERROR.CONFIG_MISMATCH"
	TombstoneNameReuse      = "STREAMING_QUERY_EVOLUTION_ERROR.TOMBSTONE_SOURCE_NAME_REUSE"
	SourceCountMismatch     = "SOURCE_COUNT_MISMATCH"
	PendingBatchSourceMiss  = "PENDING_BATCH_SOURCE_MISSING"
	StateSchemaMismatch     = "STATE_SCHEMA_MISMATCH"
	UnresumableRepartition  = "STREAMING_UNRESUMABLE_CONTROL_BATCH_DETECTED.REPARTITION"
	CheckpointLocked        = "CHECKPOINT_LOCKED"
	CheckpointCorrupt       = "CHECKPOINT_CORRUPT"
	// StateProviderUnsupported: the checkpoint's state was written by
	// another state store provider (Spark's HDFSBackedStateStoreProvider
	// or RocksDBStateStoreProvider); ethstream can read its logs but
	// neither resume nor repartition it. Raised before anything is written.
	StateProviderUnsupported = "STATE_PROVIDER_UNSUPPORTED"
	CheckpointNotFound       = "CHECKPOINT_NOT_FOUND"
	MissingFlag              = "MISSING_REQUIRED_FLAG"
	InvalidArgument          = "INVALID_ARGUMENT"
	// UnresolvedColumn: the query reads a column that a source's declared
	// schema (stream.Source.Schema) lacks; raised before anything is
	// written, naming the source's columns (Spark's UNRESOLVED_COLUMN).
	UnresolvedColumn = "UNRESOLVED_COLUMN"
)

// Restart rules: a query restarted on a checkpoint whose recorded shape
// (package shape) differs in a way that cannot carry on safely. Each is
// decided before anything is written, names the checkpoint, and says what
// to do instead (a new checkpoint, or a new source name). A change of the
// group keys, aggregates or window is StateSchemaMismatch, with both state
// schemas.
const (
	// SourceProviderChanged: a source name (or, without source evolution,
	// a position) now reads from another provider (s3archive <-> ethrpc).
	// Its committed offsets mean nothing to the new provider: resuming would
	// rewind or skip data silently.
	SourceProviderChanged = "SOURCE_PROVIDER_CHANGED"
	// SourceLocationChanged: a source name now reads another location (an
	// archive bucket or prefix, a node URL). Its offsets were positions in
	// the old location; Spark calls the outcome unpredictable.
	SourceLocationChanged = "SOURCE_LOCATION_CHANGED"
	// SinkLocationChanged: the output location changed and nothing is
	// there (no table), or the sink cannot tell its tables apart. A new
	// table lacks the rows of every committed batch, and the batch ids
	// already committed would never be written there. A table that moved
	// with its checkpoint is recognised by its identity and resumes.
	SinkLocationChanged = "SINK_LOCATION_CHANGED"
	// SinkTableMismatch: the table at the sink location is not the
	// checkpoint's: another Delta metadata id than the one the checkpoint
	// recorded (both named), or, for a checkpoint that recorded none, a
	// table at a new location without a batch of the query id.
	SinkTableMismatch = "SINK_TABLE_MISMATCH"
	// SinkTableInUse: a checkpoint that never committed a batch is pointed
	// at a table another query writes (a txn of another appId, named); its
	// MERGE would silently mix into that query's rows. Refused unless the
	// sharing is explicit (run --table-shared).
	SinkTableInUse = "SINK_TABLE_IN_USE"
	// OutputSchemaMismatch: the query's output columns changed (an
	// aggregate renamed) while the state would fit; the Delta table keeps
	// the schema it was created with and does not evolve it.
	OutputSchemaMismatch = "OUTPUT_SCHEMA_MISMATCH"
	// WatermarkDelayIncreased: a larger watermark delay would move the
	// watermark back: windows already evicted (final in the table) would
	// accept late rows again, start from an empty state and, in update
	// mode, overwrite the full count in the table with a partial one.
	WatermarkDelayIncreased = "WATERMARK_DELAY_INCREASED"
	// WatermarkChanged: a watermark added, removed or moved to another
	// column. Removing one keeps every window forever and lets evicted
	// windows restart from zero; adding or moving one changes which state is
	// final. Spark requires a full refresh.
	WatermarkChanged = "WATERMARK_CHANGED"
	// OutputModeChanged: a query with a stateful operator switched to
	// append from update or complete. Those modes wrote groups before they
	// were final; append writes each again when the watermark closes it,
	// and an append sink (the Delta sink's blind append, the file sink)
	// would hold it twice.
	OutputModeChanged = "OUTPUT_MODE_CHANGED"
)

// Error is a user-facing error with a stable code. It is immutable and safe to
// share between goroutines.
type Error struct {
	Code   string // stable, from docs/contracts.md; never renamed
	Path   string // the file, directory or object concerned; may be empty
	Msg    string // what happened, lowercase, no trailing period
	Remedy string // what the user should do; may be empty
	Err    error  // the underlying cause; may be nil
}

// Error renders "<CODE>: <msg> (path: <path>): <cause>. To fix: <remedy>".
// The path is left out when the message already names it.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Code)
	b.WriteString(": ")
	b.WriteString(e.Msg)
	if e.Path != "" && !strings.Contains(e.Msg, e.Path) {
		fmt.Fprintf(&b, " (path: %s)", e.Path)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if e.Remedy != "" {
		b.WriteString(". To fix: ")
		b.WriteString(e.Remedy)
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// New returns an *Error with a formatted message.
func New(code, path, remedy, format string, args ...any) *Error {
	return &Error{Code: code, Path: path, Remedy: remedy, Msg: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error with cause err.
func Wrap(err error, code, path, remedy, format string, args ...any) *Error {
	return &Error{Code: code, Path: path, Remedy: remedy, Msg: fmt.Sprintf(format, args...), Err: err}
}

// Corrupt is the CHECKPOINT_CORRUPT error for a damaged file at path.
func Corrupt(path string, err error, format string, args ...any) *Error {
	return Wrap(err, CheckpointCorrupt, path,
		"restore the file from a backup or move the checkpoint aside; ethstream never resets it silently",
		format, args...)
}

// Code returns the code err stands for: that of an object store's own
// failure (READ_ONLY_STORAGE, STORAGE_CREDENTIALS, STORAGE_UNAVAILABLE,
// STORAGE_WRITE_LOST) wherever it is in err's chain, since a sink or a
// checkpoint that wraps it (DELTA_CORRUPT_FILE around a dead endpoint)
// names a consequence, not the cause; otherwise the code of the first
// *Error in the chain; "" if none.
func Code(err error) string {
	if e := storageCause(err); e != nil {
		return e.Code
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Is reports whether err carries code.
func Is(err error, code string) bool { return Code(err) == code }
