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
//   - state version C of every operator the checkpoint records (ops, by
//     id: recordedOperators) that is a stream.StateRecorder against
//     commits/C and the query shape record (CheckStateRecord, the check
//     `checkpoint verify` runs on every state directory): with C+1 not
//     planned yet, the commit alone decides the next batch's watermark;
//   - offsets/L against the logs the query's sources keep of their own
//     (each source that is a stream.OffsetAuditor checks the offset
//     offsets/L records for it: auditSources).
//
// A disagreement is CHECKPOINT_CORRUPT naming both files.
func checkRecords(ctx context.Context, fs vfs.FS, d checkpoint.Dir, snap *checkpoint.Snapshot, rec *shape.Record, ops []stream.Operator, srcs []keyedSource) error {
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
	if snap.CheckStateProvider() != nil {
		return nil
	}
	for id, op := range ops {
		sr, ok := op.(stream.StateRecorder)
		if !ok {
			continue
		}
		st, ok, err := sr.CommittedRecord(ctx, fs, d.Join(checkpoint.StateDir, strconv.Itoa(id)), c)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if err := CheckStateRecord(d, rec, id, c, snap.Committed, st); err != nil {
			return err
		}
	}
	return nil
}

// CheckStateRecord compares what state version (of operator opID, read
// into sr) records with the checkpoint's other records of the same facts:
// the next batch's watermark with commits/version's (c; nil: not
// compared), and the state schema with the one the query shape record
// rec gives operator opID (CheckStateSchema). A start runs it on version C
// of every operator's state, `checkpoint verify` on every committed version
// of every state directory: what verify reports on version C, a start
// refuses (older versions' records a start never reads). A disagreement is CHECKPOINT_CORRUPT naming both files.
func CheckStateRecord(d checkpoint.Dir, rec *shape.Record, opID int, version int64, c *checkpoint.CommitEntry, sr stream.StateRecord) error {
	if sr.HasNextWatermark {
		if err := d.CheckRecordedWatermark(version, c, sr.Path, sr.NextWatermarkMs); err != nil {
			return err
		}
	}
	return CheckStateSchema(rec, opID, version, sr.Path, sr.StateSchema)
}

// CheckStateSchema compares the query shape record rec with state version
// of operator opID (written with stateSchema, recorded in statePath): when
// rec was in force for that version (its first batch is at most version),
// both name the same state columns. A disagreement is CHECKPOINT_CORRUPT
// naming both files. Empty schemas (an operator that renders none) and an
// operator the record does not list are not compared.
func CheckStateSchema(rec *shape.Record, opID int, version int64, statePath, stateSchema string) error {
	if rec == nil || rec.FirstBatchID > version || stateSchema == "" {
		return nil
	}
	ops := rec.Shape.OperatorList()
	if opID < 0 || opID >= len(ops) || ops[opID].StateSchema == "" || stateLayout(ops[opID].StateSchema) == stateLayout(stateSchema) {
		return nil
	}
	return errcode.Corrupt(rec.Path, nil,
		"%s records the state schema %s, but state version %d (%s), written under it, has %s: one of the two files was replaced",
		rec.Path, ops[opID].StateSchema, version, statePath, stateSchema)
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
