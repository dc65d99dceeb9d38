package engine

import (
	"encoding/json"
	"math"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/stream"
)

// Listener receives progress events. Calls come from the query's goroutine,
// one at a time; a slow listener delays the next batch.
type Listener interface {
	OnProgress(p *stream.Progress)
}

// ListenerFunc adapts a function to Listener.
type ListenerFunc func(p *stream.Progress)

// OnProgress calls f(p).
func (f ListenerFunc) OnProgress(p *stream.Progress) { f(p) }

// rate returns n per second over d, or nil (omitted, Spark's NaN) if d is 0.
func rate(n int64, d time.Duration) *float64 {
	if d <= 0 {
		return nil
	}
	r := float64(n) / d.Seconds()
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return nil
	}
	return &r
}

// isoTime formats ms since the epoch as Spark does: 2026-11-29T17:39:12.000Z.
func isoTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// LineListener is a Listener that also takes the event's JSON encoding:
// the engine marshals each event once, appends that line to the
// checkpoint's progress log and hands every LineListener the same bytes
// (read-only; they may be kept) in place of calling OnProgress.
type LineListener interface {
	Listener
	OnProgressLine(p *stream.Progress, line []byte)
}

// JSONLListener appends every event as one JSON line to a file (the run's
// --progress FILE), without fsync: progress is informational. The first
// write error is kept in Err and later events are dropped. Not safe for
// concurrent use (the engine calls listeners from one goroutine).
type JSONLListener struct {
	FS   vfs.FS
	Path string
	Err  error

	dirMade bool
}

// OnProgress appends p, encoded here (the engine calls OnProgressLine with
// the encoding it made once).
func (l *JSONLListener) OnProgress(p *stream.Progress) {
	if l.Err != nil {
		return
	}
	line, err := json.Marshal(p)
	if err != nil {
		l.Err = err
		return
	}
	l.OnProgressLine(p, line)
}

// OnProgressLine appends line, p's encoding. The first event creates the
// file's missing directories: an event means the start was not refused, so a
// refused start still creates nothing.
func (l *JSONLListener) OnProgressLine(_ *stream.Progress, line []byte) {
	if l.Err != nil {
		return
	}
	if !l.dirMade {
		if l.Err = l.FS.MkdirAll(filepath.Dir(l.Path), 0o755); l.Err != nil {
			return
		}
		l.dirMade = true
	}
	l.Err = checkpoint.AppendLineNoSync(l.FS, l.Path, line)
}
