package pipeline

// `ethstream checkpoint verify`: every file of a checkpoint and of its table
// read in full, and the two compared.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/shape"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/sources/ethrpc"
	"github.com/ethstream/ethstream/state"
)

// VerifyCheck is one verified file or step.
type VerifyCheck struct {
	Path string
	What string
	Err  error // nil: intact
}

// VerifyReport lists every check; Damaged counts the failed ones.
type VerifyReport struct {
	Checks  []VerifyCheck
	Damaged int
}

func (r *VerifyReport) add(path, what string, err error) {
	r.Checks = append(r.Checks, VerifyCheck{Path: path, What: what, Err: err})
	if err != nil {
		r.Damaged++
	}
}

// Print writes one line per check ("ok" or "DAMAGED" with the error) and a
// summary.
func (r *VerifyReport) Print(w io.Writer) {
	for _, c := range r.Checks {
		if c.Err != nil {
			fmt.Fprintf(w, "DAMAGED  %s (%s): %v\n", c.Path, c.What, c.Err)
		} else {
			fmt.Fprintf(w, "ok       %s (%s)\n", c.Path, c.What)
		}
	}
	fmt.Fprintf(w, "%d files checked, %d damaged\n", len(r.Checks), r.Damaged)
}

// Verify reads, locking and writing nothing, every file of the checkpoint
// dir and, when table is set, every file of its Delta table, and
// cross-checks what two files both record. Each file is read in full as a
// restart would read it: metadata, every offsets and commits entry, the
// sources' logs (a file source's log, the ethrpc source's history), the
// query shape records, the progress log (every line a progress event) and
// every retained state version; the table's commits, checkpoints and live
// data files (Table.Verify). The cross-checks: gaps in the offsets and
// commit logs, commits without their offsets entry, a commit's watermark
// against the next batch's (checkpoint.Dir.Audit), the file source logs
// against the newest offsets entry, state versions the commit log does not
// cover, and the table's txn for the query against the commit log. It goes
// on past damage, one check per line; the error is for a directory that is
// not a checkpoint.
func Verify(ctx context.Context, fs vfs.FS, dir, table string) (*VerifyReport, error) {
	if fs == nil {
		fs = vfs.Default
	}
	d := checkpoint.Dir{FS: fs, Path: dir}
	snap, err := d.ReadExisting()
	var ce *errcode.Error
	if err != nil && (!errors.As(err, &ce) || ce.Code != errcode.CheckpointCorrupt) {
		return nil, err
	}
	rep := &VerifyReport{}
	rep.add(d.Join(checkpoint.MetadataFile), "metadata and latest entries", err)
	logs := verifyLogs(d, rep)
	verifySources(d, logs, rep)
	verifyShape(fs, dir, rep)
	verifyProgress(d, rep)
	if err := verifyState(ctx, d, snap, logs, rep); err != nil {
		return rep, err
	}
	if table == "" {
		return rep, ctx.Err()
	}
	return rep, verifyTable(ctx, fs, dir, table, snap, logs, rep)
}

// verifyLogs reads every offsets and commits entry and audits the two logs
// against each other.
func verifyLogs(d checkpoint.Dir, rep *VerifyReport) checkpoint.Logs {
	logs, damaged, err := d.ReadLogs()
	if err != nil {
		rep.add(d.Path, "offsets and commits listing", err)
		return logs
	}
	rep.add(d.Join(checkpoint.OffsetsDir), "offsets listing", nil)
	for _, id := range logs.OffsetIDs {
		rep.add(d.OffsetsPath(id), "offsets entry", damaged[d.OffsetsPath(id)])
	}
	rep.add(d.Join(checkpoint.CommitsDir), "commits listing", nil)
	for _, id := range logs.CommitIDs {
		rep.add(d.CommitPath(id), "commit entry", damaged[d.CommitPath(id)])
	}
	findings := d.Audit(logs)
	for _, f := range findings {
		rep.add(f.Path, f.What, f.Err)
	}
	if len(findings) == 0 {
		rep.add(d.Path, "offsets and commit logs agree: no gap, every commit planned, watermarks carried", nil)
	}
	return logs
}

// verifySources reads each source's private log: the ethrpc source's
// history files, or a FileStreamSource log, then compares the file source
// logs with the newest offsets entry.
func verifySources(d checkpoint.Dir, logs checkpoint.Logs, rep *VerifyReport) {
	keys, _ := d.FS.List(d.Join(checkpoint.SourcesDir))
	for _, key := range keys {
		sd := d.Join(checkpoint.SourcesDir, key)
		if ethrpc.IsHistoryDir(d.FS, sd) {
			paths, errs, err := ethrpc.VerifyHistory(d.FS, sd)
			if err != nil {
				rep.add(sd, "ethrpc source history listing", err)
			}
			for i, p := range paths {
				rep.add(p, "ethrpc source history", errs[i])
			}
			continue
		}
		_, err := d.ReadSourceLog(key)
		rep.add(sd, "source log", err)
	}
	if n := len(logs.OffsetIDs); n > 0 {
		id := logs.OffsetIDs[n-1]
		if e := logs.Offsets[id]; e != nil {
			rep.add(d.OffsetsPath(id), "file source logs hold the log ids the newest offsets entry names", d.CheckFileSourceLogs(id, e))
		}
	}
}

