package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"

	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// The REPARTITION control batch, once for the running query (a start with
// spark.sql.streaming.stateStore.partitions) and for the stopped one
// (`ethstream checkpoint repartition`): the same decisions (redoRepartition,
// newRepartition), the same plan (controlPlan), the same driver steps.

// controlPlan is control batch id: offsets/id (a copy of base with
// controlBatchInfo REPARTITION {from, to} and the new count in conf) unless
// it is recorded already (redo), the operator's repartition from version
// id-1, commits/id last with the watermark unchanged.
func controlPlan(c planConf, id int64, base *checkpoint.OffsetEntry, from, to int, redo bool, wm int64) *batchPlan {
	e := base
	if !redo {
		e = controlEntry(base, from, to)
	}
	p := &batchPlan{ID: id, Kind: stream.KindRepartition, Rerun: redo, Entry: e, From: from, To: to, Partitions: to, CommitWatermark: wm}
	for _, so := range e.Sources {
		p.Ranges = append(p.Ranges, readRange{Key: so.Key, Start: so.Offset, End: so.Offset})
	}
	p.Steps = walSteps(c, id, redo, nil, nil)
	p.Steps = append(p.Steps, stateSteps(c, step{Op: opRepartitionState, Phase: phaseRepartition, Batch: id, From: from, To: to})...)
	p.Steps = append(p.Steps, step{Op: opWriteCommit, Phase: phaseCommit, Batch: id})
	return reportStep(c, p)
}

// controlEntry copies base (offsets, watermark, timestamp, tombstones) as a
// REPARTITION control batch to n partitions.
func controlEntry(base *checkpoint.OffsetEntry, from, to int) *checkpoint.OffsetEntry {
	e := base.Clone()
	e.Metadata.Conf[checkpoint.ConfShufflePartitions] = strconv.Itoa(to)
	e.Metadata.ControlBatchInfo = &checkpoint.ControlBatchInfo{OperationType: checkpoint.OpRepartition,
		OperationInfo: map[string]string{"from": strconv.Itoa(from), "to": strconv.Itoa(to)}}
	return e
}

// redoRepartition checks that unfinished control batch L (from -> to) may be
// redone by a start requesting `requested` partitions (0: none requested):
// only the same target finishes it; remedy says how, for the caller's
// command.
func redoRepartition(path string, L int64, from, to, requested int, remedy string) error {
	if requested > 0 && requested != to {
		return errcode.New(errcode.UnresumableRepartition, path, remedy,
			"batch %d is an unfinished repartition to %d partitions (from %d); the restart requests %d: batchId=%d unfinishedNumPartition=%d requestedNumPartition=%d",
			L, to, from, requested, L, to, requested)
	}
	return nil
}

// newRepartition is the control batch a start runs after any pending batch:
// to > 0 when `requested` differs from the current count.
func newRepartition(current, requested int) (from, to int) {
	if requested > 0 && requested != current {
		return current, requested
	}
	return 0, 0
}

// pendingRepartition reports whether entry latest is a repartition control
// batch: controlBatchInfo REPARTITION (V2), or, as Spark detects it in V1
// where no control info exists, a partition count differing from prev's.
func pendingRepartition(latest, prev *checkpoint.OffsetEntry) (from, to int, ok bool) {
	if from, to, ok := latest.IsRepartition(); ok {
		return from, to, true
	}
	if latest.Version != checkpoint.OffsetsV1 || prev == nil {
		return 0, 0, false
	}
	a, b := prev.Metadata.Conf[checkpoint.ConfShufflePartitions], latest.Metadata.Conf[checkpoint.ConfShufflePartitions]
	if a == "" || b == "" || a == b {
		return 0, 0, false
	}
	from, err1 := strconv.Atoi(a)
	to, err2 := strconv.Atoi(b)
	return from, to, err1 == nil && err2 == nil
}

// Repartition errors of the offline procedure (as Spark 4.x and DBR 18 name them), in Spark's
// STATE_REPARTITION_INVALID_CHECKPOINT class.
const (
	ErrRepartitionNoCommittedBatch = "STATE_REPARTITION_INVALID_CHECKPOINT.NO_COMMITTED_BATCH"
	ErrRepartitionLastBatchFailed  = "STATE_REPARTITION_INVALID_CHECKPOINT.LAST_BATCH_FAILED"
	ErrRepartitionInvalidParameter = "STATE_REPARTITION_INVALID_PARAMETER.IS_NOT_GREATER_THAN_ZERO"
)

