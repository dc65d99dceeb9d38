package agg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/opbase"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// Custom metrics of the stateOperators entry that say how much of Spark's
// figures is state never stored (doc.go, Closed at commit).
const (
	// MetricClosedUnstored: rows of numRowsTotal that the next batch's
	// watermark closes, so this version does not store them.
	MetricClosedUnstored = "numClosedRowsNotStored"
	// MetricRemovedUnstored: rows of numRowsRemoved that the previous
	// version counted but never stored.
	MetricRemovedUnstored = "numRemovedRowsNotStored"
)

// Custom metrics of the stateOperators entry that time what Spark's figures
// do not split out.
const (
	// MetricProcessTime: milliseconds spent in Process (folding the input
	// into the batch's partial aggregates); the merge into state and the
	// eviction are allUpdatesTimeMs and allRemovalsTimeMs.
	MetricProcessTime = "processTimeMs"
	// MetricCommitPrepareTime: the part of commitTimeMs spent in
	// PrepareCommit, which the engine runs while the sink writes the batch
	// (0 when the commit ran alone).
	MetricCommitPrepareTime = "commitPrepareTimeMs"
)

// Operator is the stateful grouped aggregation (stream.Operator over a
// state.Store). The engine drives it from one goroutine at a time (its
// PrepareCommit runs on another, while nothing else of it does); it is not
// safe for concurrent use.
type Operator struct {
	p      *plan
	store  *state.Store
	logger *slog.Logger
	life   opbase.Lifecycle
	// pts are the partials Process folds chunks into (shard.go), sh their
	// workers. Finish merges every partial's entries (their keys are
	// disjoint) in key order across them.
	pts []*partial
	sh  *shards

	// The current batch's figures.
	inRows  int64
	chunk   chunkStats
	process time.Duration // spent in Process
	// retracted counts the batch's input rows with Sign -1; deleted the
	// groups those emptied (removed from state, emitted with Sign -1).
	retracted, deleted int64
	// removedAtMerge counts the windows merged this batch that its own
	// watermark closes: stored (or not) and removed at once, as Spark's
	// StateStoreSaveExec puts them and then evicts them (append mode
	// emits them); a window the carry held is not counted again, the
	// previous version's closedRows count it.
	removedAtMerge int64

	// stateReads counts the batch's merge's state lookups (tests).
	stateReads int64

	// noneBelowUs: no key in state (committed and pending) has a window end
	// <= noneBelowUs; it makes eviction skip the store
	// when nothing can be closed. committedNoneBelowUs is its value at the
	// last committed version, restored by Abort.
	noneBelowUs, committedNoneBelowUs int64
	// noneAboveUs: no key in state (committed and pending) has a window end
	// > noneAboveUs (MaxInt64: not known). With noneBelowUs it tells the
	// merge that a key of a window outside (noneBelowUs, noneAboveUs]
	// cannot be in state, so it costs no state read: in a backfill nearly
	// every key is of a window newer than any stored. Only Open lowers it
	// (an upper bound stays one whatever a failed batch left).
	noneAboveUs int64

	// nextWmUs is the watermark batch nextWmBatch's successor runs with
	// (NextWatermark), in µs; hasNextWm says it was given for that batch.
	nextWmUs    int64
	nextWmMs    int64
	nextWmBatch int64
	hasNextWm   bool
	// committed is the committed state version's record (oprecord.go);
	// pending the one Finish gave the version being written.
	committed, pending opRecord
	// version is the committed state version (-1: none).
	version int64
	// carry is what the committed version closed at commit (carryfile.go),
	// read at its first use; pendingCarry writes the one of the version
	// being written.
	carry        *carryRef
	pendingCarry *carryWriter
	// lateFloorMs raises the batch's late watermark when the committed
	// version closed windows at commit and no carry of them is left (a
	// version written by a build that kept it in memory, or one older than
	// the carries kept): input of those windows is dropped as late rather
	// than merged with a value the operator no longer has (doc.go, Closed
	// at commit). MinInt64 when the carry is there or nothing was closed.
	lateFloorMs int64
	// legacyZero says the query's watermark delay of 0 is read as no
	// watermark: the rule the checkpoint's state was written under
	// (oprecord.go, zeroDelayIsNone; doc.go, Watermark delay 0).
	legacyZero bool
	// fs and stateDir locate the carry files (env.FS, env.StateDir).
	fs       vfs.FS
	stateDir string

	// lastOut is the batch the last Finish returned; spare is one the
	// engine handed back (Recycle), whose columns the next Finish reuses.
	lastOut, spare *stream.Batch

	vals     []aggVal
	orders   [][]int32 // per partial: its entries in window runs (update mode), reused
	counts   [][]int32 // per partial: keyRuns' scratch
	ends     [][]int32 // per partial: its runs' ends in orders (keyRuns)
	runs     [keyedRuns]keyedRun
	keyBuf   []byte
	valBuf   []byte
	progress stream.OperatorProgress
	memBytes int64
}

