package join

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/opbase"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// Operator is the stream-stream join (stream.SideOperator over one
// state.Store), driven from one goroutine at a time; it is not safe for
// concurrent use.
type Operator struct {
	// StateRecord makes the operator a stream.StateRecorder.
	opbase.StateRecord
	p *plan
	// need is the spec's plan, storing the columns the query reads; p is
	// need or, once Open found a state recorded with more columns, a plan
	// storing those (stored.go).
	need   *plan
	store  *state.Store
	logger *slog.Logger
	life   opbase.Lifecycle
	types  [2][]stream.Type // each side's key column types
	// evcol is the column each side's eviction compares, -1 on a side
	// that never evicts.
	evcol [2]int

	out            *outBuilder
	outRows        int // the last batch's joined rows: the next one's room (outBuilder)
	inRows, late   int64
	nullKeys, put  int64
	process        time.Duration
	progress       stream.OperatorProgress
	keyBuf, sk, vb []byte
	// ahead sums what ProcessSide's loads ahead read, so that they are
	// not optimized away.
	ahead  uintptr
	cb, ek []byte
	// slab holds the rows, keys and keyRows the operator keeps (slab.go).
	slab slabs
	// mem is each side's rows and eviction index in memory (keyrows.go),
	// nil until loaded; it reflects the state after batch memFor, and
	// dirty lists the keys the batch changed, which flush writes.
	mem    [2]*sideMem
	memFor int64
	dirty  [2][]*keyRows

	// storeEv are each side's state watermark predicates at the eviction
	// watermark of batch storeEvBatch (EvictionWatermark).
	storeEv      [2]evictor
	storeEvBatch int64
	hasStoreEv   bool
}

var (
	_ stream.SideOperator      = (*Operator)(nil)
	_ stream.SchemaOperator    = (*Operator)(nil)
	_ stream.PartitionLimiter  = (*Operator)(nil)
	_ stream.StateRecorder     = (*Operator)(nil)
	_ stream.ProgressReporter  = (*Operator)(nil)
	_ stream.WatermarkProducer = (*Operator)(nil)
	_ stream.CommitPreparer    = (*Operator)(nil)
	_ stream.SideColumnsReader = (*Operator)(nil)
)

// New validates spec (columns, types and Spark's rules for the join type)
// and returns an operator to Open.
func New(spec Spec) (*Operator, error) {
	p, err := newPlan(spec)
	if err != nil {
		return nil, err
	}
	o := &Operator{life: opbase.New("join", p), need: p}
	o.use(p)
	return o, nil
}

// use makes p the operator's plan, with the column indexes it resolves.
func (o *Operator) use(p *plan) {
	o.p = p
	for i, e := range p.evictors(0) {
		// Whether a side evicts and by which column do not depend on the
		// watermark, only the limit does.
		o.evcol[i] = -1
		if e.active {
			o.evcol[i] = e.col
		}
	}
	for i, sp := range p.sides {
		o.types[i] = o.types[i][:0]
		for _, j := range sp.keys {
			o.types[i] = append(o.types[i], sp.Schema.Fields[j].Type)
		}
	}
}

// Schema returns the state schema the operator records and checks on Open.
func (o *Operator) Schema() state.Schema { return o.p.schema }

// OutputSchema is the joined rows' schema (plan.outputSchema).
func (o *Operator) OutputSchema() stream.Schema { return o.p.out }

// OutputColumn is the name in the joined rows of column col of side side
// (stream.LeftSide or RightSide): col, or alias_col when both sides have
// it; false when the rows do not carry it (a left semi join's right side).
func (o *Operator) OutputColumn(side int, col string) (string, bool) {
	return o.p.outputName(side, col)
}

// InputColumns are the columns ProcessSide reads of side's rows: those
// the join stores (stream.SideColumnsReader). Once Open found a state
// recorded with more columns than the query reads, those (stored.go).
func (o *Operator) InputColumns(side int) []string {
	fs := o.p.sides[side].Schema.Fields
	cols := make([]string, len(fs))
	for i, f := range fs {
		cols[i] = f.Name
	}
	return cols
}

