package filter

import (
	"context"
	"slices"

	"github.com/ethstream/ethstream/expr"
	"github.com/ethstream/ethstream/stream"
)

// Operator runs a predicate before the stateful operator it wraps: Process
// hands Inner only the rows the predicate keeps (a chunk left empty is not
// handed on), with the Derive columns computed over them and appended;
// every other call goes to Inner unchanged. It implements
// stream.SchemaOperator and stream.ProgressReporter when Inner does.
type Operator struct {
	Pred *Predicate // nil keeps every row
	// Derive are the columns computed before Inner sees the rows (the
	// expressions a query groups by or aggregates), in order; an error
	// (ARITHMETIC_OVERFLOW, DIVIDE_BY_ZERO, ...) fails the batch before
	// Inner sees any of it.
	Derive []Derived
	// Post is the stage after the aggregation, nil without one.
	Post  *Post
	Inner stream.Operator
	buf   stream.Batch
	last  stream.OperatorProgress // Inner's progress from Finish
}

var (
	_ stream.Operator           = (*Operator)(nil)
	_ stream.SchemaOperator     = (*Operator)(nil)
	_ stream.ProgressReporter   = (*Operator)(nil)
	_ stream.CommitPreparer     = (*Operator)(nil)
	_ stream.WatermarkLookahead = (*Operator)(nil)
	_ stream.PartitionLimiter   = (*Operator)(nil)
	_ stream.OutputRecycler     = (*Operator)(nil)
)

// Open opens Inner.
func (o *Operator) Open(ctx context.Context, env stream.OperatorEnv) error {
	return o.Inner.Open(ctx, env)
}

// Process filters in, then hands what is left to Inner.
func (o *Operator) Process(ctx context.Context, batchID, watermarkMs int64, in *stream.Batch) error {
	if in == nil || in.Len == 0 {
		return o.Inner.Process(ctx, batchID, watermarkMs, in)
	}
	out := in
	if o.Pred != nil {
		keep, err := o.Pred.Keep(in)
		if err != nil {
			return err
		}
		out = o.compact(in, keep)
	}
	if out.Len == 0 {
		// Inner still learns that the batch started.
		return o.Inner.Process(ctx, batchID, watermarkMs, &stream.Batch{})
	}
	if len(o.Derive) > 0 {
		d, err := o.derive(out)
		if err != nil {
			return err
		}
		out = d
	}
	return o.Inner.Process(ctx, batchID, watermarkMs, out)
}

// derive appends the Derive columns to in. The Guarded ones are computed
// only for the rows Inner (a RowGuard) says it aggregates, given in and the
// unguarded columns: null elsewhere, and an error they would raise for
// another row is not raised.
func (o *Operator) derive(in *stream.Batch) (*stream.Batch, error) {
	d := &stream.Batch{Len: in.Len, Signs: in.Signs, Columns: append(make([]stream.Column, 0, len(in.Columns)+len(o.Derive)), in.Columns...)}
	cols := make([]stream.Column, len(o.Derive))
	guard, _ := o.Inner.(RowGuard)
	guarded := false
	for i, dv := range o.Derive {
		if dv.Guarded && guard != nil {
			guarded = true
			continue
		}
		c, err := dv.Expr.Eval(in, dv.Name)
		if err != nil {
			return nil, err
		}
		cols[i] = c
	}
	if guarded {
		withUnguarded := &stream.Batch{Len: in.Len, Signs: in.Signs, Columns: slices.Clone(d.Columns)}
		for i, dv := range o.Derive {
			if !dv.Guarded {
				withUnguarded.Columns = append(withUnguarded.Columns, cols[i])
			}
		}
		use, err := guard.RowsAggregated(withUnguarded)
		if err != nil {
			return nil, err
		}
		for i, dv := range o.Derive {
			if !dv.Guarded {
				continue
			}
			if cols[i], err = dv.Expr.EvalRows(in, dv.Name, use); err != nil {
				return nil, err
			}
		}
	}
	d.Columns = append(d.Columns, cols...)
	return d, nil
}

// Derived is a column computed from the input rows.
type Derived struct {
	Name string
	Expr *expr.Compiled
	// Guarded columns are computed only for the rows the Inner operator
	// aggregates, when it is a RowGuard (a session window's aggregate
	// inputs, for the rows with a session).
	Guarded bool
}

// RowGuard is an Inner operator that skips some of the rows it is handed
// and says which before Derived columns marked Guarded are computed: Spark
// filters those rows out before its aggregation computes its inputs, so an
// error an input would raise for them (DIVIDE_BY_ZERO) is never raised.
type RowGuard interface {
	// RowsAggregated reports, per row of b (the input rows with the
	// unguarded derived columns appended), whether the operator
	// aggregates it.
	RowsAggregated(b *stream.Batch) ([]bool, error)
}

