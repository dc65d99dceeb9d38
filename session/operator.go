package session

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/interval"
	"github.com/ethstream/ethstream/internal/opbase"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// Custom metrics of the stateOperators entry.
const (
	// MetricNullEventTime counts input rows with a null event time (no
	// session; Spark filters them).
	MetricNullEventTime = "numNullEventTimeRows"
	// MetricInvalidGap counts input rows whose dynamic gap is null,
	// malformed or not positive (no session; Spark filters them).
	MetricInvalidGap = "numInvalidGapRows"
)

// Operator is the session window aggregation (stream.Operator over a
// state.Store), driven from one goroutine at a time; it is not safe for
// concurrent use.
type Operator struct {
	// StateRecord makes the operator a stream.StateRecorder.
	opbase.StateRecord
	p      *plan
	store  *state.Store
	logger *slog.Logger
	life   opbase.Lifecycle

	// idx holds every stored session by group key prefix (the encoded
	// group columns), sorted by start: its span and, in append mode, its
	// stored value (doc.go, Index). stale: idx must be rebuilt from the
	// committed state (after an Abort).
	idx   map[string][]indexed
	stale bool
	// minEnd is at most the least end in idx (MaxInt64: none).
	minEnd int64
	// legacyZero says the query's watermark delay of 0 is read as no
	// watermark, the rule the checkpoint's state was written under
	// (oprecord.go; doc.go, Watermark delay 0).
	legacyZero bool

	// byKey holds the batch's new sessions by group prefix: one-row
	// sessions, merged among themselves whenever a key's list doubles
	// (compact), so a batch holds about one entry per session it forms,
	// not one per row.
	byKey          map[string]*pending
	inRows, late   int64
	nullTS, badGap int64
	gapCache       map[string]int64
	process        time.Duration
	keyBuf, valBuf []byte
	rowBuf         agg.Buffer // a row's buffer before it merges into its key's last session
	progress       stream.OperatorProgress
}

// indexed is a stored session in idx: its span and, when the operator
// keeps values (append mode), its state value as stored (end, then the
// aggregates); nil reads it from the store.
type indexed struct {
	span
	val []byte
}

// newRow is a session of the batch's rows: at first one row's, then
// (after compact) several rows merged.
type newRow struct {
	span
	buf agg.Buffer
}

// pending are a key's new sessions; compactAt is the length at which
// compact next runs. While the key's rows come in order of start
// (ordered), a row that starts within the last session (which holds the
// latest start, lastStart) is folded into it: a miner's blocks in a file
// come in time order, and a buffer and a slot per row were most of
// Process's CPU. Its sum then adds in the order of starts, as mergePieces
// would add that row.
type pending struct {
	rows      []newRow
	compactAt int
	lastStart int64
	unordered bool
}

// compactFirst is the number of a key's new rows before its first compact
// (a variable for the tests).
var compactFirst = 64

// compact merges the key's new sessions among themselves (sessions merge
// by overlap alone, so merging a batch's rows in two steps forms the same
// sessions as in one).
func (o *Operator) compact(pd *pending) error {
	ps := make([]piece, len(pd.rows))
	for i, r := range pd.rows {
		ps[i] = piece{span: r.span, row: i}
	}
	sessions, members := mergePieces(ps)
	merged := make([]newRow, len(sessions))
	for j, s := range sessions {
		m := members[j]
		merged[j] = newRow{s, pd.rows[m[0].row].buf}
		for _, x := range m[1:] {
			if err := o.p.buf.Merge(merged[j].buf, pd.rows[x.row].buf); err != nil {
				return fmt.Errorf("batch %d: %s: %w", o.life.ID(), o.p, err)
			}
		}
	}
	pd.rows = merged
	pd.compactAt = max(compactFirst, 2*len(merged))
	return nil
}

var (
	_ stream.Operator         = (*Operator)(nil)
	_ stream.SchemaOperator   = (*Operator)(nil)
	_ stream.PartitionLimiter = (*Operator)(nil)
	_ stream.StateRecorder    = (*Operator)(nil)
	_ stream.ProgressReporter = (*Operator)(nil)
)

// New validates spec and returns an operator to Open.
func New(spec Spec) (*Operator, error) {
	p, err := newPlan(spec)
	if err != nil {
		return nil, err
	}
	return &Operator{p: p, life: opbase.New("session window", p)}, nil
}

