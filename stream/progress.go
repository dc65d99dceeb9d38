package stream

import (
	"bytes"
	"encoding/json"
)

// Progress is a StreamingQueryProgress in Spark's JSON shape and key order
// (as Spark's StreamingQueryProgress.json), plus sources[].name. It is immutable once delivered.
type Progress struct {
	ID                     string             `json:"id"`
	RunID                  string             `json:"runId"`
	Name                   *string            `json:"name"`
	Timestamp              string             `json:"timestamp"`
	BatchID                int64              `json:"batchId"`
	BatchDuration          int64              `json:"batchDuration"`
	NumInputRows           int64              `json:"numInputRows"`
	InputRowsPerSecond     *float64           `json:"inputRowsPerSecond,omitempty"`
	ProcessedRowsPerSecond *float64           `json:"processedRowsPerSecond,omitempty"`
	DurationMs             map[string]int64   `json:"durationMs,omitempty"`
	EventTime              map[string]string  `json:"eventTime,omitempty"`
	StateOperators         []OperatorProgress `json:"stateOperators"`
	Sources                []SourceProgress   `json:"sources"`
	Sink                   SinkProgress       `json:"sink"`
	ObservedMetrics        map[string]any     `json:"observedMetrics,omitempty"`
}

// SourceProgress is one sources[] entry. Offsets are embedded JSON (null
// before a source's first batch).
type SourceProgress struct {
	Description            string            `json:"description"`
	Name                   *string           `json:"name"`
	StartOffset            json.RawMessage   `json:"startOffset"`
	EndOffset              json.RawMessage   `json:"endOffset"`
	LatestOffset           json.RawMessage   `json:"latestOffset"`
	NumInputRows           int64             `json:"numInputRows"`
	InputRowsPerSecond     *float64          `json:"inputRowsPerSecond,omitempty"`
	ProcessedRowsPerSecond *float64          `json:"processedRowsPerSecond,omitempty"`
	Metrics                map[string]string `json:"metrics,omitempty"`
}

// durationMs keys (Spark's, plus DBR's control batch key). The phases do not
// overlap, so together they take at most triggerExecution, as in Spark:
// latestOffset, queryPlanning, walCommit (less the part of the offsets
// write the reads covered, engine doc.go Crash order), then getBatch (time inside the
// sources' ReadBatch) and addBatch (operator, sink and state commit: the rest
// of the read-process-write pass, which streams source chunks into the
// operator), then commitOffsets; a control batch has controlBatch.REPARTITION
// in place of getBatch and addBatch.
const (
	DurTriggerExecution = "triggerExecution"
	DurLatestOffset     = "latestOffset"
	DurWalCommit        = "walCommit"
	DurGetBatch         = "getBatch"
	DurQueryPlanning    = "queryPlanning"
	DurAddBatch         = "addBatch"
	DurCommitOffsets    = "commitOffsets"
	DurRepartition      = "controlBatch.REPARTITION"
)

// MetricFreshnessMs is the sources[].metrics key of a source that times its
// data: milliseconds from the source learning that the batch's newest row
// was readable (a head notification's arrival, or the poll that first saw
// it) to the batch's commit. The dashboard shows it.
const MetricFreshnessMs = "freshnessMs"

// Batch kinds as flattened to CSV.
const (
	KindData        = "data"
	KindNoData      = "no-data"
	KindRepartition = "repartition"
)

// Kind classifies the progress event: repartition, data (some source's end
// offset differs from its start) or no-data.
func (p *Progress) Kind() string {
	if _, ok := p.DurationMs[DurRepartition]; ok {
		return KindRepartition
	}
	for _, s := range p.Sources {
		if !bytes.Equal(s.StartOffset, s.EndOffset) {
			return KindData
		}
	}
	return KindNoData
}