var (
	_ stream.Operator           = (*Operator)(nil)
	_ stream.PartitionLimiter   = (*Operator)(nil)
	_ stream.WatermarkLookahead = (*Operator)(nil)
	_ stream.CommitPreparer     = (*Operator)(nil)
	_ stream.OutputRecycler     = (*Operator)(nil)
)

// New validates spec and returns an operator to Open. Columns missing from
// the input are reported by the first Process.
func New(spec Spec) (*Operator, error) {
	p, err := newPlan(spec)
	if err != nil {
		return nil, err
	}
	o := &Operator{life: opbase.New("aggregation", nil)}
	o.setPlan(p, shardsFor(p))
	return o, nil
}

// setPlan makes p the operator's plan, with n partials (shard.go).
func (o *Operator) setPlan(p *plan, n int) {
	o.p, o.pts, o.vals = p, newShards(p, n), make([]aggVal, len(p.aggs))
	o.lastOut, o.spare = nil, nil // another plan's columns
	o.sh = newShardSet(o.pts)
	o.orders, o.counts, o.ends = make([][]int32, n), make([][]int32, n), make([][]int32, n)
}

// Schema returns the state schema the operator records and checks on Open.
func (o *Operator) Schema() state.Schema { return o.p.schema }

// Spec returns the validated spec (Mode defaulted).
func (o *Operator) Spec() Spec { return o.p.spec }

// Open loads the state committed at env.Version.
func (o *Operator) Open(ctx context.Context, env stream.OperatorEnv) error {
	s, err := o.openStore(ctx, env, o.p)
	if errcode.Code(err) == errcode.StateSchemaMismatch && o.p.spec.StateFormat == 0 {
		// State written before format 2 (a checkpoint without a query shape
		// to tell ForRecordedState) still reads, in its own format.
		old := o.p.spec
		old.StateFormat = StateFormat1
		if p, perr := newPlan(old); perr == nil && !p.schema.Equal(o.p.schema) {
			if s1, err1 := o.openStore(ctx, env, p); err1 == nil {
				o.setPlan(p, shardsFor(p))
				s, err = s1, nil
			}
		}
	}
	if err != nil {
		return err
	}
	rec, err := decodeOpRecord(s.OperatorRecord(), env.StateDir)
	if err != nil {
		return errors.Join(err, s.Close())
	}
	o.store, o.committed, o.logger = s, rec, opbase.Logger(env)
	o.legacyZero = o.p.spec.Mode == Update && o.p.spec.HasWatermark && o.p.spec.WatermarkDelay == 0 &&
		s.Version() >= 0 && rec.zeroDelayIsNone()
	if o.legacyZero {
		o.logger.Warn("aggregation: the watermark delay of 0 is read as no watermark, as when the checkpoint's state was written; start a new checkpoint to evict by it",
			"version", env.Version)
	}
	o.fs, o.stateDir = env.FS, env.StateDir
	o.version, o.carry, o.pendingCarry = env.Version, nil, nil
	o.resetBatch()
	// An empty store has nothing to evict; otherwise the first eviction
	// scan finds out.
	o.noneBelowUs, o.noneAboveUs = math.MinInt64, math.MaxInt64
	if s.NumKeys() == 0 {
		o.noneBelowUs, o.noneAboveUs = math.MaxInt64, math.MinInt64
	}
	o.committedNoneBelowUs = o.noneBelowUs
	return nil
}

// memCacheBytes is the budget of the state's cache in memory
// (state.Options.MemCacheBytes). A windowed count keeps its open windows
// only: the seed backfill's state holds about 5,000 rows and 8 KB of
// Pebble files beside the memtables, yet creating its 200 partitions'
// instances on disk cost 0.5 CPU-s of a 6.7 CPU-s backfill in openat(2)
// and mkdir(2) (README, Performance). A state of a key per block passes
// the budget within its first batches and moves to disk, before the
// commit that would pass it; one below it is rebuilt from the checkpoint
// after a restart (it is under what Close keeps on disk), reading at most
// this many bytes.
const memCacheBytes = 16 << 20

// openStore opens the operator's state store with plan p's schema.
func (o *Operator) openStore(ctx context.Context, env stream.OperatorEnv, p *plan) (*state.Store, error) {
	s, _, err := o.life.Open(ctx, o.store, env, state.Options{
		Schema:        p.schema,
		MemCacheBytes: memCacheBytes,
		// Checkpoints written before spec v2 named the mode and watermark
		// too; the engine's restart rules decide those now.
		SpecCompatible: p.compatibleSpec,
	})
	return s, err
}

func (o *Operator) resetBatch() {
	o.sh.stop()
	for _, pt := range o.pts {
		pt.reset()
	}
	o.life.End()
}

