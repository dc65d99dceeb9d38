package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/ethstream/ethstream/errcode"
)

// Implemented protocol: reader 1, writer 2, no table features.
const (
	ReaderVersion = 1
	WriterVersion = 2
)

// Table is a Delta table in a local directory. A Table holds only its paths,
// so it is safe for concurrent use; every Snapshot is an immutable view that
// is safe for concurrent reads. Writers on the same directory (in this or
// other processes) are serialised by put-if-absent commits.
type Table struct {
	root   string
	logDir string
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
	} else if strings.Contains(path, "://") {
		return "", errcode.New(errcode.InvalidArgument, path, "pass a local directory or a file:// URI", "unsupported table location scheme")
	}
	if path == "" {
		return "", errcode.New(errcode.InvalidArgument, path, "pass a table directory", "empty table path")
	}
	return filepath.Clean(path), nil
}

// Open opens an existing table: the directory must have a _delta_log holding
// at least one commit or checkpoint. It reads nothing else; Snapshot replays.
func Open(ctx context.Context, path string) (*Table, error) {
	root, err := resolveRoot(path)
	if err != nil {
		return nil, err
	}
	t := &Table{root: root, logDir: filepath.Join(root, "_delta_log")}
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
	return filepath.Join(t.logDir, fmt.Sprintf("%020d.json", v))
}

func (t *Table) checkpointPath(v int64) string {
	return filepath.Join(t.logDir, fmt.Sprintf("%020d.checkpoint.parquet", v))
}

// listing is what _delta_log holds: commit versions and classic
// single-part checkpoint versions, both ascending.
type listing struct {
	commits     []int64
	checkpoints []int64
}

func (t *Table) list() (listing, error) {
	var l listing
	ents, err := os.ReadDir(t.logDir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return l, errcode.New(CodeNotATable, t.logDir, "check the path, or let the sink create the table", "no _delta_log directory")
		}
		return l, fmt.Errorf("list %s: %w", t.logDir, err)
	}
	for _, e := range ents {
		name := e.Name()
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
	data, err := os.ReadFile(p)
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
	err := readGenericRows(path, func(row map[string]any) error {
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
