package delta

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ethstream/ethstream/errcode"
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

func (m keyMask) keyOf(r *sinkRow) mergeKey {
	k := r.key()
	if m&keyWS == 0 {
		k.WS, k.nulls = 0, k.nulls&^nullWS
	}
	if m&keyWE == 0 {
		k.WE, k.nulls = 0, k.nulls&^nullWE
	}
	if m&keySource == 0 {
		k.Source, k.nulls = "", k.nulls&^nullSource
	}
	if m&keyMiner == 0 {
		k.Miner, k.nulls = "", k.nulls&^nullMiner
	}
	if m&(keyWS|keyWE) == 0 {
		k.nulls &^= nullWindow
	}
	return k
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
		"numTargetRowsMatchedDeleted":            "0",
		"numTargetRowsNotMatchedBySourceUpdated": "0",
		"numTargetRowsNotMatchedBySourceDeleted": "0",
		"numTargetRowsDeleted":                   "0",
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
	written []string // local paths of the new files, deleted if the commit is abandoned
	metrics MergeMetrics
}

// abandon deletes the plan's data files. They were never referenced by a
// commit, so no reader can need them.
func (p *mergePlan) abandon() {
	for _, f := range p.written {
		os.Remove(f)
	}
}

// hotTailRows: when the last file of a MERGE output holds more rows than
// this, the rows of its newest window go to a file of their own, so that the
// next live batch (which updates that window) rewrites only a few rows.
const hotTailRows = 1024

// planMerge upserts src into the snapshot's sink table: rows whose key
// matches take src's count, the others are inserted. Only the files whose
// stats may hold a src key are read, and only the ones that really hold one
// are rewritten.
func (s *Snapshot) planMerge(ctx context.Context, src []sinkRow, o mergeOptions) (*mergePlan, error) {
	start := time.Now()
	plan := &mergePlan{}
	plan.metrics.NumSourceRows = int64(len(src))

	// Deduplicate the source: the last row for a key wins.
	index := make(map[mergeKey]int, len(src))
	uniq := make([]sinkRow, 0, len(src))
	for i := range src {
		k := o.keys.keyOf(&src[i])
		if j, ok := index[k]; ok {
			uniq[j] = src[i]
			continue
		}
		index[k] = len(uniq)
		uniq = append(uniq, src[i])
	}
	// Order by window.start so that pruning can binary-search it.
	order := make([]int, len(uniq))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		wa, wb := uniq[a].WS, uniq[b].WS
		switch {
		case wa < wb:
			return -1
		case wa > wb:
			return 1
		}
		return 0
	})

	candidates := s.mergeCandidates(uniq, order, o.keys)
	matched := make([]bool, len(uniq))
	var out []sinkRow
	var buf []sinkRow
	for _, f := range candidates {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p := s.table.filePath(f.Path)
		var err error
		buf, err = readSinkFile(p, buf[:0])
		if err != nil {
			if os.IsNotExist(err) {
				return nil, errcode.Wrap(err, CodeMissingFile, p, "restore the file or the table from a backup", "live data file of version %d is missing", s.Version)
			}
			return nil, errcode.Wrap(err, CodeMissingFile, p, "restore the file or the table from a backup", "read live data file")
		}
		touched := false
		var updated int64
		for i := range buf {
			j, ok := index[o.keys.keyOf(&buf[i])]
			if !ok {
				continue
			}
			touched = true
			matched[j] = true
			buf[i].Count = uniq[j].Count
			buf[i].nulls = buf[i].nulls&^nullCount | uniq[j].nulls&nullCount
			updated++
		}
		if !touched {
			continue
		}
		plan.metrics.NumTargetRowsUpdated += updated
		plan.metrics.NumTargetRowsCopied += int64(len(buf)) - updated
		plan.metrics.NumTargetFilesRemoved++
		plan.metrics.NumTargetBytesRemoved += f.Size
		out = append(out, buf...)
		ts := o.now.UnixMilli()
		size := f.Size
		plan.removes = append(plan.removes, action{Remove: &RemoveFile{
			Path: f.Path, DeletionTimestamp: &ts, DataChange: true, ExtendedFileMetadata: ptr(true),
			PartitionValues: nonNilPV(f.PartitionValues), Size: &size,
			Stats: fmt.Sprintf(`{"numRecords":%d}`, len(buf)),
		}})
	}
	plan.metrics.ScanTimeMs = time.Since(start).Milliseconds()
	for i := range uniq {
		if !matched[i] {
			out = append(out, uniq[i])
			plan.metrics.NumTargetRowsInserted++
		}
	}
	plan.metrics.NumOutputRows = int64(len(out))
	if len(out) > 0 {
		rewriteStart := time.Now()
		slices.SortFunc(out, func(a, b sinkRow) int {
			if rowLess(&a, &b) {
				return -1
			}
			if rowLess(&b, &a) {
				return 1
			}
			return 0
		})
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
		plan.metrics.RewriteTimeMs = time.Since(rewriteStart).Milliseconds()
	}
	plan.metrics.ExecutionTimeMs = time.Since(start).Milliseconds()
	return plan, nil
}

func nonNilPV(m map[string]*string) map[string]*string {
	if m == nil {
		return map[string]*string{}
	}
	return m
}

// mergeCandidates returns the live files whose stats may hold a key of uniq
// (order sorts uniq by window.start), in path order.
func (s *Snapshot) mergeCandidates(uniq []sinkRow, order []int, keys keyMask) []*AddFile {
	if len(uniq) == 0 {
		return nil
	}
	var out []*AddFile
	for _, f := range s.files {
		fr := s.rangeOf(f)
		if fr.numRecords == 0 {
			continue
		}
		if keys&keyWS == 0 || !fr.hasWS {
			out = append(out, f)
			continue
		}
		lo := sort.Search(len(order), func(i int) bool { return uniq[order[i]].WS >= fr.minWS })
		for i := lo; i < len(order) && uniq[order[i]].WS <= fr.maxWS; i++ {
			r := &uniq[order[i]]
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
