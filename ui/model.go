package ui

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// APIVersion is the version of the JSON documents served under /api (see doc.go).
const APIVersion = 1

// Status values of Query.Status.State.
const (
	StatusStarting = "starting" // the command runs but no query has started yet
	StatusActive   = "active"
	StatusStopped  = "stopped"
	StatusFailed   = "failed"
)

// Segment keys of Batch.Segments, in the stacking order of the duration chart.
// Each is milliseconds of the batch's triggerExecution.
var Segments = []string{
	"latestOffset",  // durationMs.latestOffset
	"walCommit",     // durationMs.walCommit
	"getBatch",      // durationMs.getBatch: reading the sources
	"operator",      // the rest: planning, aggregation, sink planning, bookkeeping
	"stateCommit",   // stateOperators[0].commitTimeMs
	"deltaCommit",   // sink.metrics.executionTimeMs (the Delta MERGE)
	"commitOffsets", // durationMs.commitOffsets
	"repartition",   // durationMs["controlBatch.REPARTITION"]
}

// State is the whole dashboard: GET /api/state, and the SSE snapshot event.
// It is a plain value; the Dashboard hands out copies.
type State struct {
	Version   int       `json:"v"`
	Query     Query     `json:"query"`
	Batches   []Batch   `json:"batches"`
	Sources   []Source  `json:"sources"`
	OffsetLog OffsetLog `json:"offsetLog"`
	Demo      *Demo     `json:"demo"` // nil unless the command is `ethstream demo`
}

// Meta is State without the batches: the SSE meta event, sent whenever any
// of it changes (batches travel one by one as batch events).
type Meta struct {
	Query     Query     `json:"query"`
	Sources   []Source  `json:"sources"`
	OffsetLog OffsetLog `json:"offsetLog"`
	Demo      *Demo     `json:"demo"`
}

// Query is the dashboard header.
type Query struct {
	Mode            string `json:"mode"` // run | demo | ui
	ID              string `json:"id"`
	Name            string `json:"name"`
	RunID           string `json:"runId"` // run id of the newest batch
	Runs            int    `json:"runs"`  // distinct run ids seen (starts that ran a batch)
	Checkpoint      string `json:"checkpoint"`
	StatePartitions int    `json:"statePartitions"` // 0 = unknown yet
	Trigger         string `json:"trigger"`         // "" = not known (not recorded in the checkpoint)
	Status          Status `json:"status"`
	LatestBatchID   *int64 `json:"latestBatchId"`
	Watermark       string `json:"watermark"` // of the newest batch; "" before the first
	Error           string `json:"error"`     // why the dashboard cannot read the checkpoint, if it cannot
}

// Status is the state of the query as this command knows it.
type Status struct {
	State   string `json:"state"`
	Code    string `json:"code,omitempty"`    // errcode of a failed start or run
	Message string `json:"message,omitempty"` // its message
	Since   string `json:"since,omitempty"`   // RFC 3339 time of the change
}

// Control describes a control batch.
type Control struct {
	BatchID   int64  `json:"batchId"`
	Operation string `json:"operation"` // REPARTITION
	From      int    `json:"from"`
	To        int    `json:"to"`
}

// Batch is one point of every chart: one progress event.
type Batch struct {
	BatchID   int64    `json:"batchId"`
	RunID     string   `json:"runId"`
	Run       int      `json:"run"` // 1-based index of RunID among the runs seen
	Restart   bool     `json:"restart"`
	Phase     string   `json:"phase,omitempty"`
	Timestamp string   `json:"timestamp"`
	Kind      string   `json:"kind"` // data | no-data | repartition
	Control   *Control `json:"control,omitempty"`

	InputRows   int64            `json:"inputRows"`
	InputRate   *float64         `json:"inputRate"`   // rows/s, nil for the first batch of a run
	ProcessRate *float64         `json:"processRate"` // rows/s
	DurationMs  int64            `json:"durationMs"`  // triggerExecution
	Segments    map[string]int64 `json:"segments"`    // keys of Segments, ms
	SourceRows  map[string]int64 `json:"sourceRows"`  // rows read per source name

	StateRows        int64 `json:"stateRows"`
	StateMemoryBytes int64 `json:"stateMemoryBytes"`
	Partitions       int64 `json:"partitions"`
	SinkRows         int64 `json:"sinkRows"`

	Watermark        string `json:"watermark"`        // "" while no event time was seen
	EventTimeMax     string `json:"eventTimeMax"`     // "" for a batch without rows
	WatermarkDelayMs *int64 `json:"watermarkDelayMs"` // batch time minus watermark
	EventDelayMs     *int64 `json:"eventDelayMs"`     // batch time minus the newest event time read
	// FreshnessMs is the largest sources[].metrics.freshnessMs of the batch
	// (stream.MetricFreshnessMs): from a source learning of its newest row
	// to the commit. Nil when no source times its data.
	FreshnessMs *int64 `json:"freshnessMs"`
}

