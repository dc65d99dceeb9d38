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
// sources, the operator and the sink, and reports the commit watermark back
// as a batchResult; the recorder beside it (recorder.go) keeps the books.
// It decides nothing: which batch, which ranges, whether to write offsets
// or re-use them, where a phase ends, all come from the plan. The same driver runs a query (Run), a stopped query's
// repartition (RepartitionOffline) and, with dry set, `plan`.

// srcState is one opened source of the query.
type srcState struct {
	name, key string
	// side is the source's side in a two-input query, -1 in a one-input one.
	side    int
	src     stream.Source
	nameBuf []string // the literal source column, reused
	// nameIdx: its dictionary view's indexes (all 0: one value), reused.
	nameIdx []int32
	open    bool
}

type driver struct {
	o Options
	w *checkpoint.Writer
	// ops are the plan's stateful operators in id order, post the
	// transforms after the last one (operators.go).
	ops  []*planOp
	post []stream.Transform
	// sidePost are the transforms after each join side's last operator
	// (sidechain.go), before the join.
	sidePost [][]stream.Transform
	// reparts, set offline in place of ops, are the stopped query's
	// operator states in id order, opened from what the checkpoint recorded:
	// all a control batch needs.
	reparts []stream.StateRepartitioner
	// q, sink and byKey are nil offline (a control batch reads no source and
	// writes no sink).
	q       *Query
	sink    stream.Sink
	byKey   map[string]*srcState
	order   []*srcState // query order
	withSrc bool
	// rp is the read path: the source column, event time and filter
	// between the sources and the operator (readpath.go).
	rp readPath
	// sides, in a two-input query, are each side's read path, and
	// sideMarks each side's tracked watermark (sides.go); policy is the
	// watermark policy.
	sides     []*sideReads
	sideMarks []sideMark
	policy    string
	// shape is the restart rules' decision; open records the shape if asked.
	shape *shapeDecision
	// minRetain is minBatchesToRetain, handed to the sources that prune
	// their own logs.
	minRetain int
	// sinkOpen says whether close must close the sink.
	sinkOpen bool

	queryID, runID string
	lastTrigger    time.Time
	// dry records the steps instead of performing them (`plan`).
	dry bool
	// trace, if set, receives each plan just before it is performed.
	trace func(p *batchPlan)
	// aheadOn, set by the loop of an availableNow run for a batch that the
	// run may follow with another, turns the read-ahead on (readahead.go):
	// aheadKeys are the keys it polls, in query order, aheadFrom the loop's
	// Current before the batch in flight, ahead the next batch's read-ahead.
	aheadOn   bool
	aheadKeys []string
	aheadFrom map[string]json.RawMessage
	ahead     *readAhead
	aheadFree []*stream.Batch // the last read-ahead's chunks, to re-use
}

// batchResult is what the driver reports back after a batch committed:
// the commit watermark (advance) and a control batch's repartition
// (RepartitionOffline).
type batchResult struct {
	NextWatermark int64
	// Repartition is the figures of every operator's repartition, in id
	// order.
	Repartition []stream.RepartitionStats
	// sideMarks, in a two-input query, are the sides' tracked watermarks
	// after the batch (sides.go), taken once it committed.
	sideMarks []sideMark
}

// batchRun is one batch in flight: its plan, the books the recorder keeps
// beside the steps, the operator's output on its way to the sink, and the
// result reported back.
type batchRun struct {
	p   *batchPlan
	rec *recorder
	out *stream.Batch
	// recycle, when set, takes out back once the sink returned: out is
	// the batch its operator's Finish returned, which nothing else saw.
	recycle stream.OutputRecycler
	res     batchResult
	// wal, while offsets/N is written alongside the reads, receives the
	// write's result (opAwaitOffsets takes it).
	wal chan error
	// commit, while commits/N is written alongside the sink and the state,
	// is that write (opAwaitCommit publishes it).
	commit *commitAhead
	// late and evict are each operator's input watermark of the previous
	// batch and of this one (batchWatermarks), set with the first input.
	late, evict []int64
	// held are the right side's rows waiting for the left side's chain
	// (sidechain.go).
	held *stream.Batch
}

