package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
)

// FileSourceLogV1 is the only version of Spark's FileStreamSource log.
const FileSourceLogV1 = 1

// compactSuffix marks a compacted FileStreamSource log file.
const compactSuffix = ".compact"

// FileEntry is one file a FileStreamSource admitted (Spark's FileEntry).
type FileEntry struct {
	Path      string `json:"path"`      // URL-encoded URI of the file
	Timestamp int64  `json:"timestamp"` // its modification time, ms since the epoch
	BatchID   int64  `json:"batchId"`   // the source log id that admitted it
}

// fileEntryJSON detects missing fields when decoding.
type fileEntryJSON struct {
	Path      *string `json:"path"`
	Timestamp *int64  `json:"timestamp"`
	BatchID   *int64  `json:"batchId"`
}

// EncodeFileSourceLog renders one log file as Spark writes it: "v1", then
// "\n" + one JSON object per entry, no final newline.
func EncodeFileSourceLog(entries []FileEntry) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "v%d", FileSourceLogV1)
	for _, e := range entries {
		b.WriteByte('\n')
		j, err := json.Marshal(e)
		if err != nil {
			panic(fmt.Sprintf("marshal file entry %+v: %v", e, err)) // three plain fields cannot fail
		}
		b.Write(j)
	}
	return b.Bytes()
}

// ParseFileSourceLog decodes the FileStreamSource log file at path: log id n,
// compacted or not. A compacted file holds the entries of ids 0..n, any
// other the entries of id n. Any defect is CHECKPOINT_CORRUPT naming path.
func ParseFileSourceLog(path string, n int64, compacted bool, data []byte) ([]FileEntry, error) {
	lines, err := splitLines(path, data)
	if err != nil {
		return nil, err
	}
	if _, err := parseVersion(path, lines[0], FileSourceLogV1); err != nil {
		return nil, err
	}
	out := make([]FileEntry, 0, len(lines)-1)
	for i, line := range lines[1:] {
		var j fileEntryJSON
		if err := json.Unmarshal([]byte(line), &j); err != nil {
			return nil, errcode.Corrupt(path, err, "file source log line %d is not a JSON entry", i+2)
		}
		if j.Path == nil || *j.Path == "" || j.Timestamp == nil || j.BatchID == nil {
			return nil, errcode.Corrupt(path, nil, "file source log line %d lacks path, timestamp or batchId", i+2)
		}
		e := FileEntry{Path: *j.Path, Timestamp: *j.Timestamp, BatchID: *j.BatchID}
		if compacted && (e.BatchID < 0 || e.BatchID > n) {
			return nil, errcode.Corrupt(path, nil, "file source log line %d has batchId %d outside 0..%d", i+2, e.BatchID, n)
		}
		if !compacted && e.BatchID != n {
			return nil, errcode.Corrupt(path, nil, "file source log line %d has batchId %d in the file of log id %d", i+2, e.BatchID, n)
		}
		out = append(out, e)
	}
	return out, nil
}

// FileSourceLog is a FileStreamSource log read whole from its directory.
type FileSourceLog struct {
	Dir string
	// LatestID is the newest log id, -1 for an empty log.
	LatestID int64
	// CompactID is the newest compacted id (<n>.compact), -1 if none.
	CompactID int64
	// Entries are every admitted file: the newest compacted file's entries,
	// then those of each later id, in file order.
	Entries []FileEntry
}

// ReadFileSourceLog reads the FileStreamSource log in dir (a source's
// sources/<key>/ directory), as Spark's CompactibleFileStreamLog does: the
// newest <c>.compact plus every id after it, which must all be present;
// ids before c may have been deleted. Names that are not log ids (temp and
// checksum files) are ignored. A missing directory is an empty log.
func ReadFileSourceLog(fs vfs.FS, dir string) (*FileSourceLog, error) {
	l := &FileSourceLog{Dir: dir, LatestID: -1, CompactID: -1}
	names, err := fs.List(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return l, nil
		}
		return nil, fmt.Errorf("list file source log %s: %w", dir, err)
	}
	compacted := map[int64]bool{}
	for _, name := range names {
		base, compact := strings.CutSuffix(name, compactSuffix)
		id, ok := ParseBatchID(base)
		if !ok {
			continue
		}
		if prev, dup := compacted[id]; dup && prev != compact {
			return nil, errcode.Corrupt(fs.PathJoin(dir, name), nil, "file source log id %d is both compacted and not", id)
		}
		compacted[id] = compact
		l.LatestID = max(l.LatestID, id)
		if compact {
			l.CompactID = max(l.CompactID, id)
		}
	}
	if l.LatestID < 0 {
		return l, nil
	}
	ids := make([]int64, 0, len(compacted))
	for id := range compacted {
		if id >= l.CompactID {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	first := max(l.CompactID, 0)
	for i, id := range ids {
		if want := first + int64(i); id != want {
			return nil, errcode.Corrupt(dir, nil, "file source log has a gap: id %d is missing (found %d)", want, id)
		}
	}
	for _, id := range ids {
		name := strconv.FormatInt(id, 10)
		if compacted[id] {
			name += compactSuffix
		}
		path := fs.PathJoin(dir, name)
		data, err := readFile(fs, path)
		if err != nil {
			return nil, fmt.Errorf("read file source log %s: %w", path, err)
		}
		es, err := ParseFileSourceLog(path, id, compacted[id], data)
		if err != nil {
			return nil, err
		}
		l.Entries = append(l.Entries, es...)
	}
	return l, nil
}

// ReadSourceLog reads the FileStreamSource log of source key
// (sources/<key>/).
func (d Dir) ReadSourceLog(key string) (*FileSourceLog, error) {
	return ReadFileSourceLog(d.FS, d.Join(SourcesDir, key))
}
