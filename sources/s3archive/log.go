package s3archive

import (
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/sources/internal/filelog"
)

// The source log, its compaction and pruning, and its offsets are the
// machinery every file source shares (package filelog; the format is
// specified in doc.go). These names keep this package's code and tests
// reading as before.

// fileLog is the source's admission log in MetadataDir.
type fileLog = filelog.Log

// logEntry is one admitted file: Spark's FileEntry.
type logEntry = filelog.Entry

// sourceLogCodec is Spark's FileStreamSource log format, checked as this
// source writes it.
type sourceLogCodec = filelog.Codec

const defaultCompactInterval = filelog.DefaultCompactInterval

func isCompactID(n, interval int64) bool { return filelog.IsCompactID(n, interval) }

func deriveCompactInterval(def, latest int64) int64 {
	return filelog.DeriveCompactInterval(def, latest)
}

func formatLog(entries []logEntry) []byte { return filelog.FormatLog(entries) }

func parseLog(path string, n int64, compact bool, data []byte) ([]logEntry, error) {
	return filelog.ParseLog(path, n, compact, data)
}

var (
	formatOffset = filelog.FormatOffset
	parseOffset  = filelog.ParseOffset
)

// newFileLog is the log of dir keeping retain ids, with the move records'
// directory beside it.
func newFileLog(fs vfs.FS, dir string, retain int64) *fileLog {
	return &fileLog{FS: fs, Dir: dir, Retain: retain, Beside: []string{movesDir}}
}
