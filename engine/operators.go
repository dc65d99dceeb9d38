package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ethstream/ethstream/stream"
)

// The plan of operators a driver runs: the query's stages after the read
// path, in flow order, each stateful operator with its id (opids.go:
// Spark's pre-order ids on a new checkpoint, the sink side's operator 0;
// flow order on a checkpoint that started with it). Operator id keeps its
// state in <checkpoint>/state/<id> and has stateOperators[] entry id; the
// stateless transforms before it are applied to its input. Below (and in
// d.ops), operator i is the i-th in flow order, whatever its id.
//
// Within a batch the rows flow down the plan: the reads feed operator 0,
// operator i's Finish output feeds operator i+1, the last one's goes to the
// sink (a join's side chains feed the join instead: sidechain.go). Watermarks follow Spark 3.4+'s rules for several stateful
// operators (SPARK-40925, propagate.go): every operator, operator 0
// included, drops input late by its input watermark of the previous batch
// (PropagateWatermarkSimulator.getInputWatermarkForLateEvents) and evicts
// by its input watermark of the batch (getInputWatermarkForEviction).

// OperatorID is the id, and state directory, of operator 0:
// <ckpt>/state/0 (Spark numbers operators from 0). It is the operator
// nearest the sink on a checkpoint numbered as Spark numbers them, the
// source side's on one numbered in flow order (opids.go), and a plan's
// only operator either way: the reference query's aggregation.
const OperatorID = "0"

// planOp is one stateful operator of the running plan.
type planOp struct {
	// id is the operator's id (opids.go), not its place in the plan.
	id int
	op stream.Operator
	// pre are the transforms between the stage before (the read path or
	// the previous operator) and this operator.
	pre []stream.Transform
	// side is the join input the operator is below (stream.LeftSide or
	// stream.RightSide: a side's chain, sidechain.go), or mainChain.
	side int
	open bool
}

// dir is the operator's state directory name under state/.
func (po *planOp) dir() string { return strconv.Itoa(po.id) }

// planOps splits a query's stages into its stateful operators, in
// execution order (a join's left side's chain, its right side's, then the
// main chain: sidechain.go) and numbered by nb, the transforms after the
// main chain's last one, and those after each side's last one (before
// the join).
func planOps(q *Query, nb opNumbering) (ops []*planOp, post []stream.Transform, sidePost [][]stream.Transform) {
	for i, sd := range q.Sides {
		so, sp := splitStages(sd.Stages, i)
		ops = append(ops, so...)
		sidePost = append(sidePost, sp)
	}
	mo, post := splitStages(q.stages(), mainChain)
	ops = append(ops, mo...)
	side := make([]int, len(ops))
	for i, po := range ops {
		side[i] = po.side
	}
	for i, id := range nb.treeIDs(side) {
		ops[i].id = id
	}
	return ops, post, sidePost
}

// splitStages is one chain's stateful operators, each with the transforms
// before it, and the transforms after the last one.
func splitStages(stages []Stage, side int) (ops []*planOp, post []stream.Transform) {
	var pre []stream.Transform
	for _, s := range stages {
		if s.Transform != nil {
			pre = append(pre, s.Transform)
			continue
		}
		ops = append(ops, &planOp{op: s.Operator, pre: pre, side: side})
		pre = nil
	}
	return ops, pre
}

// opByID is the operator of id (a state step names its operator by id).
func (d *driver) opByID(id int) *planOp {
	for _, po := range d.ops {
		if po.id == id {
			return po
		}
	}
	panic(fmt.Sprintf("engine: no stateful operator has id %d (the plan has %d)", id, len(d.ops)))
}

// appendsRows reports whether the sink appends the plan's output: no
// stateful operator, or the last one passes rows (stream.RowPasser).
func appendsRows(ops []*planOp) bool {
	if len(ops) == 0 {
		return true
	}
	rp, ok := ops[len(ops)-1].op.(stream.RowPasser)
	return ok && rp.PassesRows()
}

// applyTransforms runs in through ts in order; nil when no row is left.
func applyTransforms(ts []stream.Transform, in *stream.Batch) (*stream.Batch, error) {
	for _, t := range ts {
		if in == nil || in.Len == 0 {
			return nil, nil
		}
		out, err := t.Apply(in)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t, err)
		}
		in = out
	}
	return in, nil
}

// evictionWatermarker is implemented by operators that need the batch's
// eviction watermark before its input (a join, which does not store a row
// that watermark already removes, as Spark's OneSideHashJoiner): the
// driver calls EvictionWatermark(N, ms) before the first Process of batch
// N, ms being the watermark Finish(N) will get.
type evictionWatermarker interface {
	EvictionWatermark(batchID, watermarkMs int64)
}