// begin starts batch batchID on its first Process or Finish.
func (o *Operator) begin(batchID int64) error {
	started, err := o.life.Begin(o.store, batchID)
	if started {
		o.inRows = 0
		o.process = 0
		o.chunk = chunkStats{}
		o.retracted, o.deleted, o.removedAtMerge, o.stateReads = 0, 0, 0, 0
		o.lateFloorMs = math.MinInt64
		if o.carry != nil && o.carry.version != o.version {
			o.carry = nil
		}
		o.pendingCarry.abort()
		o.pendingCarry = nil
		if o.carry == nil && o.committed.ClosedRows > 0 && o.committed.NextWatermarkMs != nil {
			var cerr error
			if o.carry, cerr = o.findCarry(); cerr != nil {
				return cerr
			}
			if o.carry == nil {
				o.lateFloorMs = *o.committed.NextWatermarkMs
			}
		}
	}
	return err
}

// findCarry returns the carry the committed record names, or nil when it
// names none or its file is gone (doc.go, Closed at commit).
func (o *Operator) findCarry() (*carryRef, error) {
	r := o.committed
	if !r.hasCarry() {
		return nil, nil
	}
	if r.CarryFile != "" {
		path := o.fs.PathJoin(o.stateDir, r.CarryFile)
		if _, err := o.fs.Stat(path); errors.Is(err, os.ErrNotExist) {
			o.logger.Warn("aggregation: the carry of the state version is gone; its windows' late rows are dropped",
				"version", o.version, "file", path)
			return nil, nil
		} else if err != nil {
			return nil, fmt.Errorf("aggregation: stat the closed-at-commit carry: %w", err)
		}
	}
	return &carryRef{version: o.version, upUs: o.wmUs(*r.NextWatermarkMs), rec: r}, nil
}

// evicts says the operator evicts by the watermark (plan.evicts, unless
// the checkpoint reads a delay of 0 as no watermark).
func (o *Operator) evicts() bool { return o.p.evicts && !o.legacyZero }

// wmUs converts the engine's watermark to the window clock, or returns
// MinInt64 when the query has no watermark (nothing is late or evicted).
func (o *Operator) wmUs(watermarkMs int64) int64 {
	if !o.evicts() {
		return math.MinInt64
	}
	return watermarkMs * 1000
}

// Process folds one chunk of batch batchID into the batch's partial
// aggregates. Window instances whose end <= the watermark are dropped and
// counted; rows with a null event time are skipped.
func (o *Operator) Process(ctx context.Context, batchID, watermarkMs int64, in *stream.Batch) error {
	if err := o.begin(batchID); err != nil {
		return err
	}
	if in == nil || in.Len == 0 {
		return nil
	}
	t0 := time.Now()
	defer func() { o.process += time.Since(t0) }()
	if in.Signs != nil {
		if err := o.checkRetractions(in); err != nil {
			return err
		}
	}
	st, err := o.sh.add(in, o.wmUs(max(watermarkMs, o.lateFloorMs)))
	if oe, ok := err.(*overflowError); ok {
		return o.overflow(batchID, oe.agg)
	}
	if err != nil {
		return err
	}
	o.inRows += int64(in.Len)
	o.chunk.dropped += st.dropped
	o.chunk.nullTS += st.nullTS
	o.chunk.lateRetractions += st.lateRetractions
	return nil
}

// checkRetractions counts the chunk's retractions and refuses them when the
// query cannot undo a row (see Spec.Retractions).
func (o *Operator) checkRetractions(in *stream.Batch) error {
	var n int64
	for _, s := range in.Signs {
		if s < 0 {
			n++
		}
	}
	if n > 0 && !o.p.retractable {
		why := "it has no count(*) to tell when a group is empty; add count(*) or declare Spec.Retractions"
		for _, a := range o.p.aggs {
			if a.Kind == Min || a.Kind == Max || a.Kind == ApproxCountDistinct {
				why = a.Kind.String() + "(" + a.Column + ") keeps one value per group, not the rows behind it; drop it"
				break
			}
		}
		return errcode.New(CodeRetractionUnsupported, "",
			"read the source without retractions (e.g. with confirmations instead of reorg=retract), or change the query",
			"the input retracts %d rows, but the aggregation cannot undo a row: %s", n, why)
	}
	o.retracted += n
	return nil
}

