package state

import (
	"context"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// Recorded opens a stopped query's operator state with the schema its
// checkpoint recorded (stream.RecordedStates): the store's rows are keys
// and values of that schema whatever the operator, so a repartition needs
// nothing else. It holds no state; the zero value is ready to use.
type Recorded struct{}

var (
	_ stream.RecordedStates   = Recorded{}
	_ stream.PartitionLimiter = Recorded{}
)

// OpenRecorded opens the store under env.StateDir at env.Version with the
// schema that version's metadata records. A version without metadata is
// CHECKPOINT_CORRUPT naming the directory, as Open reports it.
func (Recorded) OpenRecorded(ctx context.Context, env stream.OperatorEnv) (stream.StateRepartitioner, error) {
	return OpenRecorded(ctx, Options{Dir: env.StateDir, FS: env.FS, LocalDir: env.LocalDir,
		LocalFS: env.LocalFS, Partitions: env.Partitions, Logger: env.Logger}, env.Version)
}

// CheckPartitions is the package's CheckPartitions (stream.PartitionLimiter).
func (Recorded) CheckPartitions(from, to int) error { return CheckPartitions(from, to) }

// OpenRecorded is Open with opts.Schema taken from the metadata of version
// (which must be committed): the store reads and writes exactly the rows
// recorded, and the versions it writes record the same schema. A local
// cache it cannot reuse is rebuilt only when a partition is first needed,
// which a Repartition never does: it reads the checkpoint files.
func OpenRecorded(ctx context.Context, opts Options, version int64) (*Store, error) {
	if version < 0 {
		return nil, errcode.New(CodeStateNotFound, opts.Dir, "run the query until it commits a batch", "no state version to open")
	}
	rec, ok, err := ReadRecord(opts.FS, opts.Dir, version)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errcode.Corrupt(opts.Dir, nil,
			"state version %d is committed in the checkpoint but missing from the state directory", version)
	}
	opts.Schema, opts.SpecCompatible = rec.Schema, nil
	opts.deferRebuild = true
	return Open(ctx, opts, version)
}

var _ stream.StateRecorder = Recorded{}

// CommittedRecord reads what version's metadata records for a start's
// checks (stream.StateRecorder): the state schema, the newest version; the
// operator's own facts (a watermark) are its record's, not read here.
func (Recorded) CommittedRecord(_ context.Context, fs vfs.FS, stateDir string, version int64) (stream.StateRecord, bool, error) {
	r, ok, err := ReadRecord(fs, stateDir, version)
	if err != nil || !ok {
		return stream.StateRecord{Newest: r.Newest}, ok, err
	}
	return stream.StateRecord{Path: r.Path, StateSchema: r.Schema.String(), Newest: r.Newest}, true, nil
}
