package delta

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Key column names (engine batch columns) that MergeSink can match on.
const (
	KeyWindowStart = "window_start"
	KeyWindowEnd   = "window_end"
	KeySource      = "source"
	KeyMiner       = "miner"
)

// DefaultKeyColumns is the MERGE key of the reference pipeline.
var DefaultKeyColumns = []string{KeyWindowStart, KeyWindowEnd, KeySource, KeyMiner}

// keyMask selects the key columns; a zero bit means the column is ignored.
type keyMask uint8

const (
	keyWS keyMask = 1 << iota
	keyWE
	keySource
	keyMiner
	keyAll = keyWS | keyWE | keySource | keyMiner
)

func parseKeyColumns(cols []string) (keyMask, error) {
	var m keyMask
	for _, c := range cols {
		switch c {
		case KeyWindowStart:
			m |= keyWS
		case KeyWindowEnd:
			m |= keyWE
		case KeySource:
			m |= keySource
		case KeyMiner:
			m |= keyMiner
		default:
			return 0, fmt.Errorf("unknown key column %q (want some of %v)", c, DefaultKeyColumns)
		}
	}
	if m == 0 {
		return 0, fmt.Errorf("no key columns")
	}
	return m, nil
}

// mergeOptions parameterise one MERGE.
type mergeOptions struct {
	keys       keyMask
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

// cmp orders rows by the key columns in m: window.start, window.end,
// source, miner, each with null first. With every key column it is also
// the row order of the files MergeSink writes.
func (m keyMask) cmp(a, b *sinkRow) int {
	if m&keyWS != 0 {
		if c := cmpNullable(a.nulls&nullWS != 0, b.nulls&nullWS != 0); c != 0 {
			return c
		}
		if a.WS != b.WS {
			if a.WS < b.WS {
				return -1
			}
			return 1
		}
	}
	if m&keyWE != 0 {
		if c := cmpNullable(a.nulls&nullWE != 0, b.nulls&nullWE != 0); c != 0 {
			return c
		}
		if a.WE != b.WE {
			if a.WE < b.WE {
				return -1
			}
			return 1
		}
	}
	if m&keySource != 0 {
		if c := cmpNullable(a.nulls&nullSource != 0, b.nulls&nullSource != 0); c != 0 {
			return c
		}
		if c := strings.Compare(a.Source, b.Source); c != 0 {
			return c
		}
	}
	if m&keyMiner != 0 {
		if c := cmpNullable(a.nulls&nullMiner != 0, b.nulls&nullMiner != 0); c != 0 {
			return c
		}
		if c := strings.Compare(a.Miner, b.Miner); c != 0 {
			return c
		}
	}
	return 0
}

// cmpNullable orders null before non-null; 0 means "compare the values"
// (both present) or "equal" (both null).
func cmpNullable(an, bn bool) int {
	switch {
	case an == bn:
		return 0
	case an:
		return -1
	}
	return 1
}

// dedupeSorted returns src's rows sorted by key, keeping the last row of
// each key (the engine's order is the update order). src is not modified;
// when it is sorted with unique keys already (an update-mode batch in key
// order) it is returned itself rather than copied: the copy of a seed
// backfill batch's ~1M rows was 57 MB live at the batch's memory peak.
func (m keyMask) dedupeSorted(src []sinkRow) []sinkRow {
	if slices.IsSortedFunc(src, func(a, b sinkRow) int { return m.cmp(&a, &b) }) && m.unique(src) {
		return src
	}
	rows := make([]sinkRow, len(src))
	copy(rows, src)
	if !slices.IsSortedFunc(rows, func(a, b sinkRow) int { return m.cmp(&a, &b) }) {
		for i := range rows {
			rows[i].seq = int32(i)
		}
		slices.SortFunc(rows, func(a, b sinkRow) int {
			if c := m.cmp(&a, &b); c != 0 {
				return c
			}
			return int(a.seq - b.seq)
		})
	}
	out := rows[:0]
	for i := range rows {
		if len(out) > 0 && m.cmp(&out[len(out)-1], &rows[i]) == 0 {
			out[len(out)-1] = rows[i]
			continue
		}
		out = append(out, rows[i])
	}
	return out
}

// unique reports whether sorted holds no two rows with the same key.
func (m keyMask) unique(sorted []sinkRow) bool {
	for i := 1; i < len(sorted); i++ {
		if m.cmp(&sorted[i-1], &sorted[i]) == 0 {
			return false
		}
	}
	return true
}

// mergeSorted merges two runs sorted by m.cmp.
func (m keyMask) mergeSorted(a, b []sinkRow) []sinkRow {
	if len(a) == 0 {
		return b
	}
	if len(b) == 0 {
		return a
	}
	out := make([]sinkRow, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if m.cmp(&b[j], &a[i]) < 0 {
			out = append(out, b[j])
			j++
		} else {
			out = append(out, a[i])
			i++
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

// planMerge upserts src into the snapshot's sink table: rows whose key
// matches take src's count, the others are inserted; a src row marked del
// (Sign -1) deletes the target row with its key instead (and inserts
// nothing when there is none). Only the files whose
// stats may hold a src key are read, and only the ones that really hold one
// are rewritten. Matching is a sort-merge join: the source is sorted by key
// once, and each candidate file (already sorted when we wrote it) is joined
// against the part of the source its first key starts at.
func (s *Snapshot) planMerge(ctx context.Context, src []sinkRow, o mergeOptions) (*mergePlan, error) {
	start := time.Now()
	plan := &mergePlan{fs: s.table.fs}
	plan.metrics.NumSourceRows = int64(len(src))
	cmp := func(a, b sinkRow) int { return o.keys.cmp(&a, &b) }
	uniq := o.keys.dedupeSorted(src)

	candidates := s.mergeCandidates(uniq, o.keys)
	matched := make([]bool, len(uniq))
	var touchedRows []sinkRow
	touchedFiles := 0
	var buf []sinkRow
	for _, f := range candidates {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p := s.table.filePath(f.Path)
		var err error
		buf, err = readSinkFile(s.table.fs, p, buf[:0])
		if err != nil {
			return nil, dataFileError(err, p, "restore the file or the table from a backup", "read live data file of version %d", s.Version)
		}
		if len(buf) == 0 {
			continue
		}
		if !slices.IsSortedFunc(buf, cmp) {
			slices.SortFunc(buf, cmp) // a file another writer produced
		}
		j := sort.Search(len(uniq), func(i int) bool { return o.keys.cmp(&uniq[i], &buf[0]) >= 0 })
		var updated, deleted int64
		for i := range buf {
			for j < len(uniq) && o.keys.cmp(&uniq[j], &buf[i]) < 0 {
				j++
			}
			if j == len(uniq) {
				break
			}
			if o.keys.cmp(&uniq[j], &buf[i]) == 0 {
				matched[j] = true
				if uniq[j].del {
					buf[i].del = true
					deleted++
					continue
				}
				buf[i].Count = uniq[j].Count
				buf[i].nulls = buf[i].nulls&^nullCount | uniq[j].nulls&nullCount
				updated++
			}
		}
		if updated == 0 && deleted == 0 {
			continue
		}
		rows := int64(len(buf))
		if deleted > 0 {
			kept := buf[:0]
			for _, r := range buf {
				if !r.del {
					kept = append(kept, r)
				}
			}
			buf = kept
		}
		touchedFiles++
		plan.metrics.NumTargetRowsUpdated += updated
		plan.metrics.NumTargetRowsDeleted += deleted
		plan.metrics.NumTargetRowsCopied += rows - updated - deleted
		plan.metrics.NumTargetFilesRemoved++
		plan.metrics.NumTargetBytesRemoved += f.Size
		touchedRows = append(touchedRows, buf...)
		ts := o.now.UnixMilli()
		size := f.Size
		plan.removes = append(plan.removes, action{Remove: &RemoveFile{
			Path: f.Path, DeletionTimestamp: &ts, DataChange: true, ExtendedFileMetadata: ptr(true),
			PartitionValues: nonNilPV(f.PartitionValues), Size: &size,
			Stats: fmt.Sprintf(`{"numRecords":%d}`, rows),
		}})
	}
	plan.metrics.ScanTimeMs = ceilMs(time.Since(start))
	inserted := make([]sinkRow, 0, len(uniq))
	for i := range uniq {
		if !matched[i] && !uniq[i].del {
			inserted = append(inserted, uniq[i])
		}
	}
	plan.metrics.NumTargetRowsInserted = int64(len(inserted))
	if touchedFiles > 1 {
		slices.SortFunc(touchedRows, cmp) // files may overlap
	}
	out := o.keys.mergeSorted(touchedRows, inserted)
	plan.metrics.NumOutputRows = int64(len(out))
	if len(out) > 0 {
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

// mergeCandidates returns the live files whose stats may hold a key of
// uniq (sorted by keys.cmp), in path order.
func (s *Snapshot) mergeCandidates(uniq []sinkRow, keys keyMask) []*AddFile {
	if len(uniq) == 0 {
		return nil
	}
	// uniq is sorted by window.start when it is a key column; keys with a
	// null window.start sort first and defeat the range search.
	byWS := keys&keyWS != 0 && uniq[0].nulls&nullWS == 0
	var out []*AddFile
	for _, f := range s.files {
		fr := s.rangeOf(f)
		if fr.numRecords == 0 {
			continue
		}
		if !byWS || !fr.hasWS {
			out = append(out, f)
			continue
		}
		lo := sort.Search(len(uniq), func(i int) bool { return uniq[i].WS >= fr.minWS })
		for i := lo; i < len(uniq) && uniq[i].WS <= fr.maxWS; i++ {
			r := &uniq[i]
			if keys&keySource != 0 && !strMayContain(r.Source, fr.minSrc, fr.maxSrc) {
				continue
			}
			if keys&keyMiner != 0 && !strMayContain(r.Miner, fr.minMiner, fr.maxMiner) {
				continue
			}
			out = append(out, f)
			break
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// chunkRows cuts sorted rows into files of at most target rows, keeping
// the newest window in a file of its own when the last chunk is large.
func chunkRows(rows []sinkRow, target int) [][]sinkRow {
	if target <= 0 {
		target = DefaultTargetFileRows
	}
	var chunks [][]sinkRow
	for len(rows) > target {
		chunks = append(chunks, rows[:target])
		rows = rows[target:]
	}
	if len(rows) > hotTailRows {
		lastWS := rows[len(rows)-1].WS
		cut := sort.Search(len(rows), func(i int) bool { return rows[i].WS >= lastWS })
		if cut > 0 {
			chunks = append(chunks, rows[:cut])
			rows = rows[cut:]
		}
	}
	return append(chunks, rows)
}

// writeChunks writes each chunk to its own data file, two at a time.
func (t *Table) writeChunks(ctx context.Context, chunks [][]sinkRow, now time.Time) ([]*AddFile, error) {
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
			adds[i], errs[i] = t.writeSinkFile(c, now)
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

// mergePredicate renders the MERGE condition the way Spark shows it.
func mergePredicate(keys keyMask) string {
	var parts []string
	if keys&keyWS != 0 {
		parts = append(parts, "(t.window.start = s.window.start)")
	}
	if keys&keyWE != 0 {
		parts = append(parts, "(t.window.end = s.window.end)")
	}
	if keys&keySource != 0 {
		parts = append(parts, "(t.source = s.source)")
	}
	if keys&keyMiner != 0 {
		parts = append(parts, "(t.miner = s.miner)")
	}
	return `["` + strings.Join(parts, " AND ") + `"]`
}
