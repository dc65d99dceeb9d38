package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/shape"
	"github.com/ethstream/ethstream/stream"
	"github.com/google/uuid"
)

// minIdleWait bounds how often an idle processingTime query polls its
// sources (Spark's pollingDelay).
const minIdleWait = 10 * time.Millisecond

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

// run is one start of a query: the plan of the start, the loop state the
// planner reads, and the driver that performs the plans.
type run struct {
	q   Query
	sp  *startPlan
	c   planConf
	st  loopState
	d   *driver
	sum RunSummary
}

// Run starts (or restarts) query q on the checkpoint in o and runs it under
// its trigger. Every refusal (source evolution rules, locks, corrupt files,
// an unresumable repartition, state another provider wrote, partition
// counts, unreachable sources, an unusable sink) happens before anything is
// written, created or opened (checkStart), so a refused start leaves the
// checkpoint byte-identical and creates nothing, not even .lock (only a lock
// held by another query is found after taking it). On restart the uncommitted
// batch re-runs first with its recorded offsets, timestamp and watermark, then
// a requested repartition runs as a control batch, then new batches follow.
//
// A cancelled ctx between batches, or while the sources are polled for the
// next one (nothing of it is written yet), ends the run with Interrupted set
// and a nil error; inside a batch the batch is abandoned (the next start
// re-runs it) and the context's error is returned.
func Run(ctx context.Context, q Query, o Options) (sum *RunSummary, err error) {
	o = o.withDefaults()
	if err := q.validateShape(); err != nil {
		return nil, err
	}
	if o.CheckpointDir == "" {
		return nil, errcode.New(errcode.InvalidArgument, "", "pass --checkpoint DIR", "no checkpoint directory")
	}
	// Everything a start depends on is validated before the first write:
	// Lock creates the directory and .lock. The plan is made again under the
	// lock.
	chk, err := checkStart(ctx, q, o.FS, o.CheckpointDir)
	if err != nil {
		if chk != nil && chk.snap != nil && writtenSince(o.FS, o.CheckpointDir, chk.snap) {
			return nil, errcode.New(errcode.CheckpointLocked, o.CheckpointDir,
				"stop the other query using this checkpoint, or use another checkpoint directory",
				"another query is writing the checkpoint (its logs moved while this start read them)")
		}
		return nil, err
	}
	s, names := chk.s, q.sourceNames()
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
	pinWatermarkPolicy(sp, s, q.multiWatermark())
	rec, err := shape.ReadLatest(o.FS, o.CheckpointDir)
	if err != nil {
		return nil, err
	}
	sd, err := decideShape(o.CheckpointDir, rec, q.Shape, sp, s.evolution, chk.seen, chk.moved)
	if err != nil {
		return nil, err
	}
	sp.Warnings = append(sp.Warnings, sd.Warnings...)
	logSinkMoved(o, sd)
	d := &driver{o: o, w: w, q: &q, sink: q.Sink, runID: uuid.NewString(), trace: o.trace, shape: sd, minRetain: s.minRetain}
	d.ops, d.post, d.sidePost = planOps(&q, numberingOf(rec, q.Shape, snap.Latest != nil))
	r := newRun(q, sp, s, d)
	for _, wmsg := range sp.Warnings {
		o.Logger.Warn(wmsg, "checkpoint", o.CheckpointDir)
	}
	// close releases whatever open opened, even if open failed midway.
	defer func() { err = errors.Join(err, r.d.close()) }()
	if err := r.d.open(ctx, sp); err != nil {
		return &r.sum, err
	}
	r.sum.QueryID = r.d.queryID
	logStart(o.Logger, o.CheckpointDir, r.d.queryID, r.d.runID, sp, r.st.NextID, r.st.Partitions)
	if err := r.recover(ctx); err != nil {
		return &r.sum, err
	}
	err = r.loop(ctx)
	return &r.sum, err
}

