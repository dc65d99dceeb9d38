package delta

import (
	"context"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/deltalog"
	"github.com/ethstream/ethstream/internal/durable"
)

// Implemented protocol: reader 1, writer 2, no table features.
const (
	ReaderVersion = deltalog.ReaderVersion
	WriterVersion = deltalog.WriterVersion
)

// Table is a Delta table in a directory of a vfs.FS (the local disk by
// default; every file of the table is read and written through it, so tests
// inject faults and crashes). A Table holds only its paths and FS, so it is
// safe for concurrent use; every Snapshot is an immutable view that
// is safe for concurrent reads. Writers on the same directory (in this or
// other processes) are serialised by put-if-absent commits.
type Table struct {
	fs     vfs.FS
	pub    durable.Publisher
	root   string
	logDir string
	log    *deltalog.Log // the read side of the log, over fs
}

func newTable(fs vfs.FS, root string) *Table {
	if fs == nil {
		fs = vfs.Default
	}
	l := deltalog.NewLog(fs, root)
	return &Table{fs: fs, pub: durable.For(fs), root: root, logDir: l.Dir, log: l}
}

// readFile reads a whole file of the table.
func (t *Table) readFile(p string) ([]byte, error) { return t.log.ReadFile(p) }

// resolveRoot turns "file:///x", "file:/x" or a plain path into a local path.
func resolveRoot(path string) (string, error) { return deltalog.ResolveRoot(path) }

// Open opens an existing table on the local disk (OpenFS with vfs.Default).
func Open(ctx context.Context, path string) (*Table, error) {
	return OpenFS(ctx, vfs.Default, path)
}

// OpenFS opens an existing table in fs: the directory must have a _delta_log
// holding at least one commit or checkpoint. It reads nothing else; Snapshot
// replays.
func OpenFS(ctx context.Context, fs vfs.FS, path string) (*Table, error) {
	root, err := resolveRoot(path)
	if err != nil {
		return nil, err
	}
	t := newTable(fs, root)
	l, err := t.list()
	if err != nil {
		return nil, err
	}
	if len(l.commits) == 0 && len(l.checkpoints) == 0 {
		return nil, errcode.New(CodeNotATable, t.logDir, "check the path, or let the sink create the table", "no Delta commits found")
	}
	return t, nil
}

// Path returns the table's root directory.
func (t *Table) Path() string { return t.root }

func (t *Table) commitPath(v int64) string { return t.log.CommitPath(v) }

func (t *Table) checkpointPath(v int64) string { return t.log.CheckpointPath(v) }

// listing is what _delta_log holds: commit versions and classic
// single-part checkpoint versions, both ascending.
type listing struct {
	commits     []int64
	checkpoints []int64
}

func (t *Table) list() (listing, error) {
	ls, err := t.log.List()
	return listing{commits: ls.Commits, checkpoints: ls.Checkpoints}, err
}

// readCommit reads and parses one commit file.
func (t *Table) readCommit(v int64) ([]action, error) { return t.log.ReadCommit(v) }

// Snapshot replays the log up to version (-1 = latest) and returns the
// table state at that version.
func (t *Table) Snapshot(ctx context.Context, version int64) (*Snapshot, error) {
	ls, err := t.log.List()
	if err != nil {
		return nil, err
	}
	target, err := t.log.Target(ls, version)
	if err != nil {
		return nil, err
	}
	return t.replay(ctx, listing{commits: ls.Commits, checkpoints: ls.Checkpoints}, target)
}

// replay builds the snapshot at target from the newest checkpoint at or
// below it plus the JSON commits after that checkpoint (deltalog.Log.Replay).
func (t *Table) replay(ctx context.Context, l listing, target int64) (*Snapshot, error) {
	s := newSnapshot(t)
	ls := deltalog.Listing{Commits: l.commits, Checkpoints: l.checkpoints}
	err := t.log.Replay(ctx, ls, target, func(v int64, acts []action) {
		s.applyAll(acts)
		s.Version = v
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// readCheckpoint loads the actions of a classic single-file checkpoint.
func (t *Table) readCheckpoint(path string) ([]action, error) { return t.log.ReadCheckpoint(path) }
