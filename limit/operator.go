package limit

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// OperatorName is the state schema's operator name and the
// stateOperators[].operatorName, Spark's StreamingGlobalLimitExec's.
const OperatorName = "globalLimit"

// CodeRetractionUnsupported: the input retracts a row, which a limit
// cannot undo (the rows after it were dropped).
const CodeRetractionUnsupported = "RETRACTION_UNSUPPORTED"

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
	spec   Spec
	schema state.Schema
	store  *state.Store

	inBatch, finished bool
	batchID           int64
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
	return &Operator{spec: spec, schema: Schema()}, nil
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
	if o.store != nil {
		return errors.New("limit operator already open")
	}
	logger := env.Logger
	if logger == nil {
		logger = slog.Default()
	}
	s, err := state.Open(ctx, state.Options{Dir: env.StateDir, FS: env.FS, LocalDir: env.LocalDir,
		Partitions: env.Partitions, Schema: o.schema, Logger: logger}, env.Version)
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
	o.inBatch, o.finished = false, false
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

func (o *Operator) begin(batchID int64) error {
	if o.store == nil {
		return errors.New("limit operator is not open")
	}
	if o.inBatch {
		if batchID != o.batchID {
			return fmt.Errorf("limit: batch %d started while batch %d is uncommitted", batchID, o.batchID)
		}
		if o.finished {
			return fmt.Errorf("limit: batch %d already finished", batchID)
		}
		return nil
	}
	o.inBatch, o.finished, o.batchID = true, false, batchID
	o.inRows, o.process = 0, 0
	o.out = &stream.Batch{}
	for _, f := range o.spec.Input.Fields {
		o.out.Columns = append(o.out.Columns, stream.Column{Name: f.Name, Type: f.Type})
	}
	return nil
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
	for _, s := range in.Signs {
		if s < 0 {
			return errcode.New(CodeRetractionUnsupported, "",
				"read the source without retractions (e.g. with confirmations instead of reorg=retract)",
				"%s: the input retracts a row, which a limit cannot undo", o)
		}
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
	o.finished = true
	out := o.out
	o.out = nil
	return out, o.progress, nil
}

// Commit makes state version batchID durable.
func (o *Operator) Commit(ctx context.Context, batchID int64) error {
	if o.store == nil {
		return errors.New("limit operator is not open")
	}
	if !o.inBatch || !o.finished || o.batchID != batchID {
		return fmt.Errorf("limit: commit of batch %d before its Finish", batchID)
	}
	m, err := o.store.Commit(ctx, batchID)
	if err != nil {
		return fmt.Errorf("%s: commit state version %d: %w", o, batchID, err)
	}
	o.progress.CommitTimeMs = m.CommitTimeMs
	o.progress.MemoryUsedBytes = m.MemoryUsedBytes
	o.progress.NumRowsTotal = m.RowsTotal
	o.committed = o.count
	o.inBatch, o.finished = false, false
	return nil
}

// Progress returns the last batch's stateOperators entry.
func (o *Operator) Progress() stream.OperatorProgress { return o.progress }

// Abort discards the current batch.
func (o *Operator) Abort() {
	if o.store != nil {
		o.store.Abort()
	}
	o.count = o.committed
	o.inBatch, o.finished, o.out = false, false, nil
}

// NeedsNoDataBatch is false: a batch without input emits nothing.
func (o *Operator) NeedsNoDataBatch(int64) (bool, error) { return false, nil }

// Repartition writes the state committed at base into n partitions as
// version batchID, and continues with n partitions.
func (o *Operator) Repartition(ctx context.Context, base, batchID int64, n int) (stream.RepartitionStats, error) {
	if o.store == nil {
		return stream.RepartitionStats{}, errors.New("limit operator is not open")
	}
	if o.inBatch {
		return stream.RepartitionStats{}, fmt.Errorf("limit: repartition while batch %d is uncommitted", o.batchID)
	}
	return o.store.Repartition(ctx, base, batchID, n)
}

// CheckPartitions refuses a partition count the state store's cache cannot
// hold (stream.PartitionLimiter).
func (o *Operator) CheckPartitions(from, to int) error { return state.CheckPartitions(from, to) }

// Close releases the store; uncommitted changes are discarded.
func (o *Operator) Close() error {
	if o.store == nil {
		return nil
	}
	o.store.Abort()
	err := o.store.Close()
	o.store = nil
	return err
}