// batchWatermarks sets b's operator watermarks on the batch's first input
// (telling each evictionWatermarker its eviction watermark) and returns
// operator i's late watermark.
func (d *driver) batchWatermarks(batchID int64, b *batchRun, i int) int64 {
	if b.late == nil {
		b.late = inputWatermarks(d.ops, b.p.PrevWatermark)
		b.evict = inputWatermarks(d.ops, b.p.Entry.Metadata.BatchWatermarkMs)
		for j, po := range d.ops {
			if ew, ok := po.op.(evictionWatermarker); ok {
				ew.EvictionWatermark(batchID, b.evict[j])
			}
		}
	}
	return b.late[i]
}

// feed hands one chunk to operator i, through the transforms before it; it
// drops input late by its late watermark (batchWatermarks).
func (d *driver) feed(ctx context.Context, b *batchRun, batchID int64, i int, in *stream.Batch) error {
	lateMs := d.batchWatermarks(batchID, b, i)
	po := d.ops[i]
	if len(po.pre) > 0 {
		var err error
		if in, err = applyTransforms(po.pre, in); err != nil || in == nil {
			return err
		}
	}
	if err := po.op.Process(ctx, batchID, lateMs, in); err != nil {
		if len(d.ops) > 1 {
			return fmt.Errorf("operator %d: %w", po.id, err)
		}
		return err
	}
	return nil
}

// finishOps ends the batch for every operator in plan order, each one's
// output feeding the next, and returns the rows for the sink, each
// operator's progress, and the operator to hand the rows back to once the
// sink returned (nil: none, or the rows are not its batch).
func (d *driver) finishOps(ctx context.Context, b *batchRun, s step) (*stream.Batch, []stream.OperatorProgress, stream.OutputRecycler, error) {
	d.batchWatermarks(s.Batch, b, 0)
	progs := make([]stream.OperatorProgress, len(d.ops))
	var out *stream.Batch
	var recycle stream.OutputRecycler
	for i, po := range d.ops {
		// Operator 0's input watermark of the next batch is the one its
		// commit records (nextBatchWatermarkMs), which its state record
		// repeats; a later operator's state keeps all it would close.
		if la, ok := po.op.(stream.WatermarkLookahead); ok && i == 0 {
			la.NextWatermark(s.Batch, b.res.NextWatermark)
		}
		o, prog, err := po.op.Finish(ctx, s.Batch, b.evict[i])
		if err != nil {
			return nil, nil, nil, fmt.Errorf("batch %d: finish operator%s: %w", s.Batch, strings.TrimPrefix(d.opLabel(po), " of operator"), err)
		}
		progs[i] = prog
		if po.side != mainChain {
			if err := d.sideOutput(ctx, b, s.Batch, i, o); err != nil {
				return nil, nil, nil, fmt.Errorf("batch %d: %w", s.Batch, err)
			}
			continue
		}
		if i+1 < len(d.ops) {
			if o != nil && o.Len > 0 {
				if err := d.feed(ctx, b, s.Batch, i+1, o); err != nil {
					return nil, nil, nil, fmt.Errorf("batch %d: %w", s.Batch, err)
				}
			}
			continue
		}
		out = o
		recycle, _ = po.op.(stream.OutputRecycler)
	}
	if len(d.post) > 0 && out != nil {
		// The transforms' output may share the operator's columns, or
		// not be its batch: nothing is handed back.
		recycle = nil
		var err error
		if out, err = applyTransforms(d.post, out); err != nil {
			return nil, nil, nil, fmt.Errorf("batch %d: %w", s.Batch, err)
		}
	}
	if out == nil {
		out, recycle = &stream.Batch{}, nil
	}
	return out, progs, recycle, nil
}

// opLabel names operator po in errors when the plan has several: " of
// operator 1" (a one-operator plan's errors read as they always did).
func (d *driver) opLabel(po *planOp) string {
	if len(d.ops) < 2 {
		return ""
	}
	return " of operator " + strconv.Itoa(po.id)
}

// commitOps commits state version N of every operator, in flow order.
func (d *driver) commitOps(ctx context.Context, batchID int64) error {
	for _, po := range d.ops {
		if err := d.commitOp(ctx, po, batchID); err != nil {
			return err
		}
	}
	return nil
}

// commitOp commits state version N of operator po (a commit-state step).
func (d *driver) commitOp(ctx context.Context, po *planOp, batchID int64) error {
	if err := po.op.Commit(ctx, batchID); err != nil {
		return fmt.Errorf("batch %d: commit state%s: %w", batchID, d.opLabel(po), err)
	}
	return nil
}

// prepareOps prepares state version N of every operator, then publishes
// them (stream.CommitPreparer); the plan asks for it only when every
// operator can.
func (d *driver) prepareOps(ctx context.Context, batchID int64) error {
	for _, po := range d.ops {
		cp, ok := po.op.(stream.CommitPreparer)
		if !ok {
			return fmt.Errorf("batch %d: the plan prepares the state commit, operator %d cannot", batchID, po.id)
		}
		if err := cp.PrepareCommit(ctx, batchID); err != nil {
			return fmt.Errorf("batch %d: prepare state%s: %w", batchID, d.opLabel(po), err)
		}
	}
	return d.commitOps(ctx, batchID)
}

