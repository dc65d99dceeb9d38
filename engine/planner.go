package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/stream"
)

// The per-batch planner: pure functions from an immutable view to the steps
// of the next batch, in the manner of etcd raft's Ready. The driver
// (driver.go) performs the steps and hands the results back through advance
// (raft's Advance). Nothing here reads a file, a source or the operator.

// loopState is what the loop knows between batches. The driver holds one and
// replaces it only with the value advance returns.
type loopState struct {
	NextID int64
	// Last is the newest offsets entry (nil before the first batch).
	Last *checkpoint.OffsetEntry
	// Current is each source key's end offset of the last batch (nil: the
	// source never ran and starts from its configured start).
	Current map[string]json.RawMessage
	// Watermark is the one in force for the next new batch.
	Watermark  int64
	Partitions int
	// Conf is pinned into every new entry.
	Conf map[string]string
	// Tombstones are carried forward; NewTombstones land in the next new
	// data or no-data entry.
	Tombstones, NewTombstones map[string]checkpoint.Tombstone
}

// planConf is what the planner needs of the query; fixed for a run.
type planConf struct {
	Version   int      // offset log version of new entries
	Keys      []string // checkpoint key of each query source, in query order
	Providers []string // sourceMetadataInfo providerName of each key
	NoData    bool     // spark.sql.streaming.noDataMicroBatches.enabled
	MinRetain int
	// Progress is false offline: no query runs, no event is emitted.
	Progress bool
	// Prepare: the operators commit their state (PrepareCommit, then
	// Commit) while the sink writes (stream.CommitPreparer).
	Prepare bool
	// Operators is the plan's stateful operator count (0 reads as 1): a
	// state step is planned for each, with its id.
	Operators int
	// Stateless: the plan has no stateful operator (its rows are appended
	// to the sink), so no state step is planned.
	Stateless bool
}

// operatorIDs are the ids the state steps of a batch name.
func (c planConf) operatorIDs() []int {
	if c.Stateless {
		return nil
	}
	ids := make([]int, max(c.Operators, 1))
	for i := range ids {
		ids[i] = i
	}
	return ids
}

// batchView is the immutable input of planNext: the loop state and what the
// driver obtained for this trigger.
type batchView struct {
	loopState
	// Latest is each source's latest offset; nil until the driver polled.
	Latest map[string]json.RawMessage
	// NeedsNoData is whether some operator whose input watermark moved
	// wants a no-data batch (driver.needsNoData: Spark's
	// shouldRunAnotherBatch); nil until the driver probed (it asks only
	// when the planner needs it).
	NeedsNoData *bool
	NowMs       int64
}

// need is what the planner asks the driver to obtain before it can decide.
type need int

const (
	needNothing need = iota
	needLatest       // poll every source's LatestOffset
	needProbe        // ask the operators whether a no-data batch runs
)

// decision is planNext's answer: a need, a batch to run, or idle (neither).
type decision struct {
	Need need
	Plan *batchPlan
}

// stepOp is one thing the driver does.
type stepOp int

// Step operations, in the order a batch performs them.
const (
	opWriteOffsets     stepOp = iota // offsets/N (walCommit); with Overlap, started alongside the reads
	opAwaitOffsets                   // offsets/N, written alongside the reads, is durable
	opReuseOffsets                   // offsets/N is recorded: a re-run
	opPurge                          // offsets and commits below Below
	opRead                           // Source's rows in (Start, End] into the operator
	opFinish                         // Operator.Finish: evict, output rows
	opWriteSink                      // Sink.AddBatch(N), with Overlap alongside Operator.PrepareCommit(N) and Commit(N)
	opCommitState                    // Operator.Commit(N) after the sink (an operator without stream.CommitPreparer)
	opRepartitionState               // Operator.Repartition(N-1, N, To)
	opWriteCommit                    // commits/N; with Overlap, started alongside the sink and the state
	opAwaitCommit                    // commits/N, written alongside, is published once the sink and the state are durable
	opCommitSources                  // Source.Commit(end) for each source with an end
	opEmitProgress                   // the progress log, then the listeners
)

// phase is a named part of a batch, as raft's Ready names each of its
// parts: every step carries the phase it belongs to, and a phase ends where
// the next step's differs (or with the plan). At a phase's end the progress
// recorder takes its time (recorder.go) and the driver runs the crash point
// that closes it; nothing depends on the order of the step operations.
type phase int

