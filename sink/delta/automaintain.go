package delta

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// Auto-maintenance defaults (Delta's delta.autoOptimize.autoCompact with
// minNumFiles 50). A file is small below DefaultTargetFileRows/16 rows; the
// autoCompactSkipNewest newest files are left to the next MERGE, which
// rewrites the files holding the windows it updates anyway.
const (
	DefaultAutoCompactMinFiles = 50
	autoCompactSkipNewest      = 8
)

// autoCompactEnabled reads delta.autoOptimize.autoCompact: on unless the
// table sets it to false (ethstream's sink adds a file per batch, so a
// table without compaction grows without bound).
func (m *MergeSink) autoCompactEnabled() bool {
	if m.o.AutoCompactMinFiles < 0 {
		return false
	}
	switch m.snap.Metadata.Configuration["delta.autoOptimize.autoCompact"] {
	case "false", "False", "FALSE":
		return false
	}
	return true
}

// autoMaintain runs after a committed batch: when at least minNumFiles
// small files (other than the newest) are live, a background goroutine
// compacts them by an OPTIMIZE commit of its own (dataChange=false,
// auto=true), off the batch's path; then, at most every half retention, it
// vacuums the files removed longer ago than delta.deletedFileRetentionDuration
// (and orphans that old). A MERGE that races the OPTIMIZE commit loses at
// most one attempt and re-plans on the fresher snapshot. Both steps are
// idempotent and crash-safe (a crash leaves at most unreferenced files,
// which a later vacuum deletes), and a failure is logged, never the
// batch's: the batch is committed. One maintenance runs at a time; Close
// waits for it. Called with m.mu held.
func (m *MergeSink) autoMaintain() {
	if !m.autoCompactEnabled() || m.maintaining.Load() {
		return
	}
	minFiles := m.o.AutoCompactMinFiles
	if minFiles == 0 {
		minFiles = DefaultAutoCompactMinFiles
	}
	o := OptimizeOptions{TargetFileRows: m.o.TargetFileRows, MaxFileRows: max(m.o.TargetFileRows/16, 1),
		SkipNewest: autoCompactSkipNewest, MinFiles: minFiles, Auto: true, Clock: m.o.Clock}
	if len(m.snap.optimizeBins(o)) == 0 {
		return // the cheap check, on the sink's own snapshot
	}
	retention := m.snap.tombstoneRetention()
	logRetention, cleanLogs := m.snap.logRetention()
	m.maintaining.Store(true)
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		defer m.maintaining.Store(false)
		m.maintain(context.Background(), o, retention)
		if cleanLogs {
			if n, err := m.table.cleanExpiredLogs(logRetention, m.o.Clock()); err != nil {
				m.log.Warn("delta log cleanup failed", "err", err)
			} else if n > 0 {
				m.log.Debug("delta log cleanup", "deleted", n, "retention", logRetention.String())
			}
		}
	}()
}

func (m *MergeSink) maintain(ctx context.Context, o OptimizeOptions, retention time.Duration) {
	res, err := m.table.Optimize(ctx, o)
	if err != nil {
		m.log.Warn("delta auto-compaction failed", "err", err)
		return
	}
	m.log.Debug("delta auto-compaction", "version", res.Version, "filesRemoved", res.FilesRemoved, "filesAdded", res.FilesAdded)
	now := m.o.Clock()
	if !m.lastVacuum.IsZero() && now.Sub(m.lastVacuum) < retention/2 {
		return
	}
	m.lastVacuum = now
	deleted, err := m.table.vacuum(ctx, retention, false, now)
	if err != nil {
		m.log.Warn("delta auto-vacuum failed", "err", err)
		return
	}
	if len(deleted) > 0 {
		m.log.Debug("delta auto-vacuum", "deleted", len(deleted), "retention", retention.String())
	}
}

// waitMaintenance waits for a running auto-maintenance (Close, tests).
func (m *MergeSink) waitMaintenance() { m.bg.Wait() }

// defaultLogRetention is delta.logRetentionDuration's default.
const defaultLogRetention = 30 * 24 * time.Hour

// logRetention is delta.logRetentionDuration, and false when the table sets
// delta.enableExpiredLogCleanup=false.
func (s *Snapshot) logRetention() (time.Duration, bool) {
	if s.Metadata.Configuration["delta.enableExpiredLogCleanup"] == "false" {
		return 0, false
	}
	if d, ok := parseInterval(s.Metadata.Configuration["delta.logRetentionDuration"]); ok {
		return d, true
	}
	return defaultLogRetention, true
}

// cleanExpiredLogs deletes the log entries Delta's expired-log cleanup
// deletes: with cp the newest checkpoint written before now - retention,
// every commit and checkpoint below cp. Every version newer than the cutoff
// keeps a checkpoint at or below it and the commits after, so it still
// reads (time travel to older versions ends); the newest checkpoint and
// the commits after it are never touched. Oldest first, so a crash leaves
// a log that starts later, never one with a gap.
func (t *Table) cleanExpiredLogs(retention time.Duration, now time.Time) (int, error) {
	l, err := t.list()
	if err != nil {
		return 0, err
	}
	cutoff := now.Add(-retention)
	cp := int64(-1)
	for _, c := range l.checkpoints {
		st, err := t.fs.Stat(t.checkpointPath(c))
		if err != nil || st.ModTime().After(cutoff) {
			break // ascending: later checkpoints are newer still
		}
		cp = c
	}
	if cp <= 0 {
		return 0, nil
	}
	var doomed []string
	for _, v := range l.commits {
		if v < cp {
			doomed = append(doomed, t.commitPath(v))
		}
	}
	for _, c := range l.checkpoints {
		if c < cp {
			doomed = append(doomed, t.checkpointPath(c))
		}
	}
	n := 0
	for _, p := range doomed {
		if err := t.fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return n, fmt.Errorf("clean up expired log %s: %w", p, err)
		}
		n++
	}
	return n, nil
}
