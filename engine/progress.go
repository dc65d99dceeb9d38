package engine

import (
	"bytes"
	"encoding/json"
	"math"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
)

// Progress is a StreamingQueryProgress in Spark's JSON shape and key order
// (reference §e), plus sources[].name. It is immutable once delivered.
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

// durationMs keys (Spark's, plus DBR's control batch key).
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

// Listener receives progress events. Calls come from the query's goroutine,
// one at a time; a slow listener delays the next batch.
type Listener interface {
	OnProgress(p *Progress)
}

// ListenerFunc adapts a function to Listener.
type ListenerFunc func(p *Progress)

// OnProgress calls f(p).
func (f ListenerFunc) OnProgress(p *Progress) { f(p) }

// rate returns n per second over d, or nil (omitted, Spark's NaN) if d is 0.
func rate(n int64, d time.Duration) *float64 {
	if d <= 0 {
		return nil
	}
	r := float64(n) / d.Seconds()
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return nil
	}
	return &r
}

// isoTime formats ms since the epoch as Spark does: 2026-11-29T17:39:12.000Z.
func isoTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// JSONLListener appends every event as one JSON line to a file (the run's
// --progress FILE), without fsync: progress is informational. The first
// write error is kept in Err and later events are dropped. Not safe for
// concurrent use (the engine calls listeners from one goroutine).
type JSONLListener struct {
	FS   vfs.FS
	Path string
	Err  error
}

// OnProgress appends p.
func (l *JSONLListener) OnProgress(p *Progress) {
	if l.Err != nil {
		return
	}
	b, err := json.Marshal(p)
	if err == nil {
		err = checkpoint.AppendLineNoSync(l.FS, l.Path, b)
	}
	l.Err = err
}
