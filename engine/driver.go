package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// The driver performs a batchPlan's steps against the checkpoint, the
// sources, the operator and the sink, and reports what it saw (rows, event
// times, the commit watermark) back as a batchResult. It decides nothing:
// which batch, which ranges, whether to write offsets or re-use them, all
// come from the plan. The same driver runs a query (Run), a stopped query's
// repartition (RepartitionOffline) and, with dry set, `plan`.

// srcState is one opened source of the query.
type srcState struct {
	name, key string
	src       stream.Source
	nameBuf   []string // the literal source column, reused
	open      bool
}

type driver struct {
	o  Options
	w  *checkpoint.Writer
	op stream.Operator
	// q, sink and byKey are nil offline (a control batch reads no source and
	// writes no sink).
	q       *Query
	sink    stream.Sink
	byKey   map[string]*srcState
	order   []*srcState // query order
	withSrc bool
	// shape is the restart rules' decision; open records the shape if asked.
	shape *shapeDecision
	// minRetain is minBatchesToRetain, handed to the sources that prune
	// their own logs.
	minRetain int
	// opOpen and sinkOpen say what close must close.
	opOpen, sinkOpen bool

	queryID, runID string
	lastTrigger    time.Time
	// dry records the steps instead of performing them (`plan`).
	dry bool
	// trace, if set, receives each plan just before it is performed.
	trace func(p *batchPlan)
}

// batchResult is what the driver reports back after a batch committed.
type batchResult struct {
	NextWatermark int64
	Rows          int64
	Repartition   stream.RepartitionStats
}

// batchRun accumulates one batch's intermediate values and timings.
type batchRun struct {
	p        *batchPlan
	trigger  time.Time
	dur      map[string]int64
	t        time.Time // start of the current phase
	tAdd     time.Time
	getBatch time.Duration
	ev       eventStats
	rows     []int64 // per range of the plan
	total    int64
	out      *stream.Batch
	opProg   stream.OperatorProgress
	sinkProg stream.SinkProgress
	srcProg  []stream.SourceProgress
	res      batchResult
	walDone  bool
}

// preDurations are the trigger's durations before the batch started:
// latestOffset and queryPlanning, reported by every data and no-data batch
// (0 for a re-run, which polls and plans nothing).
type preDurations struct{ latest, planning time.Duration }

// exec performs plan p. Any failure of a data batch aborts the operator's
// batch and leaves p.ID pending.
func (d *driver) exec(ctx context.Context, p *batchPlan, trigger time.Time, pre preDurations) (res batchResult, err error) {
	if d.trace != nil {
		d.trace(p)
	}
	if d.dry {
		return batchResult{NextWatermark: d.dryWatermark(p)}, nil
	}
	clk := d.o.Clock
	b := &batchRun{p: p, trigger: trigger, dur: map[string]int64{}, res: batchResult{NextWatermark: p.CommitWatermark}}
	if p.reportsWAL() {
		b.t = clk.Now()
	}
	if p.Kind != stream.KindRepartition {
		b.dur[stream.DurLatestOffset] = pre.latest.Milliseconds()
		b.dur[stream.DurQueryPlanning] = pre.planning.Milliseconds()
		b.rows = make([]int64, len(p.Ranges))
		defer func() {
			if err != nil {
				d.op.Abort()
			}
		}()
	}
	for _, s := range p.Steps {
		if !b.walDone && s.Op > opPurge {
			if err := d.endWAL(b); err != nil {
				return res, err
			}
		}
		if err := d.do(ctx, b, s); err != nil {
			return res, err
		}
	}
	return b.res, nil
}

// dryWatermark is the commit watermark a dry run assumes: the rows a re-run
// would read are unknown, so the batch's own.
func (d *driver) dryWatermark(p *batchPlan) int64 {
	if p.Kind == stream.KindRepartition {
		return p.CommitWatermark
	}
	return p.Entry.Metadata.BatchWatermarkMs
}

// endWAL closes the offsets phase (walCommit), crash point after-offsets.
func (d *driver) endWAL(b *batchRun) error {
	b.walDone = true
	if b.p.reportsWAL() {
		b.dur[stream.DurWalCommit] = d.o.Clock.Now().Sub(b.t).Milliseconds()
	}
	if err := d.o.hook("after-offsets"); err != nil {
		return err
	}
	if b.p.Kind != stream.KindRepartition {
		b.tAdd = d.o.Clock.Now()
	}
	return nil
}

