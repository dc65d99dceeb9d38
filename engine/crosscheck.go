package engine

import (
	"context"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/shape"
	"github.com/ethstream/ethstream/stream"
)

// checkRecords cross-checks, before a start writes anything, what two files
// of the checkpoint both record about the batch the start continues from
// (each file may parse on its own and still have been replaced):
//
//   - commits/C's nextBatchWatermarkMs against offsets/C+1's
//     batchWatermarkMs, when C+1 is planned;
//   - commits/C's against state version C's own record of it (an operator
//     that is a stream.StateRecorder): with C+1 not planned yet, the commit
//     alone decides the next batch's watermark;
//   - offsets/L against the file source logs (each holds the log id its
//     offset names);
//   - the recorded query shape's state schema against the one state
//     version C was written with, when that shape was in force for C.
//
// A disagreement is CHECKPOINT_CORRUPT naming both files.
func checkRecords(ctx context.Context, fs vfs.FS, d checkpoint.Dir, snap *checkpoint.Snapshot, rec *shape.Record, op stream.Operator) error {
	c := snap.CommittedID
	if snap.Latest != nil {
		if err := d.CheckFileSourceLogs(snap.LatestID, snap.Latest); err != nil {
			return err
		}
	}
	if c < 0 {
		return nil
	}
	if snap.LatestID == c+1 {
		if err := d.CheckWatermark(c, snap.Committed, snap.Latest); err != nil {
			return err
		}
	}
	sr, ok := op.(stream.StateRecorder)
	if !ok || snap.CheckStateProvider() != nil {
		return nil
	}
	st, ok, err := sr.CommittedRecord(ctx, fs, d.Join(checkpoint.StateDir, OperatorID), c)
	if err != nil || !ok {
		return err
	}
	if st.HasNextWatermark {
		if err := d.CheckRecordedWatermark(c, snap.Committed, st.Path, st.NextWatermarkMs); err != nil {
			return err
		}
	}
	return CheckStateSchema(rec, c, st.Path, st.StateSchema)
}

// CheckStateSchema compares the query shape record rec with state version
// (written with stateSchema, recorded in statePath): when rec was in force
// for that version (its first batch is at most version), both name the same
// state columns. A disagreement is CHECKPOINT_CORRUPT naming both files.
// Empty schemas (an operator that renders none) are not compared.
func CheckStateSchema(rec *shape.Record, version int64, statePath, stateSchema string) error {
	if rec == nil || rec.FirstBatchID > version || rec.Shape.StateSchema == "" || stateSchema == "" ||
		stateLayout(rec.Shape.StateSchema) == stateLayout(stateSchema) {
		return nil
	}
	return errcode.Corrupt(rec.Path, nil,
		"%s records the state schema %s, but state version %d (%s), written under it, has %s: one of the two files was replaced",
		rec.Path, rec.Shape.StateSchema, version, statePath, stateSchema)
}

// stateLayout is a state schema's rendering without its spec(...) part: the
// operator, key and value columns. The spec's wording may change between
// versions of the operator (a compatible spec is accepted on Open), the
// columns may not.
func stateLayout(s string) string {
	layout, _, _ := strings.Cut(s, " spec(")
	return layout
}
