package engine

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/durable"
	"github.com/ethstream/ethstream/stream"
)

// PhaseFile names one progress log (a --progress file or a checkpoint,
// ReadProgress) and the phase its events belong to.
type PhaseFile struct {
	Phase string
	Path  string
}

// BatchesCSVHeader and SourcesCSVHeader are the columns of docs/contracts.md, Progress records.
var (
	BatchesCSVHeader = []string{"query_id", "run_id", "phase", "batch_id", "timestamp", "kind",
		"num_input_rows", "input_rows_per_second", "processed_rows_per_second", "trigger_execution_ms",
		"latest_offset_ms", "wal_commit_ms", "get_batch_ms", "add_batch_ms", "commit_offsets_ms",
		"repartition_ms", "watermark", "state_rows_total", "state_rows_updated", "state_rows_removed",
		"rows_dropped_by_watermark", "state_partitions", "state_memory_bytes", "sink_rows"}
	SourcesCSVHeader = []string{"query_id", "run_id", "phase", "batch_id", "src_idx", "source_name",
		"description", "start_offset", "end_offset", "latest_offset", "num_input_rows"}
)

// Codes of reading progress logs.
const (
	// CodeProgressNotFound: a progress log to read does not exist or cannot be read.
	CodeProgressNotFound = "PROGRESS_FILE_NOT_FOUND"
	// CodeProgressCorrupt: a line of a progress log (other than a torn last one)
	// is not a progress event.
	CodeProgressCorrupt = "PROGRESS_FILE_CORRUPT"
)

// ReadProgress reads a progress log: a run's --progress file, or a
// checkpoint's log given as the checkpoint directory (or its progress/
// directory, or its progress.jsonl of format 1, which then also reads the
// segments after it): package checkpoint, "progress/". Each file holds one
// JSON event per line. A torn final line of a file (a crash during the
// append) is skipped; any other bad line is an error naming the file.
func ReadProgress(fs vfs.FS, path string) ([]*stream.Progress, error) {
	files, err := progressFiles(fs, path)
	if err != nil {
		return nil, err
	}
	var out []*stream.Progress
	for _, f := range files {
		events, err := readProgressFile(fs, f)
		if err != nil {
			return nil, err
		}
		out = append(out, events...)
	}
	return out, nil
}

// progressFiles resolves path to the files of its progress log, in order.
func progressFiles(fs vfs.FS, path string) ([]string, error) {
	const remedy = "pass a checkpoint directory a query ran on, or the --progress FILE of a run"
	st, err := fs.Stat(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, errcode.Wrap(err, CodeProgressNotFound, path, "check the path and its permissions", "cannot read progress log %s", path)
	}
	var ckpt string
	switch {
	case err == nil && st.IsDir() && fs.PathBase(path) == checkpoint.ProgressDir:
		ckpt = fs.PathDir(path)
	case err == nil && st.IsDir():
		ckpt = path
	case fs.PathBase(path) == checkpoint.ProgressFile:
		// <ckpt>/progress.jsonl: format 1, and the segments written since.
		ckpt = fs.PathDir(path)
		if err != nil {
			if _, derr := fs.Stat(fs.PathJoin(ckpt, checkpoint.ProgressDir)); derr != nil {
				return nil, errcode.New(CodeProgressNotFound, path, remedy, "progress log %s does not exist", path)
			}
		}
	case err != nil:
		return nil, errcode.New(CodeProgressNotFound, path, remedy, "progress log %s does not exist", path)
	default:
		return []string{path}, nil
	}
	segs, err := checkpoint.Dir{FS: fs, Path: ckpt}.ProgressSegments()
	if err != nil {
		return nil, errcode.Wrap(err, CodeProgressNotFound, path, "check the path and its permissions", "cannot read progress log %s", path)
	}
	if len(segs) == 0 {
		return nil, errcode.New(CodeProgressNotFound, path, remedy, "%s holds no progress log", path)
	}
	files := make([]string, len(segs))
	for i, s := range segs {
		files[i] = s.Path
	}
	return files, nil
}

