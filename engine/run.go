package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
	"github.com/google/uuid"
)

// minIdleWait bounds how often an idle processingTime query polls its
// sources (Spark's pollingDelay).
const minIdleWait = 10 * time.Millisecond

// OperatorID is the state directory of the query's single stateful operator:
// <ckpt>/state/0 (Spark numbers operators from 0).
const OperatorID = "0"

// RunSummary describes what one Run did. It is a plain value.
type RunSummary struct {
	QueryID string
	RunID   string
	// NewCheckpoint is true if this run created the query.
	NewCheckpoint bool
	// RerunBatchID is the pending batch re-run first, -1 if none.
	RerunBatchID int64
	// FirstBatchID and LastBatchID bound the batches committed by this run
	// (-1 if none).
	FirstBatchID, LastBatchID int64
	DataBatches               int
	NoDataBatches             int
	ControlBatches            int
	Warnings                  []string
	// Interrupted is true if the context ended the run between batches.
	Interrupted bool
}

type srcState struct {
	name, key string
	src       stream.Source
	current   json.RawMessage // end offset of the last planned batch
	nameBuf   []string        // the literal source column, reused
	open      bool
}

type runner struct {
	q        Query
	o        Options
	s        settings
	w        *checkpoint.Writer
	sp       *startPlan
	queryID  string
	runID    string
	proj     []string
	withSrc  bool
	srcs     []*srcState
	byKey    map[string]*srcState
	parts    int
	nextID   int64
	last     *checkpoint.OffsetEntry // newest entry, its offsets are "current"
	wm       int64                   // watermark for the next batch
	tombs    map[string]checkpoint.Tombstone
	newTombs map[string]checkpoint.Tombstone
	conf     map[string]string

	lastTrigger time.Time
	sum         RunSummary
	opOpen      bool
	sinkOpen    bool
}

// Run starts (or restarts) query q on the checkpoint in o and runs it under
// its trigger. Every refusal (source evolution rules, locks, corrupt files,
// an unresumable repartition, state another provider wrote) happens before
// anything is written or any source is opened, so a refused start leaves the
// checkpoint byte-identical and creates nothing, not even .lock (only a lock
// held by another query is found after taking it). On restart the uncommitted
// batch re-runs first with its recorded offsets, timestamp and watermark, then
// a requested repartition runs as a control batch, then new batches follow.
//
// A cancelled ctx between batches ends the run with Interrupted set and a nil
// error; inside a batch the batch is abandoned (the next start re-runs it) and
// the context's error is returned.
func Run(ctx context.Context, q Query, o Options) (sum *RunSummary, err error) {
	o = o.withDefaults()
	if err := q.validateShape(); err != nil {
		return nil, err
	}
	if o.CheckpointDir == "" {
		return nil, errcode.New(errcode.InvalidArgument, "", "pass --checkpoint DIR", "no checkpoint directory")
	}
	s, err := parseSettings(q.Conf)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(q.Sources))
	for i, ns := range q.Sources {
		names[i] = ns.Name
	}
	// Rules that need no checkpoint are checked before the directory is
	// created or locked.
	if err := validateNames(names, s); err != nil {
		return nil, err
	}
	// So are the rules a read of the checkpoint decides: Lock creates the
	// directory and .lock. The plan is made again under the lock.
	pre, err := checkpoint.Dir{FS: o.FS, Path: o.CheckpointDir}.ReadSnapshot()
	if err != nil {
		return nil, err
	}
	if _, err := planStart(pre, names, s); err != nil {
		return nil, err
	}
	w, err := checkpoint.Lock(o.FS, o.CheckpointDir)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, w.Close()) }()
	snap, err := w.ReadSnapshot()
	if err != nil {
		return nil, err
	}
	sp, err := planStart(snap, names, s)
	if err != nil {
		return nil, err
	}
	r := &runner{q: q, o: o, s: s, w: w, sp: sp, runID: uuid.NewString()}
	r.sum = RunSummary{RunID: r.runID, NewCheckpoint: sp.New, RerunBatchID: -1, FirstBatchID: -1, LastBatchID: -1, Warnings: sp.Warnings}
	for _, wmsg := range sp.Warnings {
		o.Logger.Warn(wmsg, "checkpoint", o.CheckpointDir)
	}
	// close releases whatever prepare opened, even if prepare failed midway.
	defer func() { err = errors.Join(err, r.close()) }()
	if err := r.prepare(ctx); err != nil {
		return &r.sum, err
	}
	if err := r.recover(ctx); err != nil {
		return &r.sum, err
	}
	err = r.loop(ctx)
	return &r.sum, err
}