const (
	phaseNone        phase = iota
	phaseWAL               // offsets/N written or re-used, the purge: walCommit, then crash point after-offsets (the second WAL part of an overlapped write)
	phaseAddBatch          // reads, finish, sink, state commit: addBatch, with getBatch inside it
	phaseRepartition       // the state's repartition: controlBatch.REPARTITION
	phaseCommit            // commits/N and the sources' commits: commitOffsets
	phaseReport            // the progress event, timed by triggerExecution alone
)

func (ph phase) String() string {
	switch ph {
	case phaseWAL:
		return "wal"
	case phaseAddBatch:
		return "add-batch"
	case phaseRepartition:
		return "repartition"
	case phaseCommit:
		return "commit"
	case phaseReport:
		return "report"
	}
	return "none"
}

// step is one planned action. It is a plain value; String is what `plan` and
// the datadriven scripts print.
type step struct {
	Op         stepOp
	Phase      phase
	Batch      int64
	Source     string
	Start, End json.RawMessage
	From, To   int
	Below      int64
	// Operator is the stateful operator a state step is for (its id); the
	// step of a plan of one operator prints as it always did.
	Operator int
	several  bool
	// Overlap: on opWriteSink, the sink write runs alongside the state's
	// PrepareCommit and Commit, and no opCommitState follows
	// (planConf.Prepare); on opWriteOffsets, offsets/N is written alongside
	// the reads and opAwaitOffsets waits for it (walSteps); on
	// opWriteCommit, commits/N is written and fsynced alongside the sink
	// write and the state commit, and opAwaitCommit publishes it after them
	// (dataPlan).
	Overlap bool
}

func (s step) String() string {
	switch s.Op {
	case opWriteOffsets:
		if s.Overlap {
			return fmt.Sprintf("write offsets/%d alongside the reads", s.Batch)
		}
		return fmt.Sprintf("write offsets/%d", s.Batch)
	case opAwaitOffsets:
		return fmt.Sprintf("await offsets/%d", s.Batch)
	case opReuseOffsets:
		return fmt.Sprintf("re-use recorded offsets/%d", s.Batch)
	case opPurge:
		return fmt.Sprintf("purge offsets and commits below %d", s.Below)
	case opRead:
		return fmt.Sprintf("read %s %s -> %s, process", s.Source, rawOrNull(s.Start), rawOrNull(s.End))
	case opFinish:
		return "finish operator"
	case opWriteSink:
		if s.Overlap {
			return fmt.Sprintf("write sink batch %d, commit state version %d alongside", s.Batch, s.Batch)
		}
		return fmt.Sprintf("write sink batch %d", s.Batch)
	case opCommitState:
		return fmt.Sprintf("commit state version %d%s", s.Batch, s.ofOperator())
	case opRepartitionState:
		return fmt.Sprintf("repartition state version %d -> %d: %d -> %d partitions%s", s.Batch-1, s.Batch, s.From, s.To, s.ofOperator())
	case opWriteCommit:
		if s.Overlap {
			return fmt.Sprintf("write commits/%d alongside the sink and the state", s.Batch)
		}
		return fmt.Sprintf("write commits/%d", s.Batch)
	case opAwaitCommit:
		return fmt.Sprintf("publish commits/%d", s.Batch)
	case opCommitSources:
		return "commit sources"
	case opEmitProgress:
		return fmt.Sprintf("emit progress of batch %d", s.Batch)
	}
	return "step(" + strconv.Itoa(int(s.Op)) + ")"
}

// ofOperator names a state step's operator when the plan has several.
func (s step) ofOperator() string {
	if !s.several {
		return ""
	}
	return " of operator " + strconv.Itoa(s.Operator)
}

// stateSteps is one state step of kind like per operator, in id order.
func stateSteps(c planConf, like step) []step {
	ids := c.operatorIDs()
	steps := make([]step, len(ids))
	for i, id := range ids {
		steps[i] = like
		steps[i].Operator, steps[i].several = id, len(ids) > 1
	}
	return steps
}

func rawOrNull(r json.RawMessage) string {
	if r == nil {
		return "null"
	}
	return string(r)
}

// readRange is one source's part of a batch.
type readRange struct {
	Key        string
	Start, End json.RawMessage
}