func newRun(q Query, sp *startPlan, s settings, d *driver) *run {
	r := &run{q: q, sp: sp, d: d, st: initialState(sp)}
	r.c = planConf{Version: sp.Version, Keys: sp.Keys, NoData: s.noDataBatches, MinRetain: s.minRetain, Progress: true}
	r.c.Prepare = canPrepare(q.operators())
	r.c.Operators = len(q.operators())
	r.c.Stateless = r.c.Operators == 0
	for _, ns := range q.Sources {
		desc := ""
		if ns.Source != nil {
			desc = ns.Source.Description()
		}
		r.c.Providers = append(r.c.Providers, providerName(desc))
	}
	r.sum = RunSummary{RunID: d.runID, NewCheckpoint: sp.New, RerunBatchID: -1, FirstBatchID: -1, LastBatchID: -1, Warnings: sp.Warnings}
	return r
}

// recover runs what the start plan puts before new batches: the pending
// batch, then a requested repartition.
func (r *run) recover(ctx context.Context) error {
	for phase := startPending; phase <= startRepartition; phase++ {
		p, err := recoveryPlan(r.c, r.sp, r.st, phase)
		if err != nil {
			return err
		}
		if p == nil {
			continue
		}
		if phase == startPending {
			r.sum.RerunBatchID = p.ID
			r.d.o.Logger.Info("re-running uncommitted batch", "batchId", p.ID)
		}
		if err := r.perform(ctx, p, r.d.o.Clock.Now(), preDurations{}); err != nil {
			return err
		}
	}
	return nil
}

// perform has the driver run plan p, then advances the loop state.
func (r *run) perform(ctx context.Context, p *batchPlan, trigger time.Time, pre preDurations) error {
	res, err := r.d.exec(ctx, p, trigger, pre)
	if err != nil {
		return err
	}
	r.st = advance(r.st, p, res.NextWatermark)
	if res.sideMarks != nil {
		r.d.sideMarks = res.sideMarks
	}
	switch p.Kind {
	case stream.KindData:
		r.sum.DataBatches++
	case stream.KindNoData:
		r.sum.NoDataBatches++
	default:
		r.sum.ControlBatches++
	}
	if r.sum.FirstBatchID < 0 {
		r.sum.FirstBatchID = p.ID
	}
	r.sum.LastBatchID = p.ID
	// The CLI logs each batch from its progress event (pipeline.LogBatches),
	// one line in one format; this is for debugging the loop.
	r.d.o.Logger.Debug("batch committed", "batchId", p.ID, "kind", p.Kind, "watermarkMs", res.NextWatermark)
	return nil
}

// loop runs batches under the trigger.
func (r *run) loop(ctx context.Context) error {
	o := r.d.o
	if r.q.Trigger.Kind == AvailableNow {
		if err := r.d.prepareAvailableNow(ctx); err != nil {
			return err
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
		start := o.Clock.Now()
		ran, err := r.trigger(ctx, start)
		if errors.Is(err, errStoppedPolling) {
			r.sum.Interrupted = true
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				o.Logger.Warn("batch abandoned: stopped", "batchId", r.st.NextID, "err", err)
			}
			return err
		}
		stop, wait := afterTrigger(r.q.Trigger, ran, start, o.Clock.Now)
		if stop {
			return nil
		}
		if r.q.Trigger.Kind == RealTime && wait > 0 {
			if err := r.waitForData(ctx, wait); err != nil {
				r.sum.Interrupted = true
				return nil
			}
			continue
		}
		if wait > 0 {
			if err := o.Clock.Sleep(ctx, wait); err != nil {
				r.sum.Interrupted = true
				return nil
			}
		}
	}
}

// afterTrigger decides, after a trigger that ran a batch or not, whether the
// run ends and how long to wait before the next trigger.
// now is read only for processingTime (the others do not wait).
func afterTrigger(t Trigger, ran bool, start time.Time, now func() time.Time) (stop bool, wait time.Duration) {
	switch t.Kind {
	case Once:
		return true, 0
	case AvailableNow:
		return !ran, 0
	case RealTime:
		return false, realTimeWait(t, ran)
	}
	wait = start.Add(t.Interval).Sub(now())
	if !ran && wait < minIdleWait {
		// Nothing to do: poll no faster than minIdleWait.
		wait = minIdleWait
	}
	return false, wait
}