// RepartitionResult is what RepartitionOffline did.
type RepartitionResult struct {
	BatchID  int64
	From, To int
	Redo     bool
	// AlreadyAt is true when the state already had To partitions: nothing
	// was written (BatchID is the last committed batch).
	AlreadyAt bool
	// Stats sums the repartitions of every stateful operator.
	Stats stream.RepartitionStats
	// Operators is the number of stateful operators repartitioned.
	Operators  int
	DurationMs int64
	// Steps are the steps performed (or, for PlanRepartitionOffline, the
	// steps that would be), one per line.
	Steps string
}

// planOffline decides the offline procedure on a stopped query: control
// batch R = L+1 based on the last committed batch C == L, a redo of an
// unfinished repartition R == L to the same n, nothing if the count already
// matches (plan nil), or the coded refusal.
func planOffline(snap *checkpoint.Snapshot, n, minRetain, operators int) (*batchPlan, *RepartitionResult, error) {
	if err := checkPartitionsParam(n); err != nil {
		return nil, nil, err
	}
	if err := snap.CheckStateProvider(); err != nil {
		return nil, nil, err
	}
	path := snap.Path
	if snap.CommittedID < 0 {
		return nil, nil, errcode.New(ErrRepartitionNoCommittedBatch, path, "run the query until it commits a batch", "checkpoint has no committed batch")
	}
	if operators == 0 {
		return nil, nil, errcode.New(errcode.InvalidArgument, snap.Path+"/"+checkpoint.StateDir, "repartition the checkpoint of a query with a stateful operator (an aggregation)",
			"the checkpoint holds no operator state: there is nothing to repartition")
	}
	c := planConf{MinRetain: minRetain, Operators: operators}
	wm := snap.Committed.NextBatchWatermarkMs
	res := &RepartitionResult{To: n}
	if snap.LatestID == snap.CommittedID {
		parts, _ := checkpoint.ConfValue(snap.Latest.Metadata.Conf, checkpoint.ConfShufflePartitions)
		cur, err := strconv.Atoi(parts)
		if err != nil || cur < 1 {
			return nil, nil, errcode.Corrupt(path, err, "offsets entry %d has an invalid %s", snap.LatestID, checkpoint.ConfShufflePartitions)
		}
		from, to := newRepartition(cur, n)
		if to == 0 {
			res.BatchID, res.From, res.AlreadyAt = snap.LatestID, cur, true
			return nil, res, nil
		}
		res.BatchID, res.From = snap.LatestID+1, from
		return controlPlan(c, res.BatchID, snap.Latest, from, to, false, wm), res, nil
	}
	from, to, ok := pendingRepartition(snap.Latest, snap.Prev)
	if !ok {
		return nil, nil, errcode.New(ErrRepartitionLastBatchFailed, path, "let the query finish its last batch (e.g. run it with trigger availableNow), then repartition",
			"last batch %d is not committed", snap.LatestID)
	}
	if err := redoRepartition(path, snap.LatestID, from, to, n, fmt.Sprintf("repartition to %d until it finishes", to)); err != nil {
		return nil, nil, err
	}
	res.BatchID, res.From, res.Redo = snap.LatestID, from, true
	return controlPlan(c, res.BatchID, snap.Latest, from, to, true, wm), res, nil
}

// checkPartitionsParam refuses a partition count below 1 (Spark's
// IS_NOT_GREATER_THAN_ZERO).
func checkPartitionsParam(n int) error {
	if n <= 0 {
		return errcode.New(ErrRepartitionInvalidParameter, "", "pass --partitions N with N >= 1", "numPartitions must be greater than zero, got %d", n)
	}
	return nil
}

