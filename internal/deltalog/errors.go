package deltalog

import "github.com/ethstream/ethstream/errcode"

// Error codes of Delta tables, read or written. They are part of the CLI
// contract ("error: CODE: ..."), so they are never renamed.
const (
	// CodeUnsupportedProtocol: the table needs a reader or writer version (or
	// a table feature) this implementation does not have.
	CodeUnsupportedProtocol = "DELTA_UNSUPPORTED_PROTOCOL"
	// CodeCorruptLog: a commit, checkpoint or _last_checkpoint cannot be parsed.
	CodeCorruptLog = "DELTA_CORRUPT_LOG"
	// CodeVersionGap: the commits after the checkpoint are not contiguous.
	CodeVersionGap = "DELTA_VERSION_GAP"
	// CodeMissingFile: a live data file named by the log is not on disk.
	CodeMissingFile = "DELTA_MISSING_FILE"
	// CodeCorruptFile: a live data file does not have the size its add
	// action records (truncated or replaced), or does not decode.
	CodeCorruptFile = "DELTA_CORRUPT_FILE"
	// CodeNotATable: the directory has no _delta_log with commits.
	CodeNotATable = "DELTA_TABLE_NOT_FOUND"
	// CodeVersionNotFound: time travel to a version the log does not hold.
	CodeVersionNotFound = "DELTA_VERSION_NOT_FOUND"
	// CodeUnsupportedFeature: a file action uses something we cannot read
	// (deletion vectors) or an operation is not possible on this table.
	CodeUnsupportedFeature = "DELTA_UNSUPPORTED_FEATURE"
)

// Remedies of the errors above.
const (
	RemedyCorrupt  = "restore the file from a backup or copy of the table; ethstream never repairs a Delta log silently"
	RemedyProtocol = "read this table with an engine that supports its protocol (ethstream implements reader 1 / writer 2 without table features)"
)

// Corrupt is the DELTA_CORRUPT_LOG error of the log file at path.
func Corrupt(path string, err error, format string, args ...any) *errcode.Error {
	return errcode.Wrap(err, CodeCorruptLog, path, RemedyCorrupt, format, args...)
}

func errcodeNew(code, path, remedy, format string, args ...any) *errcode.Error {
	return errcode.New(code, path, remedy, format, args...)
}