// prepare writes what a validated start writes (directories, metadata) and
// opens the sink, the operator and the sources.
func (r *runner) prepare(ctx context.Context) error {
	if err := r.w.Prepare(); err != nil {
		return err
	}
	r.queryID = r.sp.QueryID
	if r.queryID == "" {
		r.queryID = uuid.NewString()
		if err := r.w.WriteMetadata(checkpoint.Metadata{ID: r.queryID}); err != nil {
			return fmt.Errorf("write query metadata: %w", err)
		}
	}
	r.sum.QueryID = r.queryID
	r.proj, r.withSrc = queryColumns(r.q.Columns)
	if wmk := r.q.Watermark; wmk != nil && !contains(r.proj, wmk.Column) {
		r.proj = append(r.proj, wmk.Column)
	}
	r.byKey = map[string]*srcState{}
	for i, ns := range r.q.Sources {
		st := &srcState{name: ns.Name, key: r.sp.Keys[i], src: ns.Source}
		r.srcs = append(r.srcs, st)
		r.byKey[st.key] = st
	}
	r.parts = r.sp.Partitions
	senv := stream.SinkEnv{QueryID: r.queryID}
	if so, ok := r.q.Operator.(stream.SchemaOperator); ok {
		senv.Schema = so.OutputSchema()
	}
	if err := r.q.Sink.Open(ctx, senv); err != nil {
		return fmt.Errorf("open sink %s: %w", r.q.Sink.Description(), err)
	}
	r.sinkOpen = true
	stateDir, err := r.w.StateDir(OperatorID)
	if err != nil {
		return err
	}
	env := stream.OperatorEnv{
		StateDir: stateDir, FS: r.o.FS, LocalDir: r.o.LocalDir,
		Partitions: r.parts, Version: r.sp.CommittedID, Logger: r.o.Logger,
	}
	if err := r.q.Operator.Open(ctx, env); err != nil {
		return fmt.Errorf("open operator: %w", err)
	}
	r.opOpen = true
	for _, st := range r.srcs {
		dir, err := r.w.SourceDir(st.key)
		if err != nil {
			return err
		}
		senv := stream.SourceEnv{Name: st.name, MetadataDir: dir, FS: r.o.FS, Columns: r.proj,
			Committed: r.sp.Committed[st.key], Clock: r.o.Clock, Logger: r.o.Logger.With("source", st.key)}
		if err := st.src.Open(ctx, senv); err != nil {
			return fmt.Errorf("open source %q (%s): %w", st.key, st.src.Description(), err)
		}
		st.open = true
		st.current = r.sp.Committed[st.key]
	}
	r.nextID = r.sp.NextID
	r.last = r.sp.Last
	r.wm = r.sp.Watermark
	r.tombs = r.sp.Tombstones
	r.newTombs = r.sp.NewTombstones
	r.conf = r.sp.Conf
	r.o.Logger.Info("query started", "queryId", r.queryID, "runId", r.runID, "checkpoint", r.o.CheckpointDir,
		"nextBatch", r.nextID, "statePartitions", r.parts)
	return nil
}

func (r *runner) close() error {
	var errs []error
	for _, st := range r.srcs {
		if st.open {
			errs = append(errs, st.src.Close())
		}
	}
	if r.opOpen {
		errs = append(errs, r.q.Operator.Close())
	}
	if r.sinkOpen {
		errs = append(errs, r.q.Sink.Close())
	}
	return errors.Join(errs...)
}