// batchPlan is one batch: its entry and the steps that run it.
type batchPlan struct {
	ID    int64
	Kind  string // stream.KindData, KindNoData or KindRepartition
	Rerun bool
	Entry *checkpoint.OffsetEntry
	// Ranges are the entry's sources with their start offsets, in entry
	// order (reads happen only where Start != End).
	Ranges []readRange
	// From and To are the control batch's partition counts.
	From, To int
	// Partitions is the state partition count the batch runs with (a
	// control batch's: the new one), reported in progress.
	Partitions int
	// CommitWatermark is the control batch's commit watermark (it does not
	// move the watermark); data batches compute theirs from the rows read.
	CommitWatermark int64
	// PrevWatermark is the previous batch's watermark (0 for batch 0):
	// every operator drops input late by its input watermark of it
	// (Spark's getInputWatermarkForLateEvents; operators.go).
	PrevWatermark int64
	Steps         []step
}

// reportsWAL is true when the batch's progress has walCommit: every data
// batch (0 for a re-run, as Spark reports), a control batch that writes its
// entry.
func (p *batchPlan) reportsWAL() bool { return p.Kind != stream.KindRepartition || !p.Rerun }

// phaseList renders the steps grouped by phase, one phase per line with its
// steps indented below it (the phase scripts: a moved boundary shows).
func phaseList(p *batchPlan) string {
	var b strings.Builder
	b.WriteString(p.Header())
	b.WriteString("\n")
	cur := phaseNone
	for _, s := range p.Steps {
		if s.Phase != cur {
			cur = s.Phase
			fmt.Fprintf(&b, "  %s:\n", cur)
		}
		fmt.Fprintf(&b, "    %s\n", s)
	}
	return b.String()
}

// Header is the plan's one-line title.
func (p *batchPlan) Header() string {
	verb := "batch"
	if p.Rerun {
		verb = "re-run batch"
	}
	if p.Kind == stream.KindRepartition {
		return fmt.Sprintf("%s %d: %s %d -> %d", verb, p.ID, p.Kind, p.From, p.To)
	}
	return fmt.Sprintf("%s %d: %s", verb, p.ID, p.Kind)
}

// planNext decides the next trigger: a data batch if some source's latest
// offset differs from its current one (byte comparison), else a no-data
// batch if enabled, the watermark moved past the last batch's and an
// operator wants it (Spark's shouldRunAnotherBatch), else idle. It asks
// for what it lacks.
func planNext(c planConf, v batchView) decision {
	if v.Latest == nil {
		return decision{Need: needLatest}
	}
	kind := stream.KindData
	if !hasNewData(c.Keys, v.Latest, v.Current) {
		if !c.NoData || v.Last == nil || v.Watermark <= v.Last.Metadata.BatchWatermarkMs {
			return decision{}
		}
		if v.NeedsNoData == nil {
			return decision{Need: needProbe}
		}
		if !*v.NeedsNoData {
			return decision{}
		}
		kind = stream.KindNoData
	}
	e := newEntry(c, v.loopState, v.Latest, v.NowMs)
	ranges := make([]readRange, len(c.Keys))
	for i, k := range c.Keys {
		ranges[i] = readRange{Key: k, Start: v.Current[k], End: v.Latest[k]}
	}
	p := dataPlan(c, v.NextID, e, ranges, false)
	p.Kind, p.Partitions = kind, v.Partitions
	if v.Last != nil {
		p.PrevWatermark = v.Last.Metadata.BatchWatermarkMs
	}
	return decision{Plan: p}
}

func hasNewData(keys []string, latest, current map[string]json.RawMessage) bool {
	for _, k := range keys {
		if !bytes.Equal(latest[k], current[k]) {
			return true
		}
	}
	return false
}

// planRerun is the pending data batch L, re-run with exactly its recorded
// offsets from the end offsets of L-1.
func planRerun(c planConf, id int64, e *checkpoint.OffsetEntry, starts map[string]json.RawMessage, parts int, prevWM int64) *batchPlan {
	ranges := make([]readRange, len(e.Sources))
	for i, so := range e.Sources {
		ranges[i] = readRange{Key: so.Key, Start: starts[so.Key], End: so.Offset}
	}
	p := dataPlan(c, id, e, ranges, true)
	p.Kind, p.Partitions, p.PrevWatermark = stream.KindNoData, parts, prevWM
	for _, r := range ranges {
		if !bytes.Equal(r.Start, r.End) {
			p.Kind = stream.KindData
		}
	}
	return p
}

