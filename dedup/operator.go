package dedup

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/opbase"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// CodeRetractionUnsupported: the input retracts a row, which a
// deduplication cannot undo (it keeps the first row's key, not the rows).
const CodeRetractionUnsupported = opbase.CodeRetractionUnsupported

// Operator is the deduplication (stream.Operator over a state.Store),
// driven from one goroutine at a time; it is not safe for concurrent use.
type Operator struct {
	// StateRecord makes the operator a stream.StateRecorder.
	opbase.StateRecord
	p      *plan
	store  *state.Store
	logger *slog.Logger
	life   opbase.Lifecycle

	out *stream.Batch
	// outHint is the rows the last batch emitted: the next batch's output
	// columns start with room for as many (reserve).
	outHint     int
	inRows, put int64
	late, dups  int64
	process     time.Duration

	// minUs is at most the least event time (dropDuplicates evicting by
	// it) or expiry (WithinWatermark) in state, pending included;
	// committedMinUs its value at the committed version. MinInt64: unknown.
	minUs, committedMinUs int64
	// absent rules out keys not in state without a lookup (absent.go).
	absent absentFilter

	valBuf, decBuf []byte
	// shareCol is the output column that is the one key column when its
	// values are strings, else -1 (sharedKey).
	shareCol int
	// win and winKeys are the probed rows of the window being processed.
	win     []probedRow
	winKeys []byte
	// touched keeps probe's loads from being optimised away.
	touched  uint32
	progress stream.OperatorProgress
}

var (
	_ stream.Operator         = (*Operator)(nil)
	_ stream.SchemaOperator   = (*Operator)(nil)
	_ stream.PartitionLimiter = (*Operator)(nil)
	_ stream.StateRecorder    = (*Operator)(nil)
	_ stream.ProgressReporter = (*Operator)(nil)
	_ stream.RowPasser        = (*Operator)(nil)
)

// New validates spec and returns an operator to Open.
func New(spec Spec) (*Operator, error) {
	p, err := newPlan(spec)
	if err != nil {
		return nil, err
	}
	o := &Operator{p: p, life: opbase.New("deduplication", p), shareCol: -1}
	if len(p.cols) == 1 && p.types[0].Storage() == stream.String {
		o.shareCol = slices.IndexFunc(spec.Input.Fields, func(f stream.Field) bool { return f.Name == p.cols[0] })
	}
	return o, nil
}

// Schema returns the state schema the operator records and checks on Open.
func (o *Operator) Schema() state.Schema { return o.p.schema }

// Columns returns the deduplication columns, in key order.
func (o *Operator) Columns() []string { return append([]string(nil), o.p.cols...) }

// OutputSchema is the input's: the operator only drops rows.
func (o *Operator) OutputSchema() stream.Schema { return o.p.spec.Input }

// PassesRows is true: the output rows are first occurrences of the input
// rows, each emitted once (stream.RowPasser; a sink appends them).
func (o *Operator) PassesRows() bool { return true }

// String renders the operator for the query shape.
func (o *Operator) String() string { return o.p.String() }

// evicts reports whether state leaves by the watermark.
func (o *Operator) evicts() bool { return o.p.spec.WithinWatermark || o.p.evictCol >= 0 }

// Open loads the state committed at env.Version.
func (o *Operator) Open(ctx context.Context, env stream.OperatorEnv) error {
	// The cache is lazy (absent.go): a backfill whose keys the absence
	// filter rules out never reads the committed version, so its commits
	// write the checkpoint's files and no Pebble instance.
	s, logger, err := o.life.Open(ctx, o.store, env, state.Options{Schema: o.p.schema, LazyCache: true})
	if err != nil {
		return err
	}
	o.store, o.logger = s, logger
	o.minUs = math.MinInt64
	if s.NumKeys() == 0 {
		o.minUs = math.MaxInt64
	}
	o.committedMinUs = o.minUs
	o.absent.reset(s.NumKeys() == 0)
	return nil
}

// begin starts batch batchID on its first Process or Finish.
func (o *Operator) begin(batchID int64) error {
	started, err := o.life.Begin(o.store, batchID)
	if started {
		o.inRows, o.put, o.late, o.dups, o.process = 0, 0, 0, 0, 0
		o.out = opbase.NewBatch(o.p.spec.Input)
		reserve(o.out, o.outHint)
	}
	return err
}

