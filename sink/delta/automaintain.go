package delta

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
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

// Sink metrics of the maintenance that finished since the previous batch
// (MergeSink.AddBatch reports them in its SinkProgress): maintenance runs
// after a batch's commit, off the batch's path, so the batch that started
// it cannot report it; the next one does. Durations are milliseconds.
const (
	MetricCheckpointMs       = "deltaCheckpointMs"
	MetricCheckpointVersion  = "deltaCheckpointVersion"
	MetricAutoCompactMs      = "autoCompactMs"
	MetricAutoCompactRemoved = "autoCompactFilesRemoved"
	MetricAutoCompactAdded   = "autoCompactFilesAdded"
	MetricVacuumMs           = "vacuumMs"
	MetricVacuumDeleted      = "vacuumFilesDeleted"
	MetricLogCleanupMs       = "logCleanupMs"
	MetricLogCleanupDeleted  = "logCleanupEntriesDeleted"
)

// maintReport accumulates the metrics above until AddBatch reports them.
type maintReport struct {
	mu sync.Mutex
	m  map[string]int64
}

func (r *maintReport) add(k string, v int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]int64{}
	}
	r.m[k] += v
}

func (r *maintReport) set(k string, v int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]int64{}
	}
	r.m[k] = v
}

// drainInto moves the accumulated metrics into m.
func (r *maintReport) drainInto(m map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, v := range r.m {
		m[k] = strconv.FormatInt(v, 10)
	}
	r.m = nil
}

// background queues job on the sink's maintenance goroutine, which runs
// the jobs one at a time in the order queued and exits when none is left.
// Close waits for them.
func (m *MergeSink) background(job func()) {
	m.bg.Add(1)
	m.bgMu.Lock()
	m.bgQueue = append(m.bgQueue, job)
	start := !m.bgRunning
	m.bgRunning = true
	m.bgMu.Unlock()
	if start {
		go m.runBackground()
	}
}

func (m *MergeSink) runBackground() {
	for {
		m.bgMu.Lock()
		if len(m.bgQueue) == 0 {
			m.bgRunning = false
			m.bgMu.Unlock()
			return
		}
		job := m.bgQueue[0]
		m.bgQueue = m.bgQueue[1:]
		m.bgMu.Unlock()
		job()
		m.bg.Done()
	}
}

// checkpointLater writes the checkpoint of s (just committed) off the
// batch's path, as Delta's post-commit checkpoint hook: the rows are taken
// now (s changes with the next batch), the file is written by the
// maintenance goroutine. A checkpoint still waiting there when the next one
// is due is replaced by it (only the newest one speeds up replay), so the
// queue stays bounded however slow the store. A failure is logged: the
// commit is durable, a missing checkpoint only slows replay. Called with
// m.mu held.
func (m *MergeSink) checkpointLater(s *Snapshot) {
	cp := &pendingCheckpoint{version: s.Version, rows: s.checkpointRows(m.o.Clock()), adds: int64(len(s.files))}
	m.bgMu.Lock()
	queued := m.nextCheckpoint != nil
	m.nextCheckpoint = cp
	m.bgMu.Unlock()
	if queued {
		return
	}
	m.background(func() {
		m.bgMu.Lock()
		cp := m.nextCheckpoint
		m.nextCheckpoint = nil
		m.bgMu.Unlock()
		t0 := time.Now()
		if err := m.table.writeCheckpointRows(cp.version, cp.rows, cp.adds); err != nil {
			m.log.Warn("delta checkpoint failed", "version", cp.version, "err", err)
			return
		}
		m.report.add(MetricCheckpointMs, time.Since(t0).Milliseconds())
		m.report.set(MetricCheckpointVersion, cp.version)
	})
}

// pendingCheckpoint is a checkpoint's content, taken at its version.
type pendingCheckpoint struct {
	version int64
	rows    []cpRow
	adds    int64
}

// autoMaintain runs after a committed batch and queues, off the batch's
// path, what is due of three steps, each on its own schedule:
//   - compaction, when at least minNumFiles small files (other than the
//     newest) are live: an OPTIMIZE commit of its own (dataChange=false,
//     auto=true), published under the sink's lock and rebased past the
//     batches committed meanwhile (commitRebasing), so a batch never loses
//     its version to it;
//   - vacuum of the files removed longer ago than
//     delta.deletedFileRetentionDuration (and orphans that old), at most
//     every half retention;
//   - cleanup of the log entries older than delta.logRetentionDuration, at
//     most every half log retention.
//
// Vacuum and cleanup delete in bounded steps (maxVacuumPerRun,
// maxLogCleanupPerRun); one that hit its bound is due again after the
// next batch, so a backlog drains however fast batches come. They used to
// run only after a compaction, which a query of one-block batches (each
// rewriting its window's file) reaches rarely: a 10,000-block live run
// left 4,737 data files and 5,510 log entries. All steps are idempotent
// and crash-safe (a crash leaves at most unreferenced files, which a
// later vacuum deletes), and a failure is logged, never the batch's: the
// batch is committed. One maintenance runs at a time; Close waits for it.
// Called with m.mu held.
func (m *MergeSink) autoMaintain() {
	if !m.autoCompactEnabled() || m.maintaining.Load() {
		return
	}
	minFiles := m.o.AutoCompactMinFiles
	if minFiles == 0 {
		minFiles = DefaultAutoCompactMinFiles
	}
	o := OptimizeOptions{TargetFileRows: m.o.TargetFileRows, MaxFileRows: max(m.o.TargetFileRows/16, 1),
		SkipNewest: autoCompactSkipNewest, MinFiles: minFiles, Auto: true, Clock: m.o.Clock, commitLock: &m.mu}
	compact := len(m.snap.optimizeBins(o)) > 0 // the cheap check, on the sink's own snapshot
	retention := m.snap.tombstoneRetention()
	logRetention, cleanLogs := m.snap.logRetention()
	// maintaining is false, so the maintenance goroutine is done with
	// lastVacuum and lastLogCleanup (its Store(false) came after).
	now := m.o.Clock()
	vacuum := due(m.lastVacuum, now, retention)
	clean := cleanLogs && due(m.lastLogCleanup, now, logRetention)
	if !compact && !vacuum && !clean {
		return
	}
	m.maintaining.Store(true)
	m.background(func() {
		defer m.maintaining.Store(false)
		ctx := context.Background()
		if compact && !m.compact(ctx, o) {
			return
		}
		if vacuum {
			m.vacuum(ctx, retention)
		}
		if clean {
			m.cleanLogs(logRetention)
		}
	})
}

