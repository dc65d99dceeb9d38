package s3archive

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// compactInterval is Spark's spark.sql.streaming.fileSource.log.compactInterval
// default: log ids n with (n+1)%compactInterval == 0 are written as
// "<n>.compact" holding every entry so far.
const compactInterval = 10

const (
	logVersion   = 1
	compactSufix = ".compact"
	tmpSuffix    = ".tmp"
)

// logEntry is one admitted file: Spark's FileEntry.
type logEntry struct {
	Path      string `json:"path"`      // URL-encoded URI of the object
	Timestamp int64  `json:"timestamp"` // modification time, ms since the epoch
	BatchID   int64  `json:"batchId"`   // the source log id that admitted it
}

// entryJSON is used for decoding so that a missing field is detected.
type entryJSON struct {
	Path      *string `json:"path"`
	Timestamp *int64  `json:"timestamp"`
	BatchID   *int64  `json:"batchId"`
}

func isCompactID(n int64) bool { return (n+1)%compactInterval == 0 }

// fileLog is the source's admission log in MetadataDir. It is not safe for
// concurrent use; the engine calls the source from one goroutine.
type fileLog struct {
	fs  vfs.FS
	dir string
}

func (l *fileLog) fileName(n int64) string {
	if isCompactID(n) {
		return l.fs.PathJoin(l.dir, strconv.FormatInt(n, 10)+compactSufix)
	}
	return l.fs.PathJoin(l.dir, strconv.FormatInt(n, 10))
}

// scan returns the ids present in the log, ascending, removing stale temp
// files left by a crash (they were never published, so nothing refers to them).
func (l *fileLog) scan() ([]int64, error) {
	names, err := l.fs.List(l.dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("list source log %s: %w", l.dir, err)
	}
	var ids []int64
	for _, name := range names {
		if strings.HasSuffix(name, tmpSuffix) {
			if err := l.fs.Remove(l.fs.PathJoin(l.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("remove stale temp file %s: %w", l.fs.PathJoin(l.dir, name), err)
			}
			continue
		}
		base, compact := strings.CutSuffix(name, compactSufix)
		n, err := strconv.ParseInt(base, 10, 64)
		if err != nil || n < 0 || strconv.FormatInt(n, 10) != base {
			return nil, errcode.Corrupt(l.fs.PathJoin(l.dir, name), nil,
				"unexpected file in source log directory (want <n> or <n>.compact)")
		}
		if compact != isCompactID(n) {
			return nil, errcode.Corrupt(l.fs.PathJoin(l.dir, name), nil,
				"source log file %d has the wrong form (compaction interval %d)", n, compactInterval)
		}
		ids = append(ids, n)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for i, id := range ids {
		if id != int64(i) {
			return nil, errcode.Corrupt(l.dir, nil, "source log has a gap: expected file %d, found %d", i, id)
		}
	}
	return ids, nil
}

// read returns the entries stored in file n: the entries of batch n, or for a
// compact file every entry of batches 0..n.
func (l *fileLog) read(n int64) ([]logEntry, error) {
	path := l.fileName(n)
	f, err := l.fs.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open source log %s: %w", path, err)
	}
	data, err := io.ReadAll(f)
	err = errors.Join(err, f.Close())
	if err != nil {
		return nil, fmt.Errorf("read source log %s: %w", path, err)
	}
	return parseLog(path, n, data)
}

// batch returns the entries admitted by log id n, in admission order.
func (l *fileLog) batch(n int64) ([]logEntry, error) {
	all, err := l.read(n)
	if err != nil || !isCompactID(n) {
		return all, err
	}
	var out []logEntry
	for _, e := range all {
		if e.BatchID == n {
			out = append(out, e)
		}
	}
	return out, nil
}

// write publishes file n holding entries through the checkpoint's own
// publishing (temp file, fsync, link, fsync dir): crash-safe and never
// overwriting, so a second writer gets checkpoint.ErrExists.
func (l *fileLog) write(n int64, entries []logEntry) error {
	if err := l.fs.MkdirAll(l.dir, 0o755); err != nil {
		return fmt.Errorf("create source log dir %s: %w", l.dir, err)
	}
	path := l.fileName(n)
	if err := checkpoint.Publish(l.fs, l.dir, l.fs.PathBase(path), formatLog(entries)); err != nil {
		if errors.Is(err, checkpoint.ErrExists) {
			return fmt.Errorf("write source log %s: %w (is another query using this checkpoint?)", path, err)
		}
		return fmt.Errorf("write source log: %w", err)
	}
	return nil
}

// formatLog renders a log file exactly as Spark's FileStreamSourceLog does:
// "v1", then "\n" + one JSON object per entry, no trailing newline.
func formatLog(entries []logEntry) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "v%d", logVersion)
	for _, e := range entries {
		b.WriteByte('\n')
		j, err := json.Marshal(e)
		if err != nil {
			panic(fmt.Sprintf("marshal log entry %+v: %v", e, err))
		}
		b.Write(j)
	}
	return b.Bytes()
}