// Finish merges the batch's partial aggregates into state (one Get and Put
// per distinct key; no Get for a key of a window outside the range state
// holds), evicts windows whose end <= the watermark, and returns
// the rows of the output mode: update, the keys changed by this batch with
// their full values; append, the windows evicted now; complete, every key
// left in state. The returned batch is the caller's until it hands it back
// (Recycle).
func (o *Operator) Finish(ctx context.Context, batchID, watermarkMs int64) (*stream.Batch, stream.OperatorProgress, error) {
	if err := o.begin(batchID); err != nil {
		return nil, stream.OperatorProgress{}, err
	}
	p := o.p
	o.sh.stop()
	n := 0
	for _, pt := range o.pts {
		n += pt.len()
	}
	var out *output
	switch p.spec.Mode {
	case Update:
		out = newOutput(p, n, o.spare)
	default:
		out = newOutput(p, 0, o.spare)
	}
	o.spare, o.lastOut = nil, out.b

	// closeUs is the watermark the state this batch commits must be read
	// at: windows ending at or before it are closed at commit (update
	// mode, with the next batch's watermark known; see closedAtCommitUs).
	wmUs := o.wmUs(watermarkMs)
	closeUs := o.closedAtCommitUs(batchID, wmUs)
	if closeUs > wmUs {
		o.pendingCarry = newCarryWriter(o.fs, o.stateDir, batchID)
	}
	var f finishFigures
	f.updated = int64(n)

	t0 := time.Now()
	closed, err := o.mergeAll(ctx, batchID, wmUs, closeUs, out)
	if err != nil {
		return nil, stream.OperatorProgress{}, err
	}
	f.updates = time.Since(t0)

	t1 := time.Now()
	removed, closedStored, err := o.evict(wmUs, closeUs, out)
	if err != nil {
		return nil, stream.OperatorProgress{}, err
	}
	f.closed = closed + closedStored
	// The previous version's closed rows are what this batch's watermark
	// evicts without a stored key to delete.
	f.removedUnstored = o.committed.ClosedRows
	f.removed = removed + f.removedUnstored + o.removedAtMerge
	o.pending = opRecord{ClosedRows: f.closed, LegacyZeroDelay: o.legacyZero}
	if o.hasNextWm && o.nextWmBatch == batchID {
		// The second record of commits/batchID (CommittedRecord).
		wm := o.nextWmMs
		o.pending.NextWatermarkMs = &wm
	}
	if o.pendingCarry != nil {
		if err := o.pendingCarry.finish(&o.pending); err != nil {
			return nil, stream.OperatorProgress{}, err
		}
	}
	o.store.SetOperatorRecord(o.pending.encode())
	f.removals = time.Since(t1)

	if p.spec.Mode == Complete {
		if err := o.appendState(out); err != nil {
			return nil, stream.OperatorProgress{}, err
		}
	}

	f.outRows = int64(out.b.Len)
	o.progress = o.batchProgress(f)
	if o.chunk.lateRetractions > 0 {
		o.logger.Warn("aggregation: retractions behind the watermark were not applied (their windows are closed)",
			"batchId", batchID, "windowInstances", o.chunk.lateRetractions, "watermarkMs", watermarkMs)
	}
	for _, pt := range o.pts {
		pt.reset()
	}
	o.life.Finish()
	return out.b, o.progress, nil
}

// mergeAll merges every partial entry into state (mergeEntry) and returns
// how many of them were closed at commit rather than stored. Each entry is
// a distinct key, and Process writes no state: with an empty pending batch
// now, no key the loop reads has a pending change, so it reads the
// committed version directly. In update mode the entries go in key order,
// the order the sink merges in (it then skips a sort): each partial's
// entries are placed in window runs on a goroutine of its own (keyOrders),
// then merged across the partials, each run sorted as the merge reaches it
// (eachInOrder); otherwise partial after partial, in entry order.
func (o *Operator) mergeAll(ctx context.Context, batchID, wmUs, closeUs int64, out *output) (closed int64, err error) {
	get := o.store.Get
	if o.store.PendingLen() == 0 {
		get = o.store.GetCommitted
	}
	i := 0
	// merge merges entry e of pt, whose state key is key.
	merge := func(pt *partial, e int, key []byte) error {
		if i&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		i++
		c, err := o.mergeEntry(get, batchID, pt, e, key, wmUs, closeUs, out)
		if c {
			closed++
		}
		return err
	}
	if o.p.spec.Mode != Update {
		for _, pt := range o.pts {
			for e := range pt.len() {
				o.keyBuf = pt.stateKey(o.keyBuf[:0], e)
				if err := merge(pt, e, o.keyBuf); err != nil {
					return closed, err
				}
			}
		}
		return closed, nil
	}
	o.keyOrders()
	n := 0
	for _, pt := range o.pts {
		n += pt.len()
	}
	if n >= keyedMinEntries {
		// A large batch: the state keys are built on another goroutine
		// (finish_keys.go).
		return closed, o.mergeKeyed(merge)
	}
	o.eachInOrder(func(s int, e int32) bool {
		o.keyBuf = o.pts[s].stateKey(o.keyBuf[:0], int(e))
		err = merge(o.pts[s], int(e), o.keyBuf)
		return err == nil
	})
	return closed, err
}

