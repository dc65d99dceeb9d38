package engine

import (
	"context"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/shape"
	"github.com/ethstream/ethstream/stream"
)

// PlanReport is what a start of a query would do (`ethstream plan`).
type PlanReport struct {
	Checkpoint      string   `json:"checkpoint"`
	NewCheckpoint   bool     `json:"newCheckpoint"`
	QueryID         string   `json:"queryId"`
	FormatVersion   int      `json:"formatVersion"`
	StatePartitions int      `json:"statePartitions"`
	PendingBatch    *int64   `json:"pendingBatch"`
	PendingKind     string   `json:"pendingKind,omitempty"`
	NextBatchID     int64    `json:"nextBatchId"`
	Resumed         []string `json:"resumed"`
	Added           []string `json:"added"`
	// Tombstoned are sources the next new offsets entry will tombstone.
	Tombstoned  []InspectTombstone `json:"tombstoned"`
	Repartition *InspectControl    `json:"repartition"`
	Warnings    []string           `json:"warnings"`
	// Steps are the steps the start would perform, one per line: each batch
	// the start runs before polling its sources (the pending batch, a
	// control batch), then the poll that decides the next new batch.
	Steps []string `json:"steps"`
	// RecordedShape is the query shape in the checkpoint (nil: none), Shape
	// the starting query's, and ShapeChanges every difference with the
	// restart rule that decides it.
	RecordedShape *shape.Shape  `json:"recordedShape,omitempty"`
	Shape         *shape.Shape  `json:"shape,omitempty"`
	ShapeChanges  []ShapeChange `json:"shapeChanges,omitempty"`
	// Error is the code and message a start would fail with ("" if none).
	ErrorCode string `json:"errorCode,omitempty"`
	Error     string `json:"error,omitempty"`
}

// Plan is Run's dry run: the same start plan, the same per-batch planner and
// the same driver with its I/O switched off, so it writes, locks and opens
// nothing. It validates as Run does (checkStart: confs, names, the
// checkpoint, partition counts, and a read-only probe of the sources and the
// sink the query has; nil ones are skipped). No source is opened, so the
// steps end where Run would poll the sources. If the start would be refused,
// the report carries the code and the error is returned too.
func Plan(ctx context.Context, q Query, fs vfs.FS, dir string) (*PlanReport, error) {
	rep := &PlanReport{Checkpoint: dir, Resumed: []string{}, Added: []string{}, Tombstoned: []InspectTombstone{},
		Warnings: []string{}, Steps: []string{}, ShapeChanges: []ShapeChange{}, Shape: q.Shape}
	fail := func(err error) (*PlanReport, error) {
		rep.ErrorCode, rep.Error = errcode.Code(err), err.Error()
		return rep, err
	}
	// Run's own validation, so plan refuses exactly what run refuses.
	chk, err := checkStart(ctx, q, fs, dir)
	if chk != nil && chk.rec != nil {
		rep.RecordedShape = &chk.rec.Shape
	}
	if q.Shape != nil && chk != nil {
		// The shape as the start records it: operators listed by id.
		s := numberShape(*q.Shape, numberingOf(chk.rec, q.Shape, chk.snap.Latest != nil))
		rep.Shape = &s
	}
	if chk != nil && chk.sd != nil {
		rep.ShapeChanges = append(rep.ShapeChanges, chk.sd.Changes...)
	}
	if chk != nil {
		snap := chk.snap
		rep.QueryID, rep.NewCheckpoint, rep.NextBatchID = snap.Metadata.ID, snap.Latest == nil, snap.LatestID+1
		if snap.Latest != nil {
			rep.FormatVersion = snap.Latest.Version
			parts, _ := checkpoint.ConfValue(snap.Latest.Metadata.Conf, checkpoint.ConfShufflePartitions)
			rep.StatePartitions, _ = strconv.Atoi(parts)
		}
	}
	if err != nil {
		return fail(err)
	}
	s, sp := chk.s, chk.sp
	rep.Warnings = append(rep.Warnings, s.warnings...)
	sp.Warnings = append(sp.Warnings, chk.sd.Warnings...)
	rep.NewCheckpoint, rep.QueryID, rep.FormatVersion, rep.StatePartitions = sp.New, sp.QueryID, sp.Version, sp.Partitions
	rep.NextBatchID = sp.NextID
	rep.Resumed = append(rep.Resumed, sp.Resumed...)
	rep.Added = append(rep.Added, sp.Added...)
	rep.Warnings = append(rep.Warnings, sp.Warnings...)
	for _, k := range sortedKeys(sp.NewTombstones) {
		rep.Tombstoned = append(rep.Tombstoned, InspectTombstone{Name: k, RemovedInBatch: -1, LastOffset: sp.NewTombstones[k].LastOffset})
	}
	if sp.Pending != nil {
		id := sp.PendingID
		rep.PendingBatch = &id
		rep.PendingKind = stream.KindData
		if sp.PendingRepartitionTo > 0 {
			rep.PendingKind = stream.KindRepartition
			rep.Repartition = &InspectControl{BatchID: id, OperationType: checkpoint.OpRepartition, From: sp.Partitions, To: sp.PendingRepartitionTo}
		}
	}
	if sp.RepartitionTo > 0 {
		rep.Repartition = &InspectControl{BatchID: sp.NextID, OperationType: checkpoint.OpRepartition, From: sp.RepartitionFrom, To: sp.RepartitionTo}
	}
	// The dry run: the batches of the start, through the same run and
	// driver as Run, recorded instead of performed.
	dry := &driver{o: Options{}.withDefaults(), dry: true, trace: func(p *batchPlan) {
		rep.Steps = append(rep.Steps, strings.Split(strings.TrimSuffix(stepList(p), "\n"), "\n")...)
	}}
	r := newRun(q, sp, s, dry)
	if err := r.recover(ctx); err != nil {
		return fail(err)
	}
	if dec := planNext(r.c, batchView{loopState: r.st}); dec.Need == needLatest {
		poll := "poll sources " + strings.Join(r.c.Keys, ", ") + ": batch " + strconv.FormatInt(r.st.NextID, 10) + " if one has new data"
		if r.c.NoData {
			poll += " (or a no-data batch if the watermark moved)"
		}
		rep.Steps = append(rep.Steps, poll)
	}
	// New tombstones land in the first new data or no-data entry.
	for i := range rep.Tombstoned {
		rep.Tombstoned[i].RemovedInBatch = r.st.NextID
	}
	return rep, nil
}
