package limit

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/opbase"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// OperatorName is the state schema's operator name and the
// stateOperators[].operatorName, Spark's StreamingGlobalLimitExec's.
const OperatorName = "globalLimit"

// CodeRetractionUnsupported: the input retracts a row, which a limit
// cannot undo (the rows after it were dropped).
const CodeRetractionUnsupported = opbase.CodeRetractionUnsupported

// Spec is a global limit.
type Spec struct {
	// N is the number of rows the stream emits, at least 0.
	N int64
	// Input is the schema of the rows (the output's too).
	Input stream.Schema
}

// Operator is the global limit (stream.Operator over a state.Store),
// driven from one goroutine at a time; it is not safe for concurrent use.
type Operator struct {
	// StateRecord makes the operator a stream.StateRecorder.
	opbase.StateRecord
	spec   Spec
	schema state.Schema
	store  *state.Store
	life   opbase.Lifecycle

	// count is the rows emitted up to the batch being run; committed
	// its value at the committed version.
	count, committed int64
	out              *stream.Batch
	inRows           int64
	process          time.Duration
	progress         stream.OperatorProgress
}

var (
	_ stream.Operator         = (*Operator)(nil)
	_ stream.SchemaOperator   = (*Operator)(nil)
	_ stream.PartitionLimiter = (*Operator)(nil)
	_ stream.StateRecorder    = (*Operator)(nil)
	_ stream.ProgressReporter = (*Operator)(nil)
	_ stream.RowPasser        = (*Operator)(nil)
)

// stateKey is the one key: key = 0 (state's Int64 key encoding).
var stateKey = state.AppendInt64Key(nil, 0)

// New validates spec and returns an operator to Open.
func New(spec Spec) (*Operator, error) {
	if spec.N < 0 {
		return nil, errcode.New(errcode.InvalidArgument, "", "use LIMIT 0 or more",
			"LIMIT %d: the limit must not be negative", spec.N)
	}
	o := &Operator{spec: spec, schema: Schema()}
	o.life = opbase.New("limit", o)
	return o, nil
}

// Schema is the state schema every global limit records (doc.go).
func Schema() state.Schema {
	return state.Schema{OperatorName: OperatorName, Spec: "format=1",
		Key:   []state.Field{{Name: "key", Type: stream.Int64}},
		Value: []state.Field{{Name: "value", Type: stream.Int64}}}
}

// N is the limit.
func (o *Operator) N() int64 { return o.spec.N }

// OutputSchema is the input's: the operator only drops rows.
func (o *Operator) OutputSchema() stream.Schema { return o.spec.Input }

// PassesRows is true: the output rows are input rows, each emitted once.
func (o *Operator) PassesRows() bool { return true }

// String renders the operator for the query shape.
func (o *Operator) String() string { return fmt.Sprintf("globalLimit(%d)", o.spec.N) }

// Open loads the count committed at env.Version.
func (o *Operator) Open(ctx context.Context, env stream.OperatorEnv) error {
	s, _, err := o.life.Open(ctx, o.store, env, state.Options{Schema: o.schema})
	if err != nil {
		return err
	}
	o.store = s
	n, err := o.read()
	if err != nil {
		s.Close()
		o.store = nil
		return err
	}
	o.count, o.committed = n, n
	return nil
}

// read returns the stored count (0 when none).
func (o *Operator) read() (int64, error) {
	v, ok, err := o.store.Get(stateKey)
	if err != nil || !ok {
		return 0, err
	}
	n, k := binary.Varint(v)
	if k <= 0 || k != len(v) || n < 0 {
		return 0, errcode.New(errcode.CheckpointCorrupt, "", "restore the state directory from a backup, or start a new checkpoint",
			"%s: the stored count of emitted rows is malformed", o)
	}
	return n, nil
}

// begin starts batch batchID on its first Process or Finish.
func (o *Operator) begin(batchID int64) error {
	started, err := o.life.Begin(o.store, batchID)
	if started {
		o.inRows, o.process = 0, 0
		o.out = opbase.NewBatch(o.spec.Input)
	}
	return err
}

// Process emits the chunk's first rows while the count is below N.
func (o *Operator) Process(ctx context.Context, batchID, watermarkMs int64, in *stream.Batch) error {
	if err := o.begin(batchID); err != nil {
		return err
	}
	if in == nil || in.Len == 0 {
		return nil
	}
	t0 := time.Now()
	defer func() { o.process += time.Since(t0) }()
	if err := opbase.RefuseRetractions(in, "%s: the input retracts a row, which a limit cannot undo", o); err != nil {
		return err
	}
	o.inRows += int64(in.Len)
	take := min(int64(in.Len), o.spec.N-o.count)
	if take <= 0 {
		return nil
	}
	for j := range o.out.Columns {
		src := in.Column(o.out.Columns[j].Name)
		if src == nil {
			return fmt.Errorf("%s: the input has no column %q", o, o.out.Columns[j].Name)
		}
		for i := range int(take) {
			o.out.Columns[j].Append(src, i)
		}
	}
	o.out.Len += int(take)
	o.count += take
	return nil
}

// Finish writes the count and returns the batch's emitted rows.
func (o *Operator) Finish(ctx context.Context, batchID, watermarkMs int64) (*stream.Batch, stream.OperatorProgress, error) {
	if err := o.begin(batchID); err != nil {
		return nil, stream.OperatorProgress{}, err
	}
	updated := int64(0)
	if o.count != o.committed {
		if err := o.store.Put(stateKey, state.AppendInt64Value(nil, o.count)); err != nil {
			return nil, stream.OperatorProgress{}, fmt.Errorf("%s: write state: %w", o, err)
		}
		updated = 1
	}
	parts := int64(o.store.Partitions())
	o.progress = stream.OperatorProgress{
		OperatorName:           OperatorName,
		NumRowsTotal:           o.store.NumKeys(),
		NumRowsUpdated:         updated,
		AllUpdatesTimeMs:       o.process.Milliseconds(),
		NumShufflePartitions:   parts,
		NumStateStoreInstances: parts,
		CustomMetrics: map[string]int64{
			"numInputRows":  o.inRows,
			"numOutputRows": int64(o.out.Len),
		},
	}
	o.life.Finish()
	out := o.out
	o.out = nil
	return out, o.progress, nil
}

// Commit makes state version batchID durable.
func (o *Operator) Commit(ctx context.Context, batchID int64) error {
	if _, err := o.life.Commit(ctx, o.store, batchID, &o.progress); err != nil {
		return err
	}
	o.committed = o.count
	return nil
}

// Progress returns the last batch's stateOperators entry.
func (o *Operator) Progress() stream.OperatorProgress { return o.progress }

// Abort discards the current batch.
func (o *Operator) Abort() {
	o.life.Abort(o.store)
	o.count = o.committed
	o.out = nil
}

// NeedsNoDataBatch is false: a batch without input emits nothing.
func (o *Operator) NeedsNoDataBatch(int64) (bool, error) { return false, nil }

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
	return err
}