// exec performs plan p step by step. A phase begins with its first step
// and ends with its last (the next step's phase differs, or the plan ends);
// the recorder times it, and the step's crash point follows the phase's
// end. Any failure of a data batch aborts the operator's batch and leaves
// p.ID pending.
func (d *driver) exec(ctx context.Context, p *batchPlan, trigger time.Time, pre preDurations) (res batchResult, err error) {
	if d.trace != nil {
		d.trace(p)
	}
	if d.dry {
		return batchResult{NextWatermark: d.dryWatermark(p)}, nil
	}
	b := &batchRun{p: p, rec: newRecorder(d.o.Clock, p, trigger, pre, d.o.observe), res: batchResult{NextWatermark: p.CommitWatermark}}
	if len(d.sides) > 0 {
		b.rec.in.sides = make([]eventStats, len(d.sides))
	}
	// A read that failed while offsets/N was being written returns before
	// the await: the write still finishes before the batch does, so no
	// writer of the checkpoint outlives exec.
	defer func() {
		if b.wal != nil {
			<-b.wal
		}
		if b.commit != nil {
			// The batch failed before its publish: commits/N is dropped.
			b.commit.abandon()
		}
	}()
	if p.Kind != stream.KindRepartition {
		defer func() {
			d.rp.endBatch()
			for _, sr := range d.sides {
				sr.rp.endBatch()
			}
			if err != nil {
				d.rp.take()
				d.abortOps()
			}
		}()
	}
	steps := stepListeners(d.o.Listeners)
	for i, s := range p.Steps {
		if i == 0 || p.Steps[i-1].Phase != s.Phase {
			b.rec.begin(s.Phase)
		}
		if d.o.observe != nil {
			d.o.observe("  " + s.String())
		}
		for _, l := range steps {
			l.OnStep(p.ID, stepName(s.Op), true)
		}
		err := d.do(ctx, b, s)
		for _, l := range steps {
			l.OnStep(p.ID, stepName(s.Op), false)
		}
		if err != nil {
			return res, err
		}
		last := i+1 == len(p.Steps) || p.Steps[i+1].Phase != s.Phase
		if last {
			b.rec.end()
		}
		if err := d.o.hook(crashPoint(s, last)); err != nil {
			return res, err
		}
	}
	return b.res, nil
}

// crashPoint names the crash point (a test hook, Options.crash) after step
// s, "" if none; last says s ended its phase. The WAL phase's end is
// after-offsets (for offsets/N written alongside the reads, the end of the
// WAL part that awaits it); the others follow single steps (doc.go, Crash
// order).
func crashPoint(s step, last bool) string {
	switch s.Op {
	case opFinish:
		return "before-sink"
	case opWriteSink:
		if s.Overlap {
			// The state committed alongside: the serial order's point.
			return "after-state-commit"
		}
		return "after-sink"
	case opCommitState, opRepartitionState:
		return "after-state-commit"
	case opCommitSources:
		return "after-commit"
	}
	if last && s.Phase == phaseWAL && !(s.Op == opWriteOffsets && s.Overlap) {
		return "after-offsets"
	}
	return ""
}

// dryWatermark is the commit watermark a dry run assumes: the rows a re-run
// would read are unknown, so the batch's own.
func (d *driver) dryWatermark(p *batchPlan) int64 {
	if p.Kind == stream.KindRepartition {
		return p.CommitWatermark
	}
	return p.Entry.Metadata.BatchWatermarkMs
}

// do performs one step.
func (d *driver) do(ctx context.Context, b *batchRun, s step) error {
	switch s.Op {
	case opWriteOffsets:
		if s.Overlap {
			b.wal = make(chan error, 1)
			go func() { b.wal <- d.writeOffsets(b.p, s) }()
			return nil
		}
		return d.writeOffsets(b.p, s)
	case opAwaitOffsets:
		return d.awaitOffsets(b, s)
	case opReuseOffsets:
		return nil
	case opPurge:
		_, err := d.w.Purge(s.Batch, int(s.Batch-s.Below))
		return err
	case opRead:
		return d.read(ctx, b, s)
	case opFinish:
		return d.finish(ctx, b, s)
	case opWriteSink:
		if s.Overlap {
			return d.writeSinkPreparing(ctx, b, s)
		}
		return d.writeSink(ctx, b, s)
	case opCommitState:
		return d.commitState(ctx, b, s)
	case opRepartitionState:
		return d.repartition(ctx, b, s)
	case opWriteCommit:
		if s.Overlap {
			b.commit = d.startCommit(s.Batch, b.res.NextWatermark)
			return nil
		}
		if err := d.w.WriteCommit(s.Batch, &checkpoint.CommitEntry{NextBatchWatermarkMs: b.res.NextWatermark}); err != nil {
			return fmt.Errorf("write commit for batch %d: %w", s.Batch, err)
		}
		return nil
	case opAwaitCommit:
		return d.awaitCommit(b, s)
	case opCommitSources:
		return d.commitSources(ctx, b, s)
	case opEmitProgress:
		return d.report(b)
	}
	return fmt.Errorf("batch %d: unknown step %v", s.Batch, s)
}