// canPrepare reports whether every operator splits its commit.
func canPrepare(ops []stream.Operator) bool {
	for _, op := range ops {
		if _, ok := op.(stream.CommitPreparer); !ok {
			return false
		}
	}
	return len(ops) > 0
}

// reportedProgress replaces each operator's progress with what it reports
// after Commit (stream.ProgressReporter).
func (d *driver) reportedProgress(progs []stream.OperatorProgress) {
	for i, po := range d.ops {
		if pr, ok := po.op.(stream.ProgressReporter); ok && i < len(progs) {
			progs[i] = pr.Progress()
		}
	}
}

// abortOps discards every operator's uncommitted batch.
func (d *driver) abortOps() {
	for _, po := range d.ops {
		po.op.Abort()
	}
}

// needsNoData reports whether a no-data batch runs at watermarkMs after a
// batch that ran at lastMs: MicroBatchExecution's
// lastExecutionRequiresAnotherBatch, true when some operator's input
// watermark moved past the one it ran the last batch with (Spark's
// eventTimeWatermarkForEviction of the last execution) and the operator,
// asked at its new one, wants the batch (shouldRunAnotherBatch). An
// operator whose input watermark did not move is not asked.
func (d *driver) needsNoData(watermarkMs, lastMs int64) (bool, error) {
	wms, last := inputWatermarks(d.ops, watermarkMs), inputWatermarks(d.ops, lastMs)
	for i, po := range d.ops {
		if wms[i] <= last[i] {
			continue
		}
		needs, err := po.op.NeedsNoDataBatch(wms[i])
		if err != nil {
			return false, fmt.Errorf("operator %d: %w", po.id, err)
		}
		if needs {
			return true, nil
		}
	}
	return false, nil
}

// repartitionOp rewrites operator po's state version base as version
// batchID with n partitions (a repartition-state step: a REPARTITION
// control batch has one per operator).
func (d *driver) repartitionOp(ctx context.Context, po *planOp, base, batchID int64, n int) (stream.RepartitionStats, error) {
	st, err := po.op.Repartition(ctx, base, batchID, n)
	if err != nil && len(d.ops) > 1 {
		return st, fmt.Errorf("operator %d: %w", po.id, err)
	}
	return st, err
}

// opLocalDir is operator id's cache directory under the query's local
// directory: operator 0 keeps the directory itself (the caches every
// earlier start left stay trusted), a later one has op-<id> in it, a name
// the state store's cache never uses (state/doc.go, Local cache).
func opLocalDir(local string, id int) string {
	if id == 0 || local == "" {
		return local
	}
	return filepath.Join(local, "op-"+strconv.Itoa(id))
}

// openOps opens every operator on its own state directory and cache.
func (d *driver) openOps(ctx context.Context, env stream.OperatorEnv) error {
	local := env.LocalDir
	for _, po := range d.ops {
		dir, err := d.w.StateDir(po.dir())
		if err != nil {
			return err
		}
		env.StateDir, env.LocalDir = dir, opLocalDir(local, po.id)
		if err := po.op.Open(ctx, env); err != nil {
			if len(d.ops) > 1 {
				return fmt.Errorf("open operator %d: %w", po.id, err)
			}
			return fmt.Errorf("open operator: %w", err)
		}
		po.open = true
	}
	return nil
}

// closeOps closes the operators open opened.
func (d *driver) closeOps() []error {
	var errs []error
	for _, po := range d.ops {
		if po.open {
			errs = append(errs, po.op.Close())
			po.open = false
		}
	}
	return errs
}

// outputSchema is the schema of the rows the sink receives, when the last
// operator declares its own (stream.SchemaOperator), or in a plan without
// one, from the columns the read path selects as the sources declare them.
func (d *driver) outputSchema() (stream.Schema, bool, error) {
	var s stream.Schema
	if len(d.ops) == 0 {
		s = d.q.outputSchema()
	} else {
		so, ok := d.ops[len(d.ops)-1].op.(stream.SchemaOperator)
		if !ok {
			return stream.Schema{}, false, nil
		}
		s = so.OutputSchema()
	}
	for _, t := range d.post {
		var err error
		if s, err = t.OutputSchema(s); err != nil {
			return s, false, fmt.Errorf("%s: %w", t, err)
		}
	}
	return s, true, nil
}

// sumStats adds the operators' repartition figures into one (the result of
// an offline repartition).
func sumStats(stats []stream.RepartitionStats) stream.RepartitionStats {
	var t stream.RepartitionStats
	for _, s := range stats {
		t.From, t.To = s.From, s.To
		t.KeysBefore += s.KeysBefore
		t.KeysAfter += s.KeysAfter
		t.BytesRead += s.BytesRead
		t.BytesWritten += s.BytesWritten
	}
	return t
}