// Source is one row of the sources table.
type Source struct {
	Name         string `json:"name"`
	Provider     string `json:"provider"`
	Description  string `json:"description"`
	Status       string `json:"status"` // active | stopped | failed (as the query) | removed
	StartOffset  string `json:"startOffset"`
	EndOffset    string `json:"endOffset"`
	LatestOffset string `json:"latestOffset"`
	RowsLast     int64  `json:"rowsLastBatch"`
	LastBatchID  int64  `json:"lastBatchId"` // batch the row describes
	Lag          *int64 `json:"lag"`         // latest - end, in LagUnit; nil if offsets are not numeric
	LagUnit      string `json:"lagUnit"`
	Pending      string `json:"pending"` // a source's own backlog metric, e.g. "4 files listed, not admitted"
	// Removed sources (tombstones of the newest offsets entry).
	RemovedInBatch *int64 `json:"removedInBatch,omitempty"`
	LastOffset     string `json:"lastOffset,omitempty"`
}

// OffsetLog is the offsets/ and commits/ directories as they are on disk.
type OffsetLog struct {
	Dir             string      `json:"dir"`
	Retained        []int64     `json:"retained"` // [first, last] offsets ids on disk, empty if none
	LatestCommitted *int64      `json:"latestCommitted"`
	Entries         []LogEntry  `json:"entries"` // the newest entries, newest last
	Tombstones      []Tombstone `json:"tombstones"`
	ControlBatches  []Control   `json:"controlBatches"` // in the retained log
	Error           string      `json:"error"`          // a file that could not be read, with its path
}

// LogEntry is one offsets/<id> file, with its commit if it has one.
type LogEntry struct {
	BatchID    int64             `json:"batchId"`
	Version    int               `json:"version"`
	Committed  bool              `json:"committed"`
	Timestamp  string            `json:"timestamp"`
	Watermark  string            `json:"watermark"`
	Sources    []LogSource       `json:"sources"`
	Control    *Control          `json:"control,omitempty"`
	Tombstones []Tombstone       `json:"tombstones"`
	Conf       map[string]string `json:"conf"`
	Raw        string            `json:"raw"`       // the file's bytes
	CommitRaw  string            `json:"commitRaw"` // commits/<id>, "" if absent
}

// LogSource is a source line of an offsets entry.
type LogSource struct {
	Key      string `json:"key"`
	Offset   string `json:"offset"` // compact JSON, "-" for no offset yet
	Provider string `json:"provider,omitempty"`
}

// Tombstone is a removed source as the newest offsets entry records it.
type Tombstone struct {
	Name           string `json:"name"`
	RemovedInBatch int64  `json:"removedInBatch"`
	LastOffset     string `json:"lastOffset"`
}

// Demo is the lifecycle of `ethstream demo`.
type Demo struct {
	Phases []Phase `json:"phases"`
	Checks []Check `json:"checks"`
	Result string  `json:"result"` // "" while running, then passed | failed | error
	Error  string  `json:"error,omitempty"`
}

// Phase states.
const (
	PhasePending = "pending"
	PhaseRunning = "running"
	PhaseDone    = "done"
	PhaseRefused = "refused" // refused as the demo expects (reuse_refused)
	PhaseFailed  = "failed"
)

// Phase is one start of the query in the demo.
type Phase struct {
	Name       string   `json:"name"`
	State      string   `json:"state"`
	Sources    []string `json:"sources"`
	Trigger    string   `json:"trigger"`
	StartedAt  string   `json:"startedAt,omitempty"`
	DurationMs int64    `json:"durationMs"`
	FirstBatch *int64   `json:"firstBatch"`
	LastBatch  *int64   `json:"lastBatch"`
	Code       string   `json:"code,omitempty"`
	Message    string   `json:"message,omitempty"`
	// Starts is how many times the phase started the query (live_reorgs: 3).
	Starts int `json:"starts"`
	// OwnCheckpoint: the phase runs on a checkpoint of its own, so its
	// batches are not in this dashboard's charts.
	OwnCheckpoint bool `json:"ownCheckpoint"`
}

// Check is one verification line.
type Check struct {
	Name     string `json:"name"`
	Expected string `json:"expected"`
	Actual   string `json:"actual"`
	Result   string `json:"result"` // pass | fail | figure
}

