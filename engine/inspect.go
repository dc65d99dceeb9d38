package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// InspectReport is `checkpoint inspect --json` (docs/contracts.md, CLI); its JSON
// field names and order are the contract. It is a plain value.
type InspectReport struct {
	QueryID                string             `json:"queryId"`
	FormatVersion          int                `json:"formatVersion"`
	LatestBatchID          *int64             `json:"latestBatchId"`
	LatestCommittedBatchID *int64             `json:"latestCommittedBatchId"`
	Sources                []InspectSource    `json:"sources"`
	Tombstones             []InspectTombstone `json:"tombstones"`
	StatePartitions        int                `json:"statePartitions"`
	Conf                   map[string]string  `json:"conf"`
	ControlBatches         []InspectControl   `json:"controlBatches"`
}

// InspectSource is a source line of the latest offsets entry.
type InspectSource struct {
	Name   string          `json:"name"`
	Offset json.RawMessage `json:"offset"`
}

// InspectTombstone is a removed source.
type InspectTombstone struct {
	Name           string          `json:"name"`
	RemovedInBatch int64           `json:"removedInBatch"`
	LastOffset     json.RawMessage `json:"lastOffset"`
}

// InspectControl is a control batch still in the offsets log.
type InspectControl struct {
	BatchID       int64  `json:"batchId"`
	OperationType string `json:"operationType"`
	From          int    `json:"from"`
	To            int    `json:"to"`
}

// Inspect reads the checkpoint at dir without writing or locking anything
// (safe on a running query's checkpoint).
func Inspect(fs vfs.FS, dir string) (*InspectReport, error) {
	d := checkpoint.Dir{FS: fs, Path: dir}
	snap, err := d.ReadExisting()
	if err != nil {
		return nil, err
	}
	rep := &InspectReport{QueryID: snap.Metadata.ID, Sources: []InspectSource{}, Tombstones: []InspectTombstone{},
		Conf: map[string]string{}, ControlBatches: []InspectControl{}}
	if snap.Latest == nil {
		return rep, nil
	}
	l := snap.LatestID
	rep.LatestBatchID = &l
	if snap.CommittedID >= 0 {
		c := snap.CommittedID
		rep.LatestCommittedBatchID = &c
	}
	rep.FormatVersion = snap.Latest.Version
	for _, s := range snap.Latest.Sources {
		rep.Sources = append(rep.Sources, InspectSource{Name: s.Key, Offset: s.Offset})
	}
	for _, k := range sortedKeys(snap.Latest.Metadata.Tombstones) {
		t := snap.Latest.Metadata.Tombstones[k]
		rep.Tombstones = append(rep.Tombstones, InspectTombstone{Name: k, RemovedInBatch: t.RemovedInBatch, LastOffset: t.LastOffset})
	}
	rep.Conf = snap.Latest.Metadata.Conf
	parts, _ := checkpoint.ConfValue(rep.Conf, checkpoint.ConfShufflePartitions)
	rep.StatePartitions, _ = strconv.Atoi(parts)
	ids, err := d.ListOffsets()
	if err != nil {
		return nil, err
	}
	var prev *checkpoint.OffsetEntry
	for i, id := range ids {
		e, err := d.ReadOffsets(id)
		if err != nil {
			return nil, err
		}
		if i > 0 && ids[i-1] != id-1 {
			prev = nil
		}
		if from, to, ok := pendingRepartition(e, prev); ok {
			rep.ControlBatches = append(rep.ControlBatches, InspectControl{BatchID: id, OperationType: checkpoint.OpRepartition, From: from, To: to})
		}
		prev = e
	}
	return rep, nil
}

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
	// Error is the code and message a start would fail with ("" if none).
	ErrorCode string `json:"errorCode,omitempty"`
	Error     string `json:"error,omitempty"`
}

// Plan computes what Run would do on start without writing, locking or
// opening anything. Only the query's source names and Conf are used. If the
// start would be refused, the report carries the code and the error is
// returned too.
func Plan(q Query, fs vfs.FS, dir string) (*PlanReport, error) {
	if fs == nil {
		fs = vfs.Default
	}
	rep := &PlanReport{Checkpoint: dir, Resumed: []string{}, Added: []string{}, Tombstoned: []InspectTombstone{}, Warnings: []string{}}
	fail := func(err error) (*PlanReport, error) {
		rep.ErrorCode, rep.Error = errcode.Code(err), err.Error()
		return rep, err
	}
	s, err := parseSettings(q.Conf)
	if err != nil {
		return fail(err)
	}
	names := make([]string, len(q.Sources))
	for i, ns := range q.Sources {
		names[i] = ns.Name
	}
	d := checkpoint.Dir{FS: fs, Path: dir}
	snap := &checkpoint.Snapshot{Path: dir, LatestID: -1, CommittedID: -1}
	if d.Exists() {
		if snap, err = d.ReadSnapshot(); err != nil {
			return fail(err)
		}
	}
	rep.QueryID, rep.NewCheckpoint, rep.NextBatchID = snap.Metadata.ID, snap.Latest == nil, snap.LatestID+1
	if snap.Latest != nil {
		rep.FormatVersion = snap.Latest.Version
		parts, _ := checkpoint.ConfValue(snap.Latest.Metadata.Conf, checkpoint.ConfShufflePartitions)
		rep.StatePartitions, _ = strconv.Atoi(parts)
	}
	sp, err := planStart(snap, names, s)
	if err != nil {
		return fail(err)
	}
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
	// New tombstones land in the first new data or no-data entry.
	next := sp.NextID
	if sp.RepartitionTo > 0 {
		next++
	}
	for i := range rep.Tombstoned {
		rep.Tombstoned[i].RemovedInBatch = next
	}
	return rep, nil
}

