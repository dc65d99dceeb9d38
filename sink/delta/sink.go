package delta

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
	"github.com/google/uuid"
)

// DefaultTargetFileRows is the number of rows per data file MERGE and
// OPTIMIZE aim for.
const DefaultTargetFileRows = 1 << 17

// maxCommitAttempts bounds the retries of a batch that keeps losing the race
// for its version to other writers.
const maxCommitAttempts = 100

// SinkOptions configure a MergeSink.
type SinkOptions struct {
	Path           string       // table directory or file:// URI
	KeyColumns     []string     // MERGE key (output column names); default the output schema's key
	TargetFileRows int          // rows per data file; default DefaultTargetFileRows
	Logger         *slog.Logger // default slog.Default()
	Clock          func() time.Time
	// FS holds the table; nil = vfs.Default (the local disk).
	FS vfs.FS
	// Schema is the schema of the rows the sink will receive (the
	// operator's output), known before Open so that Check refuses a table of
	// another schema before anything is written; SinkEnv.Schema, when set,
	// wins at Open. The sink has no default: with both empty, Open fails
	// (DELTA_SINK_SCHEMA_REQUIRED).
	Schema stream.Schema
	// AutoCompactMinFiles is auto-compaction's minNumFiles (default
	// DefaultAutoCompactMinFiles); negative turns auto-compaction off
	// (as does the table property delta.autoOptimize.autoCompact=false).
	AutoCompactMinFiles int
	// TableProperties are the metaData.configuration of a table the sink
	// creates (delta.logRetentionDuration, ...); an existing table keeps its own.
	TableProperties map[string]string
	// OutputMode is the query's output mode, in Spark's names: "append"
	// appends each batch's rows and "complete" replaces the table with
	// them, as Spark's DeltaSink does (append.go); "update" (and "", for
	// callers that merge without a query) MERGEs them by key. A query with
	// no stateful operator (stream.SinkEnv.Append) always appends.
	OutputMode string
}

// writeMode is how a batch reaches the table.
type writeMode uint8

const (
	modeMerge    writeMode = iota // MERGE by key (update mode)
	modeAppend                    // blind append (append mode)
	modeComplete                  // replace every file (complete mode)
)

// sparkName is the mode as Spark's OutputMode.toString prints it in a
// STREAMING UPDATE commit's operationParameters.
func (w writeMode) sparkName() string {
	switch w {
	case modeAppend:
		return "Append"
	case modeComplete:
		return "Complete"
	}
	return "Update"
}

// parseWriteMode reads SinkOptions.OutputMode.
func parseWriteMode(mode string) (writeMode, error) {
	switch strings.ToLower(mode) {
	case "", "update":
		return modeMerge, nil
	case "append":
		return modeAppend, nil
	case "complete":
		return modeComplete, nil
	}
	return 0, errcode.New(errcode.InvalidArgument, "", "use --output-mode update, append or complete",
		"output mode %q is not one of Spark's", mode)
}

// MergeSink is the stream.Sink that upserts each batch into the Delta table
// with one idempotent MERGE commit (docs/contracts.md, Delta table). It keeps the latest snapshot
// in memory and applies only new commits before each batch. Its methods are
// safe for concurrent use but batches are written one at a time.
type MergeSink struct {
	o   SinkOptions
	log *slog.Logger

	mu      sync.Mutex
	table   *Table
	snap    *Snapshot // private, updated in place; never handed out
	queryID string
	seen    map[string]struct{} // live files known to exist (checkLiveFiles)
	// layout is the table layout of the output schema, keyed for the MERGE.
	layout *outLayout
	// mode is how batches are written: MERGEd, appended or replacing the
	// table (append.go).
	mode writeMode
	// Auto-maintenance (automaintain.go): jobs queued for the maintenance
	// goroutine (bgMu guards the queue and nextCheckpoint); maintaining is
	// set while a maintenance job is queued or runs; lastVacuum and
	// lastLogCleanup are written only by that goroutine, and read only
	// while maintaining is false; report holds what finished since the
	// last batch.
	maintaining    atomic.Bool
	bg             sync.WaitGroup
	bgMu           sync.Mutex
	bgQueue        []func()
	bgRunning      bool
	nextCheckpoint *pendingCheckpoint
	lastVacuum     time.Time
	lastLogCleanup time.Time
	report         maintReport
}

var _ stream.Sink = (*MergeSink)(nil)