// errStoppedPolling is a cancel that stopped the sources' poll for the next
// batch (a real-time trigger polls at once when a head arrives, so a SIGINT
// often lands there): no batch began, so it is an interruption, not a failure.
var errStoppedPolling = errors.New("stopped while polling the sources")

// trigger plans the next batch, obtaining what the planner asks for, and
// runs it; ran is false when there was nothing to do.
func (r *run) trigger(ctx context.Context, start time.Time) (ran bool, err error) {
	clk := r.d.o.Clock
	v := batchView{loopState: r.st, NowMs: start.UnixMilli()}
	var latestDur time.Duration
	var t1 time.Time // end of the poll: planning starts
	dec := planNext(r.c, v)
	for dec.Need != needNothing {
		switch dec.Need {
		case needLatest:
			t0 := clk.Now()
			// Polled while the last batch finished, or now.
			latest, ok, err := r.d.takeLatest(r.st.Current)
			if !ok {
				latest, err = r.d.latestOffsets(ctx, r.c.Keys, r.st.Current)
			}
			if err != nil {
				if ctx.Err() != nil {
					return false, errStoppedPolling
				}
				return false, err
			}
			v.Latest = latest
			t1 = clk.Now()
			latestDur = t1.Sub(t0)
		case needProbe:
			needs, err := r.d.needsNoData(v.Watermark, v.Last.Metadata.BatchWatermarkMs)
			if err != nil {
				return false, fmt.Errorf("batch %d: ask the operator for a no-data batch at watermark %d: %w", v.NextID, v.Watermark, err)
			}
			v.NeedsNoData = &needs
		}
		dec = planNext(r.c, v)
	}
	if dec.Plan == nil {
		return false, nil
	}
	planDur := clk.Now().Sub(t1)
	// Under availableNow the sources' ends are fixed, so the next batch's
	// input may be read while this one finishes (readahead.go), unless
	// --max-batches ends the run with this one.
	r.d.aheadOn = r.q.Trigger.Kind == AvailableNow &&
		(r.q.MaxDataBatches == 0 || r.sum.DataBatches+1 < r.q.MaxDataBatches)
	r.d.aheadKeys, r.d.aheadFrom = r.c.Keys, r.st.Current
	r.d.o.Logger.Debug("planned batch", "batchId", dec.Plan.ID, "kind", dec.Plan.Kind)
	return true, r.perform(ctx, dec.Plan, start, preDurations{latest: latestDur, planning: planDur})
}

// logStart logs what the start does: the batch it runs first (a pending
// batch re-runs before the next new one, and the line says so), then one line
// per source: added (from its configured start), resumed (from its committed
// offset) or tombstoned (its last offset kept in the log).
func logStart(l *slog.Logger, ckpt, queryID, runID string, sp *startPlan, next int64, parts int) {
	first := []any{"nextBatch", next}
	if sp.Pending != nil {
		first = []any{"rerunBatch", sp.PendingID, "nextBatch", next}
	}
	l.Info("query started", append(append([]any{"queryId", queryID, "runId", runID, "checkpoint", ckpt}, first...), "statePartitions", parts)...)
	for _, k := range sp.Added {
		l.Info("source added", "source", k, "from", "its configured start")
	}
	for _, k := range sp.Resumed {
		from := "its recorded offset"
		if o := sp.Committed[k]; o != nil {
			from = string(o)
		}
		l.Info("source resumed", "source", k, "from", from)
	}
	for _, k := range slices.Sorted(maps.Keys(sp.NewTombstones)) {
		l.Info("source tombstoned", "source", k, "lastOffset", string(sp.NewTombstones[k].LastOffset))
	}
}
