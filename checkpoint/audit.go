package checkpoint

// Cross-checks between the logs of a checkpoint: what two files both
// record must agree. Each file may parse on its own and the checkpoint still
// be damaged (a gap, a commit without its plan, a commit replaced by valid
// JSON with another watermark); these checks find that. `checkpoint verify`
// runs Audit over every retained entry, a start runs CheckWatermark and
// CheckFileSourceLogs over the entries the next batch depends on.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/ethstream/ethstream/errcode"
)

// Finding is one inconsistency Audit found: the file at fault (for a
// missing file, the path it should have), what the inconsistency means,
// and the CHECKPOINT_CORRUPT error naming the files involved.
type Finding struct {
	Path string
	What string
	Err  error
}

// Logs is what Audit compares: the ids listed in offsets/ and commits/, and
// the entries that read (an entry that does not parse is absent from its map
// and reported by its reader, not here).
type Logs struct {
	OffsetIDs []int64
	CommitIDs []int64
	Offsets   map[int64]*OffsetEntry
	Commits   map[int64]*CommitEntry
}

// ReadLogs lists and reads offsets/ and commits/ in full, for Audit. The
// errors are the entries that do not read, each naming its file; a listing
// that fails is returned as err.
func (d Dir) ReadLogs() (l Logs, damaged map[string]error, err error) {
	l = Logs{Offsets: map[int64]*OffsetEntry{}, Commits: map[int64]*CommitEntry{}}
	damaged = map[string]error{}
	if l.CommitIDs, err = d.ListCommits(); err != nil {
		return l, damaged, err
	}
	if l.OffsetIDs, err = d.ListOffsets(); err != nil {
		return l, damaged, err
	}
	for _, id := range l.OffsetIDs {
		e, err := d.ReadOffsets(id)
		if err != nil {
			damaged[d.OffsetsPath(id)] = err
			continue
		}
		l.Offsets[id] = e
	}
	for _, id := range l.CommitIDs {
		c, err := d.ReadCommit(id)
		if err != nil {
			damaged[d.CommitPath(id)] = err
			continue
		}
		l.Commits[id] = c
	}
	return l, damaged, nil
}

// Audit cross-checks offsets/ and commits/ (doc.go, Retention and
// Publishing give the rules):
//
//   - each log is gap-free: retention deletes the oldest ids only, and a
//     batch id is planned once, so a missing id between two present ones is
//     a lost file;
//   - every commit has its offsets entry, unless retention already deleted
//     it (offsets are purged before commits, so commits below the oldest
//     offsets entry are legal);
//   - every planned batch older than the newest commit is committed (a
//     batch is re-run under its own id until it commits);
//   - the newest commit is at most one batch behind the newest offsets
//     entry (CheckCommitLogEnd);
//   - the watermark a commit records for the next batch is the one that
//     batch's offsets entry runs with (CheckWatermark).
//
// The gap, ordering and log-end checks read the listings alone; the
// watermark check compares the entries l holds (a start passes the few it
// read, verify all of them).
func (d Dir) Audit(l Logs) []Finding {
	var out []Finding
	out = append(out, gaps(l.OffsetIDs, d.OffsetsPath, "offsets log")...)
	out = append(out, gaps(l.CommitIDs, d.CommitPath, "commit log")...)
	if err := d.CheckCommitLogEnd(l); err != nil {
		out = append(out, Finding{Path: d.Join(CommitsDir), What: "commit log behind the offsets log", Err: err})
	}
	if len(l.CommitIDs) > 0 {
		firstOff, lastOff := int64(-1), int64(-1)
		if n := len(l.OffsetIDs); n > 0 {
			firstOff, lastOff = l.OffsetIDs[0], l.OffsetIDs[n-1]
		}
		for _, id := range l.CommitIDs {
			_, has := slices.BinarySearch(l.OffsetIDs, id)
			if has || (firstOff >= 0 && id < firstOff) {
				continue
			}
			out = append(out, Finding{Path: d.CommitPath(id), What: "commit without its offsets entry",
				Err: errcode.Corrupt(d.CommitPath(id), nil, "commit %d has no offsets entry %s (the offsets log holds %s)",
					id, d.OffsetsPath(id), idRange(firstOff, lastOff))})
		}
		lastCommit := l.CommitIDs[len(l.CommitIDs)-1]
		firstCommit := l.CommitIDs[0]
		for _, id := range l.OffsetIDs {
			if id >= firstCommit {
				break // gaps above the first commit are the commit log's gaps
			}
			out = append(out, Finding{Path: d.CommitPath(id), What: "planned batch never committed",
				Err: errcode.Corrupt(d.CommitPath(id), nil, "batch %d is planned (%s) and batch %d is committed, but %s is missing",
					id, d.OffsetsPath(id), lastCommit, d.CommitPath(id))})
		}
	}
	for _, id := range l.CommitIDs {
		c, next := l.Commits[id], l.Offsets[id+1]
		if c == nil || next == nil {
			continue
		}
		if err := d.CheckWatermark(id, c, next); err != nil {
			out = append(out, Finding{Path: d.CommitPath(id), What: "commit and next offsets entry disagree on the watermark", Err: err})
		}
	}
	return out
}