// eachInOrder calls f with every entry of the partials in key order (their
// keys are disjoint: a k-way merge of o.orders, which keyOrders set, each
// run of o.ends sorted in place as the merge reaches it) until f returns
// false, and reports whether it went through them all. A shard's keys are
// whole windows (shard.go), so the merge's first comparison (the window
// start) nearly always decides. A run it sorted stays sorted: a call after
// one that stopped part way sorts it again at little cost.
func (o *Operator) eachInOrder(f func(s int, e int32) bool) bool {
	var heads, runEnd, run [8]int
	if len(o.pts) > len(heads) {
		panic(fmt.Sprintf("aggregation: %d partials, at most %d", len(o.pts), len(heads)))
	}
	// enter sorts partial s's run starting at its head.
	enter := func(s int) {
		h, ends := heads[s], o.ends[s]
		if ends == nil {
			runEnd[s] = len(o.orders[s])
			return
		}
		b := run[s]
		for int(ends[b]) <= h { // skip the empty windows
			b++
		}
		run[s], runEnd[s] = b, int(ends[b])
		o.pts[s].sortRun(o.orders[s][h:runEnd[s]])
	}
	if len(o.pts) == 1 {
		ord := o.orders[0]
		for heads[0] < len(ord) {
			enter(0)
			for _, e := range ord[heads[0]:runEnd[0]] {
				if !f(0, e) {
					return false
				}
			}
			heads[0] = runEnd[0]
		}
		return true
	}
	for s := range o.pts {
		if len(o.orders[s]) > 0 {
			enter(s)
		}
	}
	for {
		best := -1
		for s := range o.pts {
			h := heads[s]
			if h == len(o.orders[s]) {
				continue
			}
			if best < 0 || o.p.cmpEntries(o.pts[s], o.orders[s][h], o.pts[best], o.orders[best][heads[best]]) < 0 {
				best = s
			}
		}
		if best < 0 {
			return true
		}
		e := o.orders[best][heads[best]]
		heads[best]++
		if h := heads[best]; h == runEnd[best] && h < len(o.orders[best]) {
			enter(best)
		}
		if !f(best, e) {
			return false
		}
	}
}

// keyOrders sets o.orders and o.ends to each partial's entries in window
// runs (keyRuns), placing the partials after the first on goroutines of
// their own when they are large enough to pay for one.
func (o *Operator) keyOrders() {
	var wg sync.WaitGroup
	for s := 1; s < len(o.pts); s++ {
		if o.pts[s].len() < shardMinRows {
			o.orders[s], o.counts[s], o.ends[s] = o.pts[s].keyRuns(o.orders[s][:0], o.counts[s])
			continue
		}
		wg.Go(func() { o.orders[s], o.counts[s], o.ends[s] = o.pts[s].keyRuns(o.orders[s][:0], o.counts[s]) })
	}
	o.orders[0], o.counts[0], o.ends[0] = o.pts[0].keyRuns(o.orders[0][:0], o.counts[0])
	wg.Wait()
}

// mergeEntry merges partial entry e into its state key (key), read with
// get or, for a window the previous version closed at commit, from the
// carry, and writes the result: a group every row of which is retracted
// leaves state (dropEmptied); a window this batch's watermark (wmUs)
// closes is removed at once, as Spark puts it and evicts it in the same
// batch (append mode emits it); a window closed at commit (end <= closeUs)
// is not stored but carried to the next batch, which may still merge rows
// into it; any other group is stored. In update mode the entry's row goes
// to out.
func (o *Operator) mergeEntry(get func([]byte) ([]byte, bool, error), batchID int64, pt *partial, e int, key []byte, wmUs, closeUs int64, out *output) (closed bool, err error) {
	p := o.p
	clear(o.vals)
	end := pt.start[e] + p.sizeUs
	// absent: the key's window is outside those state holds, so the key is
	// not in state (a read would say so at the cost of a call and a copy
	// of the key per entry).
	absent := p.window && (end > o.noneAboveUs || end <= o.noneBelowUs)
	var val []byte
	var stored bool
	if !absent {
		o.stateReads++
		if val, stored, err = get(key); err != nil {
			return false, fmt.Errorf("aggregation: read state: %w", err)
		}
	}
	carried := false
	if !stored && o.carry != nil && p.window && end <= o.carry.upUs {
		if val, carried, err = o.carry.get(o.fs, o.stateDir, key); err != nil {
			return false, err
		}
	}
	if stored || carried {
		if err := p.decodeValue(val, o.vals); err != nil {
			return false, err
		}
	}
	if a := pt.merge(e, o.vals); a >= 0 {
		return false, o.overflow(batchID, a)
	}
	if p.rowsAgg >= 0 && o.vals[p.rowsAgg].i <= 0 {
		return false, o.dropEmptied(batchID, pt, e, key, stored, carried, out)
	}
	if p.spec.Mode == Update {
		out.appendEntry(pt, e, o.vals)
	}
	if p.window && end <= closeUs {
		if stored {
			if err := o.store.Delete(key); err != nil {
				return false, fmt.Errorf("aggregation: write state: %w", err)
			}
		}
		if end <= wmUs {
			// Input reaches a window the batch's watermark closes when it
			// was not late by the previous batch's (Spark 3.4+): the window
			// is final now, so append mode emits it now, as Spark's
			// StateStoreSaveExec emits what the watermark evicts.
			if p.spec.Mode == Append {
				out.appendEntry(pt, e, o.vals)
			}
			if !carried {
				o.removedAtMerge++
			}
			return false, nil
		}
		o.valBuf = p.encodeValue(o.valBuf[:0], o.vals)
		return true, o.pendingCarry.add(key, o.valBuf)
	}
	o.valBuf = p.encodeValue(o.valBuf[:0], o.vals)
	if absent {
		// Known missing from the committed version: the store looks it
		// up neither now nor at commit.
		err = o.store.PutKnown(key, o.valBuf, false)
	} else {
		err = o.store.Put(key, o.valBuf)
	}
	if err != nil {
		return false, fmt.Errorf("aggregation: write state: %w", err)
	}
	if p.window {
		o.noneBelowUs = min(o.noneBelowUs, end-1)
		o.noneAboveUs = max(o.noneAboveUs, end)
	}
	return false, nil
}