// Spec returns the spec the operator was built from.
func (o *Operator) Spec() Spec { return o.p.spec }

// Schema returns the state schema the operator records and checks on Open.
func (o *Operator) Schema() state.Schema { return o.p.schema }

// Aggregates returns the aggregates with their output names settled.
func (o *Operator) Aggregates() []agg.Aggregate { return o.p.buf.Aggregates() }

// String renders the operator for the query shape.
func (o *Operator) String() string { return o.p.String() }

// OutputSchema is session_window_start, session_window_end (or
// Spec.StartAs and EndAs), the group
// columns, then the aggregates; the key is the group columns and the
// session start.
func (o *Operator) OutputSchema() stream.Schema {
	s := stream.Schema{Fields: []stream.Field{{Name: o.p.spec.StartAs, Type: stream.Timestamp}, {Name: o.p.spec.EndAs, Type: stream.Timestamp}}}
	for i, g := range o.p.spec.GroupBy {
		s.Fields = append(s.Fields, stream.Field{Name: g, Type: o.p.groupType[i], Nullable: true})
		s.Key = append(s.Key, g)
	}
	s.Key = append(s.Key, o.p.spec.StartAs)
	s.Fields = append(s.Fields, o.p.buf.OutputFields()...)
	return s
}

// memCacheBytes is the budget of the state's cache in memory
// (state.Options.MemCacheBytes): on disk, the 30-day bench shape's 200
// Pebble instances took half its CPU (their directories, MANIFESTs and
// markers at the first commit, the memtables' flush, a syncfs(2) and the
// marker at Close) for 11,152 sessions. A state that outgrows it (complete
// mode never evicts) moves to disk before the commit that would pass it.
//
// In append mode the cache is lazy too (state.Options.LazyCache): the
// index holds every stored session's value (keepValues), so a batch reads
// nothing from the store and its commits skip the cache until a restart
// or an Abort reindexes from it.
const memCacheBytes = 16 << 20

// keepValues says idx holds the stored sessions' values: in append mode,
// whose watermark bounds the sessions stored. Complete mode keeps every
// session for ever and reads the store every batch anyway (emitAll).
func (o *Operator) keepValues() bool { return o.p.spec.Mode == agg.Append }

// Open loads the state committed at env.Version and indexes its sessions.
func (o *Operator) Open(ctx context.Context, env stream.OperatorEnv) error {
	s, logger, err := o.life.Open(ctx, o.store, env, state.Options{Schema: o.p.schema, MemCacheBytes: memCacheBytes, LazyCache: o.keepValues()})
	if err != nil {
		return err
	}
	rec, err := decodeOpRecord(s.OperatorRecord(), env.StateDir)
	if err != nil {
		return errors.Join(err, o.life.Close(s))
	}
	o.store, o.logger = s, logger
	o.legacyZero = o.p.spec.Mode == agg.Complete && o.p.spec.HasWatermark && o.p.spec.WatermarkDelay == 0 &&
		s.Version() >= 0 && rec.zeroDelayIsNone()
	if o.legacyZero {
		o.logger.Warn(o.p.String()+": the watermark delay of 0 is read as no watermark, as when the checkpoint's state was written; start a new checkpoint to drop late rows by it",
			"version", env.Version)
	}
	if err := o.reindex(); err != nil {
		return errors.Join(err, o.Close())
	}
	return nil
}

