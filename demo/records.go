package demo

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"strconv"
)

// BatchRecord is one row of batches.csv (docs/contracts.md, Progress records), the fields the report uses.
type BatchRecord struct {
	QueryID, RunID, Phase, Kind string
	BatchID                     int64
	NumInputRows                int64
	AddBatchMs                  float64
	RepartitionMs               float64
	TriggerExecutionMs          float64
	// The other durationMs phases; with AddBatchMs and RepartitionMs they
	// sum to at most TriggerExecutionMs.
	LatestOffsetMs, WalCommitMs, GetBatchMs, CommitOffsetsMs float64
	StateRowsTotal                                           int64
	StateRowsUpdated                                         int64
	StateRowsRemoved                                         int64
	StatePartitions                                          int64
	StateMemoryBytes                                         int64
	SinkRows                                                 int64
	Watermark                                                string
}

// SourceRecord is one row of sources.csv (docs/contracts.md, Progress records).
type SourceRecord struct {
	QueryID, RunID, Phase  string
	BatchID                int64
	SourceIdx              int
	SourceName             string
	Description            string
	StartOffset, EndOffset string
	LatestOffset           string
	NumInputRows           int64
}

// csvTable reads a CSV with a header row and gives access to fields by column name.
type csvTable struct {
	path   string
	header map[string]int
	rows   [][]string
}

func readCSV(path string) (*csvTable, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	head, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("read header of %s: %w", path, err)
	}
	t := &csvTable{path: path, header: map[string]int{}}
	for i, h := range head {
		t.header[h] = i
	}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		t.rows = append(t.rows, rec)
	}
	return t, nil
}

func (t *csvTable) str(row []string, col string) (string, error) {
	i, ok := t.header[col]
	if !ok {
		return "", fmt.Errorf("%s: missing column %q", t.path, col)
	}
	return row[i], nil
}

func (t *csvTable) int(row []string, col string) (int64, error) {
	s, err := t.str(row, col)
	if err != nil || s == "" {
		return 0, err
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: column %s: %w", t.path, col, err)
	}
	return v, nil
}

func (t *csvTable) float(row []string, col string) (float64, error) {
	s, err := t.str(row, col)
	if err != nil || s == "" {
		return 0, err
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: column %s: %w", t.path, col, err)
	}
	return v, nil
}

// ReadBatches parses batches.csv.
func ReadBatches(path string) ([]BatchRecord, error) {
	t, err := readCSV(path)
	if err != nil {
		return nil, err
	}
	out := make([]BatchRecord, 0, len(t.rows))
	for _, row := range t.rows {
		var b BatchRecord
		var errs [16]error
		b.QueryID, errs[0] = t.str(row, "query_id")
		b.RunID, errs[1] = t.str(row, "run_id")
		b.Phase, errs[2] = t.str(row, "phase")
		b.Kind, errs[3] = t.str(row, "kind")
		b.BatchID, errs[4] = t.int(row, "batch_id")
		b.NumInputRows, errs[5] = t.int(row, "num_input_rows")
		b.AddBatchMs, errs[6] = t.float(row, "add_batch_ms")
		b.RepartitionMs, errs[7] = t.float(row, "repartition_ms")
		b.TriggerExecutionMs, errs[8] = t.float(row, "trigger_execution_ms")
		b.StateRowsTotal, errs[9] = t.int(row, "state_rows_total")
		b.StateRowsUpdated, errs[10] = t.int(row, "state_rows_updated")
		b.StateRowsRemoved, errs[11] = t.int(row, "state_rows_removed")
		b.StatePartitions, errs[12] = t.int(row, "state_partitions")
		b.StateMemoryBytes, errs[13] = t.int(row, "state_memory_bytes")
		b.SinkRows, errs[14] = t.int(row, "sink_rows")
		b.Watermark, errs[15] = t.str(row, "watermark")
		var more [4]error
		b.LatestOffsetMs, more[0] = t.float(row, "latest_offset_ms")
		b.WalCommitMs, more[1] = t.float(row, "wal_commit_ms")
		b.GetBatchMs, more[2] = t.float(row, "get_batch_ms")
		b.CommitOffsetsMs, more[3] = t.float(row, "commit_offsets_ms")
		for _, e := range append(errs[:], more[:]...) {
			if e != nil {
				return nil, e
			}
		}
		out = append(out, b)
	}
	return out, nil
}

// ReadSources parses sources.csv.
func ReadSources(path string) ([]SourceRecord, error) {
	t, err := readCSV(path)
	if err != nil {
		return nil, err
	}
	out := make([]SourceRecord, 0, len(t.rows))
	for _, row := range t.rows {
		var s SourceRecord
		var idx int64
		var errs [10]error
		s.QueryID, errs[0] = t.str(row, "query_id")
		s.RunID, errs[1] = t.str(row, "run_id")
		s.Phase, errs[2] = t.str(row, "phase")
		s.BatchID, errs[3] = t.int(row, "batch_id")
		idx, errs[4] = t.int(row, "src_idx")
		s.SourceName, errs[5] = t.str(row, "source_name")
		s.Description, errs[6] = t.str(row, "description")
		s.StartOffset, errs[7] = t.str(row, "start_offset")
		s.EndOffset, errs[8] = t.str(row, "end_offset")
		s.LatestOffset, _ = t.str(row, "latest_offset")
		s.NumInputRows, errs[9] = t.int(row, "num_input_rows")
		s.SourceIdx = int(idx)
		for _, e := range errs {
			if e != nil {
				return nil, e
			}
		}
		out = append(out, s)
	}
	return out, nil
}
