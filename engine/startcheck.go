package engine

// The start's share of `checkpoint verify`: what the offsets log, the commit
// log and the state each record of the last committed batch must agree
// before a start writes anything, checked by the functions verify runs over
// the whole checkpoint (checkpoint.Dir.Audit, Dir.CheckStateCovered).

import (
	"context"
	"slices"
	"strconv"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/stream"
)

// checkCommitted refuses, with the CHECKPOINT_CORRUPT of the first finding,
// a checkpoint whose logs and state disagree in a way no crash produces
// (docs/contracts.md, "What a start believes"):
//
//   - the offsets and commit listings (Dir.Audit): a gap in either log, a
//     commit without its offsets entry, a planned batch below the newest
//     commit that never committed, a commit log that ends more than one
//     batch before the offsets log (commits lost: the start would re-run
//     the newest batch on an older batch's state), and the watermark of the
//     entries the snapshot read (commits/C against offsets/C+1);
//   - the state of each stateful operator of the plan (ops, by id:
//     operator i keeps state/<i>) that is a stream.StateRecorder: no
//     version newer than the newest offsets entry or more than one past
//     the newest commit, and version C present (Dir.CheckStateCovered).
//
// The one disagreement a crash leaves, offsets/N (and state version N, and
// the table's txn N) written without commits/N, passes: the start re-runs
// N. It reads the two listings (plus a second pair when it finds
// something, see live) and the state directory's listing; it reads no
// entry the snapshot did not read, so an old entry damaged in the middle
// of the retained logs is verify's to report (a start never reads it).
func checkCommitted(ctx context.Context, fs vfs.FS, d checkpoint.Dir, snap *checkpoint.Snapshot, ops []stream.Operator) error {
	recs := make([]stream.StateRecorder, len(ops))
	for i, op := range ops {
		recs[i], _ = op.(stream.StateRecorder)
	}
	return checkCommittedStates(ctx, fs, d, snap, recs)
}

// checkCommittedStates is checkCommitted with each operator's state read
// by recs[i] (nil: not read), for the offline repartition, which has no
// operators but the states the checkpoint recorded.
func checkCommittedStates(ctx context.Context, fs vfs.FS, d checkpoint.Dir, snap *checkpoint.Snapshot, recs []stream.StateRecorder) error {
	if !d.Exists() {
		return nil
	}
	logs, err := startLogs(d, snap)
	if err != nil {
		return err
	}
	if f := d.Audit(logs); len(f) > 0 {
		if live(d, logs) {
			return nil
		}
		return f[0].Err
	}
	if snap.CheckStateProvider() != nil {
		return nil // another provider's state: refused by planStart
	}
	for i, sr := range recs {
		if sr == nil {
			continue
		}
		stateDir := d.Join(checkpoint.StateDir, strconv.Itoa(i))
		rec, has, err := sr.CommittedRecord(ctx, fs, stateDir, snap.CommittedID)
		if err != nil {
			return err
		}
		var versions []int64
		if rec.Newest >= 0 {
			versions = []int64{rec.Newest}
		}
		if err := d.CheckStateCovered(stateDir, versions, snap.LatestID, snap.CommittedID, has); err != nil {
			return err
		}
	}
	return nil
}

// startLogs lists both logs (commits first, as ReadSnapshot: every commit
// listed has its offsets entry listed too, even while a query writes) and
// holds the entries the snapshot read, for Dir.Audit.
func startLogs(d checkpoint.Dir, snap *checkpoint.Snapshot) (checkpoint.Logs, error) {
	l := checkpoint.Logs{Offsets: map[int64]*checkpoint.OffsetEntry{}, Commits: map[int64]*checkpoint.CommitEntry{}}
	var err error
	if l.CommitIDs, err = d.ListCommits(); err != nil {
		return l, err
	}
	if l.OffsetIDs, err = d.ListOffsets(); err != nil {
		return l, err
	}
	put := func(id int64, e *checkpoint.OffsetEntry) {
		if id >= 0 && e != nil {
			l.Offsets[id] = e
		}
	}
	put(snap.LatestID, snap.Latest)
	put(snap.LatestID-1, snap.Prev)
	put(snap.CommittedID, snap.CommittedOffsets)
	if snap.CommittedID >= 0 && snap.Committed != nil {
		l.Commits[snap.CommittedID] = snap.Committed
	}
	return l, nil
}

// live reports whether a query is writing the checkpoint: its logs listed
// again differ from l. The start checks run before the lock is taken, and
// a running query's commit can land between the two listings (the newest
// commit then looks more than one batch behind offsets planned since); the
// lock, taken next, refuses that start with CHECKPOINT_LOCKED, which is
// the true reason. A stopped checkpoint lists the same twice.
func live(d checkpoint.Dir, l checkpoint.Logs) bool {
	commits, err := d.ListCommits()
	if err != nil {
		return false
	}
	offs, err := d.ListOffsets()
	if err != nil {
		return false
	}
	return !slices.Equal(commits, l.CommitIDs) || !slices.Equal(offs, l.OffsetIDs)
}

// writtenSince reports whether the checkpoint's logs moved past snap: a
// query is writing it. The start checks run before the lock is taken and
// read files a running query keeps writing (its state versions, its
// table), so a refusal they reach over a moving checkpoint is the lock's
// to give (as live's, for the logs' own audit).
func writtenSince(fs vfs.FS, dir string, snap *checkpoint.Snapshot) bool {
	d := checkpoint.Dir{FS: fs, Path: dir}
	commits, err := d.ListCommits()
	if err != nil {
		return false
	}
	offs, err := d.ListOffsets()
	if err != nil {
		return false
	}
	newest := func(ids []int64) int64 {
		if len(ids) == 0 {
			return -1
		}
		return ids[len(ids)-1]
	}
	return newest(commits) != snap.CommittedID || newest(offs) != snap.LatestID
}

// committedDesc names the newest commit for a message: "only batch N", or
// "no batch" for an empty commit log.
func committedDesc(c int64) string {
	if c < 0 {
		return "no batch"
	}
	return "only batch " + strconv.FormatInt(c, 10)
}