// reindex rebuilds idx from the store (as of its pending batch, which is
// empty when it is called).
func (o *Operator) reindex() error {
	o.idx, o.minEnd, o.stale = map[string][]indexed{}, math.MaxInt64, false
	err := o.store.Scan(nil, nil, func(key, val []byte) error {
		prefix, start, err := o.splitKey(key)
		if err != nil {
			return err
		}
		end, _, err := o.decodeEnd(val)
		if err != nil {
			return err
		}
		e := indexed{span: span{start, end}}
		if o.keepValues() {
			e.val = bytes.Clone(val)
		}
		o.idx[string(prefix)] = append(o.idx[string(prefix)], e)
		o.minEnd = min(o.minEnd, end)
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: index the stored sessions: %w", o.p, err)
	}
	// Partitions are scanned one after another: sort each key's sessions.
	for k, ss := range o.idx {
		slices.SortFunc(ss, func(a, b indexed) int { return cmpInt(a.start, b.start) })
		o.idx[k] = ss
	}
	return nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// splitKey cuts a stored key into its group prefix and session start (the
// last 8 bytes, state's Timestamp key encoding).
func (o *Operator) splitKey(key []byte) ([]byte, int64, error) {
	if len(key) < 8 {
		return nil, 0, fmt.Errorf("%s: state key of %d bytes has no session start", o.p, len(key))
	}
	n := len(key) - 8
	return key[:n], int64(binary.BigEndian.Uint64(key[n:]) ^ 1<<63), nil
}

func (o *Operator) decodeEnd(val []byte) (int64, []byte, error) {
	end, n := binary.Varint(val)
	if n <= 0 {
		return 0, nil, fmt.Errorf("%s: malformed %s in a state value", o.p, stateEnd)
	}
	return end, val[n:], nil
}

// begin starts batch batchID on its first Process or Finish, the index
// rebuilt first if an abort left it stale.
func (o *Operator) begin(batchID int64) error {
	if o.stale && o.store != nil && !o.life.Active() {
		if err := o.reindex(); err != nil {
			return err
		}
	}
	started, err := o.life.Begin(o.store, batchID)
	if started {
		o.byKey = map[string]*pending{}
		o.inRows, o.late, o.nullTS, o.badGap, o.process = 0, 0, 0, 0, 0
	}
	return err
}

// Process keeps the chunk's rows as one-row sessions [t, t+gap) by group
// key, dropping (and counting) those whose session the watermark closed:
// end <= watermark, Spark's watermarkPredicateForDataForLateEvents on the
// session window.
func (o *Operator) Process(ctx context.Context, batchID, watermarkMs int64, in *stream.Batch) error {
	if err := o.begin(batchID); err != nil {
		return err
	}
	if in == nil || in.Len == 0 {
		return nil
	}
	t0 := time.Now()
	defer func() { o.process += time.Since(t0) }()
	if err := opbase.RefuseRetractions(in,
		"%s (%s): the input retracts a row, which a session window cannot undo: a retracted row may split a session, and the state keeps one aggregate per session, not its rows",
		OperatorName, o.p); err != nil {
		return err
	}
	col := func(name string, t stream.Type) (*stream.Column, error) {
		c := in.Column(name)
		if c == nil {
			return nil, errcode.New(agg.CodeUnresolvedColumn, "", "check the query's projection and the source's columns",
				"column %q is not in the input", name)
		}
		if c.Type != t {
			return nil, errcode.New(agg.CodeDatatypeMismatch, "", "declare the column's real type",
				"column %q is %s, the session window expects %s", name, c.Type, t)
		}
		return c, nil
	}
	ts, err := col(o.p.spec.Column, stream.Timestamp)
	if err != nil {
		return err
	}
	var gapCol *stream.Column
	if o.p.spec.GapColumn != "" {
		if gapCol, err = col(o.p.spec.GapColumn, stream.String); err != nil {
			return err
		}
	}
	groups := make([]*stream.Column, len(o.p.groupType))
	for k, g := range o.p.spec.GroupBy {
		if groups[k], err = col(g, o.p.groupType[k]); err != nil {
			return err
		}
	}
	aggCols, err := o.p.buf.Resolve(in)
	if err != nil {
		return err
	}
	wmUs := watermarkMs * 1000
	hasWM := o.hasWatermark()
	for i := 0; i < in.Len; i++ {
		o.inRows++
		if ts.IsNull(i) {
			o.nullTS++
			continue
		}
		gap := o.p.gapUs
		if gapCol != nil {
			if gap = o.rowGap(gapCol, i); gap <= 0 {
				o.badGap++
				continue
			}
		}
		start := ts.Int64s[i]
		end := start + gap
		if hasWM && end <= wmUs {
			o.late++
			continue
		}
		prefix := o.groupPrefix(groups, i)
		pd := o.byKey[string(prefix)]
		if pd == nil {
			pd = &pending{compactAt: compactFirst, lastStart: start}
			o.byKey[string(prefix)] = pd
		}
		if n := len(pd.rows); n > 0 && !pd.unordered && start >= pd.lastStart && start <= pd.rows[n-1].end {
			if o.rowBuf == nil {
				o.rowBuf = o.p.buf.New()
			}
			last := &pd.rows[n-1]
			if err := o.p.buf.Fold(o.rowBuf, aggCols, i); err != nil {
				return err
			}
			if err := o.p.buf.Merge(last.buf, o.rowBuf); err != nil {
				return fmt.Errorf("batch %d: %s: %w", o.life.ID(), o.p, err)
			}
			last.end, pd.lastStart = max(last.end, end), start
			continue
		}
		pd.unordered = pd.unordered || start < pd.lastStart
		pd.lastStart = max(pd.lastStart, start)
		buf := o.p.buf.New()
		if err := o.p.buf.Fold(buf, aggCols, i); err != nil {
			return err
		}
		pd.rows = append(pd.rows, newRow{span{start, end}, buf})
		if len(pd.rows) >= pd.compactAt {
			if err := o.compact(pd); err != nil {
				return err
			}
		}
	}
	return nil
}

// rowGap is row i's dynamic gap in µs, 0 when it has none (null or
// malformed: Spark's cast to an interval gives null).
func (o *Operator) rowGap(c *stream.Column, i int) int64 {
	if c.IsNull(i) {
		return 0
	}
	text := c.Strings[i]
	if g, ok := o.gapCache[text]; ok {
		return g
	}
	var g int64
	if d, err := interval.Parse(text); err == nil && d > 0 {
		g = d.Microseconds()
	}
	if o.gapCache == nil || len(o.gapCache) > 1024 {
		o.gapCache = map[string]int64{}
	}
	o.gapCache[text] = g
	return g
}

// groupPrefix encodes row i's group columns as the state key's prefix.
func (o *Operator) groupPrefix(groups []*stream.Column, i int) []byte {
	b := o.keyBuf[:0]
	for _, c := range groups {
		b = agg.AppendGroupKey(b, c, i)
	}
	o.keyBuf = b
	return b
}

func stateKey(dst []byte, prefix string, start int64) []byte {
	return state.AppendTimestampKey(append(dst, prefix...), start)
}

// Finish merges the batch's rows into each key's stored sessions, then, in
// append mode, evicts and emits the sessions the watermark closed (end <=
// watermark); in complete mode it emits every stored session.
func (o *Operator) Finish(ctx context.Context, batchID, watermarkMs int64) (*stream.Batch, stream.OperatorProgress, error) {
	if err := o.begin(batchID); err != nil {
		return nil, stream.OperatorProgress{}, err
	}
	t0 := time.Now()
	updated, removed, err := o.mergeBatch()
	if err != nil {
		return nil, stream.OperatorProgress{}, err
	}
	updateMs := time.Since(t0).Milliseconds()
	t1 := time.Now()
	out := o.newOutput()
	if o.p.spec.Mode == agg.Append {
		evicted, err := o.evict(watermarkMs*1000, out)
		if err != nil {
			return nil, stream.OperatorProgress{}, err
		}
		removed += evicted
	} else if err := o.emitAll(out); err != nil {
		return nil, stream.OperatorProgress{}, err
	}
	parts := int64(o.store.Partitions())
	o.progress = stream.OperatorProgress{
		OperatorName:              OperatorName,
		NumRowsTotal:              o.store.NumKeys(),
		NumRowsUpdated:            updated,
		AllUpdatesTimeMs:          updateMs,
		NumRowsRemoved:            removed,
		AllRemovalsTimeMs:         time.Since(t1).Milliseconds(),
		NumRowsDroppedByWatermark: o.late,
		NumShufflePartitions:      parts,
		NumStateStoreInstances:    parts,
		CustomMetrics: map[string]int64{
			"numInputRows":      o.inRows,
			"numOutputRows":     int64(out.Len),
			MetricNullEventTime: o.nullTS,
			MetricInvalidGap:    o.badGap,
			"processTimeMs":     o.process.Milliseconds(),
		},
	}
	o.store.SetOperatorRecord(opRecord{LegacyZeroDelay: o.legacyZero}.encode())
	o.life.Finish()
	o.byKey = nil
	return out, o.progress, nil
}

// hasWatermark says the operator drops late rows and evicts by the
// watermark: the spec has one, and the checkpoint does not read its delay
// of 0 as none.
func (o *Operator) hasWatermark() bool { return o.p.spec.hasWatermark() && !o.legacyZero }

// mergeBatch merges each touched key's new rows with its stored sessions
// (Spark's updateSessions: a key's sessions are replaced by the merged
// ones) and returns the sessions written and deleted.
func (o *Operator) mergeBatch() (updated, removed int64, err error) {
	prefixes := make([]string, 0, len(o.byKey))
	for k := range o.byKey {
		prefixes = append(prefixes, k)
	}
	slices.Sort(prefixes)
	var ps []piece
	for _, prefix := range prefixes {
		ps = ps[:0]
		old := o.idx[prefix]
		for i, s := range old {
			ps = append(ps, piece{span: s.span, stored: true, row: i})
		}
		rows := o.byKey[prefix].rows
		for r := range rows {
			ps = append(ps, piece{span: rows[r].span, row: r})
		}
		sessions, members := mergePieces(ps)
		next := make([]indexed, len(sessions))
		for j, s := range sessions {
			m := members[j]
			if len(m) == 1 && m[0].stored {
				next[j] = old[m[0].row] // unchanged
				continue
			}
			total := o.p.buf.New()
			for _, x := range m {
				var src agg.Buffer
				if !x.stored {
					src = rows[x.row].buf
				}
				if x.stored {
					if src, err = o.loadBuffer(prefix, old[x.row]); err != nil {
						return updated, removed, err
					}
				}
				if err := o.p.buf.Merge(total, src); err != nil {
					return updated, removed, fmt.Errorf("batch %d: %s: %w", o.life.ID(), o.p, err)
				}
			}
			// idx held the committed sessions when the batch began (an
			// Abort or a failed commit reindexes), and mergePieces puts a
			// stored piece first at its start: the session's key is in the
			// committed version exactly when m[0] is stored.
			for _, x := range m {
				if x.stored && x.start != s.start {
					if err := o.store.DeleteKnown(stateKey(o.keyBuf[:0], prefix, x.start), true); err != nil {
						return updated, removed, fmt.Errorf("%s: write state: %w", o.p, err)
					}
					removed++
				}
			}
			o.valBuf = o.p.buf.AppendValue(state.AppendTimestampValue(o.valBuf[:0], s.end), total)
			if err := o.store.PutKnown(stateKey(o.keyBuf[:0], prefix, s.start), o.valBuf, m[0].stored); err != nil {
				return updated, removed, fmt.Errorf("%s: write state: %w", o.p, err)
			}
			next[j].span = s
			if o.keepValues() {
				next[j].val = bytes.Clone(o.valBuf)
			}
			updated++
			o.minEnd = min(o.minEnd, s.end)
		}
		o.idx[prefix] = next
	}
	return updated, removed, nil
}

// loadBuffer reads the stored session e of prefix: from its value in idx,
// or else from the store.
func (o *Operator) loadBuffer(prefix string, e indexed) (agg.Buffer, error) {
	val := e.val
	if val == nil {
		key := stateKey(o.keyBuf[:0], prefix, e.start)
		v, ok, err := o.store.Get(key)
		if err != nil {
			return nil, fmt.Errorf("%s: read state: %w", o.p, err)
		}
		if !ok {
			return nil, fmt.Errorf("%s: indexed session at %d is not in state", o.p, e.start)
		}
		val = v
	}
	_, rest, err := o.decodeEnd(val)
	if err != nil {
		return nil, err
	}
	buf := o.p.buf.New()
	if rest, err = o.p.buf.DecodeValue(rest, buf); err != nil {
		return nil, err
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%s: state value has %d trailing bytes", o.p, len(rest))
	}
	return buf, nil
}

// evict deletes and emits, in key order, every session whose end is at or
// before wmUs.
func (o *Operator) evict(wmUs int64, out *stream.Batch) (int64, error) {
	if !o.hasWatermark() || wmUs < o.minEnd {
		return 0, nil
	}
	var prefixes []string
	for k, ss := range o.idx {
		for _, s := range ss {
			if s.end <= wmUs {
				prefixes = append(prefixes, k)
				break
			}
		}
	}
	slices.Sort(prefixes)
	var removed int64
	for _, prefix := range prefixes {
		var keep []indexed
		for _, s := range o.idx[prefix] {
			if s.end > wmUs {
				keep = append(keep, s)
				continue
			}
			buf, err := o.loadBuffer(prefix, s)
			if err != nil {
				return removed, err
			}
			if err := o.appendRow(out, stateKey(nil, prefix, s.start), s.end, buf); err != nil {
				return removed, err
			}
			// Committed unless this batch wrote it (then the store keeps
			// the pending entry's own presence).
			if err := o.store.DeleteKnown(stateKey(o.keyBuf[:0], prefix, s.start), true); err != nil {
				return removed, fmt.Errorf("%s: evict state: %w", o.p, err)
			}
			removed++
		}
		if len(keep) == 0 {
			delete(o.idx, prefix)
		} else {
			o.idx[prefix] = keep
		}
	}
	o.minEnd = o.leastEnd()
	return removed, nil
}

func (o *Operator) leastEnd() int64 {
	least := int64(math.MaxInt64)
	for _, ss := range o.idx {
		for _, s := range ss {
			least = min(least, s.end)
		}
	}
	return least
}

// emitAll emits every stored session (complete mode), in key order.
func (o *Operator) emitAll(out *stream.Batch) error {
	type kv struct{ k, v []byte }
	var all []kv
	err := o.store.Scan(nil, nil, func(key, val []byte) error {
		all = append(all, kv{bytes.Clone(key), bytes.Clone(val)})
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: scan state: %w", o.p, err)
	}
	slices.SortFunc(all, func(a, b kv) int { return bytes.Compare(a.k, b.k) })
	for _, x := range all {
		end, rest, err := o.decodeEnd(x.v)
		if err != nil {
			return err
		}
		buf := o.p.buf.New()
		if _, err := o.p.buf.DecodeValue(rest, buf); err != nil {
			return err
		}
		if err := o.appendRow(out, x.k, end, buf); err != nil {
			return err
		}
	}
	return nil
}

func (o *Operator) newOutput() *stream.Batch { return opbase.NewBatch(o.OutputSchema()) }

// appendRow appends the session stored under key (group columns, start)
// with its end and buffer to out.
func (o *Operator) appendRow(out *stream.Batch, key []byte, end int64, buf agg.Buffer) error {
	fields, err := state.DecodeKey(o.p.schema.Key, key)
	if err != nil {
		return fmt.Errorf("%s: decode state key: %w", o.p, err)
	}
	n := len(o.p.groupType)
	start, ok := fields[n].(int64)
	if !ok {
		return fmt.Errorf("%s: state key's session start is %T", o.p, fields[n])
	}
	cols := out.Columns
	cols[0].Int64s = append(cols[0].Int64s, start)
	cols[1].Int64s = append(cols[1].Int64s, end)
	for k := range n {
		c := &cols[2+k]
		f := fields[k]
		if err := agg.AppendGroupValue(c, f); err != nil {
			return fmt.Errorf("%s: state key: %w", o.p, err)
		}
		setNull(c, out.Len, f == nil)
	}
	o.p.buf.AppendOutput(out, 2+n, buf)
	out.Len++
	return nil
}

// setNull records whether the value just appended to c (row n) is null;
// Valid stays nil while no value is.
func setNull(c *stream.Column, n int, null bool) {
	if null && c.Valid == nil {
		c.Valid = make([]bool, n, n+1)
		for i := range c.Valid {
			c.Valid[i] = true
		}
	}
	if c.Valid != nil {
		c.Valid = append(c.Valid, !null)
	}
}

// Commit makes state version batchID durable.
func (o *Operator) Commit(ctx context.Context, batchID int64) error {
	if _, err := o.life.Commit(ctx, o.store, batchID, &o.progress); err != nil {
		// The index may hold sessions the store did not commit: rebuild it
		// from the committed state before the next batch.
		o.stale = true
		return err
	}
	return nil
}

// Progress returns the last batch's stateOperators entry, with its commit's
// figures after Commit.
func (o *Operator) Progress() stream.OperatorProgress { return o.progress }

// Abort discards the current batch; the index is rebuilt from the
// committed state before the next batch.
func (o *Operator) Abort() {
	if o.life.Active() {
		o.stale = true
	}
	o.life.Abort(o.store)
	o.byKey = nil
}

// NeedsNoDataBatch is Spark's SessionWindowStateStoreSaveExec.
// shouldRunAnotherBatch: true in append mode (update mode is refused),
// false in complete mode. The engine asks only once the operator's input
// watermark moved past the one it ran the last batch with; whether a
// session would close does not matter, since the batch after a skipped
// one would drop late input by an older watermark than Spark's. A batch
// that closes nothing costs no scan (minEnd).
func (o *Operator) NeedsNoDataBatch(int64) (bool, error) {
	return o.store != nil && o.p.spec.Mode != agg.Complete, nil
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
	o.store = nil
	o.byKey, o.idx = nil, nil
	return err
}