// dropEmptied handles entry e (state key key, merged values in o.vals)
// whose group count fell to zero or below: below is a source bug (it
// retracted rows it never emitted); zero means every row of the group was
// retracted, so it leaves state and, in update mode, the sink.
func (o *Operator) dropEmptied(batchID int64, pt *partial, e int, key []byte, stored, carried bool, out *output) error {
	if c := o.vals[o.p.rowsAgg].i; c < 0 {
		return errcode.New(CodeRetractionUnmatched, "",
			"this is a bug in the source: it must retract only rows it emitted in an earlier batch",
			"batch %d retracts %d more rows than group %s holds", batchID, -c, o.describeEntry(pt, e))
	}
	if !stored && !carried {
		return nil
	}
	if stored {
		// A carried group is counted as removed already (the previous
		// version's closedRows).
		if err := o.store.Delete(key); err != nil {
			return fmt.Errorf("aggregation: delete state: %w", err)
		}
		o.deleted++
	}
	if o.p.spec.Mode == Update {
		out.appendDeletion(pt, e, o.vals)
	}
	return nil
}

// appendState appends every key left in state to out (complete mode).
func (o *Operator) appendState(out *output) error {
	err := o.store.Scan(nil, nil, func(key, val []byte) error {
		if err := o.p.decodeValue(val, o.vals); err != nil {
			return err
		}
		return out.appendStored(key, o.vals)
	})
	if err != nil {
		return fmt.Errorf("aggregation: read state for complete output: %w", err)
	}
	return nil
}

// finishFigures are the counts and timings Finish measures for the batch's
// stateOperators entry.
type finishFigures struct {
	updated, closed, removed, removedUnstored, outRows int64
	updates, removals                                  time.Duration
}

// batchProgress builds the batch's stateOperators entry from f and the
// batch's input counters (commitTimeMs and memoryUsedBytes of its commit
// are added by Commit).
func (o *Operator) batchProgress(f finishFigures) stream.OperatorProgress {
	parts := int64(o.store.Partitions())
	pr := stream.OperatorProgress{
		OperatorName:              OperatorName,
		NumRowsTotal:              o.store.NumKeys() + f.closed,
		NumRowsUpdated:            f.updated,
		AllUpdatesTimeMs:          f.updates.Milliseconds(),
		NumRowsRemoved:            f.removed + o.deleted,
		AllRemovalsTimeMs:         f.removals.Milliseconds(),
		MemoryUsedBytes:           o.memBytes,
		NumRowsDroppedByWatermark: o.chunk.dropped,
		NumShufflePartitions:      parts,
		NumStateStoreInstances:    parts,
		CustomMetrics: map[string]int64{
			"numInputRows":         o.inRows,
			"numNullEventTimeRows": o.chunk.nullTS,
			"numOutputRows":        f.outRows,
			// Spark's figures stay whole (numRowsTotal counts the closed
			// rows, numRowsRemoved the unstored ones); these say how much
			// of them was never stored (doc.go, Closed at commit).
			MetricClosedUnstored:  f.closed,
			MetricRemovedUnstored: f.removedUnstored,
			MetricProcessTime:     o.process.Milliseconds(),
		},
	}
	if o.p.spec.Retractions || o.retracted > 0 {
		pr.CustomMetrics["numRetractedRows"] = o.retracted
		pr.CustomMetrics["numLateRetractions"] = o.chunk.lateRetractions
		pr.CustomMetrics["numGroupsRetracted"] = o.deleted
	}
	return pr
}