// parseLog parses the content of log file n (see doc.go). Anything but a
// well-formed file is a CHECKPOINT_CORRUPT error naming path.
func parseLog(path string, n int64, data []byte) ([]logEntry, error) {
	lines := strings.Split(string(data), "\n")
	if lines[0] != "v1" {
		if v, ok := strings.CutPrefix(lines[0], "v"); ok {
			if k, err := strconv.Atoi(v); err == nil && k > logVersion {
				return nil, errcode.Corrupt(path, nil, "source log version v%d is newer than this ethstream supports (v%d)", k, logVersion)
			}
		}
		return nil, errcode.Corrupt(path, nil, "source log does not start with a version line %q", "v1")
	}
	lines = lines[1:]
	// Spark writes no trailing newline; accept one so hand-edited files parse.
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) == 0 {
		return nil, errcode.Corrupt(path, nil, "source log holds no entries")
	}
	out := make([]logEntry, 0, len(lines))
	sawN := false
	for i, line := range lines {
		var j entryJSON
		if err := json.Unmarshal([]byte(line), &j); err != nil {
			return nil, errcode.Corrupt(path, err, "source log line %d is not a JSON entry", i+2)
		}
		if j.Path == nil || *j.Path == "" || j.Timestamp == nil || j.BatchID == nil {
			return nil, errcode.Corrupt(path, nil, "source log line %d lacks path, timestamp or batchId", i+2)
		}
		e := logEntry{Path: *j.Path, Timestamp: *j.Timestamp, BatchID: *j.BatchID}
		if isCompactID(n) {
			if e.BatchID < 0 || e.BatchID > n {
				return nil, errcode.Corrupt(path, nil, "source log line %d has batchId %d outside 0..%d", i+2, e.BatchID, n)
			}
		} else if e.BatchID != n {
			return nil, errcode.Corrupt(path, nil, "source log line %d has batchId %d, want %d", i+2, e.BatchID, n)
		}
		sawN = sawN || e.BatchID == n
		out = append(out, e)
	}
	if !sawN {
		return nil, errcode.Corrupt(path, nil, "compact source log holds no entry of batch %d", n)
	}
	return out, nil
}

// formatOffset renders Spark's FileStreamSourceOffset.
func formatOffset(n int64) stream.Offset {
	return stream.Offset(`{"logOffset":` + strconv.FormatInt(n, 10) + `}`)
}

// parseOffset parses {"logOffset":n} or a bare n; nil means "no offset" (-1).
func parseOffset(o stream.Offset) (int64, error) {
	if o == nil {
		return -1, nil
	}
	s := bytes.TrimSpace(o)
	if len(s) > 0 && s[0] != '{' {
		n, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("parse file source offset %q: want {\"logOffset\":n} or n >= 0", string(o))
		}
		return n, nil
	}
	var j struct {
		LogOffset *int64 `json:"logOffset"`
	}
	dec := json.NewDecoder(bytes.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil || dec.More() {
		return 0, fmt.Errorf("parse file source offset %q: want {\"logOffset\":n}", string(o))
	}
	if j.LogOffset == nil || *j.LogOffset < 0 {
		return 0, fmt.Errorf("parse file source offset %q: logOffset missing or negative", string(o))
	}
	return *j.LogOffset, nil
}