// dataPlan lists the steps of a data or no-data batch: the WAL phase, the
// add-batch phase (reads, finish, sink, state), the commit phase (commits/N,
// sources) and the report. A new batch that reads writes offsets/N
// alongside its reads (walSteps). Once Finish has fixed the commit
// watermark, commits/N's content is known: it is written and fsynced
// alongside the sink write and the state commit, and published (linked,
// its directory fsynced) only after both returned, so Spark's order holds
// (the sink's batch N and state version N durable before commits/N) and
// the file's own write and fsync leave the critical path. A crash or a
// failure before the publish leaves at most a temp file, which the next
// start removes.
func dataPlan(c planConf, id int64, e *checkpoint.OffsetEntry, ranges []readRange, rerun bool) *batchPlan {
	p := &batchPlan{ID: id, Kind: stream.KindData, Rerun: rerun, Entry: e, Ranges: ranges}
	var reads []step
	for _, r := range ranges {
		if !bytes.Equal(r.Start, r.End) {
			reads = append(reads, step{Op: opRead, Phase: phaseAddBatch, Batch: id, Source: r.Key, Start: r.Start, End: r.End})
		}
	}
	p.Steps = walSteps(c, id, rerun, reads, make([]step, 0, 10+len(ranges)))
	p.Steps = append(p.Steps,
		step{Op: opFinish, Phase: phaseAddBatch, Batch: id},
		step{Op: opWriteCommit, Phase: phaseAddBatch, Batch: id, Overlap: true},
		step{Op: opWriteSink, Phase: phaseAddBatch, Batch: id, Overlap: c.Prepare})
	if !c.Prepare {
		p.Steps = append(p.Steps, stateSteps(c, step{Op: opCommitState, Phase: phaseAddBatch, Batch: id})...)
	}
	p.Steps = append(p.Steps,
		step{Op: opAwaitCommit, Phase: phaseCommit, Batch: id},
		step{Op: opCommitSources, Phase: phaseCommit, Batch: id})
	return reportStep(c, p)
}

// walSteps are a batch's first steps up to its finish: its WAL phase (write
// offsets/N and purge what falls out of minBatchesToRetain, or re-use the
// recorded entry) and its reads. A new batch with reads writes offsets/N
// alongside them: the reads only bring rows into the operator's memory, so
// nothing of batch N is visible before the second WAL part awaits offsets/N
// (the crash point after-offsets follows it, then the purge), and the
// offsets' fsyncs leave the critical path of a short live batch (about 1.5
// ms of its 15 on the reference machine, docs/contracts.md Targets).
func walSteps(c planConf, id int64, rerun bool, reads, steps []step) []step {
	if rerun {
		steps = append(steps, step{Op: opReuseOffsets, Phase: phaseWAL, Batch: id})
		return append(steps, reads...)
	}
	overlap := len(reads) > 0
	steps = append(steps, step{Op: opWriteOffsets, Phase: phaseWAL, Batch: id, Overlap: overlap})
	if overlap {
		steps = append(steps, reads...)
		steps = append(steps, step{Op: opAwaitOffsets, Phase: phaseWAL, Batch: id})
	}
	if c.MinRetain > 0 && id >= int64(c.MinRetain) {
		steps = append(steps, step{Op: opPurge, Phase: phaseWAL, Batch: id, Below: id - int64(c.MinRetain)})
	}
	return steps
}

// reportStep ends plan p with its progress event, if the run emits one.
func reportStep(c planConf, p *batchPlan) *batchPlan {
	if c.Progress {
		p.Steps = append(p.Steps, step{Op: opEmitProgress, Phase: phaseReport, Batch: p.ID})
	}
	return p
}

// newEntry builds offsets/<NextID> from the sources' end offsets.
func newEntry(c planConf, st loopState, ends map[string]json.RawMessage, nowMs int64) *checkpoint.OffsetEntry {
	e := &checkpoint.OffsetEntry{Version: c.Version, Metadata: checkpoint.OffsetMetadata{
		BatchWatermarkMs: st.Watermark, BatchTimestampMs: nowMs, Conf: cloneConf(st.Conf),
	}}
	if e.Version == checkpoint.OffsetsV2 {
		e.Metadata.SourceMetadataInfo = make(map[string]checkpoint.SourceMetadata, len(c.Keys))
		if len(st.Tombstones)+len(st.NewTombstones) > 0 {
			e.Metadata.Tombstones = map[string]checkpoint.Tombstone{}
		}
		for k, t := range st.Tombstones {
			e.Metadata.Tombstones[k] = t
		}
		for k, t := range st.NewTombstones {
			t.RemovedInBatch = st.NextID
			e.Metadata.Tombstones[k] = t
		}
	}
	e.Sources = make([]checkpoint.SourceOffset, 0, len(c.Keys))
	for i, k := range c.Keys {
		e.Sources = append(e.Sources, checkpoint.SourceOffset{Key: k, Offset: ends[k]})
		if e.Version == checkpoint.OffsetsV2 {
			e.Metadata.SourceMetadataInfo[k] = checkpoint.SourceMetadata{
				SourceID: k, ProviderName: c.Providers[i], APIVersion: "1"}
		}
	}
	return e
}

