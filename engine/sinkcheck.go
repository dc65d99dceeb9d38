package engine

// The start checks of the sink: that its output is the checkpoint's (by
// identity, not by path) and holds what the checkpoint says it committed.

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/shape"
	"github.com/ethstream/ethstream/stream"
)

// sinkSeen is what a start read of the sink's output before writing
// anything; a plain value, the restart rules' input.
type sinkSeen struct {
	// Exists: the output exists (a table is there). Only a
	// stream.RecordingSink can tell; for any other sink it is false and
	// nothing below is known.
	Exists bool
	// Recording: the sink records its batches in its output
	// (stream.RecordingSink), so it can recognise that output at another
	// location; a file sink cannot.
	Recording bool
	// ID is the output's identity (stream.IdentifiedSink), "" if none.
	ID string
	// Batches is the newest batch each query id recorded in the output.
	Batches map[string]int64
	// Err: the output could not be read (nothing above is known). The
	// start raises it after the sink's own probe (stream.Checker), which
	// names most such damage better.
	Err error
	// advisor words the remedies of refusals about the output in the
	// sink's terms (stream.SinkAdvisor); nil: the engine's own.
	advisor stream.SinkAdvisor
}

// remedy is the remedy of refusal r: the sink's (stream.SinkAdvisor), or
// generic, which names no sink's options or files.
func (s sinkSeen) remedy(r stream.SinkRefusal, generic string) string {
	if s.advisor != nil {
		if rem := s.advisor.Remedy(r); rem != "" {
			return rem
		}
	}
	return generic
}

// readSink reads the sink's identity and record, writing nothing; a
// failure is kept in Err.
func readSink(ctx context.Context, sink stream.Sink) sinkSeen {
	var seen sinkSeen
	seen.advisor, _ = sink.(stream.SinkAdvisor)
	rs, ok := sink.(stream.RecordingSink)
	if !ok {
		return seen
	}
	rec, err := rs.RecordedBatches(ctx)
	if err != nil {
		return sinkSeen{Err: err, advisor: seen.advisor}
	}
	seen.Batches, seen.Exists, seen.Recording = rec, rec != nil, true
	if is, ok := sink.(stream.IdentifiedSink); ok {
		if seen.ID, err = is.OutputID(ctx); err != nil {
			return sinkSeen{Err: err, advisor: seen.advisor}
		}
		seen.Exists = seen.Exists || seen.ID != ""
	}
	return seen
}

// checkSinkOwner refuses to start a checkpoint that has committed nothing
// and recorded no table identity on a table another query writes (a txn of
// another appId and none of ours): its MERGE would silently mix into the
// other query's rows. shared (Query.SinkShared) allows it.
func checkSinkOwner(path string, rec *shape.Record, snap *checkpoint.Snapshot, queryID string, seen sinkSeen, shared bool) error {
	if shared || seen.Err != nil || !seen.Exists || snap.CommittedID >= 0 || (rec != nil && rec.Shape.Sink.ID != "") {
		return nil
	}
	if _, ours := seen.Batches[queryID]; ours && queryID != "" {
		return nil
	}
	var others []string
	for id := range seen.Batches {
		others = append(others, id)
	}
	if len(others) == 0 {
		return nil
	}
	slices.Sort(others)
	return errcode.New(errcode.SinkTableInUse, path,
		seen.remedy(stream.SinkRefusal{Problem: stream.SinkOutputInUse},
			"point the query at an output no other query writes, or declare the output shared (Query.SinkShared) if both queries are meant to write into it"),
		"the table (id %s) is written by query %s (batch %d): a new query's MERGE would mix into its rows; the queries writing it are %s",
		orNone(seen.ID), others[0], seen.Batches[others[0]], strings.Join(others, ", "))
}