// do performs one step.
func (d *driver) do(ctx context.Context, b *batchRun, s step) error {
	clk, p := d.o.Clock, b.p
	switch s.Op {
	case opWriteOffsets:
		if err := d.w.WriteOffsets(s.Batch, p.Entry); err != nil {
			if errors.Is(err, checkpoint.ErrExists) {
				return errcode.Wrap(err, errcode.CheckpointLocked, d.w.Path, "make sure only one query uses this checkpoint",
					"concurrent update to the offsets log: batch %d was written by another writer", s.Batch)
			}
			return fmt.Errorf("write offsets for batch %d: %w", s.Batch, err)
		}
	case opReuseOffsets:
	case opPurge:
		if _, err := d.w.Purge(s.Batch, int(s.Batch-s.Below)); err != nil {
			return err
		}
	case opRead:
		return d.read(ctx, b, s)
	case opFinish:
		b.srcProg = d.sourceProgress(b)
		if la, ok := d.op.(stream.WatermarkLookahead); ok {
			// The input is read: the commit watermark is known now.
			la.NextWatermark(s.Batch, nextWatermark(p.Entry.Metadata.BatchWatermarkMs, d.q.Watermark, b.ev))
		}
		out, opProg, err := d.op.Finish(ctx, s.Batch, p.Entry.Metadata.BatchWatermarkMs)
		if err != nil {
			return fmt.Errorf("batch %d: finish operator: %w", s.Batch, err)
		}
		if out == nil {
			out = &stream.Batch{}
		}
		b.out, b.opProg = out, opProg
		return d.o.hook("before-sink")
	case opWriteSink:
		if s.Overlap {
			return d.writeSinkPreparing(ctx, b, s)
		}
		sp, err := d.sink.AddBatch(ctx, s.Batch, b.out)
		if err != nil {
			return fmt.Errorf("batch %d: sink %s: %w", s.Batch, d.sink.Description(), err)
		}
		b.sinkProg = sp
		return d.o.hook("after-sink")
	case opCommitState:
		if err := d.op.Commit(ctx, s.Batch); err != nil {
			return fmt.Errorf("batch %d: commit state: %w", s.Batch, err)
		}
		// Commit time and memory are known only now; an operator that can
		// say so replaces what Finish reported.
		if pr, ok := d.op.(stream.ProgressReporter); ok {
			b.opProg = pr.Progress()
		}
		// Reading streams into the operator, so the two overlap in time:
		// addBatch is the wall time of read, process, sink and state commit
		// minus getBatch (the time inside the sources), and the phases sum
		// to at most triggerExecution, as Spark's do.
		b.dur[stream.DurAddBatch] = (clk.Now().Sub(b.tAdd) - b.getBatch).Milliseconds()
		b.dur[stream.DurGetBatch] = b.getBatch.Milliseconds()
		return d.o.hook("after-state-commit")
	case opRepartitionState:
		d.o.Logger.Info("repartitioning state", "batchId", s.Batch, "from", s.From, "to", s.To)
		t := clk.Now()
		stats, err := d.op.Repartition(ctx, s.Batch-1, s.Batch, s.To)
		if err != nil {
			return fmt.Errorf("repartition batch %d (%d -> %d partitions): %w", s.Batch, s.From, s.To, err)
		}
		b.res.Repartition = stats
		b.dur[stream.DurRepartition] = clk.Now().Sub(t).Milliseconds()
		return d.o.hook("after-state-commit")
	case opWriteCommit:
		if p.Kind != stream.KindRepartition {
			b.res.NextWatermark = nextWatermark(p.Entry.Metadata.BatchWatermarkMs, d.q.Watermark, b.ev)
		}
		b.t = clk.Now()
		if err := d.w.WriteCommit(s.Batch, &checkpoint.CommitEntry{NextBatchWatermarkMs: b.res.NextWatermark}); err != nil {
			return fmt.Errorf("write commit for batch %d: %w", s.Batch, err)
		}
		if p.Kind == stream.KindRepartition {
			// A data batch's commitOffsets ends after its sources commit.
			b.dur[stream.DurCommitOffsets] = clk.Now().Sub(b.t).Milliseconds()
		}
	case opCommitSources:
		for _, so := range p.Entry.Sources {
			if so.Offset != nil {
				if err := d.byKey[so.Key].src.Commit(ctx, so.Offset); err != nil {
					return fmt.Errorf("batch %d: commit source %q: %w", s.Batch, so.Key, err)
				}
			}
		}
		b.dur[stream.DurCommitOffsets] = clk.Now().Sub(b.t).Milliseconds()
		return d.o.hook("after-commit")
	case opEmitProgress:
		var ev *stream.Progress
		if p.Kind == stream.KindRepartition {
			ev = d.controlProgress(b)
		} else {
			ev = d.dataProgress(b)
		}
		d.lastTrigger = b.trigger
		return d.emit(ev)
	default:
		return fmt.Errorf("batch %d: unknown step %v", s.Batch, s)
	}
	return nil
}