// reserve gives out's columns room for n rows. A backfill's batches emit
// alike counts, and columns grown by appends from empty copied every row
// about twice, into fresh pages, with write barriers while the collector
// ran (growslice in appendRow: 2.8% of the seed dedup shape's CPU, 2.15M
// rows a batch). A batch that emits fewer leaves the rest unused once.
func reserve(out *stream.Batch, n int) {
	for j := range out.Columns {
		c := &out.Columns[j]
		switch c.Type.Storage() {
		case stream.Array, stream.Decimal:
		case stream.Float64:
			c.Float64s = make([]float64, 0, n)
		case stream.String:
			c.Strings = make([]string, 0, n)
		default:
			c.Int64s = make([]int64, 0, n)
		}
	}
}

// Process emits the chunk's rows whose key is not in state and puts their
// keys; duplicates and late rows are dropped and counted.
func (o *Operator) Process(ctx context.Context, batchID, watermarkMs int64, in *stream.Batch) error {
	if err := o.begin(batchID); err != nil {
		return err
	}
	if in == nil || in.Len == 0 {
		return nil
	}
	t0 := time.Now()
	defer func() { o.process += time.Since(t0) }()
	if err := opbase.RefuseRetractions(in, "%s: the input retracts a row, which a deduplication cannot undo", o.p); err != nil {
		return err
	}
	keys := make([]*stream.Column, len(o.p.cols))
	for k, c := range o.p.cols {
		if keys[k] = in.Column(c); keys[k] == nil || keys[k].Type != o.p.types[k] {
			return fmt.Errorf("%s: the input has no %v column %q", o.p, o.p.types[k], c)
		}
	}
	var ts *stream.Column
	if wc := o.p.spec.WatermarkColumn; wc != "" {
		if ts = in.Column(wc); ts == nil {
			return fmt.Errorf("%s: the input has no event-time column %q", o.p, wc)
		}
	}
	src := make([]*stream.Column, len(o.out.Columns))
	for j := range o.out.Columns {
		if src[j] = in.Column(o.out.Columns[j].Name); src[j] == nil {
			return fmt.Errorf("%s: the input has no column %q", o.p, o.out.Columns[j].Name)
		}
	}
	wmUs := watermarkMs * 1000
	for lo := 0; lo < in.Len; lo += probeWindow {
		hi := min(lo+probeWindow, in.Len)
		bad, keyErr := o.probe(keys, ts, wmUs, lo, hi)
		for i := lo; i < bad; i++ {
			if err := o.processRow(keys, ts, src, i, o.win[i-lo]); err != nil {
				return err
			}
		}
		if keyErr != nil {
			o.inRows++
			return keyErr
		}
	}
	return nil
}

// probeWindow is how many rows probe reads ahead: their keys' filter
// blocks (32 bytes each) stay in the core's cache until processRow asks.
var probeWindow = 256

// probedRow is a row's encoded key (o.winKeys[start:end]), its filter
// hash h and its state.KeyHash sh, or late.
type probedRow struct {
	start, end int
	h, sh      uint64
	late       bool
}

// probe encodes the keys of rows lo..hi-1 into o.winKeys, hashes them,
// loads each one's filter block and has the store prefetch its pending
// entry (state.Store.Prefetch), and returns the first row it could not
// encode (hi if none) with the error. The loads do not depend on each
// other, so the CPU overlaps their cache misses; done one row at a time,
// between the store's work for the row, each miss was waited for whole
// (the filter and the pending batch's index outgrow the caches: at 12M
// keys the filter is 36 MB, and its probe and the index's were 9% and 7%
// of BenchmarkDedupNewKeys's CPU).
func (o *Operator) probe(keys []*stream.Column, ts *stream.Column, wmUs int64, lo, hi int) (int, error) {
	o.win, o.winKeys = o.win[:0], o.winKeys[:0]
	var touched uint32
	for i := lo; i < hi; i++ {
		if ts != nil && !ts.IsNull(i) && ts.Int64s[i] <= wmUs {
			o.win = append(o.win, probedRow{late: true})
			continue
		}
		start := len(o.winKeys)
		b, err := o.appendKey(o.winKeys, keys, i)
		if err != nil {
			return i, err
		}
		o.winKeys = b
		key := b[start:]
		o.win = append(o.win, probedRow{start: start, end: len(b), h: o.absent.hash(key)})
	}
	o.storeHashes()
	// The loads in loops of their own: a loop body with the hashing in it
	// is long enough that the CPU holds only a row or two in flight.
	for _, r := range o.win {
		if !r.late {
			touched += o.absent.touch(r.h)
		}
	}
	for _, r := range o.win {
		if !r.late {
			o.store.Prefetch(o.winKeys[r.start:r.end], r.sh)
		}
	}
	o.touched += touched
	return hi, nil
}