// compact returns the kept rows of in (in itself when all are kept). The
// returned batch reuses the operator's buffers until the next call.
func (o *Operator) compact(in *stream.Batch, keep []bool) *stream.Batch {
	n := 0
	for _, k := range keep {
		if k {
			n++
		}
	}
	if n == in.Len {
		return in
	}
	in.FilterInto(&o.buf, keep)
	return &o.buf
}

// Finish finishes Inner's batch.
func (o *Operator) Finish(ctx context.Context, batchID, watermarkMs int64) (*stream.Batch, stream.OperatorProgress, error) {
	// Drop references to the last chunk's strings.
	for i := range o.buf.Columns {
		clear(o.buf.Columns[i].Strings)
	}
	out, prog, err := o.Inner.Finish(ctx, batchID, watermarkMs)
	o.last = prog
	if err != nil || o.Post == nil || out == nil {
		return out, prog, err
	}
	out, err = o.Post.apply(out)
	return out, prog, err
}

// Commit commits Inner.
func (o *Operator) Commit(ctx context.Context, batchID int64) error {
	return o.Inner.Commit(ctx, batchID)
}

// Abort aborts Inner.
func (o *Operator) Abort() { o.Inner.Abort() }

// NeedsNoDataBatch asks Inner.
func (o *Operator) NeedsNoDataBatch(watermarkMs int64) (bool, error) {
	return o.Inner.NeedsNoDataBatch(watermarkMs)
}

// Repartition repartitions Inner's state.
func (o *Operator) Repartition(ctx context.Context, base, batchID int64, n int) (stream.RepartitionStats, error) {
	return o.Inner.Repartition(ctx, base, batchID, n)
}

// Close closes Inner.
func (o *Operator) Close() error { return o.Inner.Close() }

// OutputSchema is Inner's, if it declares one, changed by Post.
func (o *Operator) OutputSchema() stream.Schema {
	if so, ok := o.Inner.(stream.SchemaOperator); ok {
		if o.Post != nil {
			return o.Post.Schema(so.OutputSchema())
		}
		return so.OutputSchema()
	}
	return stream.Schema{}
}

// Progress is Inner's, if it reports one after Commit, else what its
// Finish reported.
func (o *Operator) Progress() stream.OperatorProgress {
	if pr, ok := o.Inner.(stream.ProgressReporter); ok {
		return pr.Progress()
	}
	return o.last
}

// PrepareCommit is Inner's; without it nothing is prepared and Commit does
// all the work, as it would unwrapped.
func (o *Operator) PrepareCommit(ctx context.Context, batchID int64) error {
	if cp, ok := o.Inner.(stream.CommitPreparer); ok {
		return cp.PrepareCommit(ctx, batchID)
	}
	return nil
}

// NextWatermark tells Inner the next batch's watermark, if it uses it.
func (o *Operator) NextWatermark(batchID, nextWatermarkMs int64) {
	if wl, ok := o.Inner.(stream.WatermarkLookahead); ok {
		wl.NextWatermark(batchID, nextWatermarkMs)
	}
}

// Recycle hands a batch Finish returned back to Inner, if it takes its
// output back (stream.OutputRecycler); a batch Post built is not Inner's,
// and Inner ignores it.
func (o *Operator) Recycle(out *stream.Batch) {
	if r, ok := o.Inner.(stream.OutputRecycler); ok {
		r.Recycle(out)
	}
}

// CheckPartitions is Inner's limit, if it has one.
func (o *Operator) CheckPartitions(from, to int) error {
	if pl, ok := o.Inner.(stream.PartitionLimiter); ok {
		return pl.CheckPartitions(from, to)
	}
	return nil
}

// Wrap returns o as the engine should see it: o itself, or o joined with
// the optional interfaces only Inner can answer (stream.StateRecorder, the
// committed state's record; stream.Checker, the operator's probe), exactly
// those Inner implements. A wrapper that dropped StateRecorder let a start
// accept a tampered commits/N (the WHERE defect of issue 38, again for a
// query with derived columns); one that gained it would answer for state
// its Inner never records.
func Wrap(o *Operator) stream.Operator {
	sr, isSR := o.Inner.(stream.StateRecorder)
	ck, isCK := o.Inner.(stream.Checker)
	switch {
	case isSR && isCK:
		return &recordingChecked{o, sr, ck}
	case isSR:
		return &recording{o, sr}
	case isCK:
		return &checked{o, ck}
	}
	return o
}

// Unwrap returns the *Operator op is, or that Wrap joined into op.
func Unwrap(op stream.Operator) (*Operator, bool) {
	switch w := op.(type) {
	case *Operator:
		return w, true
	case interface{ filterOperator() *Operator }:
		return w.filterOperator(), true
	}
	return nil, false
}

func (o *Operator) filterOperator() *Operator { return o }

type recording struct {
	*Operator
	stream.StateRecorder
}

type checked struct {
	*Operator
	stream.Checker
}

type recordingChecked struct {
	*Operator
	stream.StateRecorder
	stream.Checker
}