// due reports whether a step last completed at last (zero: never in this
// sink) is due again at now: every half retention.
func due(last, now time.Time, retention time.Duration) bool {
	return last.IsZero() || now.Sub(last) >= retention/2
}

// compact runs the auto-compaction; false if it failed.
func (m *MergeSink) compact(ctx context.Context, o OptimizeOptions) bool {
	t0 := time.Now()
	res, err := m.table.Optimize(ctx, o)
	if err != nil {
		m.log.Warn("delta auto-compaction failed", "err", err)
		return false
	}
	m.report.add(MetricAutoCompactMs, time.Since(t0).Milliseconds())
	m.report.add(MetricAutoCompactRemoved, int64(res.FilesRemoved))
	m.report.add(MetricAutoCompactAdded, int64(res.FilesAdded))
	m.log.Debug("delta auto-compaction", "version", res.Version, "filesRemoved", res.FilesRemoved, "filesAdded", res.FilesAdded, "rebased", res.Rebased)
	return true
}

// vacuum runs one bounded auto-vacuum step; one that did not reach its
// bound is complete until the next is due.
func (m *MergeSink) vacuum(ctx context.Context, retention time.Duration) {
	now := m.o.Clock()
	t0 := time.Now()
	deleted, err := m.table.vacuumAtMost(ctx, retention, false, now, maxVacuumPerRun, false)
	if err != nil {
		m.log.Warn("delta auto-vacuum failed", "err", err)
		return
	}
	if len(deleted) < maxVacuumPerRun {
		m.lastVacuum = now // done; a full run leaves more for the next batch
	}
	m.report.add(MetricVacuumMs, time.Since(t0).Milliseconds())
	m.report.add(MetricVacuumDeleted, int64(len(deleted)))
	if len(deleted) > 0 {
		m.log.Debug("delta auto-vacuum", "deleted", len(deleted), "retention", retention.String())
	}
}

// cleanLogs runs one bounded expired-log cleanup step, complete as vacuum's.
func (m *MergeSink) cleanLogs(logRetention time.Duration) {
	now := m.o.Clock()
	t0 := time.Now()
	n, err := m.table.cleanExpiredLogs(logRetention, now)
	if err != nil {
		m.log.Warn("delta log cleanup failed", "err", err)
		return
	}
	if n < maxLogCleanupPerRun {
		m.lastLogCleanup = now
	}
	m.report.add(MetricLogCleanupMs, time.Since(t0).Milliseconds())
	m.report.add(MetricLogCleanupDeleted, int64(n))
	if n > 0 {
		m.log.Debug("delta log cleanup", "deleted", n, "retention", logRetention.String())
	}
}

// waitMaintenance waits for the queued maintenance (Close, tests).
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

// maxVacuumPerRun bounds the data files one automatic vacuum deletes, as
// maxLogCleanupPerRun bounds the log entries: maintenance in small steps
// beside the live batches, never one burst of deletes. A run that reaches it
// is continued after the next batch instead of waiting half a retention.
const maxVacuumPerRun = 128

// maxLogCleanupPerRun bounds the log entries one cleanup deletes, so that
// a backlog (a retention just shortened, a query restarted after weeks) is
// spread over the maintenance runs instead of one long burst of deletions
// beside the batches; a live query adds about one entry per batch, and a
// run that reaches the bound is continued after the next batch.
const maxLogCleanupPerRun = 128

// cleanExpiredLogs deletes the log entries Delta's expired-log cleanup
// deletes: with cp the newest checkpoint written before now - retention,
// every commit and checkpoint below cp, at most maxLogCleanupPerRun of
// them per call, oldest version first. Every version newer than the cutoff
// keeps a checkpoint at or below it and the commits after, so it still
// reads (time travel to older versions ends); the newest checkpoint and
// the commits after it are never touched. Oldest first, so a crash (or
// the bound) leaves a log that starts later, never one with a gap.
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
	type entry struct {
		v    int64
		path string
	}
	var doomed []entry
	for _, v := range l.commits {
		if v < cp {
			doomed = append(doomed, entry{v, t.commitPath(v)})
		}
	}
	for _, c := range l.checkpoints {
		if c < cp {
			doomed = append(doomed, entry{c, t.checkpointPath(c)})
		}
	}
	sort.SliceStable(doomed, func(i, j int) bool { return doomed[i].v < doomed[j].v })
	if len(doomed) > maxLogCleanupPerRun {
		doomed = doomed[:maxLogCleanupPerRun]
	}
	n := 0
	for _, e := range doomed {
		p := e.path
		if err := t.fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return n, fmt.Errorf("clean up expired log %s: %w", p, err)
		}
		n++
	}
	return n, nil
}