// storeHashes sets the state.KeyHash of the window's keys, four at a time
// (state.KeyHash4: one key's FNV pass waits on each byte's multiply).
func (o *Operator) storeHashes() {
	rows := o.win
	var q [4]*probedRow
	n := 0
	for j := range rows {
		if rows[j].late {
			continue
		}
		q[n] = &rows[j]
		if n++; n == len(q) {
			k := func(r *probedRow) []byte { return o.winKeys[r.start:r.end] }
			q[0].sh, q[1].sh, q[2].sh, q[3].sh = state.KeyHash4(k(q[0]), k(q[1]), k(q[2]), k(q[3]))
			n = 0
		}
	}
	for _, r := range q[:n] {
		r.sh = state.KeyHash(o.winKeys[r.start:r.end])
	}
}

// processRow drops row i (probed as r) as late or a duplicate, or emits
// it and puts its key.
func (o *Operator) processRow(keys []*stream.Column, ts *stream.Column, src []*stream.Column, i int, r probedRow) error {
	o.inRows++
	if r.late {
		o.late++
		return nil
	}
	key, h := o.winKeys[r.start:r.end], r.h
	absent := o.absent.absent(h)
	if !absent {
		_, seen, err := o.store.GetHashed(key, r.sh)
		if err != nil {
			return fmt.Errorf("%s: read state: %w", o.p, err)
		}
		o.absent.looked()
		if seen {
			o.dups++
			return nil
		}
	}
	o.valBuf = o.valBuf[:0]
	switch {
	case o.p.spec.WithinWatermark:
		var exp int64
		if !ts.IsNull(i) {
			exp = ts.Int64s[i] + o.p.delayUs
		}
		o.valBuf = binary.AppendVarint(o.valBuf, exp)
		o.minUs = min(o.minUs, exp)
	case o.p.evictCol >= 0 && !keys[o.p.evictCol].IsNull(i):
		o.minUs = min(o.minUs, keys[o.p.evictCol].Int64s[i])
	}
	// The key is known missing from the committed version: the filter
	// ruled it out, or the Get above found it in neither the pending
	// batch nor the committed version (a key the batch deleted has its
	// entry, which the store keeps). The store looks it up neither now
	// nor at commit.
	stored, err := o.store.PutKnownHashedKey(key, o.valBuf, false, r.sh)
	if err != nil {
		return fmt.Errorf("%s: write state: %w", o.p, err)
	}
	o.absent.add(h)
	if o.absent.due(o.store) {
		if err := o.absent.build(o.store); err != nil {
			return fmt.Errorf("%s: read state: %w", o.p, err)
		}
	}
	o.put++
	appendRow(o.out, src, i)
	o.sharedKey(keys[0], i, stored)
	return nil
}

// sharedKey makes the row just appended hold its key column's string in
// the state's copy of the key (stored, the encoding of row i of the one
// key column) when that copy holds it verbatim, instead of the input's:
// the batch's first occurrences then keep one copy of their keys, not
// also the input's pages (at 2.6M new keys a batch, 172 MB of the 580 MB
// of heap live at Finish, each byte of which the collector's pacing pays
// for again in the memory limit's headroom).
func (o *Operator) sharedKey(key *stream.Column, i int, stored string) {
	if o.shareCol < 0 || key.IsNull(i) {
		return
	}
	v := key.Strings[i]
	// A string key is its bytes then a two-byte end; each escaped byte
	// would make it longer (state.AppendStringKey).
	if len(stored) != len(v)+2 || stored[:len(v)] != v {
		return
	}
	c := &o.out.Columns[o.shareCol]
	c.Strings[len(c.Strings)-1] = stored[:len(v)]
}

// appendKey appends the encoding of row i's deduplication columns to b
// (package doc, State layout).
func (o *Operator) appendKey(b []byte, cols []*stream.Column, i int) ([]byte, error) {
	for k, c := range cols {
		null := c.IsNull(i)
		switch keyClass(c.Type) {
		case stream.Int64:
			b = state.AppendNullableInt64Key(b, c.Int64s[i], null)
		case stream.String:
			switch {
			case null:
				b = state.AppendNullStringKey(b)
			case c.Type.Kind() == stream.Decimal:
				b = state.AppendStringKey(b, string(c.Decimals[i].AppendKey(o.decBuf[:0])))
			default:
				b = state.AppendStringKey(b, c.Strings[i])
			}
		case stream.Float64:
			if null {
				return nil, errcode.New(errcode.InvalidArgument, "", "filter out the rows with a null "+o.p.cols[k]+" first",
					"%s: a null double in column %q cannot be a state key", o.p, o.p.cols[k])
			}
			b = state.AppendFloat64Key(b, c.Float64s[i])
		}
	}
	return b, nil
}

// appendRow appends row i of the columns src to out, each column by its
// own storage (stream's Append kernel: DECIMAL and arrays too).
func appendRow(out *stream.Batch, src []*stream.Column, i int) {
	for j := range out.Columns {
		out.Columns[j].Append(src[j], i)
	}
	out.Len++
}