// Repartition errors of the offline procedure (as Spark 4.x and DBR 18 name them), in Spark's
// STATE_REPARTITION_INVALID_CHECKPOINT class.
const (
	ErrRepartitionNoCommittedBatch = "STATE_REPARTITION_INVALID_CHECKPOINT.NO_COMMITTED_BATCH"
	ErrRepartitionLastBatchFailed  = "STATE_REPARTITION_INVALID_CHECKPOINT.LAST_BATCH_FAILED"
	ErrRepartitionAlreadyMatch     = "STATE_REPARTITION_INVALID_CHECKPOINT.SHUFFLE_PARTITIONS_ALREADY_MATCH"
	ErrRepartitionInvalidParameter = "STATE_REPARTITION_INVALID_PARAMETER.IS_NOT_GREATER_THAN_ZERO"
)

// RepartitionResult is what RepartitionOffline did.
type RepartitionResult struct {
	BatchID    int64
	From, To   int
	Redo       bool
	Stats      stream.RepartitionStats
	DurationMs int64
}

// RepartitionOffline repartitions a stopped query's state to n partitions
// (`ethstream checkpoint repartition DIR --partitions N`): control batch R =
// L+1 based on the last committed batch C == L, or a redo of an unfinished
// repartition R == L to the same n. The operator is opened here and closed
// before returning. No progress event is emitted (no query runs).
func RepartitionOffline(ctx context.Context, o Options, op stream.Operator, n int) (res *RepartitionResult, err error) {
	o = o.withDefaults()
	if n <= 0 {
		return nil, errcode.New(ErrRepartitionInvalidParameter, "", "pass --partitions N with N >= 1", "numPartitions must be greater than zero, got %d", n)
	}
	path := o.CheckpointDir
	// Refusals that a read decides come before Lock, which would create the
	// directory and .lock.
	pre, err := checkpoint.Dir{FS: o.FS, Path: path}.ReadSnapshot()
	if err != nil {
		return nil, err
	}
	if err := pre.CheckStateProvider(); err != nil {
		return nil, err
	}
	if pre.CommittedID < 0 {
		return nil, errcode.New(ErrRepartitionNoCommittedBatch, path, "run the query until it commits a batch", "checkpoint has no committed batch")
	}
	w, err := checkpoint.Lock(o.FS, o.CheckpointDir)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, w.Close()) }()
	snap, err := w.ReadSnapshot()
	if err != nil {
		return nil, err
	}
	res = &RepartitionResult{To: n}
	var e *checkpoint.OffsetEntry
	switch {
	case snap.LatestID == snap.CommittedID:
		res.BatchID = snap.LatestID + 1
		res.From, _ = strconv.Atoi(snap.Latest.Metadata.Conf[checkpoint.ConfShufflePartitions])
		if res.From == n {
			return nil, errcode.New(ErrRepartitionAlreadyMatch, path, "nothing to do",
				"batch %d already has %d state partitions", snap.LatestID, n)
		}
		e = controlEntry(snap.Latest, res.From, n)
	default:
		from, to, ok := pendingRepartition(snap.Latest, snap.Prev)
		if !ok {
			return nil, errcode.New(ErrRepartitionLastBatchFailed, path, "let the query finish its last batch (e.g. run it with trigger availableNow), then repartition",
				"last batch %d is not committed", snap.LatestID)
		}
		if to != n {
			return nil, errcode.New(errcode.UnresumableRepartition, path,
				fmt.Sprintf("repartition to %d until it finishes", to),
				"batch %d is an unfinished repartition to %d partitions; requested %d", snap.LatestID, to, n)
		}
		res.BatchID, res.From, res.Redo = snap.LatestID, from, true
		e = snap.Latest
	}
	if err := w.Prepare(); err != nil {
		return nil, err
	}
	stateDir, err := w.StateDir(OperatorID)
	if err != nil {
		return nil, err
	}
	env := stream.OperatorEnv{StateDir: stateDir, FS: o.FS, LocalDir: o.LocalDir,
		Partitions: res.From, Version: snap.CommittedID, Logger: o.Logger}
	if err := op.Open(ctx, env); err != nil {
		return nil, fmt.Errorf("open operator: %w", err)
	}
	defer func() { err = errors.Join(err, op.Close()) }()
	start := o.Clock.Now()
	if !res.Redo {
		if err := w.WriteOffsets(res.BatchID, e); err != nil {
			return nil, fmt.Errorf("write offsets for repartition batch %d: %w", res.BatchID, err)
		}
	}
	if err := o.hook("after-offsets"); err != nil {
		return nil, err
	}
	if res.Stats, err = op.Repartition(ctx, snap.CommittedID, res.BatchID, n); err != nil {
		return nil, fmt.Errorf("repartition batch %d: %w", res.BatchID, err)
	}
	if err := o.hook("after-state-commit"); err != nil {
		return nil, err
	}
	if err := w.WriteCommit(res.BatchID, &checkpoint.CommitEntry{NextBatchWatermarkMs: snap.Committed.NextBatchWatermarkMs}); err != nil {
		return nil, fmt.Errorf("write commit for repartition batch %d: %w", res.BatchID, err)
	}
	res.DurationMs = o.Clock.Now().Sub(start).Milliseconds()
	o.Logger.Info("state repartitioned", "batchId", res.BatchID, "from", res.From, "to", n, "durationMs", res.DurationMs)
	return res, nil
}