// StatusOf is the status after a start or run ended with err.
func StatusOf(err error, now time.Time) Status {
	st := Status{State: StatusStopped, Since: now.UTC().Format(time.RFC3339)}
	if err != nil {
		st.State = StatusFailed
		st.Code = errcode.Code(err)
		if st.Code == "" {
			st.Code = "RUNTIME_ERROR"
		}
		st.Message = err.Error()
	}
	return st
}

// point derives the chart point of event p. prevRun is the run id of the
// batch before it ("" for the first); run is p's run index.
func point(p *stream.Progress, prevRun string, run int, phase string) Batch {
	b := Batch{
		BatchID: p.BatchID, RunID: p.RunID, Run: run, Restart: prevRun != "" && prevRun != p.RunID,
		Phase: phase, Timestamp: p.Timestamp, Kind: p.Kind(),
		InputRows: p.NumInputRows, InputRate: p.InputRowsPerSecond, ProcessRate: p.ProcessedRowsPerSecond,
		DurationMs: p.DurationMs[stream.DurTriggerExecution], Segments: map[string]int64{}, SourceRows: map[string]int64{},
		SinkRows: p.Sink.NumOutputRows,
	}
	var stateCommit int64
	for i, o := range p.StateOperators {
		b.StateRows += o.NumRowsTotal
		b.StateMemoryBytes += o.MemoryUsedBytes
		stateCommit += o.CommitTimeMs
		if i == 0 {
			b.Partitions = o.NumShufflePartitions
		}
		if o.OperatorName == "repartition" {
			b.Control = &Control{BatchID: p.BatchID, Operation: checkpoint.OpRepartition,
				From: int(o.CustomMetrics["partitionsBefore"]), To: int(o.NumShufflePartitions)}
		}
	}
	if b.Kind == stream.KindRepartition && b.Control == nil {
		b.Control = &Control{BatchID: p.BatchID, Operation: checkpoint.OpRepartition, To: int(b.Partitions)}
	}
	for i, s := range p.Sources {
		b.SourceRows[sourceName(s, i)] += s.NumInputRows
		if v, err := strconv.ParseInt(s.Metrics[stream.MetricFreshnessMs], 10, 64); err == nil && (b.FreshnessMs == nil || v > *b.FreshnessMs) {
			b.FreshnessMs = &v
		}
	}
	var delta int64
	if v, err := strconv.ParseInt(p.Sink.Metrics["executionTimeMs"], 10, 64); err == nil && p.Sink.Metrics["skipped"] != "true" {
		delta = v
	}
	d := p.DurationMs
	seg := b.Segments
	seg["latestOffset"] = d[stream.DurLatestOffset]
	seg["walCommit"] = d[stream.DurWalCommit]
	seg["getBatch"] = d[stream.DurGetBatch]
	seg["stateCommit"] = stateCommit
	seg["deltaCommit"] = delta
	seg["commitOffsets"] = d[stream.DurCommitOffsets]
	seg["repartition"] = d[stream.DurRepartition]
	var known int64
	for _, k := range Segments {
		known += seg[k]
	}
	// The operator segment is what the named ones leave of triggerExecution;
	// millisecond rounding of each part can make the sum exceed the total.
	seg["operator"] = max(0, b.DurationMs-known)

	ts, tsErr := time.Parse(time.RFC3339Nano, p.Timestamp)
	if wm, ok := p.EventTime["watermark"]; ok {
		// A watermark of 0 is "no event time seen yet" (Spark prints the epoch too).
		if t, err := time.Parse(time.RFC3339Nano, wm); err == nil && t.UnixMilli() > 0 {
			b.Watermark = wm
			if tsErr == nil {
				v := ts.Sub(t).Milliseconds()
				b.WatermarkDelayMs = &v
			}
		}
	}
	if mx, ok := p.EventTime["max"]; ok {
		b.EventTimeMax = mx
		if t, err := time.Parse(time.RFC3339Nano, mx); err == nil && tsErr == nil {
			v := ts.Sub(t).Milliseconds()
			b.EventDelayMs = &v
		}
	}
	return b
}

// sourceName is a source's name, or "#i" for an unnamed (positional) source.
func sourceName(s stream.SourceProgress, i int) string {
	if s.Name != nil && *s.Name != "" {
		return *s.Name
	}
	return "#" + strconv.Itoa(i)
}

// providerOf shortens a description to its provider: "FileStreamSource[s3://b/p]" -> "FileStreamSource".
func providerOf(desc string) string {
	if i := strings.IndexAny(desc, "[( "); i > 0 {
		return desc[:i]
	}
	return desc
}

