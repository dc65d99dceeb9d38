package delta

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Column names of the window in an operator's output (the table holds them
// as the struct window<start, end>).
const (
	KeyWindowStart = "window_start"
	KeyWindowEnd   = "window_end"
)

// mergeOptions parameterise one MERGE.
type mergeOptions struct {
	targetRows int
	now        time.Time
}

// MergeMetrics are Spark's MERGE operationMetrics.
type MergeMetrics struct {
	NumSourceRows         int64
	NumTargetRowsInserted int64
	NumTargetRowsUpdated  int64
	NumTargetRowsDeleted  int64
	NumTargetRowsCopied   int64
	NumOutputRows         int64
	NumTargetFilesAdded   int64
	NumTargetFilesRemoved int64
	NumTargetBytesAdded   int64
	NumTargetBytesRemoved int64
	ScanTimeMs            int64
	RewriteTimeMs         int64
	ExecutionTimeMs       int64
}

func (m MergeMetrics) asMap() map[string]any {
	s := func(v int64) string { return strconv.FormatInt(v, 10) }
	return map[string]any{
		"numSourceRows":                          s(m.NumSourceRows),
		"numTargetRowsInserted":                  s(m.NumTargetRowsInserted),
		"numTargetRowsUpdated":                   s(m.NumTargetRowsUpdated),
		"numTargetRowsMatchedUpdated":            s(m.NumTargetRowsUpdated),
		"numTargetRowsMatchedDeleted":            s(m.NumTargetRowsDeleted),
		"numTargetRowsNotMatchedBySourceUpdated": "0",
		"numTargetRowsNotMatchedBySourceDeleted": "0",
		"numTargetRowsDeleted":                   s(m.NumTargetRowsDeleted),
		"numTargetRowsCopied":                    s(m.NumTargetRowsCopied),
		"numOutputRows":                          s(m.NumOutputRows),
		"numTargetFilesAdded":                    s(m.NumTargetFilesAdded),
		"numTargetFilesRemoved":                  s(m.NumTargetFilesRemoved),
		"numTargetBytesAdded":                    s(m.NumTargetBytesAdded),
		"numTargetBytesRemoved":                  s(m.NumTargetBytesRemoved),
		"numTargetChangeFilesAdded":              "0",
		"numTargetDeletionVectorsAdded":          "0",
		"numTargetDeletionVectorsRemoved":        "0",
		"numTargetDeletionVectorsUpdated":        "0",
		"executionTimeMs":                        s(m.ExecutionTimeMs),
		"scanTimeMs":                             s(m.ScanTimeMs),
		"rewriteTimeMs":                          s(m.RewriteTimeMs),
		"materializeSourceTimeMs":                "0",
	}
}

// mergePlan is a MERGE whose data files are written but not yet committed.
type mergePlan struct {
	removes []action
	adds    []action
	written []string // paths of the new files, deleted if the commit is abandoned
	fs      vfs.FS   // the table's FS, where written lives
	metrics MergeMetrics
}

// abandon deletes the plan's data files. They were never referenced by a
// commit, so no reader can need them.
func (p *mergePlan) abandon() {
	for _, f := range p.written {
		_ = p.fs.Remove(f)
	}
}

// hotTailRows: when the last file of a MERGE output holds more rows than
// this, the rows of its newest window go to a file of their own, so that the
// next live batch (which updates that window) rewrites only a few rows.
const hotTailRows = 1024

