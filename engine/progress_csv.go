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
		p := new(stream.Progress)
		if err := json.Unmarshal(l, p); err != nil {
			if i == len(lines)-1 {
				break // torn final line: no trailing newline
			}
			return nil, errcode.New(CodeProgressCorrupt, path, "restore the file, or remove the damaged line: every line is one progress event as JSON",
				"progress log %s line %d is not a progress event", path, i+1)
		}
		out = append(out, p)
	}
	return out, nil
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
