package delta

// Temp files in a table: which a writer removes at Open, and why that is
// safe.

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/ethstream/ethstream/internal/durable"
	"github.com/ethstream/ethstream/storage"
	"github.com/ethstream/ethstream/stream"
)

// tempGrace is how old a temp file in the table must be before a writer
// that cannot prove it is the table's only live writer deletes it as left
// by a crash: a temp file younger than this may be another writer's publish
// in progress.
const tempGrace = time.Hour

// Temp files a killed writer leaves in a table (durable's
// ".<name>.<16 hex>.tmp": _delta_log/.N.json.<hex>.tmp,
// _delta_log/.N.checkpoint.parquet.<hex>.tmp, .part-*.parquet.<hex>.tmp in
// the root) are never read: a commit names only published files, and a
// reader lists only published names. Deleting one is therefore always safe
// for the table; what it can break is a live writer's publish in progress,
// whose link (local) then fails and whose batch fails before its commit, to
// be re-run. So a sink removes every temp file at Open when it proves that
// no other writer is alive (sweepAll: the engine holds the checkpoint's
// lock or lease for the query, and the table records no other query's
// txn), and otherwise only those older than tempGrace.
//
// Local: the checkpoint lock is an OS lock the kernel releases when its
// holder dies, so holding it proves the query's previous run is dead, and
// with it every temp file that run was writing. S3: a publish there is one
// conditional PUT (If-None-Match), with no temp object, so temp keys come
// only from elsewhere (a copy of a local table, a foreign tool); the lease
// holder is the query's only writer, and a stale writer (one whose lease
// expired while it was paused) that PUTs a temp key late does no harm:
// temps are never read, and its conditional PUT of a commit is refused
// once the version exists. A maintenance command (table optimize, vacuum)
// run by hand while a query starts may lose a temp file and fail; it is
// then simply run again.

// sweepAll reports whether a sink opened with env on snapshot s may remove
// every temp file of the table (see above).
func sweepAll(env stream.SinkEnv, s *Snapshot) bool {
	if !env.Locked {
		return false
	}
	for app := range s.txns {
		if app != env.QueryID {
			return false // another query writes this table too
		}
	}
	return true
}

// cleanTemps deletes the temp files (durable.IsTemp) in the table root and
// _delta_log: all of them with all (sweepAll), else those whose
// modification time is more than tempGrace before now. It returns the
// number deleted.
func (t *Table) cleanTemps(now time.Time, all bool) (int, error) {
	cutoff := now.Add(-tempGrace)
	if all {
		cutoff = time.Unix(1<<62, 0) // no age limit
	}
	tmps, err := t.tempsBefore(cutoff)
	n := 0
	for _, p := range tmps {
		if err := t.fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return n, fmt.Errorf("remove stale temp file %s: %w", p, err)
		}
		n++
	}
	return n, err
}

// staleTemps lists the temp files in the table root and _delta_log older
// than tempGrace: abandoned by a writer that crashed (no publish takes that
// long), so deleting them cannot break a write in progress.
func (t *Table) staleTemps(now time.Time) ([]string, error) {
	return t.tempsBefore(now.Add(-tempGrace))
}

// tempsBefore lists the temp files in the table root and _delta_log last
// modified before cutoff.
func (t *Table) tempsBefore(cutoff time.Time) ([]string, error) {
	var out []string
	for _, dir := range []string{t.root, t.logDir} {
		infos, err := storage.ListInfo(t.fs, dir, durable.IsTemp)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return out, fmt.Errorf("list %s: %w", dir, err)
		}
		for _, st := range infos {
			if st.IsDir() || !st.ModTime().Before(cutoff) {
				continue
			}
			out = append(out, t.fs.PathJoin(dir, st.Name()))
		}
	}
	return out, nil
}