// recover re-runs the pending batch, then runs a requested repartition.
func (r *runner) recover(ctx context.Context) error {
	sp := r.sp
	if sp.Pending != nil {
		r.sum.RerunBatchID = sp.PendingID
		r.o.Logger.Info("re-running uncommitted batch", "batchId", sp.PendingID)
		if sp.PendingRepartitionTo > 0 {
			if err := r.repartition(ctx, sp.PendingID, sp.Pending, sp.Partitions, sp.PendingRepartitionTo, true); err != nil {
				return err
			}
		} else {
			for k, off := range sp.PendingStart {
				if st := r.byKey[k]; st != nil {
					st.current = off
				}
			}
			if err := r.runBatch(ctx, sp.PendingID, sp.Pending, true, r.o.Clock.Now(), 0, 0); err != nil {
				return err
			}
		}
	}
	if sp.RepartitionTo > 0 {
		if r.last == nil {
			return fmt.Errorf("repartition without a committed batch")
		}
		e := r.last.Clone()
		if err := r.repartition(ctx, r.nextID, e, r.parts, sp.RepartitionTo, false); err != nil {
			return err
		}
	}
	return nil
}

// loop runs batches under the trigger.
func (r *runner) loop(ctx context.Context) error {
	if r.q.Trigger.Kind == AvailableNow {
		for _, st := range r.srcs {
			if an, ok := st.src.(stream.AvailableNowSource); ok {
				if err := an.PrepareAvailableNow(ctx); err != nil {
					return fmt.Errorf("prepare source %q for availableNow: %w", st.key, err)
				}
			}
		}
	}
	for {
		if ctx.Err() != nil {
			r.sum.Interrupted = true
			return nil
		}
		if r.q.MaxDataBatches > 0 && r.sum.DataBatches >= r.q.MaxDataBatches {
			return nil
		}
		start := r.o.Clock.Now()
		ran, err := r.step(ctx, start)
		if err != nil {
			if ctx.Err() != nil {
				r.o.Logger.Warn("batch abandoned: stopped", "batchId", r.nextID, "err", err)
			}
			return err
		}
		switch r.q.Trigger.Kind {
		case Once:
			return nil
		case AvailableNow:
			if !ran {
				return nil
			}
		case ProcessingTime:
			wait := start.Add(r.q.Trigger.Interval).Sub(r.o.Clock.Now())
			if !ran && wait < minIdleWait {
				// Nothing to do: poll no faster than minIdleWait.
				wait = minIdleWait
			}
			if wait > 0 {
				if err := r.o.Clock.Sleep(ctx, wait); err != nil {
					r.sum.Interrupted = true
					return nil
				}
			}
		}
	}
}

// step plans the next batch and runs it; ran is false when there was
// nothing to do (no new data, no no-data batch needed).
func (r *runner) step(ctx context.Context, trigger time.Time) (ran bool, err error) {
	t0 := r.o.Clock.Now()
	latest := make(map[string]json.RawMessage, len(r.srcs))
	for _, st := range r.srcs {
		off, err := st.src.LatestOffset(ctx, st.current)
		if err != nil {
			return false, fmt.Errorf("latest offset of source %q: %w", st.key, err)
		}
		if off != nil {
			if off, err = compactOffset(off); err != nil {
				return false, fmt.Errorf("source %q returned an invalid offset: %w", st.key, err)
			}
		}
		latest[st.key] = off
	}
	t1 := r.o.Clock.Now()
	latestDur := t1.Sub(t0)
	e, kind := r.planNext(latest, trigger.UnixMilli())
	if e == nil {
		return false, nil
	}
	planDur := r.o.Clock.Now().Sub(t1)
	r.o.Logger.Debug("planned batch", "batchId", r.nextID, "kind", kind)
	if err := r.runBatch(ctx, r.nextID, e, false, trigger, latestDur, planDur); err != nil {
		return false, err
	}
	return true, nil
}

func compactOffset(off json.RawMessage) (json.RawMessage, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, off); err != nil {
		return nil, err
	}
	if b.String() == "null" {
		return nil, nil
	}
	return b.Bytes(), nil
}