// Spec returns the join's declaration.
func (o *Operator) Spec() Spec { return o.p.spec }

// KeyColumns are the equi-join key pairs, "k=k2", in order.
func (o *Operator) KeyColumns() []string { return o.p.keyColumns() }

// String renders the join, e.g. "LeftOuter join a, b on a.k = b.k AND ...".
func (o *Operator) String() string { return o.p.String() }

// memCacheBytes is the budget of the state's cache in memory
// (state.Options.MemCacheBytes): a join whose watermarks evict its rows
// keeps a few batches of them (the 30-day bench shape: about 71,500 rows,
// at most 4 MB of Pebble files beside the memtables), and its Pebble
// instances on disk cost more in file creates than in their work (README,
// Performance). A join that keeps its rows for ever outgrows it and moves
// to disk; the budget bounds the memory it holds until then.
//
// The cache is lazy too (state.Options.LazyCache): a join holding its rows
// in memory (keyrows.go) reads nothing from the store in a backfill, so its
// commits skip the cache until a batch, a restart or an outer join's
// lookup first reads it.
const memCacheBytes = 64 << 20

// Open loads the state committed at env.Version; another join type or
// other keys are STATE_SCHEMA_MISMATCH, and so are stored columns that
// lack one the query reads (a state storing more keeps its layout:
// stored.go).
func (o *Operator) Open(ctx context.Context, env stream.OperatorEnv) error {
	o.use(o.need)
	var recorded string
	s, logger, err := o.life.Open(ctx, o.store, env, state.Options{Schema: o.p.schema, MemCacheBytes: memCacheBytes, LazyCache: true, SpecCompatible: func(spec string) bool {
		recorded = spec
		return o.p.compatibleSpec(spec)
	}})
	if err != nil && recorded != "" && errcode.Is(err, errcode.StateSchemaMismatch) {
		p, perr := o.need.storing(recorded, env.StateDir)
		if perr != nil {
			return perr
		}
		if p != nil {
			if s, logger, err = o.life.Open(ctx, o.store, env, state.Options{Schema: p.schema, MemCacheBytes: memCacheBytes, LazyCache: true, SpecCompatible: p.compatibleSpec}); err == nil {
				o.use(p)
			}
		}
	}
	if err != nil {
		return err
	}
	o.store, o.logger = s, logger
	o.dropMem()
	o.memFor = s.Version()
	return nil
}

// begin starts batch batchID on its first ProcessSide or Finish.
func (o *Operator) begin(batchID int64) error {
	started, err := o.life.Begin(o.store, batchID)
	if started {
		o.inRows, o.late, o.nullKeys, o.put, o.process = 0, 0, 0, 0, 0
		o.out = newOutBuilder(o.p.out, o.outRows)
	}
	if err != nil || !started {
		return err
	}
	return o.useMem()
}

// Process refuses input without a side: a join reads through ProcessSide.
func (o *Operator) Process(ctx context.Context, batchID, watermarkMs int64, in *stream.Batch) error {
	return fmt.Errorf("%s: input without a side: a join is the first stage of a two-input query", o.p)
}

