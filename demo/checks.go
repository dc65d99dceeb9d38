package demo

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"path/filepath"
	"sort"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// verifier gathers evidence between phases (state at the right versions) and
// turns it into the checks of docs/contracts.md, Demo checks.
type verifier struct {
	o   Options
	env *Env

	retireChecks []Check
	refusal      []Check
	before       map[string]string // state at the last batch before the shrink
	beforeBatch  int64
}

func newVerifier(o Options, env *Env) *verifier { return &verifier{o: o, env: env} }

func (v *verifier) stateDir() string {
	return filepath.Join(v.env.Checkpoint, "state", engine.OperatorID)
}

// stateRows reads the state at version into key -> value strings, with the
// partition of each key.
func (v *verifier) stateRows(ctx context.Context, version int64) (rows map[string]string, parts map[int]int, schema state.Schema, err error) {
	rows, parts = map[string]string{}, map[int]int{}
	schema, err = state.ReadAll(ctx, vfs.Default, v.stateDir(), version, func(p int, key, val []any) error {
		k := fmt.Sprint(key...)
		if _, dup := rows[k]; dup {
			return fmt.Errorf("key %s appears twice in state version %d", k, version)
		}
		rows[k] = fmt.Sprint(val...)
		parts[p]++
		return nil
	})
	return rows, parts, schema, err
}

func fieldIndex(fields []state.Field, name string) int {
	for i, f := range fields {
		if f.Name == name {
			return i
		}
	}
	return -1
}

func (v *verifier) lastCommitted() (int64, *engine.InspectReport, error) {
	rep, err := engine.Inspect(vfs.Default, v.env.Checkpoint)
	if err != nil {
		return 0, nil, err
	}
	if rep.LatestCommittedBatchID == nil {
		return 0, nil, fmt.Errorf("checkpoint %s has no committed batch", v.env.Checkpoint)
	}
	return *rep.LatestCommittedBatchID, rep, nil
}

// afterRetire: archive keys still in state = archive rows in the table whose
// windows the watermark has not closed (check 6). The stored state leaves
// out what the next batch's watermark closes (agg's "closed at commit"), so
// the stored keys are compared with the rows open at that watermark (the
// last commit's nextBatchWatermarkMs), and Spark's count (numRowsTotal, at
// the batch's own watermark) with the stored keys plus those closed.
func (v *verifier) afterRetire(ctx context.Context) error {
	c, _, err := v.lastCommitted()
	if err != nil {
		return err
	}
	events, err := engine.ReadProgress(vfs.Default, filepath.Join(v.o.WorkDir, "progress", PhaseRetireArchive+".jsonl"))
	if err != nil {
		return err
	}
	if len(events) == 0 {
		return fmt.Errorf("phase %s reported no progress", PhaseRetireArchive)
	}
	last := events[len(events)-1]
	wm, err := time.Parse(time.RFC3339Nano, last.EventTime["watermark"])
	if err != nil {
		return fmt.Errorf("watermark of batch %d: %w", last.BatchID, err)
	}
	ce, err := checkpoint.Dir{FS: vfs.Default, Path: v.env.Checkpoint}.ReadCommit(c)
	if err != nil {
		return err
	}
	nextWm := time.UnixMilli(ce.NextBatchWatermarkMs).UTC()
	var keys [][]any
	schema, err := state.ReadAll(ctx, vfs.Default, v.stateDir(), c, func(_ int, key, _ []any) error {
		keys = append(keys, key)
		return nil
	})
	if err != nil {
		return err
	}
	si := fieldIndex(schema.Key, stream.ColSource)
	if si < 0 {
		return fmt.Errorf("state schema has no %q key: %v", stream.ColSource, schema.Key)
	}
	var archiveKeys int64
	for _, k := range keys {
		if k[si] == ArchiveSource {
			archiveKeys++
		}
	}
	total := len(keys)
	var openRows, openNow int64
	if err := tableRows(ctx, v.env.Table, -1, func(r tableRow) error {
		if r.Source == ArchiveSource && r.WindowEnd > nextWm.UnixMicro() {
			openRows++
		}
		if r.WindowEnd > wm.UnixMicro() {
			openNow++
		}
		return nil
	}); err != nil {
		return err
	}
	var sparkRows, closed int64
	if len(last.StateOperators) > 0 {
		sparkRows = last.StateOperators[0].NumRowsTotal
		closed = last.StateOperators[0].CustomMetrics[agg.MetricClosedUnstored]
	}
	v.retireChecks = append(v.retireChecks,
		check("6. archive keys in state after retirement = archive rows with open windows in the table (at the next batch's watermark)", openRows, archiveKeys),
		check("6. numRowsTotal = table rows with open windows at the batch's watermark = stored keys + closed at commit", openNow, sparkRows),
		check("6. stored keys + numClosedRowsNotStored = numRowsTotal", sparkRows, int64(total)+closed),
		figure(fmt.Sprintf("6. state keys at batch %d (watermark %s, next %s)", c, wm.Format(time.RFC3339), nextWm.Format(time.RFC3339)), total))
	return nil
}

