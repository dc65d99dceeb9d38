package delta

import (
	"errors"
	"os"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/deltalog"
)

// Error codes of the Delta sink. They are part of the CLI contract
// ("error: CODE: ..."), so they are never renamed.
const (
	// CodeUnsupportedProtocol: the table needs a reader or writer version (or
	// a table feature) this implementation does not have.
	CodeUnsupportedProtocol = deltalog.CodeUnsupportedProtocol
	// CodeCorruptLog: a commit, checkpoint or _last_checkpoint cannot be parsed.
	CodeCorruptLog = deltalog.CodeCorruptLog
	// CodeVersionGap: the commits after the checkpoint are not contiguous.
	CodeVersionGap = deltalog.CodeVersionGap
	// CodeMissingFile: a live data file named by the log is not on disk.
	CodeMissingFile = deltalog.CodeMissingFile
	// CodeCorruptFile: a live data file does not have the size its add
	// action records (truncated or replaced), or does not decode.
	CodeCorruptFile = deltalog.CodeCorruptFile
	// CodeNotATable: the directory has no _delta_log with commits.
	CodeNotATable = deltalog.CodeNotATable
	// CodeTableExists: Create found an existing commit 0.
	CodeTableExists = "DELTA_TABLE_ALREADY_EXISTS"
	// CodeSchemaMismatch: the table's schema is not the one the sink writes.
	CodeSchemaMismatch = "DELTA_SCHEMA_MISMATCH"
	// CodeVersionNotFound: time travel to a version the log does not hold.
	CodeVersionNotFound = deltalog.CodeVersionNotFound
	// CodeUnsupportedFeature: a file action uses something we cannot read
	// (deletion vectors) or an operation is not possible on this table.
	CodeUnsupportedFeature = deltalog.CodeUnsupportedFeature
	// CodeCommitConflict: a commit kept losing the race for its version.
	CodeCommitConflict = "DELTA_CONCURRENT_MODIFICATION"
	// CodeBadBatch: the engine handed the sink a batch without the expected columns.
	CodeBadBatch = "DELTA_BAD_BATCH"
	// CodeNoOutputSchema: the sink was opened with no output schema (it
	// has no default one).
	CodeNoOutputSchema = "DELTA_SINK_SCHEMA_REQUIRED"
)

const (
	remedyCorrupt  = deltalog.RemedyCorrupt
	remedyProtocol = deltalog.RemedyProtocol
)

func corrupt(path string, err error, format string, args ...any) *errcode.Error {
	return deltalog.Corrupt(path, err, format, args...)
}

// dataFileError is the error of a live data file that cannot be read:
// DELTA_MISSING_FILE when it is gone, DELTA_CORRUPT_FILE when it does not
// decode.
func dataFileError(err error, path, remedy, format string, args ...any) *errcode.Error {
	code := CodeCorruptFile
	if errors.Is(err, os.ErrNotExist) {
		code = CodeMissingFile
	}
	return errcode.Wrap(err, code, path, remedy, format, args...)
}