// writeSinkPreparing writes the sink while the operator prepares its state
// commit on another goroutine (stream.CommitPreparer): the two touch
// disjoint files, and nothing of the prepared version is visible until
// opCommitState publishes it, after the sink succeeded. A failure of either
// fails the batch once both returned; exec's Abort then drops the prepared
// version (doc.go, Batch lifecycle).
func (d *driver) writeSinkPreparing(ctx context.Context, b *batchRun, s step) error {
	cp, ok := d.op.(stream.CommitPreparer)
	if !ok {
		return fmt.Errorf("batch %d: the plan prepares the state commit, the operator cannot", s.Batch)
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	prepared := make(chan error, 1)
	go func() { prepared <- cp.PrepareCommit(pctx, s.Batch) }()
	sp, sinkErr := d.sink.AddBatch(ctx, s.Batch, b.out)
	if sinkErr != nil {
		// The batch fails anyway: the prepared version would be dropped.
		cancel()
	}
	prepErr := <-prepared
	if sinkErr != nil {
		return fmt.Errorf("batch %d: sink %s: %w", s.Batch, d.sink.Description(), sinkErr)
	}
	if prepErr != nil {
		return fmt.Errorf("batch %d: prepare state: %w", s.Batch, prepErr)
	}
	b.sinkProg = sp
	return d.o.hook("after-sink")
}

// read streams one source's range into the operator.
func (d *driver) read(ctx context.Context, b *batchRun, s step) error {
	clk := d.o.Clock
	st := d.byKey[s.Source]
	if st == nil {
		// planStart guarantees a pending batch's sources exist.
		return fmt.Errorf("batch %d needs source %q that the query lacks", s.Batch, s.Source)
	}
	wm := b.p.Entry.Metadata.BatchWatermarkMs
	var rows int64
	readStart := clk.Now()
	var inEmit time.Duration
	err := st.src.ReadBatch(ctx, s.Start, s.End, func(in *stream.Batch) error {
		t0 := clk.Now()
		defer func() { inEmit += clk.Now().Sub(t0) }()
		rows += int64(in.Len)
		if d.q.Watermark != nil {
			if c := in.Column(d.q.Watermark.Column); c != nil {
				b.ev.add(c)
			}
		}
		if d.withSrc {
			in = st.withSourceColumn(in)
		}
		return d.op.Process(ctx, s.Batch, wm, in)
	})
	if err != nil {
		return fmt.Errorf("batch %d: read source %q: %w", s.Batch, s.Source, err)
	}
	b.getBatch += clk.Now().Sub(readStart) - inEmit
	for i, r := range b.p.Ranges {
		if r.Key == s.Source {
			b.rows[i] += rows
		}
	}
	b.total += rows
	b.res.Rows = b.total
	return nil
}

// emit appends the event to the progress log and hands it to the listeners.
func (d *driver) emit(p *stream.Progress) error {
	line, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode progress of batch %d: %w", p.BatchID, err)
	}
	if err := d.w.AppendProgress(line); err != nil {
		// Progress is informational: the batch is committed already.
		d.o.Logger.Warn("cannot append progress", "err", err)
	}
	for _, l := range d.o.Listeners {
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