// ProcessSide joins one chunk of side's rows with the other side's state,
// emits the matches and stores the rows (package doc, Rule).
func (o *Operator) ProcessSide(ctx context.Context, batchID, watermarkMs int64, side int, in *stream.Batch) error {
	if err := o.begin(batchID); err != nil {
		return err
	}
	if side != stream.LeftSide && side != stream.RightSide {
		return fmt.Errorf("%s: unknown side %d", o.p, side)
	}
	if in == nil || in.Len == 0 {
		return nil
	}
	t0 := time.Now()
	defer func() { o.process += time.Since(t0) }()
	if err := opbase.RefuseRetractions(in, "%s: the input retracts a row, which a stream-stream join cannot take back from the rows it emitted", o.p); err != nil {
		return err
	}
	sp := &o.p.sides[side]
	cols := make([]*stream.Column, len(sp.Schema.Fields))
	for j, f := range sp.Schema.Fields {
		if cols[j] = in.Column(f.Name); cols[j] == nil || cols[j].Type != f.Type {
			return fmt.Errorf("%s: the %s side's input has no %v column %q", o.p, sideName(side), f.Type, f.Name)
		}
	}
	// Most rows of a backfill add a key of their own; a join of few keys
	// wastes at most 2 MB of slots.
	o.mem[side].keys.reserve(min(in.Len, 1<<16))
	wmUs := watermarkMs * 1000
	// Rows go in blocks: each block's keys are encoded and hashed, and
	// both sides' table slots of them loaded, before its first row
	// joins, so that the slots' cache misses (the tables are MBs) overlap
	// instead of each stalling its row (keyTable.find was 7% of the join
	// leg's CPU).
	var blk [aheadRows]pendingRow
	for i := 0; i < in.Len; {
		n := 0
		o.keyBuf = o.keyBuf[:0]
		for ; i < in.Len && n < len(blk); i++ {
			o.inRows++
			if c := cols[max(sp.wm, 0)]; sp.wm >= 0 && !c.IsNull(i) && c.Int64s[i] <= wmUs {
				o.late++
				continue
			}
			pr := &blk[n]
			pr.r = rowInto(o.slab.row(len(cols)), cols, i)
			start := len(o.keyBuf)
			o.keyBuf, pr.null = encodeJoinKey(o.keyBuf, pr.r, sp.keys, o.types[side])
			pr.start, pr.end = start, len(o.keyBuf)
			pr.h = keyHash(o.keyBuf[start:])
			n++
		}
		// The loads in a loop of their own, one after the other: a miss
		// holds back every instruction after it from retiring, so loads
		// between each row's decoding overlapped few of their misses.
		mine, theirs := &o.mem[side].keys, &o.mem[1-side].keys
		for j := range blk[:n] {
			o.ahead += mine.touch(blk[j].h) + theirs.touch(blk[j].h)
		}
		for j := range blk[:n] {
			pr := &blk[j]
			if err := o.joinRow(side, pr.r, o.keyBuf[pr.start:pr.end:pr.end], pr.h, pr.null); err != nil {
				return err
			}
		}
	}
	return nil
}

// aheadRows is the rows ProcessSide reads ahead of joining them.
const aheadRows = 16

// pendingRow is a row ProcessSide read ahead: its join key's bytes in
// o.keyBuf[start:end] and their keyHash.
type pendingRow struct {
	r          row
	start, end int
	h          uint64
	null       bool
}

// joinRow joins one row of side with the other side's state and stores it.
func (o *Operator) joinRow(side int, r row, kb []byte, h uint64, null bool) error {
	if null {
		// A null key equals nothing (SQL's =). Spark's optimizer drops such
		// rows before a side whose rows the join never emits alone
		// (isnotnull inferred); a preserved side keeps them to emit with
		// nulls once evicted.
		o.nullKeys++
		if !o.p.spec.Type.preserves(side) || o.removedOnStore(side, r) {
			return nil
		}
		return o.appendState(side, kb, h, r, false, "")
	}
	other := 1 - side
	ok, err := o.keyRowsOf(other, kb, h, false, "")
	if err != nil {
		return err
	}
	matched := false
	t := o.p.spec.Type
	for idx := range ok.rows {
		sr := &ok.rows[idx]
		l, rr := r, sr.r
		if side == stream.RightSide {
			l, rr = sr.r, r
		}
		if !o.p.inRange(l, rr) {
			continue
		}
		if t == LeftSemi && side == stream.RightSide && sr.matched {
			continue // that left row was emitted once already
		}
		matched = true
		switch {
		case t == LeftSemi && side == stream.LeftSide:
		case t == LeftSemi:
			o.out.add(o.p, sr.r, nil)
		default:
			o.out.add(o.p, l, rr)
		}
		if !sr.matched {
			sr.matched, sr.changed = true, true
			o.touch(other, ok)
		}
		if t == LeftSemi && side == stream.LeftSide {
			break
		}
	}
	if t == LeftSemi && side == stream.LeftSide && matched {
		o.out.add(o.p, r, nil)
		return nil // emitted: a left semi join keeps no matched left row
	}
	if o.removedOnStore(side, r) {
		return nil
	}
	return o.appendState(side, kb, h, r, matched, ok.key)
}

