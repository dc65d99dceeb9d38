package filelog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

// DefaultCompactInterval is Spark's
// spark.sql.streaming.fileSource.log.compactInterval default: log ids n
// with (n+1)%interval == 0 are written as "<n>.compact" holding every entry
// so far. A log that already has compact files keeps the interval they were
// written with (DeriveCompactInterval).
const DefaultCompactInterval = 10

// MaxLogID bounds the ids a log may hold: far beyond any real log (one id
// per admitting trigger; Spark itself takes the compact id as a 32-bit Int
// when deriving the interval), and small enough that id arithmetic cannot
// overflow and deriving the interval stays quick (about 2^20 steps).
const MaxLogID = 1 << 40

// Entry is one admitted file: Spark's FileEntry.
type Entry = checkpoint.FileEntry

// IsCompactID reports whether log id n is written as "<n>.compact".
func IsCompactID(n, interval int64) bool { return (n+1)%interval == 0 }

// DeriveCompactInterval is Spark's CompactibleFileStreamLog rule for a log
// holding exactly one compact file, latest: the interval must make latest a
// compaction id, so it is latest+1 when that is at most the default, else
// the smallest divisor of latest+1 that is at least the default when the
// default is below (latest+1)/2, else latest+1.
func DeriveCompactInterval(def, latest int64) int64 {
	n := latest + 1
	if n <= def || def >= n/2 {
		return n
	}
	// The smallest divisor of n from def up (n itself at worst), in
	// O(sqrt n) steps: each divisor i pairs with n/i.
	best := n
	for i := int64(1); i*i <= n; i++ {
		if n%i != 0 {
			continue
		}
		if i >= def {
			best = min(best, i)
		}
		if j := n / i; j >= def {
			best = min(best, j)
		}
	}
	return best
}

// Log is a file source's admission log in its metadata directory: a
// checkpoint.Log of Spark's FileStreamSource format with Spark's compaction
// policy (CompactibleFileStreamLog) on top, shared by every file source
// (s3archive, the parquet/json/csv sources). It is not safe for concurrent
// use; the engine calls a source from one goroutine.
type Log struct {
	// FS and Dir are where the log lives (stream.SourceEnv's).
	FS  vfs.FS
	Dir string
	// Retain is minBatchesToRetain: the log ids kept behind the newest.
	Retain int64
	// MapPath, when set, rewrites every path read (s3archive's move
	// records: the files at the archive's current location).
	MapPath func(string) string
	// Beside names subdirectories of Dir that belong to the source, not
	// the log (s3archive's moves/): a strict scan allows them.
	Beside []string

	// Set by Scan.
	interval      int64 // the compaction interval
	latestCompact int64 // newest compact id, -1 if none
	oldest        int64 // lowest id a file may exist for, -1 if none
}

// Interval is the compaction interval Scan derived.
func (l *Log) Interval() int64 { return l.interval }

// LatestCompact is the newest compact id, -1 if none.
func (l *Log) LatestCompact() int64 { return l.latestCompact }

// log is the directory as a checkpoint.Log; strict refuses names that are
// not log files.
func (l *Log) log(strict bool) checkpoint.Log[checkpoint.FileSourceID, []Entry] {
	return checkpoint.Log[checkpoint.FileSourceID, []Entry]{FS: l.FS, Dir: l.Dir, Codec: Codec{}, What: "source log", Strict: strict,
		Beside: l.Beside}
}

// key is the key of log id n: compacted when the interval says so.
func (l *Log) key(n int64) checkpoint.FileSourceID {
	return checkpoint.FileSourceID{ID: n, Compact: IsCompactID(n, l.interval)}
}

// FileName is the path of log id n.
func (l *Log) FileName(n int64) string { return l.log(true).Path(l.key(n)) }

