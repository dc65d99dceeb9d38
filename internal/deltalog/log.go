package deltalog

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
	"github.com/ethstream/ethstream/storage"
)

// Log is a table's _delta_log in a vfs.FS, read-only: its listing, commits
// and classic checkpoints, and the replay of them up to a version. It holds
// only paths, so it is safe for concurrent use.
type Log struct {
	FS   vfs.FS
	Root string // the table's directory
	Dir  string // Root/_delta_log
}

// NewLog is the log of the table at root in fs (nil: the local disk).
func NewLog(fs vfs.FS, root string) *Log {
	if fs == nil {
		fs = vfs.Default
	}
	return &Log{FS: fs, Root: root, Dir: fs.PathJoin(root, "_delta_log")}
}

var (
	commitRe     = regexp.MustCompile(`^(\d{20})\.json$`)
	checkpointRe = regexp.MustCompile(`^(\d{20})\.checkpoint\.parquet$`)
)

// ResolveRoot turns "file:///x", "file:/x", an s3:// URI or a plain path
// into the table's path in its FS.
func ResolveRoot(path string) (string, error) {
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

// Open opens the log of an existing table in fs: the directory must have a
// _delta_log holding at least one commit or checkpoint. It reads nothing
// else; Snapshot replays.
func Open(fs vfs.FS, path string) (*Log, error) {
	root, err := ResolveRoot(path)
	if err != nil {
		return nil, err
	}
	l := NewLog(fs, root)
	ls, err := l.List()
	if err != nil {
		return nil, err
	}
	if len(ls.Commits) == 0 && len(ls.Checkpoints) == 0 {
		return nil, errcode.New(CodeNotATable, l.Dir, "check the path, or let the sink create the table", "no Delta commits found")
	}
	return l, nil
}

// CommitPath is the path of commit v.
func (l *Log) CommitPath(v int64) string {
	return l.FS.PathJoin(l.Dir, fmt.Sprintf("%020d.json", v))
}

// CheckpointPath is the path of the classic checkpoint of version v.
func (l *Log) CheckpointPath(v int64) string {
	return l.FS.PathJoin(l.Dir, fmt.Sprintf("%020d.checkpoint.parquet", v))
}

// ReadFile reads a whole file of the table.
func (l *Log) ReadFile(p string) ([]byte, error) {
	f, err := l.FS.Open(p)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	return data, errors.Join(err, f.Close())
}

// Listing is what _delta_log holds: commit versions and classic
// single-part checkpoint versions, both ascending.
type Listing struct {
	Commits     []int64
	Checkpoints []int64
}

// List lists the log.
func (l *Log) List() (Listing, error) {
	var ls Listing
	ents, err := l.FS.List(l.Dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return ls, errcode.New(CodeNotATable, l.Dir, "check the path, or let the sink create the table", "no _delta_log directory")
		}
		return ls, fmt.Errorf("list %s: %w", l.Dir, err)
	}
	for _, name := range ents {
		if m := commitRe.FindStringSubmatch(name); m != nil {
			v, _ := strconv.ParseInt(m[1], 10, 64)
			ls.Commits = append(ls.Commits, v)
		} else if m := checkpointRe.FindStringSubmatch(name); m != nil {
			v, _ := strconv.ParseInt(m[1], 10, 64)
			ls.Checkpoints = append(ls.Checkpoints, v)
		}
	}
	sort.Slice(ls.Commits, func(i, j int) bool { return ls.Commits[i] < ls.Commits[j] })
	sort.Slice(ls.Checkpoints, func(i, j int) bool { return ls.Checkpoints[i] < ls.Checkpoints[j] })
	return ls, nil
}

// ReadCommit reads and parses one commit file.
func (l *Log) ReadCommit(v int64) ([]Action, error) {
	p := l.CommitPath(v)
	data, err := l.ReadFile(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, errcode.Wrap(err, CodeVersionGap, p, RemedyCorrupt, "commit %d is missing from the log", v)
		}
		return nil, fmt.Errorf("read commit %s: %w", p, err)
	}
	acts, err := ParseActions(data)
	if err != nil {
		return nil, Corrupt(p, err, "commit %d does not parse", v)
	}
	return acts, nil
}

