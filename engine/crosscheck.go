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

// checkRecords cross-checks, before a start writes anything, what two files
// of the checkpoint both record about the batch the start continues from
// (each file may parse on its own and still have been replaced):
//
//   - commits/C's nextBatchWatermarkMs against offsets/C+1's
//     batchWatermarkMs, when C+1 is planned;
//   - commits/C's against state version C's own record of it (the plan's
//     first operator, op, of id opID, when it is a stream.StateRecorder):
//     with C+1 not planned yet, the commit alone decides the next batch's
//     watermark;
//   - offsets/L against the logs the query's sources keep of their own
//     (each source that is a stream.OffsetAuditor checks the offset
//     offsets/L records for it: auditSources);
//   - the recorded query shape's state schema against the one state
//     version C was written with, when that shape was in force for C.
//
// A disagreement is CHECKPOINT_CORRUPT naming both files.
func checkRecords(ctx context.Context, fs vfs.FS, d checkpoint.Dir, snap *checkpoint.Snapshot, rec *shape.Record, op stream.Operator, opID int, srcs []keyedSource) error {
	c := snap.CommittedID
	if err := auditSources(ctx, d, snap.LatestID, snap.Latest, srcs); err != nil {
		return err
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
	st, ok, err := sr.CommittedRecord(ctx, fs, d.Join(checkpoint.StateDir, strconv.Itoa(opID)), c)
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

// keyedSource is a source of the starting query with its checkpoint key
// (sources/<key>, the key of its offsets).
type keyedSource struct {
	key string
	src stream.Source
}

// auditSources hands each source of the query that keeps a log of its own
// (stream.OffsetAuditor) the offset offsets/id (latest) records under its
// key, for it to check against that log. The engine reads no source's
// offset itself: an offset is the source's to interpret.
func auditSources(ctx context.Context, d checkpoint.Dir, id int64, latest *checkpoint.OffsetEntry, srcs []keyedSource) error {
	if latest == nil {
		return nil
	}
	for _, ks := range srcs {
		oa, ok := ks.src.(stream.OffsetAuditor)
		if !ok {
			continue
		}
		for _, so := range latest.Sources {
			if so.Key != ks.key || so.Offset == nil {
				continue
			}
			if err := oa.AuditOffset(ctx, d.FS, d.Join(checkpoint.SourcesDir, so.Key), so.Offset, d.OffsetsPath(id)); err != nil {
				return err
			}
		}
	}
	return nil
}

// keyedSources pairs each source with its checkpoint key (sourceKeys);
// sources that are nil (a plan from names alone) are left out.
func keyedSources(srcs []NamedSource, evolution bool) []keyedSource {
	names := make([]string, len(srcs))
	for i, ns := range srcs {
		names[i] = ns.Name
	}
	var ks []keyedSource
	for i, key := range sourceKeys(names, evolution) {
		if srcs[i].Source != nil {
			ks = append(ks, keyedSource{key: key, src: srcs[i].Source})
		}
	}
	return ks
}