// writeOffsets writes offsets/N; an existing one means another writer.
func (d *driver) writeOffsets(p *batchPlan, s step) error {
	err := d.w.WriteOffsets(s.Batch, p.Entry)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, checkpoint.ErrExists):
		return errcode.Wrap(err, errcode.CheckpointLocked, d.w.Path, "make sure only one query uses this checkpoint",
			"concurrent update to the offsets log: batch %d was written by another writer", s.Batch)
	}
	return fmt.Errorf("write offsets for batch %d: %w", s.Batch, err)
}

// awaitOffsets waits for offsets/N, written alongside the reads, to be
// durable; the time it waits is walCommit's, not addBatch's.
func (d *driver) awaitOffsets(b *batchRun, s step) error {
	if b.wal == nil {
		return fmt.Errorf("batch %d: await offsets/%d that no step writes", s.Batch, s.Batch)
	}
	err := <-b.wal
	b.wal = nil
	return err
}

// finish closes the input: the sources' progress and the commit watermark
// are known now, once for the batch; then the operator evicts and outputs.
func (d *driver) finish(ctx context.Context, b *batchRun, s step) error {
	p := b.p
	b.rec.seen.sources = d.sourceProgress(b)
	// The input is read: the next batch's may be, while this one finishes.
	d.startReadAhead(ctx, p)
	if len(d.sides) > 0 {
		b.res.NextWatermark, b.res.sideMarks = nextSidedWatermark(p.Entry.Metadata.BatchWatermarkMs, d.q.Sides, b.rec.in.sides, d.sideMarks, d.policy)
		for _, e := range b.rec.in.sides {
			b.rec.in.ev.merge(e)
		}
	} else {
		b.res.NextWatermark = nextWatermark(p.Entry.Metadata.BatchWatermarkMs, d.q.Watermark, b.rec.in.ev)
	}
	if len(d.ops) == 0 {
		// No stateful operator: the rows read are the output, through the
		// plan's transforms.
		out, err := applyTransforms(d.post, d.rp.take())
		if err != nil {
			return fmt.Errorf("batch %d: %w", s.Batch, err)
		}
		if out == nil {
			out = &stream.Batch{}
		}
		b.out, b.rec.seen.ops = out, nil
		return nil
	}
	out, progs, recycle, err := d.finishOps(ctx, b, s)
	if err != nil {
		return err
	}
	b.out, b.rec.seen.ops, b.recycle = out, progs, recycle
	return nil
}

// recycleOut hands the batch's output back to the operator that built it
// (stream.OutputRecycler), once the sink returned.
func (b *batchRun) recycleOut() {
	if b.recycle != nil {
		b.recycle.Recycle(b.out)
		b.recycle = nil
	}
}

// writeSink hands the operator's output to the sink as batch N.
func (d *driver) writeSink(ctx context.Context, b *batchRun, s step) error {
	sp, err := d.sink.AddBatch(ctx, s.Batch, b.out)
	b.recycleOut()
	if err != nil {
		return fmt.Errorf("batch %d: sink %s: %w", s.Batch, d.sink.Description(), err)
	}
	b.rec.seen.sink = sp
	return nil
}

// commitState commits state version N after the sink wrote batch N (an
// operator that cannot commit alongside the sink).
func (d *driver) commitState(ctx context.Context, b *batchRun, s step) error {
	if err := d.commitOp(ctx, d.opByID(s.Operator), s.Batch); err != nil {
		return err
	}
	// Commit time and memory are known only now; an operator that can say
	// so replaces what Finish reported.
	d.reportedProgress(b.rec.seen.ops)
	return nil
}

// repartition is the control batch's state step: version N-1 rewritten as
// version N with s.To partitions.
func (d *driver) repartition(ctx context.Context, b *batchRun, s step) error {
	d.o.Logger.Info("repartitioning state", "batchId", s.Batch, "from", s.From, "to", s.To)
	var stats stream.RepartitionStats
	var err error
	if d.reparts != nil {
		stats, err = d.reparts[s.Operator].Repartition(ctx, s.Batch-1, s.Batch, s.To)
		if err != nil && len(d.reparts) > 1 {
			err = fmt.Errorf("operator %d: %w", s.Operator, err)
		}
	} else {
		stats, err = d.repartitionOp(ctx, d.opByID(s.Operator), s.Batch-1, s.Batch, s.To)
	}
	if err != nil {
		return fmt.Errorf("repartition batch %d (%d -> %d partitions): %w", s.Batch, s.From, s.To, err)
	}
	b.res.Repartition = append(b.res.Repartition, stats)
	return nil
}

// commitSources tells each source its end offset is committed.
func (d *driver) commitSources(ctx context.Context, b *batchRun, s step) error {
	for _, so := range b.p.Entry.Sources {
		if so.Offset != nil {
			if err := d.commitSource(ctx, so.Key, so.Offset); err != nil {
				return fmt.Errorf("batch %d: commit source %q: %w", s.Batch, so.Key, err)
			}
		}
	}
	return nil
}