// Target resolves version (-1: the latest) against the listing: the
// version a snapshot replays to.
func (l *Log) Target(ls Listing, version int64) (int64, error) {
	if len(ls.Commits) == 0 && len(ls.Checkpoints) == 0 {
		return 0, errcode.New(CodeNotATable, l.Dir, "check the path", "no Delta commits found")
	}
	latest := int64(-1)
	if n := len(ls.Commits); n > 0 {
		latest = ls.Commits[n-1]
	}
	if n := len(ls.Checkpoints); n > 0 && ls.Checkpoints[n-1] > latest {
		latest = ls.Checkpoints[n-1]
	}
	target := version
	if target < 0 {
		target = latest
	}
	if target > latest {
		return 0, errcode.New(CodeVersionNotFound, l.Dir, fmt.Sprintf("pick a version between 0 and %d", latest), "version %d does not exist (latest is %d)", version, latest)
	}
	return target, nil
}

// Replay reads the actions of the snapshot at target from the newest
// checkpoint at or below it plus the JSON commits after that checkpoint,
// handing each file's actions to apply in log order with the version they
// bring the snapshot to, then checks what they hold (Replayed.Check).
func (l *Log) Replay(ctx context.Context, ls Listing, target int64, apply func(version int64, acts []Action)) error {
	r := Replayed{Version: -1}
	start := int64(0)
	cp := int64(-1)
	for _, c := range ls.Checkpoints {
		if c <= target {
			cp = c
		}
	}
	if cp >= 0 {
		acts, err := l.ReadCheckpoint(l.CheckpointPath(cp))
		if err != nil {
			return err
		}
		r.apply(cp, acts)
		apply(cp, acts)
		start = cp + 1
	}
	have := make(map[int64]bool, len(ls.Commits))
	for _, c := range ls.Commits {
		have[c] = true
	}
	for v := start; v <= target; v++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !have[v] {
			return errcode.New(CodeVersionGap, l.CommitPath(v), RemedyCorrupt,
				"commit %d is missing: versions %d..%d must be contiguous", v, start, target)
		}
		acts, err := l.ReadCommit(v)
		if err != nil {
			return err
		}
		r.apply(v, acts)
		apply(v, acts)
	}
	return r.Check(l)
}

// Replayed is what a replay needs to check of the actions it applied: the
// last protocol and metaData, if any.
type Replayed struct {
	Version     int64
	Protocol    Protocol
	Metadata    Metadata
	HasProtocol bool
	HasMetadata bool
}

func (r *Replayed) apply(v int64, acts []Action) {
	r.Version = v
	for i := range acts {
		if a := acts[i]; a.MetaData != nil {
			r.Metadata, r.HasMetadata = *a.MetaData, true
		} else if a.Protocol != nil {
			r.Protocol, r.HasProtocol = *a.Protocol, true
		}
	}
}

// Check validates a replayed state: protocol and metaData present, a
// protocol this reader reads, a schema.
func (r Replayed) Check(l *Log) error {
	p := l.CommitPath(r.Version)
	if !r.HasProtocol {
		return Corrupt(p, nil, "no protocol action up to version %d", r.Version)
	}
	if !r.HasMetadata {
		return Corrupt(p, nil, "no metaData action up to version %d", r.Version)
	}
	if err := CheckReadProtocol(r.Protocol, l.Dir); err != nil {
		return err
	}
	if r.Metadata.SchemaString == "" {
		return Corrupt(p, nil, "metaData has an empty schemaString")
	}
	return nil
}

// ReadCheckpoint loads the actions of a classic single-file checkpoint.
// Each row has exactly one non-null action column; rows for actions we do
// not track (commitInfo in very old checkpoints, domainMetadata) are skipped.
func (l *Log) ReadCheckpoint(path string) ([]Action, error) {
	var acts []Action
	err := ReadGenericRows(l.FS, path, func(row map[string]any) error {
		var a Action
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
			if err := a.Validate(); err != nil {
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
			return nil, errcode.Wrap(err, CodeVersionGap, path, RemedyCorrupt, "checkpoint vanished while reading")
		}
		return nil, Corrupt(path, err, "checkpoint does not parse")
	}
	return acts, nil
}