// RepartitionOffline repartitions a stopped query's state to n partitions
// (`ethstream checkpoint repartition DIR --partitions N`) through the same
// control batch plan and driver as a start with
// spark.sql.streaming.stateStore.partitions=n. It needs no query
// definition: every operator directory under state/ is opened by states
// with the schema its committed version recorded (as Spark's offline
// runner, for every stateful operator), before anything is written, and
// closed before returning. No progress event is emitted (no query runs).
// If the state already has n partitions nothing is written and the result
// says AlreadyAt.
func RepartitionOffline(ctx context.Context, o Options, states stream.RecordedStates, n int) (res *RepartitionResult, err error) {
	o = o.withDefaults()
	// Every refusal (the count, no committed batch, state another provider
	// wrote, a different count while a repartition is unfinished, more
	// partitions than the state can hold) and "already at n" are decided
	// before the lock is taken: Lock would create the directory and .lock.
	// The plan is made again under the lock.
	if res, err := checkRepartition(o, states, n); err != nil || res != nil {
		return res, err
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
	ops, err := stateOperators(w.Dir)
	if err != nil {
		return nil, err
	}
	p, res, err := planOffline(snap, n, checkpoint.DefaultMinBatchesToRetain, ops)
	if err != nil || p == nil {
		return res, err
	}
	res.Steps = stepList(p)
	if err := w.Prepare(); err != nil {
		return nil, err
	}
	var opened []stream.StateRepartitioner
	defer func() {
		for _, r := range opened {
			err = errors.Join(err, r.Close())
		}
	}()
	for id := range ops {
		env := stream.OperatorEnv{StateDir: w.Join(checkpoint.StateDir, strconv.Itoa(id)), FS: o.FS, LocalDir: opLocalDir(o.LocalDir, id),
			LocalFS: o.LocalFS, Partitions: res.From, Version: snap.CommittedID, Logger: o.Logger}
		r, err := states.OpenRecorded(ctx, env)
		if err != nil {
			return nil, fmt.Errorf("open the state of operator %d: %w", id, err)
		}
		opened = append(opened, r)
	}
	d := &driver{o: o, w: w, reparts: opened, trace: o.trace}
	start := o.Clock.Now()
	br, err := d.exec(ctx, p, start, preDurations{})
	if err != nil {
		return nil, err
	}
	res.Stats = sumStats(br.Repartition)
	res.Operators = ops
	res.DurationMs = o.Clock.Now().Sub(start).Milliseconds()
	o.Logger.Info("state repartitioned", "batchId", res.BatchID, "from", res.From, "to", n, "operators", ops, "durationMs", res.DurationMs)
	return res, nil
}

// stateOperators counts the stateful operators whose state the checkpoint
// holds: the directories state/0, state/1, ... (Spark's layout; ids from
// 0, whichever numbering the checkpoint has: opids.go). A gap in the ids is CHECKPOINT_CORRUPT; none (a query
// without a stateful operator) is planOffline's refusal, after its checks
// of the provider and the commit log, which are the more precise ones.
func stateOperators(d checkpoint.Dir) (int, error) {
	dir := d.Join(checkpoint.StateDir)
	names, err := d.FS.List(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("list state operators %s: %w", dir, err)
	}
	var ids []int
	for _, name := range names {
		id, err := strconv.Atoi(name)
		if err != nil || id < 0 || strconv.Itoa(id) != name {
			continue
		}
		if st, err := d.FS.Stat(d.FS.PathJoin(dir, name)); err == nil && st.IsDir() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for i, id := range ids {
		if id != i {
			return 0, errcode.Corrupt(d.FS.PathJoin(dir, strconv.Itoa(i)), nil,
				"the state of operator %d is missing while operator %d has state: operator ids are 0, 1, ...", i, id)
		}
	}
	return len(ids), nil
}

// PlanRepartitionOffline is RepartitionOffline's dry run: the same
// validation, decision and steps, without locking, writing or opening
// anything.
func PlanRepartitionOffline(o Options, states stream.RecordedStates, n int) (*RepartitionResult, error) {
	o = o.withDefaults()
	if res, err := checkRepartition(o, states, n); err != nil || res != nil {
		return res, err
	}
	d := checkpoint.Dir{FS: o.FS, Path: o.CheckpointDir}
	snap := &checkpoint.Snapshot{Path: o.CheckpointDir, LatestID: -1, CommittedID: -1}
	if d.Exists() {
		var err error
		if snap, err = d.ReadSnapshot(); err != nil {
			return nil, err
		}
	}
	ops, err := stateOperators(d)
	if err != nil {
		return nil, err
	}
	p, res, err := planOffline(snap, n, checkpoint.DefaultMinBatchesToRetain, ops)
	if err != nil || p == nil {
		return res, err
	}
	res.Steps = stepList(p)
	return res, nil
}
