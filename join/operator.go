package join

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
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
	p      *plan
	store  *state.Store
	logger *slog.Logger
	life   opbase.Lifecycle
	types  [2][]stream.Type // each side's key column types

	out           *outBuilder
	inRows, late  int64
	nullKeys, put int64
	process       time.Duration
	progress      stream.OperatorProgress
	keyBuf        []byte
	// rows caches the decoded stored rows the batch read or wrote, by
	// state key: a key's values are read again for every row of the batch
	// with that key, and decoding the JSON is most of a join's CPU.
	rows map[string]cachedRow
}

type cachedRow struct {
	r       row
	matched bool
}

var (
	_ stream.SideOperator      = (*Operator)(nil)
	_ stream.SchemaOperator    = (*Operator)(nil)
	_ stream.PartitionLimiter  = (*Operator)(nil)
	_ stream.ProgressReporter  = (*Operator)(nil)
	_ stream.WatermarkProducer = (*Operator)(nil)
)

// New validates spec (columns, types and Spark's rules for the join type)
// and returns an operator to Open.
func New(spec Spec) (*Operator, error) {
	p, err := newPlan(spec)
	if err != nil {
		return nil, err
	}
	o := &Operator{p: p, life: opbase.New("join", p)}
	for i, sp := range p.sides {
		for _, j := range sp.keys {
			o.types[i] = append(o.types[i], sp.Schema.Fields[j].Type)
		}
	}
	return o, nil
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

// Spec returns the join's declaration.
func (o *Operator) Spec() Spec { return o.p.spec }

// KeyColumns are the equi-join key pairs, "k=k2", in order.
func (o *Operator) KeyColumns() []string { return o.p.keyColumns() }

// String renders the join, e.g. "LeftOuter join a, b on a.k = b.k AND ...".
func (o *Operator) String() string { return o.p.String() }

// Open loads the state committed at env.Version; another join type, other
// keys or other side columns are STATE_SCHEMA_MISMATCH.
func (o *Operator) Open(ctx context.Context, env stream.OperatorEnv) error {
	s, logger, err := o.life.Open(ctx, o.store, env, state.Options{Schema: o.p.schema})
	if err != nil {
		return err
	}
	o.store, o.logger = s, logger
	return nil
}

// begin starts batch batchID on its first ProcessSide or Finish.
func (o *Operator) begin(batchID int64) error {
	started, err := o.life.Begin(o.store, batchID)
	if started {
		o.inRows, o.late, o.nullKeys, o.put, o.process = 0, 0, 0, 0, 0
		o.out = newOutBuilder(o.p.out)
		o.rows = map[string]cachedRow{}
	}
	return err
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
	wmUs := watermarkMs * 1000
	for i := 0; i < in.Len; i++ {
		o.inRows++
		r := rowAt(cols, i)
		if sp.wm >= 0 && r[sp.wm] != nil && r[sp.wm].(int64) <= wmUs {
			o.late++
			continue
		}
		if err := o.joinRow(side, r); err != nil {
			return err
		}
	}
	return nil
}

// joinRow joins one row of side with the other side's state and stores it.
func (o *Operator) joinRow(side int, r row) error {
	sp := &o.p.sides[side]
	kb, null := encodeJoinKey(o.keyBuf[:0], r, sp.keys, o.types[side])
	o.keyBuf = kb
	key := bytes.Clone(kb)
	if null {
		// A null key equals nothing (SQL's =). Spark's optimizer drops such
		// rows before a side whose rows the join never emits alone
		// (isnotnull inferred); a preserved side keeps them to emit with
		// nulls once evicted.
		o.nullKeys++
		if !o.p.spec.Type.preserves(side) {
			return nil
		}
		return o.appendState(side, key, r, false)
	}
	other := 1 - side
	n, err := o.count(other, key)
	if err != nil {
		return err
	}
	matched := false
	t := o.p.spec.Type
	for idx := int64(0); idx < n; idx++ {
		orow, omatched, err := o.value(other, key, idx)
		if err != nil {
			return err
		}
		l, rr := r, orow
		if side == stream.RightSide {
			l, rr = orow, r
		}
		if !o.p.inRange(l, rr) {
			continue
		}
		if t == LeftSemi && side == stream.RightSide && omatched {
			continue // that left row was emitted once already
		}
		matched = true
		switch {
		case t == LeftSemi && side == stream.LeftSide:
		case t == LeftSemi:
			o.out.add(o.p, orow, nil)
		default:
			o.out.add(o.p, l, rr)
		}
		if !omatched {
			if err := o.putValue(other, key, idx, orow, true); err != nil {
				return err
			}
		}
		if t == LeftSemi && side == stream.LeftSide {
			break
		}
	}
	if t == LeftSemi && side == stream.LeftSide && matched {
		o.out.add(o.p, r, nil)
		return nil // emitted: a left semi join keeps no matched left row
	}
	return o.appendState(side, key, r, matched)
}

// inRange evaluates the time-range condition on a left and a right row
// (a null is never in range).
func (p *plan) inRange(l, r row) bool {
	for _, b := range p.spec.Range {
		lv, rv := l[fieldIndex(p.sides[0].Schema, b.LeftColumn)], r[fieldIndex(p.sides[1].Schema, b.RightColumn)]
		if lv == nil || rv == nil {
			return false
		}
		x, y := lv.(int64)+b.LeftOffset.Microseconds(), rv.(int64)+b.RightOffset.Microseconds()
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

// count reads keyToNumValues of (side, key).
func (o *Operator) count(side int, key []byte) (int64, error) {
	v, ok, err := o.store.Get(stateKey(nil, side, StoreKeyToNumValues, key, 0, false))
	if err != nil || !ok {
		return 0, o.stateErr("read", err)
	}
	n, err := decodeCount(v)
	return n, o.stateErr("read", err)
}

// value reads keyWithIndexToValue of (side, key, idx).
func (o *Operator) value(side int, key []byte, idx int64) (row, bool, error) {
	sk := stateKey(nil, side, StoreKeyWithIndexToValue, key, idx, true)
	if c, ok := o.rows[string(sk)]; ok {
		return c.r, c.matched, nil
	}
	v, ok, err := o.store.Get(sk)
	if err != nil {
		return nil, false, o.stateErr("read", err)
	}
	if !ok {
		return nil, false, errcode.Corrupt("", nil, "%s: state of the %s side has no value %d of a key it counts", o.p, sideName(side), idx)
	}
	r, m, err := decodeRow(o.p.sides[side].Schema.Fields, o.p.sides[side].fast, v)
	if err != nil {
		return nil, false, o.stateErr("read", err)
	}
	if o.rows != nil {
		o.rows[string(sk)] = cachedRow{r, m}
	}
	return r, m, nil
}

func (o *Operator) putValue(side int, key []byte, idx int64, r row, matched bool) error {
	v, err := encodeRow(o.p.sides[side].Schema.Fields, r, matched)
	if err != nil {
		return fmt.Errorf("%s: %w", o.p, err)
	}
	o.put++
	sk := stateKey(nil, side, StoreKeyWithIndexToValue, key, idx, true)
	if o.rows != nil {
		o.rows[string(sk)] = cachedRow{r, matched}
	}
	return o.stateErr("write", o.store.Put(sk, v))
}

func (o *Operator) putCount(side int, key []byte, n int64) error {
	k := stateKey(nil, side, StoreKeyToNumValues, key, 0, false)
	if n == 0 {
		return o.stateErr("write", o.store.Delete(k))
	}
	return o.stateErr("write", o.store.Put(k, encodeCount(n)))
}

// appendState appends r as the next value of (side, key).
func (o *Operator) appendState(side int, key []byte, r row, matched bool) error {
	n, err := o.count(side, key)
	if err != nil {
		return err
	}
	if err := o.putValue(side, key, n, r, matched); err != nil {
		return err
	}
	return o.putCount(side, key, n+1)
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
	if !e.active || r[e.col] == nil {
		return false
	}
	return r[e.col].(int64) <= e.limUs
}

// storedRow is one keyWithIndexToValue row met by a scan.
type storedRow struct {
	idx     int64
	r       row
	matched bool
}

// scanSide reads every stored row of side, grouped by join key (the
// encoded key bytes), each group in index order. The store scans partition
// by partition, and a key's indexes hash to different partitions, so the
// groups are assembled before fn runs (fn may then write).
func (o *Operator) scanSide(side int, fn func(key []byte, rows []storedRow) error) error {
	prefix := stateKeyPrefix(side, StoreKeyWithIndexToValue)
	// The prefix ends with the store name's terminator 0x00 0x01; every
	// key of the store sorts below the same bytes ending 0x00 0x02.
	upper := bytes.Clone(prefix)
	upper[len(upper)-1]++
	groups := map[string][]storedRow{}
	idxField := []state.Field{{Name: ColIndex, Type: stream.Int64, Nullable: true}}
	err := o.store.Scan(prefix, upper, func(k, v []byte) error {
		if !bytes.HasPrefix(k, prefix) || len(k) < len(prefix)+9 {
			return nil
		}
		jk := string(k[len(prefix) : len(k)-9])
		idxRow, err := state.DecodeKey(idxField, k[len(k)-9:])
		if err != nil {
			return err
		}
		idx, _ := idxRow[0].(int64)
		r, m, err := decodeRow(o.p.sides[side].Schema.Fields, o.p.sides[side].fast, v)
		if err != nil {
			return err
		}
		groups[jk] = append(groups[jk], storedRow{idx: idx, r: r, matched: m})
		return nil
	})
	if err != nil {
		return o.stateErr("scan", err)
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		rows := groups[k]
		slices.SortFunc(rows, func(a, b storedRow) int { return cmp.Compare(a.idx, b.idx) })
		for i, sr := range rows {
			if sr.idx != int64(i) {
				return errcode.Corrupt("", nil, "%s: state of the %s side holds index %d of a key at position %d", o.p, sideName(side), sr.idx, i)
			}
		}
		if err := fn([]byte(k), rows); err != nil {
			return err
		}
	}
	return nil
}

// evict removes the rows the watermark passed on each side and emits the
// preserved side's unmatched ones with nulls; it returns the rows removed.
func (o *Operator) evict(wmMs int64) (int64, error) {
	ev := o.p.evictors(wmMs)
	var removed int64
	for side := range o.p.sides {
		if !ev[side].active {
			continue
		}
		err := o.scanSide(side, func(key []byte, rows []storedRow) error {
			var keep []storedRow
			for _, sr := range rows {
				if !ev[side].evicts(sr.r) {
					keep = append(keep, sr)
					continue
				}
				removed++
				if !sr.matched && o.p.spec.Type.preserves(side) {
					if side == stream.LeftSide {
						o.out.add(o.p, sr.r, nil)
					} else {
						o.out.add(o.p, nil, sr.r)
					}
				}
			}
			if len(keep) == len(rows) {
				return nil
			}
			// Compact the survivors to indexes 0..len(keep)-1, as Spark's
			// removal moves the last value into a removed slot.
			for i, sr := range keep {
				if sr.idx != int64(i) {
					if err := o.putValue(side, key, int64(i), sr.r, sr.matched); err != nil {
						return err
					}
				}
			}
			for i := len(keep); i < len(rows); i++ {
				sk := stateKey(nil, side, StoreKeyWithIndexToValue, key, int64(i), true)
				delete(o.rows, string(sk))
				if err := o.stateErr("write", o.store.Delete(sk)); err != nil {
					return err
				}
			}
			return o.putCount(side, key, int64(len(keep)))
		})
		if err != nil {
			return removed, err
		}
	}
	return removed, nil
}

// Finish evicts what the watermark passed, emitting outer rows, and
// returns the batch's joined rows (append mode).
func (o *Operator) Finish(ctx context.Context, batchID, watermarkMs int64) (*stream.Batch, stream.OperatorProgress, error) {
	if err := o.begin(batchID); err != nil {
		return nil, stream.OperatorProgress{}, err
	}
	t0 := time.Now()
	removed, err := o.evict(watermarkMs)
	if err != nil {
		return nil, stream.OperatorProgress{}, err
	}
	parts := int64(o.store.Partitions())
	out := o.out.batch()
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
	o.out, o.rows = nil, nil
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

// Commit makes state version batchID durable.
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
	o.out, o.rows = nil, nil
}

// NeedsNoDataBatch reports whether a batch at watermarkMs would evict a
// stored row (and so perhaps emit an outer row).
func (o *Operator) NeedsNoDataBatch(watermarkMs int64) (bool, error) {
	if o.store == nil {
		return false, nil
	}
	ev := o.p.evictors(watermarkMs)
	found := false
	for side := range o.p.sides {
		if !ev[side].active || found {
			continue
		}
		err := o.scanSide(side, func(_ []byte, rows []storedRow) error {
			for _, sr := range rows {
				if ev[side].evicts(sr.r) {
					found = true
				}
			}
			return nil
		})
		if err != nil {
			return false, err
		}
	}
	return found, nil
}

// Repartition writes the state committed at base into n partitions as
// version batchID, and continues with n partitions.
func (o *Operator) Repartition(ctx context.Context, base, batchID int64, n int) (stream.RepartitionStats, error) {
	return o.life.Repartition(ctx, o.store, base, batchID, n)
}

// CheckPartitions refuses a partition count the state store's cache cannot
// hold (stream.PartitionLimiter).
func (o *Operator) CheckPartitions(from, to int) error { return state.CheckPartitions(from, to) }

// Close releases the store; uncommitted changes are discarded.
func (o *Operator) Close() error {
	err := o.life.Close(o.store)
	o.store, o.out = nil, nil
	return err
}

// outBuilder collects the joined rows of a batch.
type outBuilder struct{ b *stream.Batch }

func newOutBuilder(s stream.Schema) *outBuilder { return &outBuilder{b: opbase.NewBatch(s)} }

// add appends the joined row of l and r (nil: that side's nulls).
func (ob *outBuilder) add(p *plan, l, r row) {
	for j, oc := range p.outCols {
		src := l
		if oc.side == stream.RightSide {
			src = r
		}
		var v any
		if src != nil {
			v = src[oc.col]
		}
		c := &ob.b.Columns[j]
		switch c.Type.Storage() {
		case stream.Float64:
			x, _ := v.(float64)
			c.Float64s = append(c.Float64s, x)
		case stream.String:
			x, _ := v.(string)
			c.Strings = append(c.Strings, x)
		default:
			x, _ := v.(int64)
			c.Int64s = append(c.Int64s, x)
		}
		if v == nil && c.Valid == nil {
			c.Valid = make([]bool, ob.b.Len, ob.b.Len+1)
			for i := range c.Valid {
				c.Valid[i] = true
			}
		}
		if c.Valid != nil {
			c.Valid = append(c.Valid, v != nil)
		}
	}
	ob.b.Len++
}

func (ob *outBuilder) batch() *stream.Batch { return ob.b }