// checkSinkAgrees compares what a RecordingSink records of this query
// (seen, read before anything is written) with the checkpoint. The newest
// committed batch that wrote to the sink (control batches do not) must be
// recorded for the query id of metadata; a record at it or one past the
// last commit is fine (one past: the pending batch reached the sink before
// the crash; the sink skips re-runs). A record below it, or none, is
// TABLE_BEHIND_CHECKPOINT; one further ahead CHECKPOINT_BEHIND_TABLE; no
// record for our id while another id holds that batch means metadata was
// replaced: CHECKPOINT_CORRUPT naming it. A sink whose output does not
// exist at all (a new table) is not checked: the sink creates it.
func checkSinkAgrees(d checkpoint.Dir, snap *checkpoint.Snapshot, sink stream.Sink, seen sinkSeen) error {
	if seen.Err != nil {
		return seen.Err
	}
	rec := seen.Batches
	if rec == nil || !snap.HasMetadata {
		return nil
	}
	id := snap.Metadata.ID
	got, ok := rec[id]
	if ok && got > snap.CommittedID+1 {
		return errcode.New(errcode.CheckpointBehindTable, d.Path,
			seen.remedy(stream.SinkRefusal{Problem: stream.SinkOutputAhead},
				"restore the checkpoint taken together with this output, or point the query at the output this checkpoint wrote"),
			"%s records batch %d of query %s, but the checkpoint committed %s: the checkpoint is older than the table, and new batches would reuse ids the table holds under other offsets, their rows skipped",
			sink.Description(), got, id, committedDesc(snap.CommittedID))
	}
	if snap.CommittedID < 0 {
		return nil
	}
	want, err := lastSinkBatch(d, snap)
	if err != nil || want < 0 {
		return err
	}
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
		seen.remedy(stream.SinkRefusal{Problem: stream.SinkOutputBehind, Batch: want},
			"restore the output from a backup that holds batch "+strconv.FormatInt(want, 10)+", or re-run the query from a copy of the checkpoint taken together with this output"),
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
// for tools (`ethstream checkpoint verify`): nil when they agree. It checks
// the table's identity (SINK_TABLE_MISMATCH when the checkpoint recorded
// another Delta metadata id), then that the table records the last
// committed batch and not more than one past it (TABLE_BEHIND_CHECKPOINT,
// CHECKPOINT_BEHIND_TABLE). It reads only.
func CheckSink(ctx context.Context, fs vfs.FS, dir string, sink stream.RecordingSink) error {
	d := checkpoint.Dir{FS: fs, Path: dir}
	snap, err := d.ReadSnapshot()
	if err != nil {
		return err
	}
	rec, err := shape.ReadLatest(fs, dir)
	if err != nil {
		return err
	}
	seen := readSink(ctx, sink)
	if seen.Err != nil {
		return seen.Err
	}
	if rec != nil && rec.Shape.Sink.ID != "" && seen.ID != "" && seen.ID != rec.Shape.Sink.ID {
		return tableMismatch(dir, rec.Shape.Sink, sink.Description(), seen)
	}
	return checkSinkAgrees(d, snap, sink, seen)
}

// tableMismatch is the refusal of an output whose identity (seen.ID) is
// not the one the checkpoint recorded.
func tableMismatch(path string, old shape.Sink, where string, seen sinkSeen) error {
	return errcode.New(errcode.SinkTableMismatch, path,
		seen.remedy(stream.SinkRefusal{Problem: stream.SinkOutputOther, ID: old.ID, Location: old.Location},
			"point the query at the output this checkpoint wrote (id "+old.ID+", last at "+old.Location+"), or start a new checkpoint for this output"),
		"%s is another table (id %s) than the one this checkpoint wrote (id %s, last at %s): resuming would write into a table that lacks every committed batch",
		where, seen.ID, old.ID, old.Location)
}

// logSinkMoved logs an allowed change of the sink location: the table moved
// or was copied with its checkpoint and is recognised by its identity.
func logSinkMoved(o Options, sd *shapeDecision) {
	for _, c := range sd.Changes {
		if c.Change == "sink location" && c.Allowed {
			o.Logger.Info("the table moved with the checkpoint: resuming on it", "checkpoint", o.CheckpointDir,
				"from", c.Old, "to", c.New, "tableId", orNone(sd.Shape.Sink.ID), "rule", c.Rule)
		}
	}
}

// identifySink completes the shape to record with the identity of the
// sink's output once the sink is open (it may just have created the table),
// and has it recorded when that identity is new to the checkpoint.
func identifySink(ctx context.Context, sd *shapeDecision, sink stream.Sink) error {
	is, ok := sink.(stream.IdentifiedSink)
	if !ok || !sd.checked || sd.Shape.Sink.ID != "" {
		return nil
	}
	id, err := is.OutputID(ctx)
	if err != nil || id == "" {
		return err
	}
	sd.Shape.Sink.ID = id
	if sd.recorded == nil || !sd.recorded.Equal(sd.Shape) {
		sd.Write = true
	}
	return nil
}