// EvictionWatermark records the watermark batch batchID evicts by (the
// engine calls it before the batch's first input): a row not late by the
// previous batch's watermark but that this one's state watermark
// predicate already removes is joined and not stored, as Spark's
// OneSideHashJoiner adds a row only if neither state watermark predicate
// matches it; an outer side's such row that matched nothing is therefore
// never emitted with nulls.
func (o *Operator) EvictionWatermark(batchID, watermarkMs int64) {
	o.storeEv, o.storeEvBatch, o.hasStoreEv = o.p.evictors(watermarkMs), batchID, true
}

// removedOnStore reports whether side's row r is below the batch's state
// watermark of its side (EvictionWatermark), so not stored.
func (o *Operator) removedOnStore(side int, r row) bool {
	return o.hasStoreEv && o.storeEvBatch == o.life.ID() && o.storeEv[side].evicts(r)
}

// inRange evaluates the time-range condition on a left and a right row
// (a null is never in range).
func (p *plan) inRange(l, r row) bool {
	for i, b := range p.spec.Range {
		lv, rv := l[p.rangeCols[i][0]], r[p.rangeCols[i][1]]
		if lv.null() || rv.null() {
			return false
		}
		x, y := lv.i()+b.LeftOffset.Microseconds(), rv.i()+b.RightOffset.Microseconds()
		var ok bool
		switch b.Op {
		case LT:
			ok = x < y
		case LE:
			ok = x <= y
		case GT:
			ok = x > y
		case GE:
			ok = x >= y
		}
		if !ok {
			return false
		}
	}
	return true
}

// appendState appends r as the next value of (side, key), whose keyHash
// is h; flush writes it. same is the other side's copy of key, or ""
// (keyRowsOf).
func (o *Operator) appendState(side int, key []byte, h uint64, r row, matched bool, same string) error {
	k, err := o.keyRowsOf(side, key, h, true, same)
	if err != nil {
		return err
	}
	shareKeyBytes(r, o.p.sides[side].keys[0], k.key)
	k.rows = append(k.rows, storedRow{r: r, matched: matched, changed: true})
	o.touch(side, k)
	if x := o.mem[side].idx; x != nil {
		x.add(k.key, r[o.evcol[side]])
	}
	return nil
}

func (o *Operator) stateErr(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %s state: %w", o.p, what, err)
}

// evictor decides which stored rows of a side the watermark removes.
type evictor struct {
	active bool
	col    int   // column of the side's rows compared
	limUs  int64 // a row whose col <= limUs (µs) is evicted
}

// evictors are each side's state watermark predicate at watermark wmMs
// (Spark's getStateWatermarkPredicates): by the key when a join key is a
// watermark column (both sides), else by the side's own watermark column
// against its state value watermark.
func (p *plan) evictors(wmMs int64) [2]evictor {
	var ev [2]evictor
	for i := range p.sides {
		sp := &p.sides[i]
		switch {
		case p.keyWM >= 0:
			ev[i] = evictor{active: true, col: sp.keys[p.keyWM], limUs: wmMs * 1000}
		case sp.wm >= 0:
			if ms, ok := p.stateValueWatermark(i, wmMs); ok {
				ev[i] = evictor{active: true, col: sp.wm, limUs: ms * 1000}
			}
		}
	}
	return ev
}

func (e evictor) evicts(r row) bool {
	if !e.active || r[e.col].null() {
		return false
	}
	return r[e.col].i() <= e.limUs
}

