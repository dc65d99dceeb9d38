package engine

// The start check that the sink holds what the checkpoint says it committed.

import (
	"context"
	"errors"
	"os"
	"strconv"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// checkSinkAgrees compares a RecordingSink's record of this query with the
// checkpoint, before anything is written. The newest committed batch that
// wrote to the sink (control batches do not) must be recorded for the
// query id of metadata; a record at or above it is fine (one above: the
// pending batch reached the sink before the crash; the sink skips re-runs).
// A record below it, or none, is TABLE_BEHIND_CHECKPOINT; no record for our
// id while another id holds that batch means metadata was replaced:
// CHECKPOINT_CORRUPT naming it. A sink whose output does not exist at all
// (a new table) is not checked: the sink creates it.
func checkSinkAgrees(ctx context.Context, d checkpoint.Dir, snap *checkpoint.Snapshot, sink stream.Sink) error {
	rs, ok := sink.(stream.RecordingSink)
	if !ok || !snap.HasMetadata || snap.CommittedID < 0 {
		return nil
	}
	want, err := lastSinkBatch(d, snap)
	if err != nil || want < 0 {
		return err
	}
	rec, err := rs.RecordedBatches(ctx)
	if err != nil || rec == nil {
		return err
	}
	id := snap.Metadata.ID
	got, ok := rec[id]
	if ok && got >= want {
		return nil
	}
	if !ok {
		for other, v := range rec {
			if v >= want && v <= snap.LatestID {
				return errcode.Corrupt(d.Join(checkpoint.MetadataFile), nil,
					"the checkpoint's metadata names query %s, but %s records batch %d of query %s and nothing of %s: the metadata was replaced (restore it with the id %s)",
					id, sink.Description(), v, other, id, other)
			}
		}
	}
	has := "nothing"
	if ok {
		has = "batch " + strconv.FormatInt(got, 10)
	}
	return errcode.New(errcode.TableBehindCheckpoint, d.Path,
		"restore the table from a backup that holds batch "+strconv.FormatInt(want, 10)+" (or the missing _delta_log commit), or re-run the query from a copy of the checkpoint taken together with this table",
		"%s records %s of query %s, but the checkpoint committed batch %d: the table is behind the checkpoint, and going on would leave those batches out of it forever",
		sink.Description(), has, id, want)
}

// lastSinkBatch is the newest committed batch that wrote to the sink: the
// last commit, or the data batch before a run of control batches; -1 when
// none is known (its offsets entry was purged).
func lastSinkBatch(d checkpoint.Dir, snap *checkpoint.Snapshot) (int64, error) {
	id, e := snap.CommittedID, snap.CommittedOffsets
	for id >= 0 {
		if e == nil {
			return -1, nil
		}
		if e.Metadata.ControlBatchInfo == nil {
			return id, nil
		}
		id--
		if id < 0 {
			return -1, nil
		}
		var err error
		e, err = d.ReadOffsets(id)
		if errors.Is(err, os.ErrNotExist) {
			return -1, nil
		}
		if err != nil {
			return -1, err
		}
	}
	return -1, nil
}

// CheckSink is the start check of a sink against the checkpoint in dir,
// for tools (`ethstream checkpoint verify`): nil when they agree.
func CheckSink(ctx context.Context, fs vfs.FS, dir string, sink stream.RecordingSink) error {
	d := checkpoint.Dir{FS: fs, Path: dir}
	snap, err := d.ReadSnapshot()
	if err != nil {
		return err
	}
	return checkSinkAgrees(ctx, d, snap, sink)
}