// Scan reads the directory: it derives the compaction interval, checks the
// ids from the newest compact file on (the ones a reader needs) are
// gap-free and of the right form, and returns the first id to read (the
// newest compact id, or 0) and the next id to write. Ids below the newest
// compact file may be missing (pruned). Stale temp files left by a crash
// are removed (they were never published, so nothing refers to them). Any
// other name but moves/ (the move records, move.go) is CHECKPOINT_CORRUPT.
func (l *Log) Scan() (first, next int64, err error) {
	l.interval, l.latestCompact, l.oldest = DefaultCompactInterval, -1, -1
	lg := l.log(true)
	keys, err := lg.Recover()
	if err != nil {
		return 0, 0, err
	}
	files, err := checkpoint.SplitFileSource(lg, keys)
	if err != nil || len(files.All) == 0 {
		return 0, 0, err
	}
	if last := files.All[len(files.All)-1]; last.ID >= MaxLogID {
		return 0, 0, errcode.Corrupt(lg.Path(last), nil, "source log id %d is out of range", last.ID)
	}
	// Spark's three cases: no compact file, the default; two or more, the
	// distance of the newest two; one, derived from it.
	switch c := files.Compacts; {
	case len(c) >= 2:
		l.interval = c[0] - c[1]
	case len(c) == 1:
		l.interval = DeriveCompactInterval(DefaultCompactInterval, c[0])
	}
	if len(files.Compacts) > 0 {
		l.latestCompact = files.Compacts[0]
		first = files.Compacts[0]
	}
	l.oldest = files.All[0].ID
	for _, k := range files.Live {
		if k.Compact != IsCompactID(k.ID, l.interval) {
			return 0, 0, errcode.Corrupt(lg.Path(k), nil,
				"source log file %d has the wrong form (compaction interval %d)", k.ID, l.interval)
		}
	}
	return first, first + int64(len(files.Live)), nil
}

// Read returns the entries stored in file n: the entries of batch n, or for a
// compact file every entry of batches 0..n, with their paths mapped through
// the move records (at the archive's current location).
func (l *Log) Read(n int64) ([]Entry, error) {
	es, err := l.log(true).Get(l.key(n))
	if err != nil || l.MapPath == nil {
		return es, err
	}
	for i := range es {
		es[i].Path = l.MapPath(es[i].Path)
	}
	return es, nil
}

// Batch returns the entries admitted by log id n, in admission order. When
// file n was pruned they come from all, every admitted entry (what the
// newest compact file and the files after it hold), as Spark's
// FileStreamSourceLog.get falls back to the newest compact file.
func (l *Log) Batch(n int64, all []Entry) ([]Entry, error) {
	es, err := l.Read(n)
	if errors.Is(err, os.ErrNotExist) && n < l.latestCompact {
		es = nil
		for _, e := range all {
			if e.BatchID == n {
				es = append(es, e)
			}
		}
		if len(es) == 0 {
			return nil, errcode.Corrupt(l.FileName(n), nil,
				"source log id %d was pruned and the compact file %d holds no entry of it", n, l.latestCompact)
		}
		return es, nil
	}
	if err != nil || !IsCompactID(n, l.interval) {
		return es, err
	}
	var out []Entry
	for _, e := range es {
		if e.BatchID == n {
			out = append(out, e)
		}
	}
	return out, nil
}

// Write publishes file n holding entries through the checkpoint's log
// (temp file, fsync, link, fsync dir; a conditional PUT on S3): crash-safe
// and never overwriting, so a second writer gets checkpoint.ErrExists.
func (l *Log) Write(n int64, entries []Entry) error {
	if err := l.FS.MkdirAll(l.Dir, 0o755); err != nil {
		return fmt.Errorf("create source log dir %s: %w", l.Dir, err)
	}
	if err := l.log(true).Add(l.key(n), entries); err != nil {
		if errors.Is(err, checkpoint.ErrExists) {
			return fmt.Errorf("write source log %s: %w (is another query using this checkpoint?)", l.FileName(n), err)
		}
		return fmt.Errorf("write source log: %w", err)
	}
	if IsCompactID(n, l.interval) {
		l.latestCompact = n
	}
	if l.oldest < 0 {
		l.oldest = n
	}
	return nil
}