// NewMergeSink validates o. The table is opened (or created) by Open.
func NewMergeSink(o SinkOptions) (*MergeSink, error) {
	if o.Path == "" {
		return nil, errcode.New(errcode.InvalidArgument, "", "pass --table DIR", "delta sink needs a table path")
	}
	if o.TargetFileRows <= 0 {
		o.TargetFileRows = DefaultTargetFileRows
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	mode, err := parseWriteMode(o.OutputMode)
	if err != nil {
		return nil, err
	}
	return &MergeSink{o: o, log: o.Logger, mode: mode}, nil
}

// Open binds the sink to the query id (the txn appId), creating the table
// with the schema of the operator's output (env.Schema; SinkOptions.Schema when
// the operator declares none) if the directory holds none, and
// loads the latest snapshot. An existing table with another schema is
// refused with DELTA_SCHEMA_MISMATCH naming both.
func (m *MergeSink) Open(ctx context.Context, env stream.SinkEnv) error {
	queryID := env.QueryID
	m.mu.Lock()
	defer m.mu.Unlock()
	if queryID == "" {
		return errcode.New(errcode.InvalidArgument, m.o.Path, "open the sink with the query id", "empty query id")
	}
	out := env.Schema
	if len(out.Fields) == 0 {
		out = m.o.Schema
	}
	t, err := OpenFS(ctx, m.o.FS, m.o.Path)
	if err == nil {
		out = widenToTable(ctx, t, out)
	}
	l, lerr := sinkLayout(out, m.o.KeyColumns, m.o.Path)
	if lerr != nil {
		return lerr
	}
	want := l.schema
	m.layout = l
	var ce *errcode.Error
	if errors.As(err, &ce) && ce.Code == CodeNotATable {
		opts := []CreateOption{WithClock(m.o.Clock), WithFS(m.o.FS)}
		if len(m.o.TableProperties) > 0 {
			opts = append(opts, WithConfiguration(m.o.TableProperties))
		}
		_, err = Create(ctx, m.o.Path, want, opts...)
		if errors.As(err, &ce) && ce.Code == CodeTableExists {
			err = nil // another writer created it first
		}
		if err == nil {
			t, err = OpenFS(ctx, m.o.FS, m.o.Path)
		}
		if err == nil {
			m.log.Info("created delta table", "path", t.Path())
		}
	}
	if err != nil {
		return err
	}
	s, err := t.Snapshot(ctx, -1)
	if err != nil {
		return err
	}
	if err := checkSinkTable(t, s, want); err != nil {
		return err
	}
	// Temp files a killed writer left: all of them when no other writer
	// can be alive, else those old enough not to be a publish in progress
	// (commit.go, sweepAll).
	if n, err := t.cleanTemps(m.o.Clock(), sweepAll(env, s)); err != nil {
		return err
	} else if n > 0 {
		m.log.Info("removed stale temp files from the delta table", "path", t.Path(), "files", n)
	}
	m.table, m.snap, m.queryID = t, s, queryID
	m.mode, _ = parseWriteMode(m.o.OutputMode) // validated by NewMergeSink
	if env.Append {
		m.mode = modeAppend
	}
	return nil
}

// sameShape compares names and types, ignoring nullability and metadata.
func sameShape(a, b Schema) bool {
	if len(a.Fields) != len(b.Fields) {
		return false
	}
	for i := range a.Fields {
		if a.Fields[i].Name != b.Fields[i].Name || a.Fields[i].Type.String() != b.Fields[i].Type.String() {
			return false
		}
	}
	return true
}

// Description names the sink in progress events.
func (m *MergeSink) Description() string { return "DeltaSink[" + m.o.Path + "]" }

// Version returns the table version the sink last saw (-1 before Open).
func (m *MergeSink) Version() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.snap == nil {
		return -1
	}
	return m.snap.Version
}

// MetricWriteTime is the sink metric (progress event sink.metrics) giving the
// milliseconds AddBatch took, the Delta commit included.
const MetricWriteTime = "writeTimeMs"

// AddBatch upserts out as batch batchID. A batch whose id is not above the
// table's txn version for this query is skipped, so re-runs write nothing.
func (m *MergeSink) AddBatch(ctx context.Context, batchID int64, out *stream.Batch) (stream.SinkProgress, error) {
	start := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	prog := stream.SinkProgress{Description: m.Description()}
	if m.snap == nil {
		return prog, errcode.New(errcode.InvalidArgument, m.o.Path, "call Open first", "delta sink is not open")
	}
	rows, err := batchRows(m.layout, out)
	if err != nil {
		return prog, err
	}
	n := rows.n
	var res batchResult
	if m.mode == modeMerge {
		res, err = m.commitBatch(ctx, batchID, rows)
	} else {
		res, err = m.commitStreaming(ctx, batchID, rows, m.mode)
	}
	if err != nil {
		return prog, err
	}
	if !res.skipped {
		m.autoMaintain()
	}
	prog.NumOutputRows = int64(n)
	// writeTimeMs is the whole call: the MERGE (executionTimeMs) plus the
	// table refresh, the log commit and starting any maintenance.
	prog.Metrics = map[string]string{"tableVersion": fmt.Sprint(res.version),
		MetricWriteTime: fmt.Sprint(time.Since(start).Milliseconds())}
	m.report.drainInto(prog.Metrics)
	if res.skipped {
		prog.NumOutputRows = 0
		prog.Metrics["skipped"] = "true"
		return prog, nil
	}
	for k, v := range res.metrics.asMap() {
		prog.Metrics[k] = v.(string)
	}
	return prog, nil
}