// CheckCommitLogEnd refuses a commit log that ends more than one batch
// before the offsets log. A run writes offsets/N, then commits/N, and plans
// N+1 only after that (retention deletes the oldest ids, never the newest),
// so a crash leaves at most the newest batch uncommitted; two or more
// planned batches past the newest commit mean commits were lost, and
// re-running from the last one left would re-run the newest batch on the
// state of an older one. Spark logs a warning and goes on; ethstream
// refuses. A checkpoint Spark before 2.2 wrote has no commit log at all (no
// commits/ directory, offsets that do not record ethstream's state
// provider, which ethstream always records) and is not refused here; on
// an object store an emptied commits/ is no directory either, so the
// provider decides.
func (d Dir) CheckCommitLogEnd(l Logs) error {
	if len(l.OffsetIDs) == 0 {
		return nil
	}
	latest := l.OffsetIDs[len(l.OffsetIDs)-1]
	committed := int64(-1)
	if n := len(l.CommitIDs); n > 0 {
		committed = l.CommitIDs[n-1]
	} else if !l.ours(latest) {
		if ok, err := statDir(d.FS, d.Join(CommitsDir)); err == nil && !ok {
			return nil
		}
	}
	if committed >= latest-1 {
		return nil
	}
	end, from := "the commit log "+d.Join(CommitsDir)+" is empty", "from empty state"
	if committed >= 0 {
		end, from = "the commit log ends at "+d.CommitPath(committed), fmt.Sprintf("on the state of batch %d", committed)
	}
	missing := fmt.Sprintf("batch %d is", committed+1)
	if latest-1 > committed+1 {
		missing = fmt.Sprintf("batches %d..%d are", committed+1, latest-1)
	}
	return errcode.Corrupt(d.Join(CommitsDir), nil,
		"%s plans batch %d, but %s: %s planned and never committed, and a crash leaves only the newest batch uncommitted, so commit files were lost; a start would re-run batch %d %s",
		d.OffsetsPath(latest), latest, end, missing, latest, from)
}

// ours reports whether offsets entry id, if l holds it, records
// ethstream's state provider (ethstream writes it into every entry).
func (l Logs) ours(id int64) bool {
	e := l.Offsets[id]
	if e == nil {
		return false
	}
	class, _ := e.StateProvider()
	return class == ProviderPebble
}

// CheckStateCovered refuses state versions the logs cannot have produced.
// A run writes offsets/N, then state version N, then commits/N, so every
// state version is at most the newest offsets entry (latest; -1: none) and
// at most one past the newest commit (committed; -1: none), and the
// committed version has its files (a crash between the state and the
// commit leaves exactly latest = committed+1 = the newest version).
// versions are the state directory's committed versions, sorted (verify
// passes all of them, a start the newest); has reports whether version
// committed is among the directory's. A disagreement is CHECKPOINT_CORRUPT
// naming the state directory and the log entry.
func (d Dir) CheckStateCovered(stateDir string, versions []int64, latest, committed int64, has bool) error {
	bound, by := committed+1, "the commit log "+d.Join(CommitsDir)+" is empty"
	if committed >= 0 {
		by = "the commit log ends at " + d.CommitPath(committed)
	}
	if latest < bound {
		bound, by = latest, "the offsets log "+d.Join(OffsetsDir)+" is empty"
		if latest >= 0 {
			by = "the newest offsets entry is " + d.OffsetsPath(latest)
		}
	}
	var beyond []int64
	for _, v := range versions {
		if v > bound {
			beyond = append(beyond, v)
		}
	}
	if len(beyond) > 0 {
		return errcode.Corrupt(stateDir, nil,
			"state versions %v in %s are newer than the logs allow (%s; a state version is written after its offsets entry and at most one batch past the newest commit): offsets or commit files were lost, or the state comes from another run",
			beyond, stateDir, by)
	}
	if committed >= 0 && !has {
		return errcode.Corrupt(stateDir, nil,
			"%s records batch %d as committed, but %s holds no state version %d (a state version is written before its commit): the state files were lost or belong to another checkpoint",
			d.CommitPath(committed), committed, stateDir, committed)
	}
	return nil
}

