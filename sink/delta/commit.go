package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/durable"
	"github.com/google/uuid"
)

// EngineVersion goes into commitInfo.engineInfo as "ethstream/<version>".
var EngineVersion = "0.1.0"

func engineInfo() string { return "ethstream/" + EngineVersion }

// errVersionTaken means another writer committed the version first.
var errVersionTaken = errors.New("delta: commit version already exists")

// errCommitUncertain means the commit was linked into the log but the log
// directory fsync failed: readers see it, a crash may lose it. The caller
// must keep its data files (the visible commit references them) and fail;
// a restart reads the log to learn what happened.
var errCommitUncertain = errors.New("delta: commit published but not known to be durable")

// tryCommit publishes body as commit v if, and only if, no commit v exists,
// through durable in NoOverwrite mode: the body is written to a unique temp
// file in _delta_log, fsynced, and hard-linked to the final name; link(2)
// fails with EEXIST instead of replacing, so two writers can never both win,
// and readers never see a partial commit. The temp file is removed whatever
// happens (a crash leaves it for cleanTemps).
//
// ready, if not nil, makes the commit's data files durable; it runs
// concurrently with the temp file's fsync (the two waits overlap) and must
// succeed before the commit is published.
func (t *Table) tryCommit(v int64, body []byte, ready func() error) error {
	res, err := durable.Bytes(t.pub, t.logDir, t.fs.PathBase(t.commitPath(v)), durable.Options{Wait: ready}, body)
	if errors.Is(err, durable.ErrExists) {
		return errVersionTaken
	}
	if err != nil && res.Visible {
		return fmt.Errorf("write commit %d: %w: %w", v, errCommitUncertain, err)
	}
	if err != nil {
		return fmt.Errorf("write commit %d: %w", v, err)
	}
	return nil
}

// replaceFile atomically replaces path with data (durable Replace: temp,
// fsync, rename, fsync dir). Only for derived files that may be
// overwritten: checkpoints and _last_checkpoint.
func (t *Table) replaceFile(path string, data []byte) error {
	_, err := durable.Bytes(t.pub, t.fs.PathDir(path), t.fs.PathBase(path), durable.Options{Mode: durable.Replace}, data)
	return err
}

// syncDirsOf fsyncs the directories of paths (data files published without
// a directory fsync), so their names survive a crash before the commit that
// references them.
func (t *Table) syncDirsOf(paths []string) error {
	dirs := map[string]bool{}
	for _, p := range paths {
		dirs[t.fs.PathDir(p)] = true
	}
	for d := range dirs {
		if err := durable.SyncDir(t.fs, d); err != nil {
			return err
		}
	}
	return nil
}

// CreateOption configures Create.
type CreateOption func(*createConfig)

type createConfig struct {
	partitionColumns []string
	configuration    map[string]string
	clock            func() time.Time
	fs               vfs.FS
}

// WithPartitionColumns sets metaData.partitionColumns.
func WithPartitionColumns(cols ...string) CreateOption {
	return func(c *createConfig) { c.partitionColumns = cols }
}

// WithConfiguration sets metaData.configuration (table properties).
func WithConfiguration(conf map[string]string) CreateOption {
	return func(c *createConfig) { c.configuration = conf }
}

// WithClock sets the clock used for createdTime and the commit timestamp.
func WithClock(clock func() time.Time) CreateOption {
	return func(c *createConfig) { c.clock = clock }
}

// WithFS creates the table in fs instead of the local disk.
func WithFS(fs vfs.FS) CreateOption {
	return func(c *createConfig) { c.fs = fs }
}

// Create makes a new empty table at path with protocol 1/2 and the given
// schema, committing version 0 put-if-absent. It fails with
// DELTA_TABLE_ALREADY_EXISTS if version 0 exists.
func Create(ctx context.Context, path string, schema Schema, opts ...CreateOption) (*Table, error) {
	cfg := createConfig{clock: time.Now, configuration: map[string]string{}, partitionColumns: []string{}}
	for _, o := range opts {
		o(&cfg)
	}
	root, err := resolveRoot(path)
	if err != nil {
		return nil, err
	}
	if len(schema.Fields) == 0 {
		return nil, errcode.New(errcode.InvalidArgument, root, "give the table at least one column", "empty schema")
	}
	for _, pc := range cfg.partitionColumns {
		if _, ok := schema.Field(pc); !ok {
			return nil, errcode.New(errcode.InvalidArgument, root, "partition by a top-level column", "partition column %q not in schema", pc)
		}
	}
	t := newTable(cfg.fs, root)
	if err := durable.EnsureDir(t.fs, t.logDir); err != nil {
		return nil, fmt.Errorf("create table dir %s: %w", t.logDir, err)
	}
	now := cfg.clock().UnixMilli()
	partBy, _ := json.Marshal(cfg.partitionColumns)
	props, _ := json.Marshal(cfg.configuration)
	blind := true
	meta := &Metadata{
		ID:               uuid.NewString(),
		Format:           Format{Provider: "parquet", Options: map[string]string{}},
		SchemaString:     schema.String(),
		PartitionColumns: cfg.partitionColumns,
		Configuration:    cfg.configuration,
		CreatedTime:      &now,
	}
	acts := []action{
		{CommitInfo: &CommitInfo{
			Timestamp: now,
			Operation: "CREATE TABLE",
			OperationParameters: map[string]any{
				"isManaged": "false", "description": nil,
				"partitionBy": string(partBy), "properties": string(props),
			},
			IsolationLevel: "Serializable", IsBlindAppend: &blind,
			OperationMetrics: map[string]any{}, EngineInfo: engineInfo(), TxnID: uuid.NewString(),
		}},
		{Protocol: ptr(protocolFor(schema))},
		{MetaData: meta},
	}
	body, err := marshalActions(acts)
	if err != nil {
		return nil, err
	}
	if err := t.tryCommit(0, body, nil); err != nil {
		if errors.Is(err, errVersionTaken) {
			return nil, errcode.New(CodeTableExists, t.commitPath(0), "open the existing table instead", "table already exists")
		}
		return nil, err
	}
	return t, nil
}

// refresh applies to s, in place, every commit after s.Version that exists
// now. It is how a writer catches up without replaying the whole log.
func (s *Snapshot) refresh(ctx context.Context) (int, error) {
	n := 0
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		v := s.Version + 1
		if _, err := s.table.fs.Stat(s.table.commitPath(v)); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return n, nil
			}
			return n, fmt.Errorf("stat commit %d: %w", v, err)
		}
		acts, err := s.table.readCommit(v)
		if err != nil {
			return n, err
		}
		s.applyAll(acts)
		s.Version = v
		n++
		if err := s.check(); err != nil {
			return n, err
		}
	}
}

// commitActions tries to publish acts as version s.Version+1 after making
// the names of the new data files (paths in the table's FS, published
// without a directory fsync) durable. On success it applies them to s.
// errVersionTaken is returned untouched for the caller's conflict handling.
func (s *Snapshot) commitActions(acts []action, dataFiles ...string) error {
	body, err := marshalActions(acts)
	if err != nil {
		return err
	}
	v := s.Version + 1
	var ready func() error
	if len(dataFiles) > 0 {
		ready = func() error { return s.table.syncDirsOf(dataFiles) }
	}
	if err := s.table.tryCommit(v, body, ready); err != nil {
		return err
	}
	s.applyAll(acts)
	s.Version = v
	return nil
}