// evict removes the rows the watermark passed on each side and emits the
// preserved side's unmatched ones with nulls; it returns the rows removed.
// The index names the keys holding such rows; each key's rows are then
// read whole (keyRowsOf) and compacted. When both sides evict many rows
// held whole in memory (a backfill's batch), the sides evict on two
// goroutines: each touches its own memory and index only (a key memory
// holds is read without the store, which is not safe for concurrent use),
// and the rows emitted with nulls are added after, the left side's first,
// as one after the other adds them.
func (o *Operator) evict(wmMs int64) (int64, error) {
	ev := o.p.evictors(wmMs)
	both := true
	for side := range o.p.sides {
		m := o.mem[side]
		both = both && ev[side].active && m.complete && m.idx.len() >= evictParallelMin
	}
	if !both {
		var removed int64
		for side := range o.p.sides {
			if !ev[side].active {
				continue
			}
			n, err := o.evictSide(side, ev[side], &o.ek, func(l, r row) { o.out.add(o.p, l, r) })
			removed += n
			if err != nil {
				return removed, err
			}
		}
		return removed, nil
	}
	var outs [2][][2]row
	var ns [2]int64
	var errs [2]error
	var ek [2][]byte
	done := make(chan struct{})
	run := func(side int) {
		ns[side], errs[side] = o.evictSide(side, ev[side], &ek[side], func(l, r row) { outs[side] = append(outs[side], [2]row{l, r}) })
	}
	go func() {
		defer close(done)
		run(stream.RightSide)
	}()
	run(stream.LeftSide)
	<-done
	for _, out := range outs {
		for _, lr := range out {
			o.out.add(o.p, lr[0], lr[1])
		}
	}
	return ns[0] + ns[1], errors.Join(errs[0], errs[1])
}

// evictParallelMin is the rows each side's index must hold for evict to
// run the sides on two goroutines: a live batch's few are not worth one.
var evictParallelMin = 4096

// evictSide is evict's work on one side at limit e: it emits through emit
// (left row, right row; nil: that side's nulls) and keeps its key in *ek.
// A side that emits nothing takes its keys unsorted, a key possibly more
// than once: its second visit finds its rows in memory (a key emptied
// stays there until flush) with none left at or below the limit.
func (o *Operator) evictSide(side int, e evictor, ek *[]byte, emit func(l, r row)) (int64, error) {
	var removed int64
	m := o.mem[side]
	preserves := o.p.spec.Type.preserves(side)
	due := m.idx.popDue(e.limUs, preserves)
	var hs [aheadRows]uint64
	for len(due) > 0 {
		// As ProcessSide: a block's hashes, then its slots' loads in a
		// loop of their own, then its keys.
		blk := due[:min(len(due), len(hs))]
		due = due[len(blk):]
		for j, key := range blk {
			hs[j] = keyHashString(key)
		}
		for j := range blk {
			m.ahead += m.keys.touch(hs[j])
		}
		for j, key := range blk {
			k, _ := m.keys.find(bytesOf(key), hs[j])
			if k == nil {
				*ek = append((*ek)[:0], key...)
				var err error
				if k, err = o.keyRowsOf(side, *ek, hs[j], false, ""); err != nil {
					return removed, err
				}
			}
			removed += o.evictKey(side, e, k, preserves, emit)
		}
	}
	return removed, nil
}

// evictKey removes k's rows at or below e's limit (evictSide) and returns
// how many.
func (o *Operator) evictKey(side int, e evictor, k *keyRows, preserves bool, emit func(l, r row)) int64 {
	var removed int64
	// Compact the survivors to indexes 0..len-1 in their order
	// (Spark's removal moves the key's last value into a removed
	// slot instead: the indexes differ, the rows a key holds, and
	// so what the join emits, do not).
	keep := k.rows[:0]
	for i, sr := range k.rows {
		if e.evicts(sr.r) {
			removed++
			if !sr.matched && preserves {
				if side == stream.LeftSide {
					emit(sr.r, nil)
				} else {
					emit(nil, sr.r)
				}
			}
			continue
		}
		sr.changed = sr.changed || len(keep) != i
		keep = append(keep, sr)
	}
	if len(keep) != len(k.rows) {
		clear(k.rows[len(keep):])
		k.rows = keep
		o.touch(side, k)
	}
	return removed
}