// gaps reports each id missing between two present ones of a sorted list.
func gaps(ids []int64, path func(int64) string, what string) []Finding {
	var out []Finding
	for i := 1; i < len(ids); i++ {
		prev, cur := ids[i-1], ids[i]
		if cur == prev+1 {
			continue
		}
		p := path(prev + 1)
		out = append(out, Finding{Path: p, What: what + " gap",
			Err: errcode.Corrupt(p, nil, "the %s has a gap: %s missing between %s and %s",
				what, idRange(prev+1, cur-1), path(prev), path(cur))})
	}
	return out
}

func idRange(first, last int64) string {
	switch {
	case first < 0:
		return "no id"
	case first == last:
		return "id " + strconv.FormatInt(first, 10)
	}
	return fmt.Sprintf("ids %d..%d", first, last)
}

// CheckWatermark compares commits/id with offsets/id+1: the watermark the
// commit computed for the next batch (nextBatchWatermarkMs) is the one that
// batch was planned with (batchWatermarkMs), as in Spark, where both come
// from the one watermark tracker between the two writes. A commit written
// before the field existed (Spark 2.2's "{}") records none and is not
// compared, nor is a control batch's entry (controlBatchInfo set), a copy of
// the entry before it, watermark included: it reads nothing and carries
// the commit's watermark to its own commit. A disagreement is
// CHECKPOINT_CORRUPT naming both files: one of them was replaced.
func (d Dir) CheckWatermark(id int64, c *CommitEntry, next *OffsetEntry) error {
	if c == nil || next == nil || c.noWatermark || next.Metadata.ControlBatchInfo != nil ||
		c.NextBatchWatermarkMs == next.Metadata.BatchWatermarkMs {
		return nil
	}
	return errcode.Corrupt(d.CommitPath(id), nil,
		"%s records nextBatchWatermarkMs %d but %s was planned with batchWatermarkMs %d: one of the two files was replaced",
		d.CommitPath(id), c.NextBatchWatermarkMs, d.OffsetsPath(id+1), next.Metadata.BatchWatermarkMs)
}

// CheckFileSourceLogs compares the offsets entry e (offsets/id) with the
// FileStreamSource logs of its sources: a source whose sources/<key>/ holds
// a file source log must hold the log id its offset names ({"logOffset":n},
// Spark's FileStreamSourceOffset), since a source writes its
// log entry before the batch that reads it is planned. A log that ends
// before it lost files (or the offsets entry was replaced): CHECKPOINT_CORRUPT
// naming both. Sources whose directory holds no log id (another kind of
// source) are not compared. It lists each source's directory once and reads
// no log file.
func (d Dir) CheckFileSourceLogs(id int64, e *OffsetEntry) error {
	if e == nil {
		return nil
	}
	for _, so := range e.Sources {
		if so.Offset == nil {
			continue
		}
		n, ok := fileSourceLogOffset(so.Offset)
		if !ok {
			continue
		}
		dir := d.Join(SourcesDir, so.Key)
		lg := FileSourceLogAt(d.FS, dir, false)
		keys, err := lg.List()
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			continue // no log here: not a file source, or one a start will refuse (its Open)
		}
		last := int64(-1)
		if len(keys) > 0 {
			last = keys[len(keys)-1].ID
		}
		if last < n {
			return errcode.Corrupt(dir, nil,
				"%s names file source log id %d of source %q, but its log %s ends at %s: log files are missing, or the offsets entry was replaced",
				d.OffsetsPath(id), n, so.Key, dir, idRange(last, last))
		}
	}
	return nil
}

// fileSourceLogOffset parses a FileStreamSourceOffset, {"logOffset":n}.
// The bare n of Spark 2.0 is not taken: other sources (Spark's rate source)
// write bare numbers too, beside files of their own in sources/<key>/.
func fileSourceLogOffset(raw json.RawMessage) (int64, bool) {
	var n int64
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || len(obj) != 1 {
		return 0, false
	}
	v, ok := obj["logOffset"]
	if !ok || json.Unmarshal(v, &n) != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// CheckRecordedWatermark compares commits/id with another file's record of
// the same watermark (the state version of batch id records the watermark
// of the batch after it): a disagreement is CHECKPOINT_CORRUPT naming both
// files. A commit that records no watermark (Spark 2.2) is not compared.
func (d Dir) CheckRecordedWatermark(id int64, c *CommitEntry, otherPath string, otherMs int64) error {
	if c == nil || c.noWatermark || c.NextBatchWatermarkMs == otherMs {
		return nil
	}
	return errcode.Corrupt(d.CommitPath(id), nil,
		"%s records nextBatchWatermarkMs %d but %s, written for the same batch, records %d: one of the two files was replaced",
		d.CommitPath(id), c.NextBatchWatermarkMs, otherPath, otherMs)
}
