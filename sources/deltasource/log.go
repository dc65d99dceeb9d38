package deltasource

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/deltalog"
)

// Delta's error classes this source raises.
const (
	// CodeIgnoreDelete: a commit removed data (DELETE) and neither
	// ignoreDeletes, ignoreChanges nor skipChangeCommits is set.
	CodeIgnoreDelete = "DELTA_SOURCE_IGNORE_DELETE"
	// CodeIgnoreChanges: a commit rewrote data (UPDATE, MERGE, overwrite)
	// and neither ignoreChanges nor skipChangeCommits is set.
	CodeIgnoreChanges = "DELTA_SOURCE_TABLE_IGNORE_CHANGES"
	// CodeDifferentTable: the table at the location has another id than
	// the one the checkpoint's offsets name (it was replaced).
	CodeDifferentTable = "DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE"
	// CodeSchemaChanged: a commit the stream reaches changes the table's
	// schema from the one the query started with.
	CodeSchemaChanged = "DELTA_SCHEMA_CHANGED"
	// CodeLogFileNotFound: a commit the stream needs is gone from
	// _delta_log (log retention removed it).
	CodeLogFileNotFound = "DELTA_LOG_FILE_NOT_FOUND_FOR_STREAMING_SOURCE"
)

// action is one line of a commit file: the actions the source looks at.
type action struct {
	Add      *deltalog.AddFile    `json:"add,omitempty"`
	Remove   *deltalog.RemoveFile `json:"remove,omitempty"`
	MetaData *deltalog.Metadata   `json:"metaData,omitempty"`
	Protocol *deltalog.Protocol   `json:"protocol,omitempty"`
}

// commit is what one version holds for the stream.
type commit struct {
	version  int64
	adds     []deltalog.AddFile // data-changing adds, in commit order
	removes  []deltalog.RemoveFile
	metaData *deltalog.Metadata
	protocol *deltalog.Protocol
}

var commitName = regexp.MustCompile(`^(\d{20})\.json$`)

// tableLog reads a table's _delta_log through fs. Safe for concurrent use.
type tableLog struct {
	fs     vfs.FS
	root   string
	logDir string

	mu      sync.Mutex
	commits map[int64]*commit // parsed commits, bounded by maxCached
}

const maxCached = 256

func newTableLog(fs vfs.FS, root string) *tableLog {
	return &tableLog{fs: fs, root: root, logDir: fs.PathJoin(root, "_delta_log"), commits: map[int64]*commit{}}
}

// latest is the newest commit version in the log (-1: none).
func (l *tableLog) latest() (int64, error) {
	names, err := l.fs.List(l.logDir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return -1, errcode.New(deltalog.CodeNotATable, l.logDir, "check the table location", "no _delta_log directory")
		}
		return -1, fmt.Errorf("list %s: %w", l.logDir, err)
	}
	v := int64(-1)
	for _, n := range names {
		if m := commitName.FindStringSubmatch(n); m != nil {
			x, _ := strconv.ParseInt(m[1], 10, 64)
			v = max(v, x)
		}
	}
	return v, nil
}

// versions lists the commit versions present, ascending.
func (l *tableLog) versions() ([]int64, error) {
	names, err := l.fs.List(l.logDir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", l.logDir, err)
	}
	var out []int64
	for _, n := range names {
		if m := commitName.FindStringSubmatch(n); m != nil {
			x, _ := strconv.ParseInt(m[1], 10, 64)
			out = append(out, x)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// commit reads version v's commit file.
func (l *tableLog) commit(v int64) (*commit, error) {
	l.mu.Lock()
	c, ok := l.commits[v]
	l.mu.Unlock()
	if ok {
		return c, nil
	}
	p := l.fs.PathJoin(l.logDir, fmt.Sprintf("%020d.json", v))
	f, err := l.fs.Open(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, errcode.Wrap(err, CodeLogFileNotFound, p,
				"restart the query from a new checkpoint (or raise delta.logRetentionDuration so that commits outlive the stream's lag)",
				"the stream needs commit %d of the table, which is gone from _delta_log", v)
		}
		return nil, fmt.Errorf("open %s: %w", p, err)
	}
	data, err := io.ReadAll(f)
	if err = errors.Join(err, f.Close()); err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	c = &commit{version: v}
	for i, line := range bytes.Split(data, []byte{'\n'}) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var a action
		if err := json.Unmarshal(line, &a); err != nil {
			return nil, errcode.Corrupt(p, err, "commit %d line %d does not parse", v, i+1)
		}
		switch {
		case a.Add != nil:
			if a.Add.DataChange {
				c.adds = append(c.adds, *a.Add)
			}
		case a.Remove != nil:
			if a.Remove.DataChange {
				c.removes = append(c.removes, *a.Remove)
			}
		case a.MetaData != nil:
			c.metaData = a.MetaData
		case a.Protocol != nil:
			c.protocol = a.Protocol
		}
	}
	l.mu.Lock()
	if len(l.commits) >= maxCached {
		clear(l.commits)
	}
	l.commits[v] = c
	l.mu.Unlock()
	return c, nil
}
