package checkpoint

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
)

// FileSourceLogV1 is the only version of Spark's FileStreamSource log.
const FileSourceLogV1 = 1

// compactSuffix marks a compacted FileStreamSource log file.
const compactSuffix = ".compact"

// FileEntry is one file a FileStreamSource admitted (Spark's FileEntry),
// one JSON object per line of a "v1" log file:
//
//	{"path":"s3://b/p/date=2024-01-01/x.parquet","timestamp":1704067200000,"batchId":0,"size":52947}
//
// path, timestamp and batchId are Spark's and required. size is ethstream's
// addition (written since the relocated-archive check, issue 27): the
// file's size in bytes when it was admitted, omitted when unknown (0), as in
// every log written before it and every log Spark writes. It is additive,
// so the version stays "v1": Spark's json4s reader ignores fields it does
// not know, and so does ParseFileSourceLog (plain json.Unmarshal); a
// negative size is CHECKPOINT_CORRUPT. A moved archive is admitted only
// where every logged file exists at the new location with this size
// (docs/contracts.md, source evolution); an entry without one is checked
// for existence only.
type FileEntry struct {
	Path      string `json:"path"`           // URL-encoded URI of the file
	Timestamp int64  `json:"timestamp"`      // its modification time, ms since the epoch
	BatchID   int64  `json:"batchId"`        // the source log id that admitted it
	Size      int64  `json:"size,omitempty"` // its size in bytes; 0: unknown
}

// fileEntryJSON detects missing fields when decoding.
type fileEntryJSON struct {
	Path      *string `json:"path"`
	Timestamp *int64  `json:"timestamp"`
	BatchID   *int64  `json:"batchId"`
	Size      int64   `json:"size"`
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
			panic(fmt.Sprintf("marshal file entry %+v: %v", e, err)) // four plain fields cannot fail
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
		if j.Size < 0 {
			return nil, errcode.Corrupt(path, nil, "file source log line %d has size %d", i+2, j.Size)
		}
		e := FileEntry{Path: *j.Path, Timestamp: *j.Timestamp, BatchID: *j.BatchID, Size: j.Size}
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

// FileSourceID is the key of a FileStreamSource log file: its log id and
// whether it is the compacted form, <n>.compact.
type FileSourceID struct {
	ID      int64
	Compact bool
}

// FileSourceCodec is the Codec of a FileStreamSource log (doc.go:
// sources/<key>/ of a FileStreamSource): <n> or <n>.compact, ordered by n.
// The two forms of one id compare equal, so a log holding both is refused.
type FileSourceCodec struct{}

// Name returns <n> or <n>.compact.
func (FileSourceCodec) Name(k FileSourceID) string {
	if k.Compact {
		return strconv.FormatInt(k.ID, 10) + compactSuffix
	}
	return strconv.FormatInt(k.ID, 10)
}

// Key parses <n> or <n>.compact.
func (FileSourceCodec) Key(name string) (FileSourceID, bool) {
	base, compact := strings.CutSuffix(name, compactSuffix)
	id, ok := ParseBatchID(base)
	return FileSourceID{ID: id, Compact: compact}, ok
}

// Compare orders keys by log id.
func (FileSourceCodec) Compare(a, b FileSourceID) int { return cmp.Compare(a.ID, b.ID) }

// Encode renders a log file (EncodeFileSourceLog).
func (FileSourceCodec) Encode(_ FileSourceID, es []FileEntry) ([]byte, error) {
	return EncodeFileSourceLog(es), nil
}

// Decode parses a log file (ParseFileSourceLog).
func (FileSourceCodec) Decode(path string, k FileSourceID, data []byte) ([]FileEntry, error) {
	return ParseFileSourceLog(path, k.ID, k.Compact, data)
}

// FileSourceFiles is a FileStreamSource log's directory as Spark's
// CompactibleFileStreamLog reads it.
type FileSourceFiles struct {
	// All is every file, by ascending id.
	All []FileSourceID
	// Compacts are the ids of the compact files, newest first.
	Compacts []int64
	// Live is what a reader reads: the newest compact file and every file
	// after it (every file when there is no compaction), gap-free from the
	// compact id (or 0). Files before it may have been deleted.
	Live []FileSourceID
}

// SplitFileSource sorts the keys all of the FileStreamSource log l (from
// List or Recover) into FileSourceFiles, and checks that the live files
// have no gap; a gap is CHECKPOINT_CORRUPT.
func SplitFileSource[T any](l Log[FileSourceID, T], all []FileSourceID) (FileSourceFiles, error) {
	var f FileSourceFiles
	if len(all) == 0 {
		return f, nil
	}
	f.All = all
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].Compact {
			f.Compacts = append(f.Compacts, all[i].ID)
		}
	}
	first := int64(0)
	if len(f.Compacts) > 0 {
		first = f.Compacts[0]
	}
	i, _ := slices.BinarySearchFunc(all, first, func(k FileSourceID, id int64) int { return cmp.Compare(k.ID, id) })
	f.Live = all[i:]
	for j, k := range f.Live {
		if want := first + int64(j); k.ID != want {
			return FileSourceFiles{}, errcode.Corrupt(l.Dir, nil, "%s has a gap: id %d is missing (found %d)", l.What, want, k.ID)
		}
	}
	return f, nil
}

// FileSourceLogAt is the FileStreamSource log in dir. A log of Spark's holds
// checksum files (.<n>.crc), which are ignored; strict refuses them (a log
// only ethstream writes).
func FileSourceLogAt(fs vfs.FS, dir string, strict bool) Log[FileSourceID, []FileEntry] {
	return Log[FileSourceID, []FileEntry]{FS: fs, Dir: dir, Codec: FileSourceCodec{}, What: "file source log", Strict: strict}
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
	lg := FileSourceLogAt(fs, dir, false)
	keys, err := lg.List()
	if err != nil {
		return nil, err
	}
	files, err := SplitFileSource(lg, keys)
	if err != nil {
		return nil, err
	}
	if len(files.All) == 0 {
		return l, nil
	}
	l.LatestID = files.All[len(files.All)-1].ID
	if len(files.Compacts) > 0 {
		l.CompactID = files.Compacts[0]
	}
	for _, k := range files.Live {
		es, err := lg.Get(k)
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