// planNext is the pure per-trigger decision: a data batch if some source has
// new data, else a no-data batch if enabled and the watermark moved past the
// last batch's and the operator has something to evict or emit, else nothing.
func (r *runner) planNext(latest map[string]json.RawMessage, nowMs int64) (*checkpoint.OffsetEntry, string) {
	data := false
	for _, st := range r.srcs {
		if !bytes.Equal(latest[st.key], st.current) {
			data = true
		}
	}
	kind := stream.KindData
	if !data {
		lastWM := int64(0)
		if r.last != nil {
			lastWM = r.last.Metadata.BatchWatermarkMs
		}
		if !r.s.noDataBatches || r.last == nil || r.wm <= lastWM || !r.q.Operator.NeedsNoDataBatch(r.wm) {
			return nil, ""
		}
		kind = stream.KindNoData
	}
	return r.newEntry(latest, nowMs), kind
}

// newEntry builds offsets/<nextID> from the sources' end offsets.
func (r *runner) newEntry(ends map[string]json.RawMessage, nowMs int64) *checkpoint.OffsetEntry {
	e := &checkpoint.OffsetEntry{Version: r.sp.Version, Metadata: checkpoint.OffsetMetadata{
		BatchWatermarkMs: r.wm, BatchTimestampMs: nowMs, Conf: cloneConf(r.conf),
	}}
	if e.Version == checkpoint.OffsetsV2 {
		e.Metadata.SourceMetadataInfo = map[string]checkpoint.SourceMetadata{}
		for k, t := range r.tombs {
			if e.Metadata.Tombstones == nil {
				e.Metadata.Tombstones = map[string]checkpoint.Tombstone{}
			}
			e.Metadata.Tombstones[k] = t
		}
		for k, t := range r.newTombs {
			if e.Metadata.Tombstones == nil {
				e.Metadata.Tombstones = map[string]checkpoint.Tombstone{}
			}
			t.RemovedInBatch = r.nextID
			e.Metadata.Tombstones[k] = t
		}
	}
	for _, st := range r.srcs {
		e.Sources = append(e.Sources, checkpoint.SourceOffset{Key: st.key, Offset: ends[st.key]})
		if e.Version == checkpoint.OffsetsV2 {
			e.Metadata.SourceMetadataInfo[st.key] = checkpoint.SourceMetadata{
				SourceID: st.key, ProviderName: providerName(st.src.Description()), APIVersion: "1"}
		}
	}
	return e
}

