package s3archive

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ethstream/ethstream/errcode"
)

// metrics are the source's counters since New; safe for concurrent use.
type metrics struct {
	filesListed   atomic.Int64 // data files seen by the latest listing
	filesAdmitted atomic.Int64 // files admitted into the log by this run
	pendingFiles  atomic.Int64 // files listed but not yet admitted
	filesRead     atomic.Int64
	rowsRead      atomic.Int64
	bytesRead     atomic.Int64 // bytes fetched from the store (footers + column chunks; read by row group, a local file's page headers twice: the open's bounds check, the decode)
	requests      atomic.Int64 // store requests (list pages, heads, range reads)
	retries       atomic.Int64
	throttles     atomic.Int64 // 503 SlowDown / 429 answers
	decodeNanos   atomic.Int64
	uncached      atomic.Int64 // ReadAt calls not served by the prefetched ranges

	mu      sync.Mutex
	skipped []string // files skipped under SkipUnreadable
}

func (m *metrics) skip(uri string) {
	m.mu.Lock()
	m.skipped = append(m.skipped, uri)
	m.mu.Unlock()
}

func (m *metrics) snapshot() map[string]string {
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	out := map[string]string{
		"filesListed":   i(m.filesListed.Load()),
		"filesAdmitted": i(m.filesAdmitted.Load()),
		"pendingFiles":  i(m.pendingFiles.Load()),
		"filesRead":     i(m.filesRead.Load()),
		"rowsRead":      i(m.rowsRead.Load()),
		"bytesRead":     i(m.bytesRead.Load()),
		"requests":      i(m.requests.Load()),
		"retries":       i(m.retries.Load()),
		"throttles":     i(m.throttles.Load()),
		"decodeMs":      i(m.decodeNanos.Load() / 1e6),
	}
	m.mu.Lock()
	out["skippedFiles"] = i(int64(len(m.skipped)))
	if len(m.skipped) > 0 {
		out["skipped"] = strings.Join(m.skipped, ",")
	}
	m.mu.Unlock()
	return out
}

const unreadableRemedy = "check that the object exists, is readable with the configured credentials and is a complete Parquet file with columns number, hash, parent_hash, timestamp and miner; fix or replace it and restart: the batch re-runs identically (or set skipUnreadable=true to skip such files)"

// unreadable wraps err as ARCHIVE_FILE_UNREADABLE for the object uri.
func unreadable(err error, uri, format string, args ...any) *errcode.Error {
	return errcode.Wrap(err, ArchiveFileUnreadable, uri, unreadableRemedy, format, args...)
}