func cloneConf(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// nextWatermark is commit N's nextBatchWatermarkMs: max(batch watermark,
// max event time - delay), unchanged if no event time was seen.
func nextWatermark(batchWM int64, wmk *Watermark, ev eventStats) int64 {
	if wmk == nil || ev.n == 0 {
		return batchWM
	}
	return max(batchWM, ev.max/1000-wmk.Delay.Milliseconds())
}

// advance is the loop state after batch p committed with commit watermark
// nextWM (raft's Advance).
func advance(st loopState, p *batchPlan, nextWM int64) loopState {
	n := st
	n.Last = p.Entry
	n.Watermark = nextWM
	if p.ID >= n.NextID {
		n.NextID = p.ID + 1
	}
	n.Current = make(map[string]json.RawMessage, len(st.Current))
	for k, v := range st.Current {
		n.Current[k] = v
	}
	for _, r := range p.Ranges {
		n.Current[r.Key] = r.End
	}
	if p.Entry.Metadata.Tombstones != nil {
		n.Tombstones = p.Entry.Metadata.Tombstones
		n.NewTombstones = map[string]checkpoint.Tombstone{}
		for k, t := range st.NewTombstones {
			if _, done := n.Tombstones[k]; !done {
				n.NewTombstones[k] = t
			}
		}
	}
	if p.Kind == stream.KindRepartition {
		n.Partitions = p.To
		n.Conf = cloneConf(st.Conf)
		n.Conf[checkpoint.ConfShufflePartitions] = strconv.Itoa(p.To)
	}
	return n
}

// stepList renders steps for `plan` and the scripts, one per line.
func stepList(p *batchPlan) string {
	var b strings.Builder
	b.WriteString(p.Header())
	b.WriteString("\n")
	for _, s := range p.Steps {
		b.WriteString("  ")
		b.WriteString(s.String())
		b.WriteString("\n")
	}
	return b.String()
}

// initialState is the loop state a start begins with.
func initialState(sp *startPlan) loopState {
	st := loopState{NextID: sp.NextID, Last: sp.Last, Watermark: sp.Watermark, Partitions: sp.Partitions,
		Conf: sp.Conf, Tombstones: sp.Tombstones, NewTombstones: sp.NewTombstones,
		Current: make(map[string]json.RawMessage, len(sp.Keys))}
	for _, k := range sp.Keys {
		st.Current[k] = sp.Committed[k]
	}
	return st
}

// startPhase is a part of a start before new batches.
type startPhase int

const (
	startPending     startPhase = iota // the uncommitted batch L
	startRepartition                   // a requested control batch
)

// recoveryPlan is the batch of a start's phase, nil if it has none: the
// pending batch re-run (a data batch with its recorded offsets, or an
// unfinished control batch redone), then a requested repartition based on
// the newest entry once the pending batch is done.
func recoveryPlan(c planConf, sp *startPlan, st loopState, phase startPhase) (*batchPlan, error) {
	switch phase {
	case startPending:
		if sp.Pending == nil {
			return nil, nil
		}
		if sp.PendingRepartitionTo > 0 {
			return controlPlan(c, sp.PendingID, sp.Pending, sp.Partitions, sp.PendingRepartitionTo, true, st.Watermark), nil
		}
		return planRerun(c, sp.PendingID, sp.Pending, sp.PendingStart, st.Partitions, sp.PendingPrevWatermark), nil
	case startRepartition:
		if sp.RepartitionTo == 0 {
			return nil, nil
		}
		if st.Last == nil {
			return nil, fmt.Errorf("repartition without a committed batch")
		}
		return controlPlan(c, st.NextID, st.Last, st.Partitions, sp.RepartitionTo, false, st.Watermark), nil
	}
	return nil, nil
}
