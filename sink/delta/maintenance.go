package delta

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/storage"
	"github.com/google/uuid"
)

// History returns the commitInfo of every commit still in the log, newest
// first. A commit without commitInfo gets one with only Version and the
// file's modification time.
func (t *Table) History(ctx context.Context) ([]CommitInfo, error) {
	l, err := t.list()
	if err != nil {
		return nil, err
	}
	out := make([]CommitInfo, 0, len(l.commits))
	for i := len(l.commits) - 1; i >= 0; i-- {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		v := l.commits[i]
		acts, err := t.readCommit(v)
		if err != nil {
			return nil, err
		}
		ci := CommitInfo{Version: v}
		found := false
		for _, a := range acts {
			if a.CommitInfo != nil {
				ci = *a.CommitInfo
				ci.Version = v
				found = true
				break
			}
		}
		if !found {
			if st, err := t.fs.Stat(t.commitPath(v)); err == nil {
				ci.Timestamp = st.ModTime().UnixMilli()
			}
		}
		out = append(out, ci)
	}
	return out, nil
}

// OptimizeOptions configure Optimize.
type OptimizeOptions struct {
	TargetFileRows int // default DefaultTargetFileRows
	Clock          func() time.Time
	// MaxFileRows: a file with at least this many rows is left alone;
	// default TargetFileRows.
	MaxFileRows int
	// SkipNewest leaves the newest files (by modificationTime) alone: the
	// ones the next MERGE is likely to rewrite anyway.
	SkipNewest int
	// MinFiles: nothing is compacted unless at least this many files are
	// candidates (auto-compaction's minNumFiles).
	MinFiles int
	// Auto marks the commit as an auto-compaction (operationParameters
	// auto=true).
	Auto bool
	// commitLock, if set, is held while the OPTIMIZE commit is published:
	// the MergeSink's own lock, so that a batch's MERGE (which holds it from
	// its refresh to its commit) never loses its version to the sink's own
	// auto-compaction and never has to write its files twice.
	commitLock sync.Locker
}

// OptimizeResult says what Optimize committed.
type OptimizeResult struct {
	Version      int64 // the OPTIMIZE commit, or the unchanged version if nothing was compacted
	FilesRemoved int
	FilesAdded   int
	Rows         int64
	// Rebased counts the commits of other writers the OPTIMIZE commit was
	// moved past (commitRebasing).
	Rebased int
}

