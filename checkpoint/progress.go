package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The progress log (doc.go, "progress/"): segments of bounded size, so an
// append costs one segment at most on a store whose appends rewrite the
// object (S3), and a retention, so weeks of batches do not grow it without
// bound.
const (
	// ProgressDir holds the segments of the progress log (format 2).
	ProgressDir = "progress"
	// ProgressFile is the progress log of format 1, one file; it is read
	// (before the segments) and never written.
	ProgressFile = "progress.jsonl"
	// ProgressSegmentBytes: a writer starts a new segment rather than grow
	// one past this size.
	ProgressSegmentBytes = 256 << 10
	// ProgressRetainBytes: when a writer starts a segment, the oldest
	// segments are deleted while the newer ones hold at least this much.
	ProgressRetainBytes = 8 << 20
	progressSegmentExt  = ".jsonl"
	progressSegmentLen  = 20 // digits of a segment number
)

// ProgressSegment is one file of a checkpoint's progress log.
type ProgressSegment struct {
	// Seq is the segment number; -1 for the format 1 file.
	Seq  int64
	Path string
	Size int64
}

// ProgressSegmentName is the file name of segment seq.
func ProgressSegmentName(seq int64) string {
	return fmt.Sprintf("%0*d%s", progressSegmentLen, seq, progressSegmentExt)
}

func parseProgressSegment(name string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, progressSegmentExt)
	if !ok || len(digits) != progressSegmentLen {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil
}

// ProgressSegments lists the checkpoint's progress log in reading order:
// the format 1 file if it exists, then the segments by number. Names in
// progress/ that are not segment names are ignored. A checkpoint without
// a progress log gives none.
func (d Dir) ProgressSegments() ([]ProgressSegment, error) {
	var out []ProgressSegment
	legacy := d.Join(ProgressFile)
	if st, err := d.FS.Stat(legacy); err == nil {
		out = append(out, ProgressSegment{Seq: -1, Path: legacy, Size: st.Size()})
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("stat progress log %s: %w", legacy, err)
	}
	dir := d.Join(ProgressDir)
	segs, err := listSegments(d.FS, dir)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].Seq < segs[j].Seq })
	return append(out, segs...), nil
}

// infoLister is a store that lists a directory with each entry's size in
// one request per page (package storage's S3 store and router), instead of
// a Stat (a HEAD on S3) per entry.
type infoLister interface {
	ListInfo(dir string, match func(name string) bool) ([]vfs.FileInfo, error)
}

// listSegments lists the segments in dir with their sizes, in any order.
func listSegments(fs vfs.FS, dir string) ([]ProgressSegment, error) {
	var segs []ProgressSegment
	isSeg := func(n string) bool { _, ok := parseProgressSegment(n); return ok }
	if l, ok := fs.(infoLister); ok {
		infos, err := l.ListInfo(dir, isSeg)
		if err != nil {
			return nil, fmt.Errorf("list progress log %s: %w", dir, err)
		}
		for _, fi := range infos {
			seq, _ := parseProgressSegment(fi.Name())
			segs = append(segs, ProgressSegment{Seq: seq, Path: fs.PathJoin(dir, fi.Name()), Size: fi.Size()})
		}
		return segs, nil
	}
	names, err := fs.List(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("list progress log %s: %w", dir, err)
	}
	for _, n := range names {
		if !isSeg(n) {
			continue
		}
		seq, _ := parseProgressSegment(n)
		p := fs.PathJoin(dir, n)
		st, err := fs.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted by the writer's retention meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("stat progress log %s: %w", p, err)
		}
		segs = append(segs, ProgressSegment{Seq: seq, Path: p, Size: st.Size()})
	}
	return segs, nil
}

// progressLog is a Writer's view of the progress log, loaded at its first
// append and kept up to date by its own appends (one writer holds the lock).
type progressLog struct {
	loaded bool
	segs   []ProgressSegment
	// open: the newest segment may take more lines (it ends with a
	// complete line, or is empty).
	open bool
}

// AppendProgress appends one line to the progress log: to the newest
// segment while it stays within ProgressSegmentBytes and ends with a
// complete line, else to a new segment, after which the oldest segments
// beyond ProgressRetainBytes are deleted. It does not fsync: the log is
// informational, and readers skip a torn final line.
func (w *Writer) AppendProgress(line []byte) error {
	pl := &w.progress
	if !pl.loaded {
		segs, err := w.ProgressSegments()
		if err != nil {
			return err
		}
		pl.segs, pl.loaded = segs, true
		if n := len(segs); n > 0 && segs[n-1].Seq >= 0 {
			pl.open, err = endsWithNewline(w.FS, segs[n-1])
			if err != nil {
				return err
			}
		}
	}
	need := int64(len(line) + 1)
	n := len(pl.segs)
	if n == 0 || pl.segs[n-1].Seq < 0 || !pl.open || (pl.segs[n-1].Size > 0 && pl.segs[n-1].Size+need > ProgressSegmentBytes) {
		seq := int64(0)
		if n > 0 {
			seq = pl.segs[n-1].Seq + 1
		}
		dir := w.Join(ProgressDir)
		if err := w.FS.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create progress log %s: %w", dir, err)
		}
		pl.segs = append(pl.segs, ProgressSegment{Seq: seq, Path: w.FS.PathJoin(dir, ProgressSegmentName(seq))})
		pl.open = true
		if err := w.retainProgress(); err != nil {
			return err
		}
	}
	cur := &pl.segs[len(pl.segs)-1]
	if err := appendLine(w.FS, cur.Path, line, false); err != nil {
		pl.open = false // possibly torn: the next line starts a new segment
		return err
	}
	cur.Size += need
	return nil
}

// retainProgress deletes the oldest segments (and the format 1 file) while
// the newer ones hold at least ProgressRetainBytes, oldest first.
func (w *Writer) retainProgress() error {
	pl := &w.progress
	var total int64
	for _, s := range pl.segs {
		total += s.Size
	}
	for len(pl.segs) > 1 && total-pl.segs[0].Size >= ProgressRetainBytes {
		old := pl.segs[0]
		if err := w.FS.Remove(old.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("delete progress log %s: %w", old.Path, err)
		}
		total -= old.Size
		pl.segs = pl.segs[1:]
	}
	return nil
}

// endsWithNewline reports whether segment s is empty or ends with "\n".
func endsWithNewline(fs vfs.FS, s ProgressSegment) (bool, error) {
	if s.Size == 0 {
		return true, nil
	}
	f, err := fs.Open(s.Path)
	if err != nil {
		return false, fmt.Errorf("open progress log %s: %w", s.Path, err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], s.Size-1); err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("read progress log %s: %w", s.Path, err)
	}
	return b[0] == '\n', nil
}