// Finish evicts what the watermark passed, emitting outer rows, and
// returns the batch's joined rows (append mode).
func (o *Operator) Finish(ctx context.Context, batchID, watermarkMs int64) (*stream.Batch, stream.OperatorProgress, error) {
	if err := o.begin(batchID); err != nil {
		return nil, stream.OperatorProgress{}, err
	}
	t0 := time.Now()
	removed, err := o.evict(watermarkMs)
	if err == nil {
		err = o.flush()
	}
	if err != nil {
		o.dropMem()
		return nil, stream.OperatorProgress{}, err
	}
	// Memory now holds the state this batch commits.
	o.memFor = batchID
	parts := int64(o.store.Partitions())
	out := o.out.batch()
	o.outRows = out.Len
	o.progress = stream.OperatorProgress{
		OperatorName:              OperatorName,
		NumRowsTotal:              o.store.NumKeys(),
		NumRowsUpdated:            o.put,
		AllUpdatesTimeMs:          o.process.Milliseconds(),
		NumRowsRemoved:            removed,
		AllRemovalsTimeMs:         time.Since(t0).Milliseconds(),
		NumRowsDroppedByWatermark: o.late,
		NumShufflePartitions:      parts,
		// Spark counts the four stores of every partition.
		NumStateStoreInstances: 4 * parts,
		CustomMetrics: map[string]int64{
			"numInputRows":  o.inRows,
			"numOutputRows": int64(out.Len),
			MetricNullKeys:  o.nullKeys,
		},
	}
	o.life.Finish()
	o.out = nil
	return out, o.progress, nil
}

// OutputWatermark is Spark's StreamingSymmetricHashJoinExec.
// produceOutputWatermark: the least of the input watermark and each side's
// state watermark at it (the key watermark, or the side's state value
// watermark), since a row the join emits later has each side's event time
// above its side's state watermark (an outer row is emitted once its
// side's state watermark passes it, not before).
func (o *Operator) OutputWatermark(inputMs int64) int64 {
	out := inputMs
	for _, e := range o.p.evictors(inputMs) {
		if e.active {
			out = min(out, e.limUs/1000)
		}
	}
	return out
}

// MetricNullKeys counts the input rows whose join key has a null (they
// match nothing): ethstream's own custom metric.
const MetricNullKeys = "numNullKeyRows"

// PrepareCommit writes state version batchID's data file without making
// it visible (stream.CommitPreparer, state.Store.Prepare); Commit then
// publishes it. The engine runs both alongside the sink's write of the
// batch instead of after it. It touches the store only: memory
// (keyrows.go) already reflects the batch, and an Abort after it drops
// memory as after a failed Commit.
func (o *Operator) PrepareCommit(ctx context.Context, batchID int64) error {
	return o.life.Prepare(ctx, o.store, batchID)
}

// Commit makes state version batchID durable (publishing what
// PrepareCommit wrote, if it ran).
func (o *Operator) Commit(ctx context.Context, batchID int64) error {
	_, err := o.life.Commit(ctx, o.store, batchID, &o.progress)
	return err
}

// Progress returns the last batch's stateOperators entry, with its commit's
// figures after Commit.
func (o *Operator) Progress() stream.OperatorProgress { return o.progress }

// Abort discards the current batch.
func (o *Operator) Abort() {
	o.life.Abort(o.store)
	o.out = nil
	// Memory holds the batch's changes: load it from the committed state
	// when next needed.
	o.dropMem()
}