// Optimize compacts the small files of one of the sink's tables:
// neighbouring files (in window order) holding fewer than TargetFileRows
// rows are rewritten into files of up to TargetFileRows rows, sorted by
// every column in table order (the key first). The commit has operation
// OPTIMIZE and every add and remove has dataChange=false, so streaming
// readers of the table ignore it. A table of another schema (types the sink
// does not write, partitions) is refused.
func (t *Table) Optimize(ctx context.Context, o OptimizeOptions) (OptimizeResult, error) {
	if o.TargetFileRows <= 0 {
		o.TargetFileRows = DefaultTargetFileRows
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	for attempt := 0; attempt < maxCommitAttempts; attempt++ {
		s, err := t.Snapshot(ctx, -1)
		if err != nil {
			return OptimizeResult{}, err
		}
		if err := checkWriteProtocol(s.Protocol, t.logDir); err != nil {
			return OptimizeResult{}, err
		}
		l, err := tableLayout(s.Schema)
		if err == nil && len(s.Metadata.PartitionColumns) > 0 {
			err = fmt.Errorf("table is partitioned by %v", s.Metadata.PartitionColumns)
		}
		if err != nil {
			return OptimizeResult{}, errcode.Wrap(err, CodeUnsupportedFeature, t.root, "optimize only tables written by ethstream's sink",
				"optimize supports the sink's tables only, table schema is %s", s.Metadata.SchemaString)
		}
		bins := s.optimizeBins(o)
		if len(bins) == 0 {
			return OptimizeResult{Version: s.Version}, nil
		}
		now := o.Clock()
		c, err := s.compact(l, bins, o.TargetFileRows, now)
		if err != nil {
			return OptimizeResult{}, err
		}
		rebased, err := s.commitRebasing(ctx, o.commitLock, c.actions(s.Version, now, o.Auto), c.removes, c.written)
		if errors.Is(err, errVersionTaken) {
			c.abandon() // a concurrent writer rewrote our inputs: start over
			continue
		}
		if err != nil {
			if !errors.Is(err, errCommitUncertain) {
				c.abandon()
			}
			return OptimizeResult{}, err
		}
		c.res.Rebased = rebased
		if s.Version%CheckpointInterval == 0 {
			if err := s.writeCheckpoint(o.Clock()); err != nil {
				return OptimizeResult{}, err
			}
		}
		c.res.Version = s.Version
		return c.res, nil
	}
	return OptimizeResult{}, errcode.New(CodeCommitConflict, t.logDir, "stop the other writers and re-run optimize", "optimize lost the commit race %d times", maxCommitAttempts)
}

// compaction is an OPTIMIZE whose files are written but not committed.
type compaction struct {
	t             *Table
	removes, adds []action
	written       []string
	res           OptimizeResult
}

func (c *compaction) abandon() {
	for _, p := range c.written {
		_ = c.t.fs.Remove(p)
	}
}

// compact reads each bin's files and writes their rows, sorted, into files
// of up to target rows (dataChange=false).
func (s *Snapshot) compact(l *outLayout, bins [][]*AddFile, target int, now time.Time) (*compaction, error) {
	t := s.table
	c := &compaction{t: t}
	for _, bin := range bins {
		rows := newRowSet(l, 0)
		for _, f := range bin {
			p := t.filePath(f.Path)
			rs, err := readDataFile(t.fs, p, l)
			if err != nil {
				c.abandon()
				return nil, dataFileError(err, p, "restore the file from a backup", "read live data file")
			}
			rows.appendRange(rs, 0, rs.n)
			ts := now.UnixMilli()
			size := f.Size
			c.removes = append(c.removes, action{Remove: &RemoveFile{
				Path: f.Path, DeletionTimestamp: &ts, DataChange: false, ExtendedFileMetadata: ptr(true),
				PartitionValues: nonNilPV(f.PartitionValues), Size: &size,
			}})
			c.res.FilesRemoved++
		}
		rows.sortByKey()
		c.res.Rows += int64(rows.n)
		for lo := 0; lo < rows.n; lo += target {
			add, err := t.writeDataFile(l.pq, rows.slice(lo, min(lo+target, rows.n)), now)
			if err != nil {
				c.abandon()
				return nil, err
			}
			add.DataChange = false
			c.written = append(c.written, t.filePath(add.Path))
			c.adds = append(c.adds, action{Add: add})
			c.res.FilesAdded++
		}
	}
	return c, nil
}

// actions is the OPTIMIZE commit: commitInfo, the removes, the adds.
func (c *compaction) actions(readVersion int64, now time.Time, auto bool) []action {
	blind := false
	acts := []action{{CommitInfo: &CommitInfo{
		Timestamp: now.UnixMilli(), Operation: "OPTIMIZE",
		OperationParameters: map[string]any{"predicate": "[]", "zOrderBy": "[]", "auto": strconv.FormatBool(auto)},
		ReadVersion:         &readVersion, IsolationLevel: "SnapshotIsolation", IsBlindAppend: &blind,
		OperationMetrics: map[string]any{
			"numRemovedFiles": strconv.Itoa(c.res.FilesRemoved), "numAddedFiles": strconv.Itoa(c.res.FilesAdded),
			"numRemovedBytes": strconv.FormatInt(sumSize(c.removes), 10), "numAddedBytes": strconv.FormatInt(sumSize(c.adds), 10),
		},
		EngineInfo: engineInfo(), TxnID: uuid.NewString(),
	}}}
	acts = append(acts, c.removes...)
	return append(acts, c.adds...)
}

// commitRebasing publishes an OPTIMIZE commit (under lock, if set). A
// version taken meanwhile by another commit is not a conflict unless that
// commit removed one of the files the OPTIMIZE read (Delta's conflict rule
// for a compaction, whose adds and removes are dataChange=false): the
// snapshot catches up and the same actions are committed at the next free
// version, without rewriting anything; rebased counts those catch-ups.
// errVersionTaken means an input file is gone.
func (s *Snapshot) commitRebasing(ctx context.Context, lock sync.Locker, acts, removes []action, written []string) (rebased int, err error) {
	if lock != nil {
		lock.Lock()
		defer lock.Unlock()
	}
	for range maxCommitAttempts {
		err = s.commitActions(acts, written...)
		if !errors.Is(err, errVersionTaken) {
			return rebased, err
		}
		if _, err := s.refresh(ctx); err != nil {
			return rebased, err
		}
		for _, r := range removes {
			if _, live := s.files[decodePath(r.Remove.Path)]; !live {
				return rebased, errVersionTaken
			}
		}
		rebased++
	}
	return rebased, errVersionTaken
}

func sumSize(acts []action) int64 {
	var n int64
	for _, a := range acts {
		switch {
		case a.Add != nil:
			n += a.Add.Size
		case a.Remove != nil && a.Remove.Size != nil:
			n += *a.Remove.Size
		}
	}
	return n
}

// optimizeBins groups runs of small files (in window order) into bins of up
// to o.TargetFileRows rows; a bin of one file is left alone. A file is small
// below o.MaxFileRows rows; the o.SkipNewest newest files are not
// candidates, and fewer than o.MinFiles candidates give no bin.
func (s *Snapshot) optimizeBins(o OptimizeOptions) [][]*AddFile {
	target := o.TargetFileRows
	maxRows := int64(o.MaxFileRows)
	if maxRows <= 0 || maxRows > int64(target) {
		maxRows = int64(target)
	}
	type fr struct {
		f  *AddFile
		r  fileRange
		ws int64
	}
	var all []fr
	for _, f := range s.files {
		r := s.rangeOf(f)
		all = append(all, fr{f, r, r.minWS})
	}
	if o.SkipNewest > 0 {
		sort.Slice(all, func(i, j int) bool {
			if all[i].f.ModificationTime != all[j].f.ModificationTime {
				return all[i].f.ModificationTime > all[j].f.ModificationTime
			}
			return all[i].f.Path > all[j].f.Path
		})
		all = all[min(o.SkipNewest, len(all)):]
	}
	small := 0
	for _, x := range all {
		if n := x.r.numRecords; n >= 0 && n < maxRows {
			small++
		}
	}
	if small < max(o.MinFiles, 2) {
		return nil
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].ws != all[j].ws {
			return all[i].ws < all[j].ws
		}
		return all[i].f.Path < all[j].f.Path
	})
	var bins [][]*AddFile
	var cur []*AddFile
	var curRows int64
	flush := func() {
		if len(cur) > 1 {
			bins = append(bins, cur)
		}
		cur, curRows = nil, 0
	}
	for _, x := range all {
		n := x.r.numRecords
		if n < 0 || n >= maxRows {
			flush()
			continue
		}
		if curRows+n > int64(target) {
			flush()
		}
		cur = append(cur, x.f)
		curRows += n
	}
	flush()
	return bins
}