// readProgressFile reads one file of a progress log.
func readProgressFile(fs vfs.FS, path string) ([]*stream.Progress, error) {
	data, err := checkpoint.ReadFile(fs, path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // deleted by the writer's retention since the listing
	}
	if err != nil {
		return nil, errcode.Wrap(err, CodeProgressNotFound, path, "check the path and its permissions", "cannot read progress log %s", path)
	}
	lines := bytes.Split(data, []byte("\n"))
	var out []*stream.Progress
	for i, l := range lines {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		p, err := parseProgressLine(l)
		if errors.Is(err, errTornLine) && i == len(lines)-1 {
			break // torn final line: no trailing newline
		}
		if err != nil {
			return nil, errcode.New(CodeProgressCorrupt, path, "pass a progress log: a run's --progress file or a checkpoint, one StreamingQueryProgress JSON object per line (restore the file, or remove the damaged line)",
				"progress log %s line %d is not a progress event: %v", path, i+1, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// errTornLine: a line that is not complete JSON (a torn final line of a
// crash mid-append, when it is the last).
var errTornLine = errors.New("not a JSON object")

// progressKeys are the fields every StreamingQueryProgress has, this
// project's and Spark's (StreamingQueryProgress.json writes them all).
var progressKeys = []string{"id", "runId", "timestamp", "batchId"}

// parseProgressLine decodes one line of a progress log. Valid JSON that is
// not a StreamingQueryProgress is refused: a Spark event log (a
// SparkListener event per line, StreamingQueryListener$QueryProgressEvent
// among them, each {"Event":"<class>",...}) would otherwise decode as an
// empty progress event per line and flatten into rows of zeros.
func parseProgressLine(line []byte) (*stream.Progress, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil || obj == nil {
		return nil, errTornLine
	}
	if ev, ok := obj["Event"]; ok {
		var class string
		_ = json.Unmarshal(ev, &class)
		return nil, fmt.Errorf("it is a Spark listener event (%q) of an event log, not a StreamingQueryProgress", class)
	}
	for _, k := range progressKeys {
		if _, ok := obj[k]; !ok {
			return nil, fmt.Errorf("it has no %q field (a StreamingQueryProgress has %v)", k, progressKeys)
		}
	}
	p := new(stream.Progress)
	if err := json.Unmarshal(line, p); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return p, nil
}

// VerifyProgressFile reads one file of a progress log (a segment) and
// refuses any line that is not a progress event, except a torn final one
// (`checkpoint verify`). It returns the number of events.
func VerifyProgressFile(fs vfs.FS, path string) (int, error) {
	events, err := readProgressFile(fs, path)
	return len(events), err
}

// FlattenProgress writes outDir/batches.csv and outDir/sources.csv from the
// progress logs, in the given order (`ethstream progress`).
func FlattenProgress(fs vfs.FS, outDir string, phases []PhaseFile) error {
	var bb, sb bytes.Buffer
	bw, sw := csv.NewWriter(&bb), csv.NewWriter(&sb)
	_ = bw.Write(BatchesCSVHeader)
	_ = sw.Write(SourcesCSVHeader)
	for _, ph := range phases {
		events, err := ReadProgress(fs, ph.Path)
		if err != nil {
			return err
		}
		for _, p := range events {
			_ = bw.Write(BatchRecord(ph.Phase, p))
			for _, rec := range SourceRecords(ph.Phase, p) {
				_ = sw.Write(rec)
			}
		}
	}
	bw.Flush()
	sw.Flush()
	if err := fs.MkdirAll(outDir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", outDir, err)
	}
	for name, b := range map[string][]byte{"batches.csv": bb.Bytes(), "sources.csv": sb.Bytes()} {
		if err := writeFile(fs, fs.PathJoin(outDir, name), b); err != nil {
			return err
		}
	}
	return nil
}

// writeFile publishes path through durable (Replace: temp file, fsync,
// rename, dir fsync): a rerun replaces the CSVs atomically, and a crash
// never leaves a truncated one.
func writeFile(fs vfs.FS, path string, data []byte) error {
	if _, err := durable.Bytes(durable.For(fs), fs.PathDir(path), fs.PathBase(path),
		durable.Options{Mode: durable.Replace}, data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func fmtRate(r *float64) string {
	if r == nil {
		return ""
	}
	return strconv.FormatFloat(*r, 'f', 3, 64)
}

func durStr(m map[string]int64, k string) string {
	if v, ok := m[k]; ok {
		return strconv.FormatInt(v, 10)
	}
	return ""
}

// BatchRecord is one batches.csv row.
func BatchRecord(phase string, p *stream.Progress) []string {
	var total, updated, removed, dropped, mem int64
	parts := ""
	for i, o := range p.StateOperators {
		total += o.NumRowsTotal
		updated += o.NumRowsUpdated
		removed += o.NumRowsRemoved
		dropped += o.NumRowsDroppedByWatermark
		mem += o.MemoryUsedBytes
		if i == 0 {
			parts = strconv.FormatInt(o.NumShufflePartitions, 10)
		}
	}
	i64 := func(v int64) string { return strconv.FormatInt(v, 10) }
	return []string{p.ID, p.RunID, phase, i64(p.BatchID), p.Timestamp, p.Kind(),
		i64(p.NumInputRows), fmtRate(p.InputRowsPerSecond), fmtRate(p.ProcessedRowsPerSecond),
		durStr(p.DurationMs, stream.DurTriggerExecution), durStr(p.DurationMs, stream.DurLatestOffset),
		durStr(p.DurationMs, stream.DurWalCommit), durStr(p.DurationMs, stream.DurGetBatch), durStr(p.DurationMs, stream.DurAddBatch),
		durStr(p.DurationMs, stream.DurCommitOffsets), durStr(p.DurationMs, stream.DurRepartition), p.EventTime["watermark"],
		i64(total), i64(updated), i64(removed), i64(dropped), parts, i64(mem), i64(p.Sink.NumOutputRows)}
}

// SourceRecords are the sources.csv rows of one event.
func SourceRecords(phase string, p *stream.Progress) [][]string {
	var out [][]string
	for i, s := range p.Sources {
		name := ""
		if s.Name != nil {
			name = *s.Name
		}
		out = append(out, []string{p.ID, p.RunID, phase, strconv.FormatInt(p.BatchID, 10), strconv.Itoa(i), name,
			s.Description, rawStr(s.StartOffset), rawStr(s.EndOffset), rawStr(s.LatestOffset), strconv.FormatInt(s.NumInputRows, 10)})
	}
	return out
}

func rawStr(r json.RawMessage) string {
	if r == nil {
		return "null"
	}
	return string(r)
}