// NeedsNoDataBatch reports whether a batch at watermarkMs runs: whenever
// a side has a state watermark predicate, as Spark's
// StreamingSymmetricHashJoinExec.shouldRunAnotherBatch (the engine asks
// only once the watermark moved past the last batch's). Whether it would
// evict a row does not matter: the batch after it drops late input by its
// watermark (the previous batch's, Spark 3.4+), so skipping it would keep
// rows Spark drops.
func (o *Operator) NeedsNoDataBatch(watermarkMs int64) (bool, error) {
	if o.store == nil {
		return false, nil
	}
	ev := o.p.evictors(watermarkMs)
	return ev[0].active || ev[1].active, nil
}

// Repartition writes the state committed at base into n partitions as
// version batchID, and continues with n partitions.
func (o *Operator) Repartition(ctx context.Context, base, batchID int64, n int) (stream.RepartitionStats, error) {
	if !o.life.Active() {
		o.dropMem()
	}
	return o.life.Repartition(ctx, o.store, base, batchID, n)
}

// CheckPartitions refuses a partition count the state store's cache cannot
// hold (stream.PartitionLimiter).
func (o *Operator) CheckPartitions(from, to int) error { return state.CheckPartitions(from, to) }

// Close releases the store; uncommitted changes are discarded.
func (o *Operator) Close() error {
	err := o.life.Close(o.store)
	o.store, o.out = nil, nil
	o.dropMem()
	return err
}

// outBuilder collects the joined rows of a batch.
type outBuilder struct {
	b *stream.Batch
	// room is the rows the columns hold before they grow: at first the
	// batch before's and an eighth more, as a backfill's batches join
	// about as many rows each, some a few more (without the eighth, each
	// such batch copied its columns once at the end). Grown by append from
	// empty, a batch's columns were copied into fresh memory about four
	// times their final size (8% of the join shape's CPU profile was
	// append's copies, here and in evictIndex.add); a batch without one
	// before (a query's first) doubles them instead of append's quarter
	// more at a time, copying them about once.
	room int
}

func newOutBuilder(s stream.Schema, last int) *outBuilder {
	return &outBuilder{b: opbase.NewBatch(s), room: last + last/8}
}

// reserve gives the columns room for a row more: room rows at the first
// add, then twice as many each time they are full.
func (ob *outBuilder) reserve() {
	n := ob.b.Len
	if n > 0 && n < ob.room {
		return
	}
	if n > 0 || ob.room == 0 {
		ob.room = max(2*ob.room, 1024)
	}
	for j := range ob.b.Columns {
		c := &ob.b.Columns[j]
		switch c.Type.Storage() {
		case stream.Float64:
			c.Float64s = growTo(c.Float64s, ob.room)
		case stream.String:
			c.Strings = growTo(c.Strings, ob.room)
		default:
			c.Int64s = growTo(c.Int64s, ob.room)
		}
	}
}

// growTo is s with a capacity of n (at least len(s)).
func growTo[T any](s []T, n int) []T {
	t := make([]T, len(s), n)
	copy(t, s)
	return t
}

// add appends the joined row of l and r (nil: that side's nulls).
func (ob *outBuilder) add(p *plan, l, r row) {
	if ob.b.Len == 0 || ob.b.Len == ob.room {
		ob.reserve()
	}
	for j, oc := range p.outCols {
		src := l
		if oc.side == stream.RightSide {
			src = r
		}
		v := nullValue
		if src != nil {
			v = src[oc.col]
		}
		c := &ob.b.Columns[j]
		switch c.Type.Storage() {
		case stream.Float64:
			c.Float64s = append(c.Float64s, v.float())
		case stream.String:
			c.Strings = append(c.Strings, v.s())
		default:
			c.Int64s = append(c.Int64s, v.i())
		}
		if v.null() && c.Valid == nil {
			c.Valid = make([]bool, ob.b.Len, ob.b.Len+1)
			for i := range c.Valid {
				c.Valid[i] = true
			}
		}
		if c.Valid != nil {
			c.Valid = append(c.Valid, !v.null())
		}
	}
	ob.b.Len++
}

func (ob *outBuilder) batch() *stream.Batch { return ob.b }