// planMerge upserts src into the snapshot's table by the layout's key,
// matching keys null-safely (Spark's <=>: a null equals a null): a target
// row whose key a src row has takes that row's values, the other src rows
// are inserted; a src row marked del (sign -1) deletes the target row with
// its key instead (and inserts nothing when there is none). Only the files
// whose stats may hold a src key are read, and only the ones that really
// hold one are rewritten. Matching is a sort-merge join: the source is
// sorted by key once, and each candidate file (already sorted when we wrote
// it) is joined against the part of the source its first key starts at. In
// a layout without a key (a global aggregation) every row has the one empty
// key: the table holds one row, which each batch updates.
func (s *Snapshot) planMerge(ctx context.Context, src *rowSet, o mergeOptions) (*mergePlan, error) {
	start := time.Now()
	plan := &mergePlan{fs: s.table.fs}
	plan.metrics.NumSourceRows = int64(src.n)
	uniq := src.dedupeSorted()
	matched := make([]bool, uniq.n)
	var touched []*rowSet
	for _, f := range s.mergeCandidates(uniq) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		part, err := s.joinFile(f, uniq, matched, plan, o.now)
		if err != nil {
			return nil, err
		}
		if part != nil {
			touched = append(touched, part)
		}
	}
	plan.metrics.ScanTimeMs = ceilMs(time.Since(start))
	inserted := uniq.unmatched(matched)
	plan.metrics.NumTargetRowsInserted = int64(inserted.n)
	out := mergeRuns(touched, inserted)
	plan.metrics.NumOutputRows = int64(out.n)
	if out.n > 0 {
		rewriteStart := time.Now()
		adds, err := s.table.writeChunks(ctx, chunkRows(out, o.targetRows), o.now)
		for _, a := range adds {
			plan.written = append(plan.written, s.table.filePath(a.Path))
			plan.adds = append(plan.adds, action{Add: a})
			plan.metrics.NumTargetFilesAdded++
			plan.metrics.NumTargetBytesAdded += a.Size
		}
		if err != nil {
			plan.abandon()
			return nil, err
		}
		plan.metrics.RewriteTimeMs = ceilMs(time.Since(rewriteStart))
	}
	plan.metrics.ExecutionTimeMs = ceilMs(time.Since(start))
	return plan, nil
}

// joinFile joins one candidate file against uniq (sorted, unique keys),
// marking the src rows it matches. When the file holds a src key it returns
// the file's rows as they are after the MERGE (updated rows replaced by
// their src row, deleted ones left out), sorted by key, and records the
// file's remove in plan; otherwise nil.
func (s *Snapshot) joinFile(f *AddFile, uniq *rowSet, matched []bool, plan *mergePlan, now time.Time) (*rowSet, error) {
	p := s.table.filePath(f.Path)
	rows, err := readDataFile(s.table.fs, p, uniq.l)
	if err != nil {
		return nil, dataFileError(err, p, "restore the file or the table from a backup", "read live data file of version %d", s.Version)
	}
	if rows.n == 0 {
		return nil, nil
	}
	rows.sortByKey() // a no-op for our files; another writer's may be in any order
	// by[i] is the src row that updates file row i, -1 for none, -2 for a deletion.
	by := make([]int32, rows.n)
	j := sort.Search(uniq.n, func(i int) bool { return cmpKey(uniq, i, rows, 0) >= 0 })
	var updated, deleted int64
	for i := range by {
		by[i] = -1
		for j < uniq.n && cmpKey(uniq, j, rows, i) < 0 {
			j++
		}
		if j == uniq.n {
			by = by[:i+1]
			break
		}
		if cmpKey(uniq, j, rows, i) != 0 {
			continue
		}
		matched[j] = true
		if uniq.deleted(j) {
			by[i] = -2
			deleted++
			continue
		}
		by[i] = int32(j)
		updated++
	}
	if updated == 0 && deleted == 0 {
		return nil, nil
	}
	out := newRowSet(uniq.l, rows.n-int(deleted))
	run := 0 // start of the current run of unchanged rows
	for i := range by {
		if by[i] == -1 {
			continue
		}
		out.appendRange(rows, run, i)
		if by[i] >= 0 {
			out.appendRow(uniq, int(by[i]))
		}
		run = i + 1
	}
	out.appendRange(rows, run, rows.n)
	plan.metrics.NumTargetRowsUpdated += updated
	plan.metrics.NumTargetRowsDeleted += deleted
	plan.metrics.NumTargetRowsCopied += int64(rows.n) - updated - deleted
	plan.metrics.NumTargetFilesRemoved++
	plan.metrics.NumTargetBytesRemoved += f.Size
	ts := now.UnixMilli()
	size := f.Size
	plan.removes = append(plan.removes, action{Remove: &RemoveFile{
		Path: f.Path, DeletionTimestamp: &ts, DataChange: true, ExtendedFileMetadata: ptr(true),
		PartitionValues: nonNilPV(f.PartitionValues), Size: &size,
		Stats: fmt.Sprintf(`{"numRecords":%d}`, rows.n),
	}})
	return out, nil
}