// Vacuum deletes data files that the current snapshot does not reference
// and that are older than retention: files removed more than retention ago
// and orphans of abandoned writes. Files referenced by the snapshot, files
// whose remove is younger than retention, and anything under _delta_log or a
// hidden/underscore directory are never touched. With dryRun it only lists.
// It returns the paths (relative to the table root) it deleted or would delete.
func (t *Table) Vacuum(ctx context.Context, retention time.Duration, dryRun bool) ([]string, error) {
	return t.vacuum(ctx, retention, dryRun, time.Now())
}

func (t *Table) vacuum(ctx context.Context, retention time.Duration, dryRun bool, now time.Time) ([]string, error) {
	return t.vacuumAtMost(ctx, retention, dryRun, now, 0, true)
}

// errVacuumFull stops a bounded vacuum's walk once it deleted its limit.
var errVacuumFull = errors.New("vacuum limit reached")

// vacuumAtMost is vacuum deleting at most limit data files (0 = all), for
// the automatic vacuum: a query that ran for weeks may owe thousands of
// deletes, and one run doing them all stalls the disk under the live batches
// (the soak's p99). The temp sweep runs only in a run that did not stop at
// its limit. A later run continues where this one stopped.
// vacuumKeeps is the set of paths (OS form, relative to the root) vacuum
// must not delete: the live files and those removed after cutoff.
func (s *Snapshot) vacuumKeeps(cutoff time.Time) map[string]bool {
	keep := map[string]bool{}
	for p := range s.files {
		keep[filepath.FromSlash(p)] = true
	}
	for p, r := range s.tombstones {
		if r.DeletionTimestamp == nil || time.UnixMilli(*r.DeletionTimestamp).After(cutoff) {
			keep[filepath.FromSlash(p)] = true
		}
	}
	return keep
}