// describeEntry renders partial entry e's key for errors.
func (o *Operator) describeEntry(pt *partial, e int) string {
	var b strings.Builder
	b.WriteByte('(')
	if o.p.window {
		fmt.Fprintf(&b, "window [%s, %s)", time.UnixMicro(pt.start[e]).UTC().Format(time.RFC3339),
			time.UnixMicro(pt.start[e]+o.p.sizeUs).UTC().Format(time.RFC3339))
	}
	for k, g := range o.p.spec.GroupBy {
		if b.Len() > 1 {
			b.WriteString(", ")
		}
		switch {
		case pt.gNull[k][e]:
			fmt.Fprintf(&b, "%s=null", g)
		case o.p.groupType[k].Kind() == stream.Decimal:
			fmt.Fprintf(&b, "%s=%s", g, stream.Dec128FromKey([]byte(pt.keyStr(k, e))).Text(o.p.groupType[k].Scale()))
		case o.p.strKey(k):
			fmt.Fprintf(&b, "%s=%q", g, pt.keyStr(k, e))
		case o.p.floatKey(k):
			fmt.Fprintf(&b, "%s=%v", g, math.Float64frombits(uint64(pt.gInt[k][e])))
		default:
			fmt.Fprintf(&b, "%s=%d", g, pt.gInt[k][e])
		}
	}
	b.WriteByte(')')
	return b.String()
}

// closedAtCommitUs is the watermark that closes state at this batch's
// commit: the next batch's (NextWatermark) in update mode, where evicting
// emits nothing and so a row the next batch would only delete need not be
// stored; otherwise this batch's own (wmUs).
func (o *Operator) closedAtCommitUs(batchID, wmUs int64) int64 {
	if !o.evicts() || o.p.spec.Mode != Update || !o.hasNextWm || o.nextWmBatch != batchID {
		return wmUs
	}
	return max(wmUs, o.nextWmUs)
}

// NextWatermark records the watermark batch batchID's successor runs with
// (stream.WatermarkLookahead): the engine calls it before Finish.
func (o *Operator) NextWatermark(batchID, nextWatermarkMs int64) {
	o.hasNextWm, o.nextWmBatch, o.nextWmUs, o.nextWmMs = true, batchID, o.wmUs(nextWatermarkMs), nextWatermarkMs
}

// evict deletes every stored key whose window end <= closeUs (a range scan:
// keys start with window_end), appending them to out in append mode. It
// returns the keys whose window end <= wmUs (removed, Spark's eviction) and
// the others (closed at commit: Spark keeps them until the next batch).
func (o *Operator) evict(wmUs, closeUs int64, out *output) (removed, closed int64, err error) {
	if !o.evicts() || closeUs <= o.noneBelowUs {
		return 0, 0, nil
	}
	upper := state.AppendInt64Key(nil, closeUs+1)
	live := state.AppendInt64Key(nil, wmUs+1) // smallest key this batch's watermark keeps
	err = o.store.Scan(nil, upper, func(key, val []byte) error {
		if bytes.Compare(key, live) >= 0 {
			closed++
			if o.pendingCarry != nil {
				if err := o.pendingCarry.add(key, val); err != nil {
					return err
				}
			}
			return o.store.Delete(key)
		}
		if o.p.spec.Mode == Append {
			if err := o.p.decodeValue(val, o.vals); err != nil {
				return err
			}
			if err := out.appendStored(key, o.vals); err != nil {
				return err
			}
		}
		removed++
		return o.store.Delete(key)
	})
	if err != nil {
		return removed, closed, fmt.Errorf("aggregation: evict windows closed by watermark: %w", err)
	}
	o.noneBelowUs = closeUs
	return removed, closed, nil
}

// PrepareCommit writes state version batchID's data without making it
// visible (stream.CommitPreparer, state.Store.Prepare); Commit then
// publishes it. The engine calls it while the sink writes the batch.
func (o *Operator) PrepareCommit(ctx context.Context, batchID int64) error {
	if err := o.life.Committable(o.store, batchID); err != nil {
		return err
	}
	// The version's .meta names its carry: the carry is durable first.
	if err := o.pendingCarry.wait(); err != nil {
		return err
	}
	if err := o.store.Prepare(ctx, batchID); err != nil {
		return fmt.Errorf("aggregation: prepare state version %d: %w", batchID, err)
	}
	return nil
}

// Commit makes state version batchID durable (publishing what PrepareCommit
// wrote, if it ran). The progress of the batch, completed with the commit's
// metrics, is then available from Progress.
func (o *Operator) Commit(ctx context.Context, batchID int64) error {
	if err := o.life.Committable(o.store, batchID); err != nil {
		return err
	}
	if err := o.pendingCarry.wait(); err != nil {
		return err
	}
	m, err := o.life.Commit(ctx, o.store, batchID, &o.progress)
	if err != nil {
		return err
	}
	o.memBytes = m.MemoryUsedBytes
	prev := o.committed
	o.committed = o.pending
	o.version, o.carry, o.pendingCarry = batchID, nil, nil
	if o.committed.hasCarry() {
		o.carry = &carryRef{version: batchID, upUs: o.wmUs(*o.committed.NextWatermarkMs), rec: o.committed}
	}
	if prev.CarryFile != "" || o.committed.CarryFile != "" {
		// The carries a load of this version or of the one before it
		// (a rerun of the batch) reads; the others are garbage.
		if err := collectCarries(o.fs, o.stateDir, prev.CarryFile, o.committed.CarryFile); err != nil {
			o.logger.Warn("aggregation: collect closed-at-commit carries", "error", err)
		}
	}
	o.progress.NumRowsTotal = m.RowsTotal + o.committed.ClosedRows
	if o.progress.CustomMetrics != nil {
		o.progress.CustomMetrics[MetricCommitPrepareTime] = m.PrepareTimeMs
	}
	o.committedNoneBelowUs = o.noneBelowUs
	o.resetBatch()
	return nil
}