type batchResult struct {
	version  int64
	skipped  bool
	attempts int
	metrics  MergeMetrics
}

// commitBatch runs the optimistic loop: catch up, check the txn, plan the
// MERGE, try to publish the next version; on a lost race abandon the files
// and start again from the fresher snapshot.
func (m *MergeSink) commitBatch(ctx context.Context, batchID int64, rows *rowSet) (batchResult, error) {
	predicate := m.layout.predicate()
	s := m.snap
	for attempt := 1; attempt <= maxCommitAttempts; attempt++ {
		if _, err := s.refresh(ctx); err != nil {
			return batchResult{}, err
		}
		if err := checkWriteProtocol(s.Protocol, m.table.logDir); err != nil {
			return batchResult{}, err
		}
		if v, ok := s.Txn(m.queryID); ok && v >= batchID {
			m.log.Debug("delta batch already committed", "batch", batchID, "txnVersion", v, "tableVersion", s.Version)
			return batchResult{version: s.Version, skipped: true, attempts: attempt}, nil
		}
		if err := m.checkLiveFiles(s); err != nil {
			return batchResult{}, err
		}
		now := m.o.Clock()
		plan, err := s.planMerge(ctx, rows, mergeOptions{targetRows: m.o.TargetFileRows, now: now})
		if err != nil {
			return batchResult{}, err
		}
		if len(plan.removes) > 0 && s.Metadata.Configuration["delta.appendOnly"] == "true" {
			plan.abandon()
			return batchResult{}, errcode.New(CodeUnsupportedFeature, m.table.root, "unset delta.appendOnly to allow MERGE updates", "table is append-only but the MERGE updates rows")
		}
		readVersion := s.Version
		ts := now.UnixMilli()
		blind := false
		acts := []action{{CommitInfo: &CommitInfo{
			Timestamp: ts, Operation: "MERGE",
			OperationParameters: map[string]any{
				"predicate":                    predicate,
				"matchedPredicates":            matchedPredicates(plan.metrics.NumTargetRowsDeleted > 0),
				"notMatchedPredicates":         `[{"actionType":"insert"}]`,
				"notMatchedBySourcePredicates": `[]`,
			},
			ReadVersion: &readVersion, IsolationLevel: "Serializable", IsBlindAppend: &blind,
			OperationMetrics: plan.metrics.asMap(), EngineInfo: engineInfo(), TxnID: uuid.NewString(),
		}}, {Txn: &Txn{AppID: m.queryID, Version: batchID, LastUpdated: &ts}}}
		acts = append(acts, plan.removes...)
		acts = append(acts, plan.adds...)
		err = s.commitActions(acts, plan.written...)
		if errors.Is(err, errVersionTaken) {
			plan.abandon()
			m.log.Info("delta commit lost the race; retrying", "version", readVersion+1, "batch", batchID, "attempt", attempt)
			continue
		}
		if err != nil {
			if !errors.Is(err, errCommitUncertain) {
				plan.abandon()
			}
			return batchResult{}, err
		}
		if s.Version%CheckpointInterval == 0 {
			m.checkpointLater(s)
		}
		return batchResult{version: s.Version, attempts: attempt, metrics: plan.metrics}, nil
	}
	return batchResult{}, errcode.New(CodeCommitConflict, m.table.logDir, "stop the other writers of this table and re-run",
		"batch %d lost the commit race %d times", batchID, maxCommitAttempts)
}

// batchRows views the engine's columnar batch as rows of layout l.
func batchRows(l *outLayout, b *stream.Batch) (*rowSet, error) {
	if b == nil || b.Len == 0 {
		return newRowSet(l, 0), nil
	}
	if err := b.Validate(); err != nil {
		return nil, errcode.Wrap(err, CodeBadBatch, "", "this is a bug in the pipeline feeding the sink", "invalid batch")
	}
	return batchRowSet(l, b)
}

// errBadBatch: the batch lacks a column of the sink's schema.
func errBadBatch(col string, typ stream.Type) error {
	return errcode.New(CodeBadBatch, "", "the batch must match the schema the sink was opened with",
		"batch column %q is missing or not %s", col, typ)
}

// matchedPredicates is the commitInfo's WHEN MATCHED clauses: a batch that
// deletes rows shows the DELETE clause Spark records for
// "WHEN MATCHED AND s.sign = -1 THEN DELETE" ahead of the update.
func matchedPredicates(deletes bool) string {
	if deletes {
		return `[{"predicate":"(s.sign = -1)","actionType":"delete"},{"actionType":"update"}]`
	}
	return `[{"actionType":"update"}]`
}

// Close releases the cached snapshot.
func (m *MergeSink) Close() error {
	m.waitMaintenance()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.snap = nil
	return nil
}
