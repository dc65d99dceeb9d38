package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/durable"
	"github.com/ethstream/ethstream/storage"
)

// Implemented protocol: reader 1, writer 2, no table features.
const (
	ReaderVersion = 1
	WriterVersion = 2
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
}

func newTable(fs vfs.FS, root string) *Table {
	if fs == nil {
		fs = vfs.Default
	}
	return &Table{fs: fs, pub: durable.For(fs), root: root, logDir: fs.PathJoin(root, "_delta_log")}
}

// readFile reads a whole file of the table.
func (t *Table) readFile(p string) ([]byte, error) {
	f, err := t.fs.Open(p)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	return data, errors.Join(err, f.Close())
}

var (
	commitRe     = regexp.MustCompile(`^(\d{20})\.json$`)
	checkpointRe = regexp.MustCompile(`^(\d{20})\.checkpoint\.parquet$`)
)

// resolveRoot turns "file:///x", "file:/x" or a plain path into a local path.
func resolveRoot(path string) (string, error) {
	if strings.HasPrefix(path, "file:") {
		u, err := url.Parse(path)
		if err != nil {
			return "", errcode.Wrap(err, errcode.InvalidArgument, path, "pass a local directory or a file:// URI", "parse table path")
		}
		path = u.Path
	} else if storage.IsS3(path) {
		// Parsed by storage.Parse; the table's FS routes it to S3.
		loc, err := storage.Parse("--table", path)
		if err != nil {
			return "", err
		}
		return loc.Path, nil
	} else if strings.Contains(path, "://") {
		return "", errcode.New(storage.CodeUnsupportedLocation, path, "pass a local directory, a file:// URI or an s3:// URI", "unsupported table location scheme")
	}
	if path == "" {
		return "", errcode.New(errcode.InvalidArgument, path, "pass a table directory", "empty table path")
	}
	return filepath.Clean(path), nil
}

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

func (t *Table) commitPath(v int64) string {
	return t.fs.PathJoin(t.logDir, fmt.Sprintf("%020d.json", v))
}

func (t *Table) checkpointPath(v int64) string {
	return t.fs.PathJoin(t.logDir, fmt.Sprintf("%020d.checkpoint.parquet", v))
}

// listing is what _delta_log holds: commit versions and classic
// single-part checkpoint versions, both ascending.
type listing struct {
	commits     []int64
	checkpoints []int64
}

func (t *Table) list() (listing, error) {
	var l listing
	ents, err := t.fs.List(t.logDir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return l, errcode.New(CodeNotATable, t.logDir, "check the path, or let the sink create the table", "no _delta_log directory")
		}
		return l, fmt.Errorf("list %s: %w", t.logDir, err)
	}
	for _, name := range ents {
		if m := commitRe.FindStringSubmatch(name); m != nil {
			v, _ := strconv.ParseInt(m[1], 10, 64)
			l.commits = append(l.commits, v)
		} else if m := checkpointRe.FindStringSubmatch(name); m != nil {
			v, _ := strconv.ParseInt(m[1], 10, 64)
			l.checkpoints = append(l.checkpoints, v)
		}
	}
	sort.Slice(l.commits, func(i, j int) bool { return l.commits[i] < l.commits[j] })
	sort.Slice(l.checkpoints, func(i, j int) bool { return l.checkpoints[i] < l.checkpoints[j] })
	return l, nil
}

// readCommit reads and parses one commit file.
func (t *Table) readCommit(v int64) ([]action, error) {
	p := t.commitPath(v)
	data, err := t.readFile(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, errcode.Wrap(err, CodeVersionGap, p, remedyCorrupt, "commit %d is missing from the log", v)
		}
		return nil, fmt.Errorf("read commit %s: %w", p, err)
	}
	acts, err := parseActions(data)
	if err != nil {
		return nil, corrupt(p, err, "commit %d does not parse", v)
	}
	return acts, nil
}