// Recycle takes back the batch the last Finish returned once nothing holds
// it (stream.OutputRecycler): the next Finish builds its rows in its
// columns rather than in new ones (a seed backfill allocated 517 of its
// 2,000 MB for them, 295 of the 1,811 left for its string column). Its
// string columns are cleared: their strings would otherwise stay live
// until the next Finish (in a backfill, through the whole next read), and
// a GC cycle's scan of a cleared column follows no pointer. Any other
// batch is ignored.
func (o *Operator) Recycle(out *stream.Batch) {
	if out == nil || out != o.lastOut {
		return
	}
	for i := range out.Columns {
		clear(out.Columns[i].Strings)
		out.Columns[i].Strings = out.Columns[i].Strings[:0]
		out.Columns[i].Dict = nil
	}
	o.spare, o.lastOut = out, nil
}

// Progress returns the stateOperators entry of the last finished batch; after
// Commit it includes commitTimeMs and memoryUsedBytes of that commit, which
// Finish cannot know yet.
func (o *Operator) Progress() stream.OperatorProgress { return o.progress }

// Abort discards the current batch: partial aggregates and pending state.
func (o *Operator) Abort() {
	o.life.Abort(o.store)
	// The carry of the committed version stays: a rerun of the batch needs it.
	o.pendingCarry.abort()
	o.pendingCarry = nil
	o.noneBelowUs = o.committedNoneBelowUs
	o.resetBatch()
}

// NeedsNoDataBatch is Spark's StateStoreSaveExec.shouldRunAnotherBatch:
// true in append and update mode, false in complete mode, except over
// windows with a watermark, which ethstream's complete mode evicts (a
// documented difference) and so runs as update mode does. The engine asks
// only once the operator's input watermark moved past the one it ran the
// last batch with, so the answer does not depend on whether a window
// closes: the batch after a skipped one would drop late input by an older
// watermark than Spark's (docs/contracts.md, State). A batch that closes
// nothing costs the eviction no scan (noneBelowUs).
func (o *Operator) NeedsNoDataBatch(int64) (bool, error) {
	return o.store != nil && (o.p.spec.Mode != Complete || o.evicts()), nil
}

// Repartition writes the state committed at base into n partitions as
// version batchID (delegated to the store), and continues with n partitions.
func (o *Operator) Repartition(ctx context.Context, base, batchID int64, n int) (stream.RepartitionStats, error) {
	st, err := o.life.Repartition(ctx, o.store, base, batchID, n)
	if err == nil && o.version == base {
		// Version batchID holds base's rows, and so leaves out what base
		// closed at commit: the carry holds it still.
		if o.carry != nil && o.carry.version == base {
			o.carry.version = batchID
		}
		o.version = batchID
	}
	return st, err
}

// CheckPartitions refuses a partition count the state store's cache cannot
// hold within the process's open-file limit (stream.PartitionLimiter).
func (o *Operator) CheckPartitions(from, to int) error { return state.CheckPartitions(from, to) }

// Close releases the store; uncommitted changes are discarded. The operator
// may be opened again.
func (o *Operator) Close() error {
	err := o.life.Close(o.store)
	o.pendingCarry.abort()
	o.store, o.carry, o.pendingCarry = nil, nil, nil
	o.lastOut, o.spare = nil, nil
	o.resetBatch()
	return err
}

// overflow is ARITHMETIC_OVERFLOW for aggregate a in batch batchID: the
// batch fails before its state or its output is written.
func (o *Operator) overflow(batchID int64, a int) error {
	ra := &o.p.aggs[a]
	remedy := "set spark.sql.ansi.enabled=false to let a long sum wrap as Spark 3 does, or sum fewer rows per group"
	if ra.Kind == Avg {
		remedy = "average a smaller column, or fewer rows per group (ethstream's avg keeps a long sum; Spark's a double)"
	}
	if ra.in.Kind() == stream.Decimal {
		return errcode.New(CodeArithmeticOverflow, "", "cast the column to a wider DECIMAL (or to DOUBLE) before aggregating it",
			"batch %d: %s(%s) as %s: the decimal result left %s", batchID, ra.Kind, ra.Column, ra.As, ra.out)
	}
	return errcode.New(CodeArithmeticOverflow, "", remedy,
		"batch %d: %s(%s) as %s: long overflow (the sum left BIGINT)", batchID, ra.Kind, ra.Column, ra.As)
}