// writeSinkPreparing writes the sink while the operator commits state
// version N on another goroutine (stream.CommitPreparer: PrepareCommit,
// then Commit): the two touch disjoint files, and commits/N, which makes
// the batch count, follows both (doc.go, Crash order). A failure of either
// fails the batch once both returned; a sink failure cancels the state's
// context, so a commit not yet published stays unpublished, and exec's
// Abort drops what is left of the batch.
func (d *driver) writeSinkPreparing(ctx context.Context, b *batchRun, s step) error {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	committed := make(chan error, 1)
	go func() { committed <- d.prepareOps(pctx, s.Batch) }()
	sp, sinkErr := d.sink.AddBatch(ctx, s.Batch, b.out)
	if sinkErr != nil {
		// The batch fails anyway: the state commit would be re-done.
		cancel()
	}
	stateErr := <-committed
	b.recycleOut()
	if sinkErr != nil {
		return fmt.Errorf("batch %d: sink %s: %w", s.Batch, d.sink.Description(), sinkErr)
	}
	if stateErr != nil {
		return stateErr
	}
	b.rec.seen.sink = sp
	d.reportedProgress(b.rec.seen.ops)
	return nil
}

// read streams one source's range into the operator; the recorder counts
// its rows and event times as they pass and times the source apart from
// the operator.
func (d *driver) read(ctx context.Context, b *batchRun, s step) error {
	st := d.byKey[s.Source]
	if st == nil {
		// planStart guarantees a pending batch's sources exist.
		return fmt.Errorf("batch %d needs source %q that the query lacks", s.Batch, s.Source)
	}
	clk := d.o.Clock
	var rows int64
	// queryErr is an error of the query over the source's rows (the WHERE,
	// a derived column, an operator), not of the source: it is reported as
	// such, not as a failed read.
	var queryErr error
	rc := b.rec.startRead()
	readBatch := st.src.ReadBatch
	a, err := d.aheadFor(s)
	if err != nil {
		return fmt.Errorf("batch %d: %w", s.Batch, err)
	}
	if a != nil {
		readBatch = func(_ context.Context, _, _ stream.Offset, emit func(*stream.Batch) error) error {
			return d.replay(a, emit)
		}
	}
	err = readBatch(ctx, s.Start, s.End, func(in *stream.Batch) error {
		t0 := clk.Now()
		defer rc.emitted(t0)
		rows += int64(in.Len)
		if st.side >= 0 {
			queryErr = d.readSide(ctx, b, s, st, in)
			return queryErr
		}
		in, err := d.rp.chunk(st, d.withSrc, in, &b.rec.in.ev)
		if err == nil {
			if len(d.ops) == 0 {
				err = d.rp.collect(in)
			} else {
				if in.Len == 0 && d.q.Where != nil {
					// The operator still learns that the batch started.
					in = &stream.Batch{}
				}
				err = d.feed(ctx, b, s.Batch, 0, in)
			}
		}
		queryErr = err
		return err
	})
	if err != nil && queryErr != nil && errors.Is(err, queryErr) {
		return fmt.Errorf("batch %d: rows of source %q: %w", s.Batch, s.Source, queryErr)
	}
	if err != nil {
		return fmt.Errorf("batch %d: read source %q: %w", s.Batch, s.Source, err)
	}
	b.rec.endRead(&rc, s.Source, rows)
	return nil
}

// report builds the batch's progress event from the recorder's books and
// emits it.
func (d *driver) report(b *batchRun) error {
	end := d.o.Clock.Now()
	var ev *stream.Progress
	if b.p.Kind == stream.KindRepartition {
		ev = d.controlProgress(b, end)
	} else {
		ev = d.dataProgress(b, end)
	}
	d.lastTrigger = b.rec.trigger
	return d.emit(ev)
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
	// One encoding: a LineListener gets the bytes the log got.
	for _, l := range d.o.Listeners {
		if ll, ok := l.(LineListener); ok {
			ll.OnProgressLine(p, line)
			continue
		}
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
		st.nameIdx = make([]int32, n)
	}
	cols := make([]stream.Column, len(b.Columns), len(b.Columns)+1)
	copy(cols, b.Columns)
	// A dictionary of one value (stream.Dict): the aggregation groups by
	// source without a look at a row's string.
	src := stream.Column{Name: stream.ColSource, Type: stream.String, Strings: st.nameBuf[:b.Len]}
	if b.Len > 0 {
		src.Dict = stream.NewDict(src.Strings, st.nameIdx[:b.Len], st.nameBuf[:1])
	}
	cols = append(cols, src)
	return &stream.Batch{Len: b.Len, Columns: cols, Signs: b.Signs}
}