func (v *verifier) refused(err error, before, after string) {
	v.refusal = append(v.refusal,
		check("5. re-adding s3_backfill is refused", errcode.TombstoneNameReuse, errcode.Code(err)),
		check("5. the refused start left the checkpoint byte-identical (sha256 of the tree)", before, after))
}

// beforeShrink snapshots the state the repartition must preserve.
func (v *verifier) beforeShrink(ctx context.Context) error {
	c, _, err := v.lastCommitted()
	if err != nil {
		return err
	}
	rows, _, _, err := v.stateRows(ctx, c)
	if err != nil {
		return err
	}
	v.before, v.beforeBatch = rows, c
	return nil
}

// tableRows calls fn for every live row of the table at version (-1 =
// latest), read from the real Delta table with its columnar reader.
func tableRows(ctx context.Context, path string, version int64, fn func(tableRow) error) error {
	snap, err := tableSnapshot(ctx, path, version)
	if err != nil {
		return err
	}
	return scanTable(ctx, snap, fn)
}

// tableRow is one row of the reference table; a null reads as its type's
// zero value.
type tableRow struct {
	WindowStart, WindowEnd int64
	Source, Miner          string
	Count                  int64
}

// scanTable calls fn for every live row of the reference table in snap.
func scanTable(ctx context.Context, snap *delta.Snapshot, fn func(tableRow) error) error {
	return snap.Scan(ctx, func(b *stream.Batch) error {
		col := func(name string, t stream.Type) (*stream.Column, error) {
			if c := b.Column(name); c != nil && c.Type == t {
				return c, nil
			}
			return nil, fmt.Errorf("the table has no %s column %q: not the reference query's table", t, name)
		}
		ws, err1 := col(delta.KeyWindowStart, stream.Timestamp)
		we, err2 := col(delta.KeyWindowEnd, stream.Timestamp)
		src, err3 := col("source", stream.String)
		miner, err4 := col("miner", stream.String)
		cnt, err5 := col("count", stream.Int64)
		if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
			return err
		}
		for i := range b.Len {
			if err := fn(tableRow{ws.Int64s[i], we.Int64s[i], src.Strings[i], miner.Strings[i], cnt.Int64s[i]}); err != nil {
				return err
			}
		}
		return nil
	})
}

func tableSnapshot(ctx context.Context, path string, version int64) (*delta.Snapshot, error) {
	t, err := delta.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	return t.Snapshot(ctx, version)
}

type windowKey struct {
	start         int64
	source, miner string
}

// tableVsRecount is the outcome of comparing the table with the recount.
type tableVsRecount struct {
	sum      int64 // sum(count) over the table's rows
	dups     int64 // rows whose (window, source, miner) an earlier row has
	mismatch int64 // groups missing from the table, with another count, or absent from the recount
}