// Snapshot replays the log up to version (-1 = latest) and returns the
// table state at that version.
func (t *Table) Snapshot(ctx context.Context, version int64) (*Snapshot, error) {
	l, err := t.list()
	if err != nil {
		return nil, err
	}
	if len(l.commits) == 0 && len(l.checkpoints) == 0 {
		return nil, errcode.New(CodeNotATable, t.logDir, "check the path", "no Delta commits found")
	}
	latest := int64(-1)
	if n := len(l.commits); n > 0 {
		latest = l.commits[n-1]
	}
	if n := len(l.checkpoints); n > 0 && l.checkpoints[n-1] > latest {
		latest = l.checkpoints[n-1]
	}
	target := version
	if target < 0 {
		target = latest
	}
	if target > latest {
		return nil, errcode.New(CodeVersionNotFound, t.logDir, fmt.Sprintf("pick a version between 0 and %d", latest), "version %d does not exist (latest is %d)", version, latest)
	}
	return t.replay(ctx, l, target)
}

// replay builds the snapshot at target from the newest checkpoint at or
// below it plus the JSON commits after that checkpoint.
func (t *Table) replay(ctx context.Context, l listing, target int64) (*Snapshot, error) {
	s := newSnapshot(t)
	start := int64(0)
	cp := int64(-1)
	for _, c := range l.checkpoints {
		if c <= target {
			cp = c
		}
	}
	if cp >= 0 {
		acts, err := t.readCheckpoint(t.checkpointPath(cp))
		if err != nil {
			return nil, err
		}
		s.applyAll(acts)
		s.Version = cp
		start = cp + 1
	}
	have := make(map[int64]bool, len(l.commits))
	for _, c := range l.commits {
		have[c] = true
	}
	for v := start; v <= target; v++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !have[v] {
			return nil, errcode.New(CodeVersionGap, t.commitPath(v), remedyCorrupt,
				"commit %d is missing: versions %d..%d must be contiguous", v, start, target)
		}
		acts, err := t.readCommit(v)
		if err != nil {
			return nil, err
		}
		s.applyAll(acts)
		s.Version = v
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	return s, nil
}

// readCheckpoint loads the actions of a classic single-file checkpoint.
// Each row has exactly one non-null action column; rows for actions we do
// not track (commitInfo in very old checkpoints, domainMetadata) are skipped.
func (t *Table) readCheckpoint(path string) ([]action, error) {
	var acts []action
	err := readGenericRows(t.fs, path, func(row map[string]any) error {
		var a action
		set := 0
		for _, col := range []string{"txn", "add", "remove", "metaData", "protocol"} {
			v, ok := row[col]
			if !ok || v == nil {
				continue
			}
			m, ok := v.(map[string]any)
			if !ok {
				return fmt.Errorf("column %s is not a group", col)
			}
			if col == "add" {
				if s, _ := m["stats"].(string); s == "" {
					if sp, ok := m["stats_parsed"].(map[string]any); ok && sp != nil {
						js, err := json.Marshal(statsJSONValue(sp))
						if err != nil {
							return fmt.Errorf("stats_parsed: %w", err)
						}
						m["stats"] = string(js)
					}
				}
				delete(m, "stats_parsed")
				delete(m, "partitionValues_parsed")
			}
			js, err := json.Marshal(m)
			if err != nil {
				return fmt.Errorf("column %s: %w", col, err)
			}
			if err := json.Unmarshal([]byte(`{"`+col+`":`+string(js)+`}`), &a); err != nil {
				return fmt.Errorf("column %s: %w", col, err)
			}
			set++
		}
		if set > 1 {
			return fmt.Errorf("row holds %d actions, want one", set)
		}
		if set == 1 {
			if err := a.validate(); err != nil {
				return err
			}
			acts = append(acts, a)
		}
		return nil
	})
	if err != nil {
		var ce *errcode.Error
		if errors.As(err, &ce) {
			return nil, err
		}
		if errors.Is(err, os.ErrNotExist) {
			return nil, errcode.Wrap(err, CodeVersionGap, path, remedyCorrupt, "checkpoint vanished while reading")
		}
		return nil, corrupt(path, err, "checkpoint does not parse")
	}
	return acts, nil
}
