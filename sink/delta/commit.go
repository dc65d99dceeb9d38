package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/google/uuid"
)

// EngineVersion goes into commitInfo.engineInfo as "ethstream/<version>".
var EngineVersion = "0.1.0"

func engineInfo() string { return "ethstream/" + EngineVersion }

// errVersionTaken means another writer committed the version first.
var errVersionTaken = errors.New("delta: commit version already exists")

// tryCommit publishes body as commit v if, and only if, no commit v exists.
// The body is written to a unique temp file in _delta_log, fsynced, and
// hard-linked to the final name: link(2) fails with EEXIST instead of
// replacing, so two writers can never both win, and readers never see a
// partial commit. The temp file is removed whatever happens.
//
// durable, if not nil, makes the commit's data files durable; it runs
// concurrently with the temp file's fsync (the two waits overlap) and must
// succeed before the commit is published.
func (t *Table) tryCommit(v int64, body []byte, durable func() error) error {
	final := t.commitPath(v)
	tmp := filepath.Join(t.logDir, fmt.Sprintf(".%020d.json.%s.tmp", v, uuid.NewString()))
	durErr := make(chan error, 1)
	if durable != nil {
		go func() { durErr <- durable() }()
	} else {
		durErr <- nil
	}
	werr := writeFileSync(tmp, body)
	if err := errors.Join(werr, <-durErr); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write commit %d: %w", v, err)
	}
	err := os.Link(tmp, final)
	rmErr := os.Remove(tmp)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return errVersionTaken
		}
		return fmt.Errorf("publish commit %s: %w", final, err)
	}
	if rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
		return fmt.Errorf("remove commit temp %s: %w", tmp, rmErr)
	}
	return syncDir(t.logDir)
}

// writeFileSync creates path exclusively, writes data and fsyncs it.
func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// replaceFileSync atomically replaces path with data (temp, fsync, rename,
// fsync dir). Only for derived files that may be overwritten: checkpoints
// and _last_checkpoint.
func replaceFileSync(path string, data []byte) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"."+uuid.NewString()+".tmp")
	if err := writeFileSync(tmp, data); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(path))
}

// syncFiles fsyncs files and then their directories, so that both the data
// and the names survive a crash before the commit that references them.
func syncFiles(paths []string) error {
	dirs := map[string]bool{}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("sync %s: %w", p, err)
		}
		err = f.Sync()
		if err = errors.Join(err, f.Close()); err != nil {
			return fmt.Errorf("sync %s: %w", p, err)
		}
		dirs[filepath.Dir(p)] = true
	}
	for d := range dirs {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir %s: %w", dir, err)
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}

// CreateOption configures Create.
type CreateOption func(*createConfig)

type createConfig struct {
	partitionColumns []string
	configuration    map[string]string
	clock            func() time.Time
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
	t := &Table{root: root, logDir: filepath.Join(root, "_delta_log")}
	if err := os.MkdirAll(t.logDir, 0o755); err != nil {
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
		{Protocol: &Protocol{MinReaderVersion: ReaderVersion, MinWriterVersion: WriterVersion}},
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
		if _, err := os.Stat(s.table.commitPath(v)); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
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
// the new data files (local paths) durable. On success it applies them to s.
// errVersionTaken is returned untouched for the caller's conflict handling.
func (s *Snapshot) commitActions(acts []action, dataFiles ...string) error {
	body, err := marshalActions(acts)
	if err != nil {
		return err
	}
	v := s.Version + 1
	var durable func() error
	if len(dataFiles) > 0 {
		durable = func() error { return syncFiles(dataFiles) }
	}
	if err := s.table.tryCommit(v, body, durable); err != nil {
		return err
	}
	s.applyAll(acts)
	s.Version = v
	return nil
}