// vacuumAtMost is Vacuum deleting at most limit data files (0: no limit);
// with temps, it then deletes the temp files older than tempGrace too. The
// sink's automatic vacuum passes temps false: it runs beside the sink's own
// publishes, and the sink removes a dead writer's temps at Open, under the
// lock (temps.go), so an in-progress publish is never judged by its age
// against a clock that may run ahead of the files' times.
func (t *Table) vacuumAtMost(ctx context.Context, retention time.Duration, dryRun bool, now time.Time, limit int, temps bool) ([]string, error) {
	if retention < 0 {
		return nil, errcode.New(errcode.InvalidArgument, t.root, "use a retention of 0 or more", "negative retention %s", retention)
	}
	s, err := t.Snapshot(ctx, -1)
	if err != nil {
		return nil, err
	}
	cutoff := now.Add(-retention)
	keep := s.vacuumKeeps(cutoff)
	var out []string
	var walk func(dir, rel string) error
	walk = func(dir, rel string) error {
		// One LIST per page gives every entry's size and time: no HEAD per
		// file on S3.
		infos, err := storage.ListInfo(t.fs, dir, nil)
		if err != nil {
			return fmt.Errorf("list %s: %w", dir, err)
		}
		sort.SliceStable(infos, func(i, j int) bool { return infos[i].Name() < infos[j].Name() })
		for _, info := range infos {
			if err := ctx.Err(); err != nil {
				return err
			}
			name := info.Name()
			p := t.fs.PathJoin(dir, name)
			r := name
			if rel != "" {
				r = filepath.Join(rel, name)
			}
			if strings.HasPrefix(name, "_") || strings.HasPrefix(name, ".") {
				continue // the log, hidden and underscore files and directories
			}
			if info.IsDir() {
				if err := walk(p, r); err != nil {
					return err
				}
				continue
			}
			if keep[r] || info.ModTime().After(cutoff) {
				continue // referenced, or may belong to a write in progress
			}
			out = append(out, filepath.ToSlash(r))
			if !dryRun {
				if err := t.fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("vacuum %s: %w", p, err)
				}
			}
			if limit > 0 && len(out) >= limit {
				return errVacuumFull
			}
		}
		return nil
	}
	err = walk(t.root, "")
	if errors.Is(err, errVacuumFull) {
		return out, nil
	}
	if err != nil || !temps {
		return out, err
	}
	// Temp files a crashed writer left in the root and the log (hidden,
	// so the walk skips them), once older than any publish in progress.
	tmps, err := t.staleTemps(now)
	if err != nil {
		return out, err
	}
	for _, p := range tmps {
		rel, _ := filepath.Rel(t.root, p)
		out = append(out, filepath.ToSlash(rel))
		if !dryRun {
			if err := t.fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return out, fmt.Errorf("vacuum %s: %w", p, err)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}