// unmatched returns the rows neither matched nor deletions: the inserts.
// With none matched and none deleted (a backfill batch) that is rs itself.
func (rs *rowSet) unmatched(matched []bool) *rowSet {
	some := rs.del != nil
	for _, m := range matched {
		some = some || m
	}
	if !some {
		return rs
	}
	out := newRowSet(rs.l, rs.n)
	run := 0
	for i := range rs.n {
		if matched[i] || rs.deleted(i) {
			out.appendRange(rs, run, i)
			run = i + 1
		}
	}
	out.appendRange(rs, run, rs.n)
	out.del = nil
	return out
}

// mergeRuns merges the rewritten files' rows (each sorted; files may
// overlap) and the inserted rows (sorted) into one run sorted by key.
func mergeRuns(touched []*rowSet, inserted *rowSet) *rowSet {
	if len(touched) == 0 {
		return inserted
	}
	a := touched[0]
	if len(touched) > 1 {
		n := 0
		for _, t := range touched {
			n += t.n
		}
		a = newRowSet(inserted.l, n)
		for _, t := range touched {
			a.appendRange(t, 0, t.n)
		}
		a.sortByKey()
	}
	if inserted.n == 0 {
		return a
	}
	// Runs, found by binary search: a backfill's inserts mostly follow the
	// rewritten rows, or come between a few of their windows.
	out := newRowSet(inserted.l, a.n+inserted.n)
	i, j := 0, 0
	for i < a.n && j < inserted.n {
		if cmpKey(inserted, j, a, i) < 0 {
			k := j + 1 + sort.Search(inserted.n-j-1, func(x int) bool { return cmpKey(inserted, j+1+x, a, i) >= 0 })
			out.appendRange(inserted, j, k)
			j = k
		} else {
			k := i + 1 + sort.Search(a.n-i-1, func(x int) bool { return cmpKey(inserted, j, a, i+1+x) < 0 })
			out.appendRange(a, i, k)
			i = k
		}
	}
	out.appendRange(a, i, a.n)
	out.appendRange(inserted, j, inserted.n)
	return out
}

// ceilMs rounds a duration up to whole milliseconds: a MERGE of a live batch
// scans and rewrites in well under a millisecond (the data files' fsyncs
// overlap the commit's), and truncating would report work that ran as 0 ms.
func ceilMs(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

func nonNilPV(m map[string]*string) map[string]*string {
	if m == nil {
		return map[string]*string{}
	}
	return m
}

// chunkRows cuts sorted rows into files of at most target rows. In a
// windowed table whose key starts with the window, the newest window goes to
// a file of its own when the last chunk is large (the hot tail).
func chunkRows(rows *rowSet, target int) []*rowSet {
	if target <= 0 {
		target = DefaultTargetFileRows
	}
	var chunks []*rowSet
	lo := 0
	for rows.n-lo > target {
		chunks = append(chunks, rows.slice(lo, lo+target))
		lo += target
	}
	if rows.n-lo > hotTailRows && len(rows.l.keys) > 0 && rows.l.leaves[rows.l.keys[0]].col == KeyWindowStart {
		ws := &rows.cols[rows.l.keys[0]]
		if last := rows.n - 1; !ws.IsNull(last) {
			lastWS := ws.Int64s[last]
			cut := lo + sort.Search(rows.n-lo, func(i int) bool { return !ws.IsNull(lo+i) && ws.Int64s[lo+i] >= lastWS })
			if cut > lo {
				chunks = append(chunks, rows.slice(lo, cut))
				lo = cut
			}
		}
	}
	return append(chunks, rows.slice(lo, rows.n))
}

// writeChunks writes each chunk to its own data file, two at a time.
func (t *Table) writeChunks(ctx context.Context, chunks []*rowSet, now time.Time) ([]*AddFile, error) {
	adds := make([]*AddFile, len(chunks))
	errs := make([]error, len(chunks))
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for i, c := range chunks {
		if err := ctx.Err(); err != nil {
			errs[i] = err
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			adds[i], errs[i] = t.writeDataFile(c.l.pq, c, now)
		}()
	}
	wg.Wait()
	var out []*AddFile
	var firstErr error
	for i := range adds {
		if adds[i] != nil {
			out = append(out, adds[i])
		}
		if errs[i] != nil && firstErr == nil {
			firstErr = errs[i]
		}
	}
	return out, firstErr
}
