package sinklog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
)

// MetadataDir is the name of the sink's log directory inside its output.
const MetadataDir = "_spark_metadata"

// LogVersion is the only version of Spark's FileStreamSinkLog.
const LogVersion = 1

// Actions of a SinkFileStatus.
const (
	ActionAdd    = "add"
	ActionDelete = "delete"
)

// DefaultCompactInterval is Spark's default of
// spark.sql.streaming.fileSink.log.compactInterval.
const DefaultCompactInterval = 10

// FileStatus is one line of the log (Spark's SinkFileStatus); the field
// order is Spark's, so the bytes match its json4s output.
type FileStatus struct {
	Path             string `json:"path"`
	Size             int64  `json:"size"`
	IsDir            bool   `json:"isDir"`
	ModificationTime int64  `json:"modificationTime"`
	BlockReplication int    `json:"blockReplication"`
	BlockSize        int64  `json:"blockSize"`
	Action           string `json:"action"`
}

// fileStatusJSON detects missing required fields when decoding.
type fileStatusJSON struct {
	Path   *string `json:"path"`
	Size   *int64  `json:"size"`
	Action *string `json:"action"`
	FileStatus
}

// EncodeLog renders one log file as Spark writes it (package doc).
func EncodeLog(entries []FileStatus) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "v%d", LogVersion)
	for _, e := range entries {
		b.WriteByte('\n')
		j, _ := json.Marshal(e) // strings, ints and a bool: cannot fail
		b.Write(j)
	}
	return b.Bytes()
}

// ParseLog parses one log file read from path. A version other than v1,
// a line that is not a SinkFileStatus, or one without path, size or action
// is CHECKPOINT_CORRUPT naming path.
func ParseLog(path string, data []byte) ([]FileStatus, error) {
	corrupt := func(format string, args ...any) error {
		return errcode.New(errcode.CheckpointCorrupt, path,
			"restore the file sink's _spark_metadata directory from a backup, or write to a new output directory",
			"file sink log "+format, args...)
	}
	lines := bytes.Split(data, []byte("\n"))
	if string(lines[0]) != fmt.Sprintf("v%d", LogVersion) {
		return nil, corrupt("starts with %q, not v%d", truncate(lines[0]), LogVersion)
	}
	var out []FileStatus
	for i, ln := range lines[1:] {
		if len(bytes.TrimSpace(ln)) == 0 {
			continue
		}
		var j fileStatusJSON
		if err := json.Unmarshal(ln, &j); err != nil {
			return nil, corrupt("line %d is not JSON: %v", i+2, err)
		}
		if j.Path == nil || j.Size == nil || j.Action == nil {
			return nil, corrupt("line %d lacks path, size or action", i+2)
		}
		if *j.Action != ActionAdd && *j.Action != ActionDelete {
			return nil, corrupt("line %d has action %q", i+2, *j.Action)
		}
		e := j.FileStatus
		e.Path, e.Size, e.Action = *j.Path, *j.Size, *j.Action
		out = append(out, e)
	}
	return out, nil
}

func truncate(b []byte) string {
	if len(b) > 20 {
		return string(b[:20]) + "…"
	}
	return string(b)
}

// logCodec is the checkpoint.Codec of the log: names are Spark's <n> and
// <n>.compact (checkpoint.FileSourceCodec's), contents FileStatus lines.
type logCodec struct{ checkpoint.FileSourceCodec }

func (logCodec) Encode(_ checkpoint.FileSourceID, es []FileStatus) ([]byte, error) {
	return EncodeLog(es), nil
}

func (logCodec) Decode(path string, _ checkpoint.FileSourceID, data []byte) ([]FileStatus, error) {
	return ParseLog(path, data)
}

// Log is the log of the output directory dir, through which the sink
// writes it.
func Log(fs vfs.FS, dir string) checkpoint.Log[checkpoint.FileSourceID, []FileStatus] {
	return checkpoint.Log[checkpoint.FileSourceID, []FileStatus]{
		FS: fs, Dir: fs.PathJoin(dir, MetadataDir), Codec: logCodec{}, What: "file sink log"}
}

// Committed is what a file sink's log says about its output.
type Committed struct {
	// LatestBatch is the newest committed batch id, -1 when none.
	LatestBatch int64
	// Files are the committed part files (action add, minus deleted
	// ones), in log order.
	Files []FileStatus
}

// ReadLog reads the metadata log of the output directory dir as Spark's
// CompactibleFileStreamLog.allFiles does: the newest compact file and
// every batch file after it, which must all be present. A missing log is
// no batch at all.
func ReadLog(fs vfs.FS, dir string) (*Committed, error) {
	lg := Log(fs, dir)
	keys, err := lg.List()
	if err != nil {
		return nil, err
	}
	split, err := checkpoint.SplitFileSource(lg, keys)
	if err != nil {
		return nil, err
	}
	c := &Committed{LatestBatch: -1}
	if len(split.All) == 0 {
		return c, nil
	}
	c.LatestBatch = split.All[len(split.All)-1].ID
	var all []FileStatus
	for _, k := range split.Live {
		es, err := lg.Get(k)
		if err != nil {
			return nil, err
		}
		all = append(all, es...)
	}
	c.Files = Compact(all)
	return c, nil
}

// Compact drops deleted files, as Spark's FileStreamSinkLog.compactLogs:
// every entry whose path some "delete" entry names goes.
func Compact(es []FileStatus) []FileStatus {
	deleted := map[string]bool{}
	for _, e := range es {
		if e.Action == ActionDelete {
			deleted[e.Path] = true
		}
	}
	return slices.DeleteFunc(slices.Clone(es), func(e FileStatus) bool { return deleted[e.Path] })
}

// IsCompactionBatch is Spark's CompactibleFileStreamLog.isCompactionBatch:
// batch batchID's log file is a compact file.
func IsCompactionBatch(batchID int64, interval int) bool {
	return (batchID+1)%int64(interval) == 0
}