// verifyShape reads every query shape record (shape/).
func verifyShape(fs vfs.FS, dir string, rep *VerifyReport) {
	l := shape.Log(fs, dir)
	seqs, err := l.List()
	if err != nil {
		rep.add(l.Dir, "query shape records listing", err)
		return
	}
	for _, seq := range seqs {
		_, err := l.Get(seq)
		rep.add(l.Path(seq), "query shape record", err)
	}
}

// verifyProgress reads every segment of the progress log: each line must be
// a progress event (a torn final line excepted).
func verifyProgress(d checkpoint.Dir, rep *VerifyReport) {
	segs, err := d.ProgressSegments()
	if err != nil {
		rep.add(d.Join(checkpoint.ProgressDir), "progress log listing", err)
		return
	}
	for _, s := range segs {
		n, err := engine.VerifyProgressFile(d.FS, s.Path)
		rep.add(s.Path, fmt.Sprintf("progress log segment: %d events", n), err)
	}
}

// verifyState reads every retained state version in full and checks that
// the commit log covers them: state version N is written before commits/N,
// so the newest may be one past the newest commit, never more.
func verifyState(ctx context.Context, d checkpoint.Dir, snap *checkpoint.Snapshot, logs checkpoint.Logs, rep *VerifyReport) error {
	if snap != nil && snap.CheckStateProvider() != nil {
		return nil // another provider's state: not ours to read
	}
	committed, latest := int64(-1), int64(-1)
	if n := len(logs.CommitIDs); n > 0 {
		committed = logs.CommitIDs[n-1]
	}
	if n := len(logs.OffsetIDs); n > 0 {
		latest = logs.OffsetIDs[n-1]
	}
	if snap != nil {
		committed, latest = snap.CommittedID, snap.LatestID
	}
	ops, err := d.FS.List(d.Join(checkpoint.StateDir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		rep.add(d.Join(checkpoint.StateDir), "state listing", err)
	}
	for _, op := range ops {
		sd := d.Join(checkpoint.StateDir, op)
		sr, err := state.Verify(ctx, d.FS, sd, committed)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rep.add(sd, fmt.Sprintf("state: %d versions, %d files, %d bytes", sr.Versions, sr.Files, sr.Bytes), err)
		// The start's check (engine.checkCommitted), over every version.
		rep.add(sd, "offsets and commit logs cover every state version",
			d.CheckStateCovered(sd, sr.Committed, latest, committed, committed < 0 || slices.Contains(sr.Committed, committed)))
		opID, err := strconv.Atoi(op)
		if err != nil {
			opID = -1
		}
		verifyStateRecords(d, sd, opID, logs, rep)
	}
	return nil
}

// verifyStateRecords runs the start's check of a state version's records
// (engine.CheckStateRecord) on every committed version of state directory
// sd, operator opID's (-1: a name that is no id): the watermark of the
// batch after it (an aggregation's record of it) against commits/N, and
// its state schema against the query shape record in force when it was
// written.
func verifyStateRecords(d checkpoint.Dir, sd string, opID int, logs checkpoint.Logs, rep *VerifyReport) {
	rec, err := shape.ReadLatest(d.FS, d.Path)
	if err != nil {
		rec = nil // a damaged record is verifyShape's
	}
	bad := 0
	// The last version's carry is checked below: CheckStateVersion reads
	// the record and the carry once for both.
	var lastCheck *agg.StateCheck
	for _, id := range logs.CommitIDs {
		c := logs.Commits[id]
		if c == nil {
			continue
		}
		check := agg.CheckStateVersion(d.FS, sd, id)
		if id == logs.CommitIDs[len(logs.CommitIDs)-1] {
			lastCheck = &check
		}
		r, ok, err := check.Record, check.OK, check.Err
		if err != nil || !ok {
			// Another operator's record: the schema alone.
			if r, ok, err = (state.Recorded{}).CommittedRecord(context.Background(), d.FS, sd, id); err != nil || !ok {
				continue // a damaged or purged version: state.Verify reports it
			}
		}
		if err := engine.CheckStateRecord(d, rec, opID, id, c, r); err != nil {
			rep.add(d.CommitPath(id), "commit, query shape and state version disagree", err)
			bad++
		}
	}
	if bad == 0 {
		rep.add(sd, "state versions record the watermarks the commit log records and the query shape's state schema", nil)
	}
	// The carry the next batch merges (agg/doc.go, Closed at commit).
	if n := len(logs.CommitIDs); n > 0 {
		last := logs.CommitIDs[n-1]
		if lastCheck == nil { // commits/last did not parse
			c := agg.CheckStateVersion(d.FS, sd, last)
			lastCheck = &c
		}
		switch st, err := lastCheck.Carry, lastCheck.CarryErr; {
		case err != nil || st == agg.CarryGood:
			rep.add(sd, fmt.Sprintf("the closed-at-commit carry of state version %d", last), err)
		case st == agg.CarryGone:
			rep.add(sd, fmt.Sprintf("the closed-at-commit carry of state version %d is gone: the next batch drops late input by its own watermark (a warning at the run)", last), nil)
		}
	}
}

// verifyTable reads every file of the table, then checks its txn for the
// query against the commit log: one txn per batch the sink wrote, batch ids
// increasing with table versions, none past the commit log (but the batch
// in flight), and the newest at the checkpoint's last committed batch.
func verifyTable(ctx context.Context, fs vfs.FS, dir, table string, snap *checkpoint.Snapshot, logs checkpoint.Logs, rep *VerifyReport) error {
	t, err := delta.OpenFS(ctx, fs, table)
	if err != nil {
		rep.add(table, "delta table", err)
		return ctx.Err()
	}
	checks, err := t.Verify(ctx)
	if err != nil {
		return err
	}
	for _, c := range checks {
		rep.add(c.Path, c.What, c.Err)
	}
	if snap != nil && snap.HasMetadata {
		txns, err := t.TxnHistory(ctx, snap.Metadata.ID)
		if err != nil {
			rep.add(table, "table txn history", err)
		} else {
			for _, f := range auditTxns(checkpoint.Dir{FS: fs, Path: dir}, snap.Metadata.ID, txns, logs) {
				rep.add(f.Path, f.What, f.Err)
			}
		}
	}
	sink, err := delta.NewMergeSink(delta.SinkOptions{Path: table, FS: fs})
	if err == nil {
		err = engine.CheckSink(ctx, fs, dir, sink)
	}
	rep.add(table, "table records the checkpoint's last committed batch", err)
	return ctx.Err()
}

// auditTxns compares the table's txn versions for the query with the
// commit log (verifyTable).
func auditTxns(d checkpoint.Dir, queryID string, txns []delta.TxnAt, logs checkpoint.Logs) []checkpoint.Finding {
	var out []checkpoint.Finding
	last := int64(-1)
	firstCommit := int64(-1)
	if n := len(logs.CommitIDs); n > 0 {
		firstCommit, last = logs.CommitIDs[0], logs.CommitIDs[n-1]
	}
	prev := int64(-1)
	for i, tx := range txns {
		switch {
		case i > 0 && tx.TxnVersion <= prev:
			out = append(out, checkpoint.Finding{Path: tx.Path, What: "table txn goes back",
				Err: errcode.Corrupt(tx.Path, nil, "table version %d records batch %d of query %s after batch %d: the table's log was rewritten, or another writer used this query id",
					tx.TableVersion, tx.TxnVersion, queryID, prev)})
		case tx.TxnVersion > last+1:
			out = append(out, checkpoint.Finding{Path: tx.Path, What: "table txn ahead of the commit log",
				Err: errcode.Corrupt(tx.Path, nil, "table version %d records batch %d of query %s, but %s: the commit log lost entries",
					tx.TableVersion, tx.TxnVersion, queryID, commitLogEnd(d, last))})
		case tx.TxnVersion >= firstCommit && tx.TxnVersion <= last && !slices.Contains(logs.CommitIDs, tx.TxnVersion):
			out = append(out, checkpoint.Finding{Path: tx.Path, What: "table txn of an uncommitted batch",
				Err: errcode.Corrupt(tx.Path, nil, "table version %d records batch %d of query %s, but %s is missing",
					tx.TableVersion, tx.TxnVersion, queryID, d.CommitPath(tx.TxnVersion))})
		}
		prev = max(prev, tx.TxnVersion)
	}
	if len(out) == 0 {
		out = append(out, checkpoint.Finding{Path: d.Join(checkpoint.CommitsDir),
			What: fmt.Sprintf("table txn of query %s agrees with the commit log (%d table versions)", queryID, len(txns))})
	}
	return out
}

// commitLogEnd describes the end of the commit log for a message.
func commitLogEnd(d checkpoint.Dir, last int64) string {
	if last < 0 {
		return "the commit log " + d.Join(checkpoint.CommitsDir) + " is empty"
	}
	return "the commit log ends at " + d.CommitPath(last)
}