func cloneConf(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// eventStats accumulates the watermark column's min/max/sum in µs.
type eventStats struct {
	n        int64
	min, max int64
	sumMs    float64 // float: an int64 sum of ms timestamps overflows past ~5M rows
}

func (s *eventStats) add(c *stream.Column) {
	for i, v := range c.Int64s {
		if c.IsNull(i) {
			continue
		}
		if s.n == 0 || v < s.min {
			s.min = v
		}
		if s.n == 0 || v > s.max {
			s.max = v
		}
		s.sumMs += float64(v / 1000)
		s.n++
	}
}

// runBatch executes batch id described by entry e: WAL (unless re-run),
// read, process, sink, state commit, commit log, source commits, progress.
// Any failure aborts the operator's batch and leaves it pending.
func (r *runner) runBatch(ctx context.Context, id int64, e *checkpoint.OffsetEntry, rerun bool, trigger time.Time, latestDur, planDur time.Duration) (err error) {
	clk := r.o.Clock
	dur := map[string]int64{stream.DurLatestOffset: latestDur.Milliseconds(), stream.DurQueryPlanning: planDur.Milliseconds()}
	t := clk.Now()
	if !rerun {
		if err := r.w.WriteOffsets(id, e); err != nil {
			if errors.Is(err, checkpoint.ErrExists) {
				return errcode.Wrap(err, errcode.CheckpointLocked, r.w.Path, "make sure only one query uses this checkpoint",
					"concurrent update to the offsets log: batch %d was written by another writer", id)
			}
			return fmt.Errorf("write offsets for batch %d: %w", id, err)
		}
		if _, err := r.w.Purge(id, r.s.minRetain); err != nil {
			return err
		}
	}
	dur[stream.DurWalCommit] = clk.Now().Sub(t).Milliseconds()
	if err := r.o.hook("after-offsets"); err != nil {
		return err
	}
	op := r.q.Operator
	defer func() {
		if err != nil {
			op.Abort()
		}
	}()
	wm := e.Metadata.BatchWatermarkMs
	tAdd := clk.Now()
	var getBatch time.Duration
	var ev eventStats
	var total int64
	sp := make([]stream.SourceProgress, 0, len(e.Sources))
	for _, so := range e.Sources {
		st := r.byKey[so.Key]
		if st == nil {
			// planStart guarantees a pending batch's sources exist.
			panic(fmt.Sprintf("batch %d needs source %q that the query lacks", id, so.Key))
		}
		start, end := st.current, so.Offset
		var rows int64
		if !bytes.Equal(start, end) {
			readStart := clk.Now()
			var inEmit time.Duration
			err := st.src.ReadBatch(ctx, start, end, func(b *stream.Batch) error {
				t0 := clk.Now()
				defer func() { inEmit += clk.Now().Sub(t0) }()
				rows += int64(b.Len)
				if r.q.Watermark != nil {
					if c := b.Column(r.q.Watermark.Column); c != nil {
						ev.add(c)
					}
				}
				if r.withSrc {
					b = st.withSourceColumn(b)
				}
				return op.Process(ctx, id, wm, b)
			})
			if err != nil {
				return fmt.Errorf("batch %d: read source %q: %w", id, so.Key, err)
			}
			getBatch += clk.Now().Sub(readStart) - inEmit
		}
		total += rows
		p := stream.SourceProgress{Description: st.src.Description(), Name: strPtr(st.name),
			StartOffset: start, EndOffset: end, LatestOffset: end, NumInputRows: rows}
		if rs, ok := st.src.(stream.ReportingSource); ok {
			p.LatestOffset = rs.ReportLatestOffset()
			p.Metrics = rs.Metrics()
		}
		sp = append(sp, p)
	}
	out, opProg, err := op.Finish(ctx, id, wm)
	if err != nil {
		return fmt.Errorf("batch %d: finish operator: %w", id, err)
	}
	if err := r.o.hook("before-sink"); err != nil {
		return err
	}
	if out == nil {
		out = &stream.Batch{}
	}
	sinkProg, err := r.q.Sink.AddBatch(ctx, id, out)
	if err != nil {
		return fmt.Errorf("batch %d: sink %s: %w", id, r.q.Sink.Description(), err)
	}
	if err := op.Commit(ctx, id); err != nil {
		return fmt.Errorf("batch %d: commit state: %w", id, err)
	}
	// Commit time and memory are known only now; an operator that can say so
	// replaces what Finish reported.
	if pr, ok := op.(stream.ProgressReporter); ok {
		opProg = pr.Progress()
	}
	dur[stream.DurAddBatch] = clk.Now().Sub(tAdd).Milliseconds()
	dur[stream.DurGetBatch] = getBatch.Milliseconds()
	if err := r.o.hook("after-state-commit"); err != nil {
		return err
	}
	next := wm
	if r.q.Watermark != nil && ev.n > 0 {
		if cand := ev.max/1000 - r.q.Watermark.Delay.Milliseconds(); cand > next {
			next = cand
		}
	}
	tc := clk.Now()
	if err := r.w.WriteCommit(id, &checkpoint.CommitEntry{NextBatchWatermarkMs: next}); err != nil {
		return fmt.Errorf("write commit for batch %d: %w", id, err)
	}
	for _, so := range e.Sources {
		if so.Offset != nil {
			if err := r.byKey[so.Key].src.Commit(ctx, so.Offset); err != nil {
				return fmt.Errorf("batch %d: commit source %q: %w", id, so.Key, err)
			}
		}
	}
	dur[stream.DurCommitOffsets] = clk.Now().Sub(tc).Milliseconds()
	if err := r.o.hook("after-commit"); err != nil {
		return err
	}
	// The batch is committed: advance the loop state.
	for _, so := range e.Sources {
		r.byKey[so.Key].current = so.Offset
	}
	kind := stream.KindData
	if total == 0 {
		kind = stream.KindNoData
		for _, p := range sp {
			if !bytes.Equal(p.StartOffset, p.EndOffset) {
				kind = stream.KindData
			}
		}
	}
	r.finishBatch(id, e, next, kind)
	end := clk.Now()
	dur[stream.DurTriggerExecution] = end.Sub(trigger).Milliseconds()
	if opProg.NumShufflePartitions == 0 {
		opProg.NumShufflePartitions = int64(r.parts)
	}
	p := r.progress(id, trigger, end, dur, total)
	p.StateOperators = []stream.OperatorProgress{opProg}
	p.Sources = sp
	for i := range p.Sources {
		p.Sources[i].InputRowsPerSecond = inputRate(p.Sources[i].NumInputRows, r.lastTrigger, trigger)
		p.Sources[i].ProcessedRowsPerSecond = rate(p.Sources[i].NumInputRows, end.Sub(trigger))
	}
	p.InputRowsPerSecond = inputRate(total, r.lastTrigger, trigger)
	p.ProcessedRowsPerSecond = rate(total, end.Sub(trigger))
	p.EventTime = map[string]string{}
	if ev.n > 0 {
		p.EventTime["min"] = isoTime(ev.min / 1000)
		p.EventTime["max"] = isoTime(ev.max / 1000)
		p.EventTime["avg"] = isoTime(int64(ev.sumMs / float64(ev.n)))
	}
	if r.q.Watermark != nil {
		p.EventTime["watermark"] = isoTime(wm)
	}
	p.Sink = sinkProg
	if p.Sink.Description == "" {
		p.Sink.Description = r.q.Sink.Description()
	}
	r.lastTrigger = trigger
	switch kind {
	case stream.KindData:
		r.sum.DataBatches++
	default:
		r.sum.NoDataBatches++
	}
	return r.emit(p)
}

// finishBatch advances the loop state after batch id committed.
func (r *runner) finishBatch(id int64, e *checkpoint.OffsetEntry, nextWM int64, kind string) {
	r.last = e
	r.wm = nextWM
	if id >= r.nextID {
		r.nextID = id + 1
	}
	if e.Metadata.Tombstones != nil {
		r.tombs = e.Metadata.Tombstones
		for k := range r.tombs {
			delete(r.newTombs, k)
		}
	}
	if r.sum.FirstBatchID < 0 {
		r.sum.FirstBatchID = id
	}
	r.sum.LastBatchID = id
	r.o.Logger.Info("batch committed", "batchId", id, "kind", kind, "watermarkMs", nextWM)
}

func inputRate(n int64, last, now time.Time) *float64 {
	if last.IsZero() {
		return nil
	}
	return rate(n, now.Sub(last))
}

func (r *runner) progress(id int64, trigger, end time.Time, dur map[string]int64, rows int64) *stream.Progress {
	return &stream.Progress{
		ID: r.queryID, RunID: r.runID, Name: strPtr(r.q.Name), Timestamp: isoTime(trigger.UnixMilli()),
		BatchID: id, BatchDuration: end.Sub(trigger).Milliseconds(), NumInputRows: rows, DurationMs: dur,
		StateOperators: []stream.OperatorProgress{}, Sources: []stream.SourceProgress{},
	}
}

// emit appends the event to progress.jsonl and hands it to the listeners.
func (r *runner) emit(p *stream.Progress) error {
	line, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode progress of batch %d: %w", p.BatchID, err)
	}
	if err := r.w.AppendProgress(line); err != nil {
		// Progress is informational: the batch is committed already.
		r.o.Logger.Warn("cannot append progress", "err", err)
	}
	for _, l := range r.o.Listeners {
		l.OnProgress(p)
	}
	return nil
}