// compareTable streams the table's rows against the recount's groups,
// marking each group it meets (count 0: no recounted group has 0 blocks),
// so no second copy of the table is built. It consumes raw.
func compareTable(raw *groupCounts, scan func(func(tableRow) error) error) (tableVsRecount, error) {
	var out tableVsRecount
	// met records a group's row; it reports whether the count is the recount's.
	met := func(c *uint32, count int64) {
		switch {
		case *c == 0:
			out.dups++
		case int64(*c) != count:
			out.mismatch++
		}
		*c = 0
	}
	extra := map[windowKey]bool{} // table rows that are no recounted group
	err := scan(func(r tableRow) error {
		out.sum += r.Count
		if id, ok := raw.miners[r.Miner]; ok {
			switch r.Source {
			case ArchiveSource:
				if i, ok := raw.lookup(r.WindowStart, id); ok {
					met(&raw.archive[i].count, r.Count)
					return nil
				}
			case LiveSource:
				k := liveKey{r.WindowStart, id}
				if c, ok := raw.live[k]; ok {
					if c == 0 {
						out.dups++
					} else if c != r.Count {
						out.mismatch++
					}
					raw.live[k] = 0
					return nil
				}
			}
		}
		k := windowKey{r.WindowStart, r.Source, r.Miner}
		if extra[k] {
			out.dups++
		} else {
			extra[k] = true
			out.mismatch++
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	for _, g := range raw.archive {
		if g.count != 0 {
			out.mismatch++
		}
	}
	for _, c := range raw.live {
		if c != 0 {
			out.mismatch++
		}
	}
	return out, nil
}

// final computes every check from the CSVs, the checkpoint, the state and
// the table, in the order of the proof (1-10; 6 and the refusal of 5 were
// computed while the phases ran).
func (v *verifier) final(ctx context.Context, phases []PhaseResult, batches []BatchRecord, sources []SourceRecord) ([]Check, int64, error) {
	cs := identityChecks(batches)
	cs = append(cs, v.backfillChecks(batches)...)
	cs = append(cs, archiveHeldChecks(sources)...)
	live, liveBlocks, err := v.liveChecks(ctx, sources)
	if err != nil {
		return nil, 0, err
	}
	cs = append(cs, live...)
	tomb, err := v.tombstoneChecks(batches)
	if err != nil {
		return nil, 0, err
	}
	cs = append(cs, tomb...)
	cs = append(cs, v.retireChecks...)
	rep, err := v.repartitionChecks(ctx, batches)
	if err != nil {
		return nil, 0, err
	}
	cs = append(cs, rep...)
	tc, err := v.tableChecks(ctx, liveBlocks)
	if err != nil {
		return nil, 0, err
	}
	cs = append(cs, tc...)
	cs = append(cs, v.durationChecks(batches)...)
	return cs, liveBlocks, nil
}

// identityChecks is check 1: one query id, contiguous batch ids, a run id
// per start.
func identityChecks(batches []BatchRecord) []Check {
	var cs []Check
	qids, runs := map[string]bool{}, map[string]string{}
	ids := make([]int64, 0, len(batches))
	for _, b := range batches {
		qids[b.QueryID] = true
		if r, ok := runs[b.Phase]; ok && r != b.RunID {
			runs[b.Phase] = "several"
		} else {
			runs[b.Phase] = b.RunID
		}
		ids = append(ids, b.BatchID)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	contiguous := len(ids) > 0 && ids[0] == 0
	for i := 1; i < len(ids); i++ {
		if ids[i] != ids[i-1]+1 {
			contiguous = false
		}
	}
	distinctRuns := map[string]bool{}
	for _, r := range runs {
		distinctRuns[r] = true
	}
	cs = append(cs,
		check("1. one query id across all phases", 1, len(qids)),
		check("1. batch ids contiguous from 0", true, contiguous),
		check("1. each start has its own run id (phases with batches = distinct run ids)", len(runs), len(distinctRuns)))

	return cs
}

// backfillChecks is check 2: the backfill's batch ids.
func (v *verifier) backfillChecks(batches []BatchRecord) []Check {
	var cs []Check
	// Backfill = ceil(files / maxFilesPerTrigger) data batches, then one
	// no-data batch: the last data batch's blocks moved the watermark
	// (Spark's shouldRunAnotherBatch, whether or not the final watermark
	// closes a window).
	files := len(v.env.Manifest.Files)
	k := int64((files + v.o.Preset.MaxFilesPerTrigger - 1) / v.o.Preset.MaxFilesPerTrigger)
	first, last := phaseSpan(batches, PhaseBackfill)
	liveFirst, _ := phaseSpan(batches, PhaseAddLive)
	cs = append(cs,
		check("2. backfill batch ids", fmt.Sprintf("0-%d", k), fmt.Sprintf("%d-%d", first, last)),
		check("2. the live phase starts at batch", k+1, liveFirst))

	return cs
}

// archiveHeldChecks is check 3: after the live source is added, the
// archive reads nothing and its offset holds.
func archiveHeldChecks(sources []SourceRecord) []Check {
	var cs []Check
	var archiveEnd string
	for _, s := range sources {
		if s.Phase == PhaseBackfill && s.SourceName == ArchiveSource {
			archiveEnd = s.EndOffset
		}
	}
	var archiveRowsAfter int64
	held, n := true, 0
	for _, s := range sources {
		if s.Phase != PhaseBackfill && s.SourceName == ArchiveSource {
			n++
			archiveRowsAfter += s.NumInputRows
			held = held && s.StartOffset == archiveEnd && s.EndOffset == archiveEnd
		}
	}
	cs = append(cs,
		check("3. s3_backfill rows read after the live source was added", 0, archiveRowsAfter),
		check(fmt.Sprintf("3. s3_backfill start and end offsets held at %s in all %d batches", archiveEnd, n), true, held && n > 0))

	return cs
}

// liveChecks is check 4: eth_live starts from a null offset at archive
// last + 1, chained to the archive, 20 blocks a batch. It returns the live
// blocks read too.
func (v *verifier) liveChecks(ctx context.Context, sources []SourceRecord) ([]Check, int64, error) {
	var cs []Check
	var liveRows []SourceRecord
	for _, s := range sources {
		if s.SourceName == LiveSource {
			liveRows = append(liveRows, s)
		}
	}
	var liveBlocks int64
	if len(liveRows) > 0 {
		f := liveRows[0]
		end, _ := parseLive(f.EndOffset)
		start := f.StartOffset
		if start == "" {
			start = "null"
		}
		per := uint64(v.o.BlocksPerBatch)
		cs = append(cs,
			check("4. eth_live first start offset", "null", start),
			check("4. eth_live first block = archive last + 1", v.env.Manifest.LastBlock+1, end.Block-per+1))
		c, err := ethclient.DialContext(ctx, v.env.Node.URL())
		if err != nil {
			return nil, 0, err
		}
		h, err := c.HeaderByNumber(ctx, new(big.Int).SetUint64(v.env.Manifest.LastBlock+1))
		c.Close()
		if err != nil {
			return nil, 0, err
		}
		cs = append(cs, check("4. its parent hash is the archive's last hash", v.env.Manifest.LastHash, h.ParentHash.Hex()))
		steps := true
		var lastEnd liveOffset
		for _, r := range liveRows {
			e, ok := parseLive(r.EndOffset)
			s, hasS := parseLive(r.StartOffset)
			if !ok {
				steps = false
				continue
			}
			if hasS && r.NumInputRows > 0 && e.Block-s.Block != per {
				steps = false
			}
			lastEnd = e
		}
		cs = append(cs, check("4. later eth_live batches advance 20 blocks each", true, steps))
		liveBlocks = int64(lastEnd.Block - v.env.Manifest.LastBlock)
	}

	return cs, liveBlocks, nil
}

// tombstoneChecks is check 5 (the refusal itself was checked when it ran):
// the newest offsets entry tombstones the archive.
func (v *verifier) tombstoneChecks(batches []BatchRecord) ([]Check, error) {
	var cs []Check
	_, rep, err := v.lastCommitted()
	if err != nil {
		return nil, err
	}
	tomb := "none"
	for _, t := range rep.Tombstones {
		if t.Name == ArchiveSource {
			tomb = fmt.Sprintf("%s removed in batch %d", t.Name, t.RemovedInBatch)
		}
	}
	retireFirst, _ := phaseSpan(batches, PhaseRetireArchive)
	cs = append(cs, check("5. newest offset entry has s3_backfill tombstoned", fmt.Sprintf("%s removed in batch %d", ArchiveSource, retireFirst), tomb))
	cs = append(cs, v.refusal...)

	return cs, nil
}

// repartitionChecks is check 7: the repartition 200 -> 8 moved every key
// unchanged.
func (v *verifier) repartitionChecks(ctx context.Context, batches []BatchRecord) ([]Check, error) {
	var cs []Check
	var rb *BatchRecord
	for i := range batches {
		if batches[i].Kind == stream.KindRepartition {
			rb = &batches[i]
		}
	}
	if rb == nil {
		cs = append(cs, check("7. a repartition control batch ran", true, false))
	} else {
		after, parts, _, err := v.stateRows(ctx, rb.BatchID)
		if err != nil {
			return nil, err
		}
		same := len(after) == len(v.before)
		for k, val := range v.before {
			if after[k] != val {
				same = false
			}
		}
		maxPart := -1
		for p := range parts {
			if p > maxPart {
				maxPart = p
			}
		}
		cs = append(cs,
			check("7. repartition batch follows the last batch before the shrink", v.beforeBatch+1, rb.BatchID),
			check("7. state partitions after the control batch", v.o.ShrinkTo, rb.StatePartitions),
			check("7. keys before = keys after", len(v.before), len(after)),
			check("7. keys removed by the repartition", 0, rb.StateRowsRemoved),
			check("7. identical contents", true, same),
			check("7. every key in a partition below the new count", true, maxPart < v.o.ShrinkTo))
	}

	return cs, nil
}

// durationChecks is check 9: durations nest as Spark's, and the figures.
func (v *verifier) durationChecks(batches []BatchRecord) []Check {
	var cs []Check
	// The phases never add up to more than the
	// batch (each is truncated to whole ms, which only lowers the sum).
	overlapping := 0
	for _, b := range batches {
		if b.LatestOffsetMs+b.WalCommitMs+b.GetBatchMs+b.AddBatchMs+b.CommitOffsetsMs+b.RepartitionMs > b.TriggerExecutionMs {
			overlapping++
		}
	}
	cs = append(cs, check("9. batches whose durationMs phases add up to more than triggerExecution", 0, overlapping))

	// 9. Figures.
	var memBefore, memAfter int64
	var repMs float64
	// The medians over every data batch at each count, as latency.svg draws them.
	var before, after float64
	for _, m := range addBatchMedians(batches) {
		switch m.partitions {
		case int64(v.o.StatePartitions):
			before = m.median
		case int64(v.o.ShrinkTo):
			after = m.median
		}
	}
	for _, b := range batches {
		switch {
		case b.Phase == PhaseRetireArchive && b.Kind == stream.KindData:
			memBefore = b.StateMemoryBytes
		case b.Phase == PhaseShrinkState && b.Kind == stream.KindData:
			memAfter = b.StateMemoryBytes
		case b.Kind == stream.KindRepartition:
			repMs = b.RepartitionMs
		}
	}
	cs = append(cs,
		figure(fmt.Sprintf("9. addBatch median ms, %d partitions", v.o.StatePartitions), before),
		figure(fmt.Sprintf("9. addBatch median ms, %d partitions", v.o.ShrinkTo), after),
		figure("9. state memory bytes before -> after the shrink", fmt.Sprintf("%d -> %d", memBefore, memAfter)),
		figure("9. controlBatch.REPARTITION ms", repMs))
	return cs
}

// tableChecks is check 8: the table's totals, its uniqueness, and every
// row against a recount of the raw blocks (the archive and the live blocks
// after it).
func (v *verifier) tableChecks(ctx context.Context, liveBlocks int64) ([]Check, error) {
	snap, err := tableSnapshot(ctx, v.env.Table, -1)
	if err != nil {
		return nil, err
	}
	hint, _ := snap.NumRecords() // only sizes the recount's slice
	raw, err := recount(ctx, v.env.ArchiveRoot, v.env.Manifest.Files, v.env.Node.URL(),
		v.env.Manifest.LastBlock+1, v.env.Manifest.LastBlock+uint64(liveBlocks), int(hint))
	if err != nil {
		return nil, err
	}
	cmp, err := compareTable(raw, func(fn func(tableRow) error) error { return scanTable(ctx, snap, fn) })
	if err != nil {
		return nil, err
	}
	rows := v.env.Manifest.Rows
	return []Check{
		check("8. table sum(count) = archive blocks + live blocks", fmt.Sprintf("%d = %d + %d", rows+liveBlocks, rows, liveBlocks), fmt.Sprintf("%d = %d + %d", cmp.sum, rows, cmp.sum-rows)),
		check("8. live blocks", v.o.BlocksPerBatch*(v.o.AddLiveBatches+v.o.RetireBatches+v.o.ShrinkBatches), liveBlocks),
		check("8. duplicate (window, source, miner) rows", 0, cmp.dups),
		check("8. rows whose count differs from a recount of the raw blocks", 0, cmp.mismatch),
	}, nil
}

func phaseSpan(batches []BatchRecord, phase string) (first, last int64) {
	first, last = -1, -1
	for _, b := range batches {
		if b.Phase != phase {
			continue
		}
		if first < 0 || b.BatchID < first {
			first = b.BatchID
		}
		if b.BatchID > last {
			last = b.BatchID
		}
	}
	return first, last
}