// PruneBound is Spark's CompactibleFileStreamLog.deleteExpiredLog bound
// after log id cur was added: files of ids below it may be deleted, -1 when
// none may. It keeps the newest compact id at or below
// cur+1-retain and every id after it, so at least retain ids (the ones the
// offset log's retained batches can name) stay readable from their own
// files, and the newest compact file is never below the bound.
func PruneBound(cur, retain, interval int64) int64 {
	minBatch := cur + 1 - retain
	if interval > minBatch {
		return -1
	}
	return minBatch - minBatch%interval - 1
}

// Prune deletes the log files Spark's deleteExpiredLog would after log id
// cur was added, lowest id first. It lists the directory only when a file
// below the bound may exist (once per interval ids). A crash midway leaves
// a suffix of the old files, which a reader never needs (it starts at the
// newest compact file) and the next prune deletes; after an error oldest
// stays below the bound, so the next prune lists again.
func (l *Log) Prune(cur int64) (removed int, err error) {
	bound := PruneBound(cur, l.Retain, l.interval)
	if bound < 0 || l.oldest < 0 || l.oldest >= bound {
		return 0, nil
	}
	// Not strict: a stray name found mid-run is left alone, as before any
	// listing refused it (scan does, at the next start).
	if removed, err = l.log(false).Purge(checkpoint.FileSourceID{ID: bound}); err != nil {
		return removed, err
	}
	l.oldest = bound
	return removed, nil
}

// Codec is Spark's FileStreamSource log format
// (checkpoint.FileSourceCodec) with what this source always writes checked
// on reading (ParseLog).
type Codec struct{ checkpoint.FileSourceCodec }

// Decode parses a log file with ParseLog.
func (Codec) Decode(path string, k checkpoint.FileSourceID, data []byte) ([]Entry, error) {
	return ParseLog(path, k.ID, k.Compact, data)
}

// FormatLog renders a log file exactly as Spark's FileStreamSourceLog does:
// "v1", then "\n" + one JSON object per entry, no trailing newline.
func FormatLog(entries []Entry) []byte { return checkpoint.EncodeFileSourceLog(entries) }

// ParseLog parses log file n (see s3archive's doc.go, Source log format) with the checkpoint's Spark
// FileStreamSourceLog parser, then checks what this source always writes:
// at least one entry, and in a compact file one of batch n itself. Anything
// but a well-formed file is a CHECKPOINT_CORRUPT error naming path.
func ParseLog(path string, n int64, compact bool, data []byte) ([]Entry, error) {
	es, err := checkpoint.ParseFileSourceLog(path, n, compact, data)
	if err != nil {
		return nil, err
	}
	if len(es) == 0 {
		return nil, errcode.Corrupt(path, nil, "source log holds no entries")
	}
	for _, e := range es {
		if e.BatchID == n {
			return es, nil
		}
	}
	return nil, errcode.Corrupt(path, nil, "compact source log holds no entry of batch %d", n)
}

// FormatOffset renders Spark's FileStreamSourceOffset.
func FormatOffset(n int64) stream.Offset {
	return stream.Offset(`{"logOffset":` + strconv.FormatInt(n, 10) + `}`)
}

// ParseOffset parses {"logOffset":n} or a bare n; nil means "no offset" (-1).
func ParseOffset(o stream.Offset) (int64, error) {
	if o == nil {
		return -1, nil
	}
	s := bytes.TrimSpace(o)
	if len(s) > 0 && s[0] != '{' {
		n, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("parse file source offset %q: want {\"logOffset\":n} or n >= 0", string(o))
		}
		return n, nil
	}
	var j struct {
		LogOffset *int64 `json:"logOffset"`
	}
	dec := json.NewDecoder(bytes.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil || dec.More() {
		return 0, fmt.Errorf("parse file source offset %q: want {\"logOffset\":n}", string(o))
	}
	if j.LogOffset == nil || *j.LogOffset < 0 {
		return 0, fmt.Errorf("parse file source offset %q: logOffset missing or negative", string(o))
	}
	return *j.LogOffset, nil
}