// withSourceColumn returns b plus the literal source column.
func (st *srcState) withSourceColumn(b *stream.Batch) *stream.Batch {
	if len(st.nameBuf) < b.Len {
		n := b.Len
		if n < 2*len(st.nameBuf) {
			n = 2 * len(st.nameBuf)
		}
		st.nameBuf = make([]string, n)
		for i := range st.nameBuf {
			st.nameBuf[i] = st.name
		}
	}
	cols := make([]stream.Column, len(b.Columns), len(b.Columns)+1)
	copy(cols, b.Columns)
	cols = append(cols, stream.Column{Name: stream.ColSource, Type: stream.String, Strings: st.nameBuf[:b.Len]})
	return &stream.Batch{Len: b.Len, Columns: cols, Signs: b.Signs}
}

// repartition runs control batch id: offsets/id (a copy of the last
// committed entry with controlBatchInfo and the new partition count), the
// operator's repartition from the last committed version, commits/id last.
func (r *runner) repartition(ctx context.Context, id int64, base *checkpoint.OffsetEntry, from, to int, redo bool) error {
	clk := r.o.Clock
	trigger := clk.Now()
	dur := map[string]int64{}
	e := base
	if !redo {
		e = controlEntry(base, from, to)
		t := clk.Now()
		if err := r.w.WriteOffsets(id, e); err != nil {
			return fmt.Errorf("write offsets for repartition batch %d: %w", id, err)
		}
		dur[stream.DurWalCommit] = clk.Now().Sub(t).Milliseconds()
		if _, err := r.w.Purge(id, r.s.minRetain); err != nil {
			return err
		}
	}
	if err := r.o.hook("after-offsets"); err != nil {
		return err
	}
	baseVersion := id - 1
	r.o.Logger.Info("repartitioning state", "batchId", id, "from", from, "to", to)
	t := clk.Now()
	stats, err := r.q.Operator.Repartition(ctx, baseVersion, id, to)
	if err != nil {
		return fmt.Errorf("repartition batch %d (%d -> %d partitions): %w", id, from, to, err)
	}
	dur[stream.DurRepartition] = clk.Now().Sub(t).Milliseconds()
	if err := r.o.hook("after-state-commit"); err != nil {
		return err
	}
	// The control batch does not move the watermark: copy commit C.
	tc := clk.Now()
	if err := r.w.WriteCommit(id, &checkpoint.CommitEntry{NextBatchWatermarkMs: r.wm}); err != nil {
		return fmt.Errorf("write commit for repartition batch %d: %w", id, err)
	}
	dur[stream.DurCommitOffsets] = clk.Now().Sub(tc).Milliseconds()
	r.parts = to
	r.conf[checkpoint.ConfShufflePartitions] = strconv.Itoa(to)
	r.finishBatch(id, e, r.wm, stream.KindRepartition)
	r.sum.ControlBatches++
	end := clk.Now()
	dur[stream.DurTriggerExecution] = end.Sub(trigger).Milliseconds()
	p := r.progress(id, trigger, end, dur, 0)
	p.StateOperators = []stream.OperatorProgress{{
		OperatorName: "repartition", NumRowsTotal: stats.KeysAfter, NumShufflePartitions: int64(to),
		NumStateStoreInstances: int64(to),
		CustomMetrics: map[string]int64{"keysBefore": stats.KeysBefore, "keysAfter": stats.KeysAfter,
			"partitionsBefore": int64(from), "bytesRead": stats.BytesRead, "bytesWritten": stats.BytesWritten},
	}}
	for _, so := range e.Sources {
		st := r.byKey[so.Key]
		desc, name := "", strPtr(so.Key)
		if st != nil {
			desc, name = st.src.Description(), strPtr(st.name)
		}
		p.Sources = append(p.Sources, stream.SourceProgress{Description: desc, Name: name,
			StartOffset: so.Offset, EndOffset: so.Offset, LatestOffset: so.Offset})
	}
	if r.q.Watermark != nil {
		p.EventTime = map[string]string{"watermark": isoTime(e.Metadata.BatchWatermarkMs)}
	}
	p.Sink = stream.SinkProgress{Description: r.q.Sink.Description(), NumOutputRows: 0}
	return r.emit(p)
}

// controlEntry copies base (offsets, watermark, timestamp, tombstones) as a
// REPARTITION control batch to n partitions.
func controlEntry(base *checkpoint.OffsetEntry, from, to int) *checkpoint.OffsetEntry {
	e := base.Clone()
	e.Metadata.Conf[checkpoint.ConfShufflePartitions] = strconv.Itoa(to)
	e.Metadata.ControlBatchInfo = &checkpoint.ControlBatchInfo{OperationType: checkpoint.OpRepartition,
		OperationInfo: map[string]string{"from": strconv.Itoa(from), "to": strconv.Itoa(to)}}
	return e
}