// Finish evicts what the watermark closed and returns the batch's first
// occurrences (append mode).
func (o *Operator) Finish(ctx context.Context, batchID, watermarkMs int64) (*stream.Batch, stream.OperatorProgress, error) {
	if err := o.begin(batchID); err != nil {
		return nil, stream.OperatorProgress{}, err
	}
	t0 := time.Now()
	removed, err := o.evict(watermarkMs * 1000)
	if err != nil {
		return nil, stream.OperatorProgress{}, err
	}
	parts := int64(o.store.Partitions())
	o.progress = stream.OperatorProgress{
		OperatorName:              o.p.schema.OperatorName,
		NumRowsTotal:              o.store.NumKeys(),
		NumRowsUpdated:            o.put,
		AllUpdatesTimeMs:          o.process.Milliseconds(),
		NumRowsRemoved:            removed,
		AllRemovalsTimeMs:         time.Since(t0).Milliseconds(),
		NumRowsDroppedByWatermark: o.late,
		NumShufflePartitions:      parts,
		NumStateStoreInstances:    parts,
		CustomMetrics: map[string]int64{
			MetricDroppedDuplicates: o.dups,
			"numInputRows":          o.inRows,
			"numOutputRows":         int64(o.out.Len),
		},
	}
	o.life.Finish()
	o.outHint = o.out.Len
	out := o.out
	o.out = nil
	return out, o.progress, nil
}

// evictable returns the event time or expiry of a stored key by which the
// watermark evicts it, and whether it has one.
func (o *Operator) evictable(key, val []byte) (int64, bool, error) {
	if o.p.spec.WithinWatermark {
		v, n := binary.Varint(val)
		if n <= 0 {
			return 0, false, fmt.Errorf("%s: malformed %s in state", o.p, ValueExpiresAt)
		}
		return v, true, nil
	}
	row, err := state.DecodeKey(o.p.schema.Key, key)
	if err != nil {
		return 0, false, err
	}
	us, ok := row[o.p.evictCol].(int64)
	return us, ok, nil
}

// evict deletes every key the watermark wmUs closed and recomputes minUs.
func (o *Operator) evict(wmUs int64) (removed int64, err error) {
	if !o.evicts() || wmUs < o.minUs {
		return 0, nil
	}
	least := int64(math.MaxInt64)
	err = o.store.Scan(nil, nil, func(key, val []byte) error {
		us, ok, err := o.evictable(key, val)
		if err != nil || !ok {
			return err
		}
		if us <= wmUs {
			removed++
			return o.store.Delete(key)
		}
		least = min(least, us)
		return nil
	})
	if err != nil {
		return removed, fmt.Errorf("%s: evict state closed by the watermark: %w", o.p, err)
	}
	o.minUs = least
	return removed, nil
}

// PrepareCommit writes state version batchID's data without making it
// visible (stream.CommitPreparer, state.Store.Prepare); Commit then
// publishes it. The engine runs both while the sink writes the batch:
// without it, a query of this operator and an aggregation committed both
// stores after the sink, one after the other, on every live batch's
// critical path (issue 43, the two-stateful freshness query).
func (o *Operator) PrepareCommit(ctx context.Context, batchID int64) error {
	return o.life.Prepare(ctx, o.store, batchID)
}

var _ stream.CommitPreparer = (*Operator)(nil)

// Commit makes state version batchID durable (publishing what PrepareCommit
// wrote, if it ran).
func (o *Operator) Commit(ctx context.Context, batchID int64) error {
	if _, err := o.life.Commit(ctx, o.store, batchID, &o.progress); err != nil {
		return err
	}
	o.committedMinUs = o.minUs
	return nil
}

// Progress returns the last batch's stateOperators entry, with its commit's
// figures after Commit.
func (o *Operator) Progress() stream.OperatorProgress { return o.progress }

// Abort discards the current batch.
func (o *Operator) Abort() {
	o.life.Abort(o.store)
	o.minUs = o.committedMinUs
	o.out = nil
}

// NeedsNoDataBatch is Spark's BaseStreamingDeduplicateExec.
// shouldRunAnotherBatch: true, for dropDuplicates and
// dropDuplicatesWithinWatermark alike. The engine asks only once the
// operator's input watermark moved past the one it ran the last batch
// with; whether a key would be evicted does not matter, since the batch
// after a skipped one would drop late input by an older watermark than
// Spark's. A batch that evicts nothing costs no scan (minUs).
func (o *Operator) NeedsNoDataBatch(int64) (bool, error) {
	return o.store != nil, nil
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