func rawString(r json.RawMessage) string {
	if len(r) == 0 || bytes.Equal(r, []byte("null")) {
		return "null"
	}
	return string(r)
}

// lag is latest - end when both offsets are JSON objects sharing exactly one
// integer field (ethrpc's block, s3archive's logOffset): how far the source's
// head is ahead of what the query has read, in that field's unit.
func lag(end, latest json.RawMessage) (*int64, string) {
	var e, l map[string]json.RawMessage
	if json.Unmarshal(end, &e) != nil || json.Unmarshal(latest, &l) != nil {
		return nil, ""
	}
	var val *int64
	unit := ""
	for k, ev := range e {
		lv, ok := l[k]
		if !ok {
			continue
		}
		a, err1 := strconv.ParseInt(string(ev), 10, 64)
		b, err2 := strconv.ParseInt(string(lv), 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		if val != nil {
			return nil, "" // two numeric fields: no single unit
		}
		d := b - a
		val, unit = &d, k
	}
	switch unit {
	case "block":
		unit = "blocks"
	case "logOffset":
		unit = "log entries"
	}
	return val, unit
}

// sources builds the sources table from the newest event and the newest
// offsets entry (tombstones, providers). A source of the newest event is
// active while the query is, failed when it failed, and stopped otherwise
// (a finished checkpoint, or a command that has not started the query yet);
// the lag of a source that is not active is its lag at its last batch.
func sources(last *stream.Progress, latest *checkpoint.OffsetEntry, query string) []Source {
	state := StatusStopped
	switch query {
	case StatusActive, StatusFailed:
		state = query
	}
	out := []Source{}
	seen := map[string]bool{}
	if last != nil {
		for i, s := range last.Sources {
			name := sourceName(s, i)
			src := Source{Name: name, Provider: providerOf(s.Description), Description: s.Description, Status: state,
				StartOffset: rawString(s.StartOffset), EndOffset: rawString(s.EndOffset), LatestOffset: rawString(s.LatestOffset),
				RowsLast: s.NumInputRows, LastBatchID: last.BatchID}
			if latest != nil {
				if m, ok := latest.Metadata.SourceMetadataInfo[name]; ok && m.ProviderName != "" {
					src.Provider = m.ProviderName
				}
			}
			src.Lag, src.LagUnit = lag(s.EndOffset, s.LatestOffset)
			if n, ok := s.Metrics["pendingFiles"]; ok && n != "0" {
				src.Pending = n + " files listed, not admitted yet"
			}
			seen[name] = true
			out = append(out, src)
		}
	}
	if latest != nil {
		for _, t := range tombstones(latest) {
			if seen[t.Name] {
				continue
			}
			rb := t.RemovedInBatch
			out = append(out, Source{Name: t.Name, Status: "removed", RemovedInBatch: &rb, LastOffset: t.LastOffset,
				EndOffset: t.LastOffset, StartOffset: "", LatestOffset: ""})
		}
	}
	return out
}

func tombstones(e *checkpoint.OffsetEntry) []Tombstone {
	out := []Tombstone{}
	for name, t := range e.Metadata.Tombstones {
		out = append(out, Tombstone{Name: name, RemovedInBatch: t.RemovedInBatch, LastOffset: rawString(t.LastOffset)})
	}
	sortTombstones(out)
	return out
}

func sortTombstones(ts []Tombstone) {
	for i := 1; i < len(ts); i++ {
		for j := i; j > 0 && (ts[j].RemovedInBatch < ts[j-1].RemovedInBatch ||
			ts[j].RemovedInBatch == ts[j-1].RemovedInBatch && ts[j].Name < ts[j-1].Name); j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
}

// logEntry is the view of offsets/<id>.
func logEntry(id int64, e *checkpoint.OffsetEntry, raw []byte) LogEntry {
	le := LogEntry{BatchID: id, Version: e.Version, Timestamp: msTime(e.Metadata.BatchTimestampMs),
		Watermark: msTime(e.Metadata.BatchWatermarkMs), Tombstones: tombstones(e), Conf: e.Metadata.Conf, Raw: string(raw),
		Sources: []LogSource{}}
	for _, s := range e.Sources {
		off := "-"
		if s.Offset != nil {
			off = string(s.Offset)
		}
		ls := LogSource{Key: s.Key, Offset: off}
		if m, ok := e.Metadata.SourceMetadataInfo[s.Key]; ok {
			ls.Provider = m.ProviderName
		}
		le.Sources = append(le.Sources, ls)
	}
	if from, to, ok := e.IsRepartition(); ok {
		le.Control = &Control{BatchID: id, Operation: checkpoint.OpRepartition, From: from, To: to}
	}
	return le
}

func msTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}
