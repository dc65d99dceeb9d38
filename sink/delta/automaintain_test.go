package delta

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
)

// liveFiles is the number of data files of the table's latest snapshot.
func liveFiles(t *testing.T, dir string) int {
	t.Helper()
	tbl, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := tbl.Snapshot(context.Background(), -1)
	if err != nil {
		t.Fatal(err)
	}
	return len(s.files)
}

// diskFiles counts the Parquet data files under the table root.
func diskFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "_delta_log" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".parquet") {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAutoCompaction: a live query that adds a small file per batch keeps a
// bounded number of files; the compactions are commits of their own with
// dataChange=false, and the table always equals the oracle.
func TestAutoCompaction(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := newSink(t, dir, 64)
	oracle := map[oracleKey]int64{}
	maxLive, reported := 0, 0
	const batches = 400
	for b := 0; b < batches; b++ {
		// One new key per batch (a new miner in the current window), and
		// every 7th batch an older key counted again (an update).
		rows := []refRow{row(b/5, "live", minerName(b), 1)}
		if b%7 == 6 {
			old := b / 2
			k := oracleKey{baseTS + int64(old/5)*window, "live", minerName(old)}
			rows = append(rows, row(old/5, "live", minerName(old), oracle[k]+1))
		}
		for _, r := range rows {
			oracle[oracleKey{r.WS, r.Source, r.Miner}] = r.Count
		}
		prog, err := s.AddBatch(ctx, int64(b), mkBatch(rows))
		if err != nil {
			t.Fatalf("batch %d: %v", b, err)
		}
		// The maintenance of the previous batches is reported by this one.
		if n, err := strconv.Atoi(prog.Metrics[MetricAutoCompactRemoved]); err == nil {
			reported += n
		}
		s.waitMaintenance()
		if b%10 == 0 {
			maxLive = max(maxLive, len(s.snap.files))
		}
	}
	// minNumFiles small files + the newest left alone + the compacted ones.
	if limit := DefaultAutoCompactMinFiles + autoCompactSkipNewest + batches/64 + 4; maxLive > limit {
		t.Fatalf("%d live files at most, want <= %d", maxLive, limit)
	}
	got := tableRows(t, dir, -1)
	if len(got) != len(oracle) {
		t.Fatalf("%d rows, oracle %d", len(got), len(oracle))
	}
	for k, v := range oracle {
		if got[k] != v {
			t.Fatalf("%v = %d, oracle %d", k, got[k], v)
		}
	}
	tbl, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	hist, err := tbl.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	auto, removed := 0, 0
	for _, ci := range hist {
		if ci.Operation != "OPTIMIZE" {
			continue
		}
		if n, err := strconv.Atoi(fmt.Sprint(ci.OperationMetrics["numRemovedFiles"])); err == nil {
			removed += n
		}
		if ci.OperationParameters["auto"] != "true" {
			t.Fatalf("OPTIMIZE %d not marked auto: %v", ci.Version, ci.OperationParameters)
		}
		auto++
		acts, err := tbl.readCommit(ci.Version)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range acts {
			if (a.Add != nil && a.Add.DataChange) || (a.Remove != nil && a.Remove.DataChange) {
				t.Fatalf("OPTIMIZE %d changes data: %+v", ci.Version, a)
			}
		}
	}
	if auto == 0 {
		t.Fatal("no auto-compaction commit")
	}
	// The batches' sink metrics report the compactions (all but one still
	// unreported after the last batch).
	if reported == 0 || reported > removed {
		t.Fatalf("the batches reported %d files compacted away, the OPTIMIZE commits removed %d", reported, removed)
	}
	// Idempotent: compacting again right away finds nothing or compacts
	// the rest, and the rows stay.
	before := liveFiles(t, dir)
	if _, err := tbl.Optimize(ctx, OptimizeOptions{TargetFileRows: 64, MaxFileRows: 4, SkipNewest: autoCompactSkipNewest,
		MinFiles: DefaultAutoCompactMinFiles, Auto: true}); err != nil {
		t.Fatal(err)
	}
	if after := liveFiles(t, dir); after > before {
		t.Fatalf("re-run of the compaction grew the table: %d -> %d files", before, after)
	}
	if d := len(tableRows(t, dir, -1)); d != len(oracle) {
		t.Fatalf("after re-run: %d rows", d)
	}
}

// TestAutoCompactionOff: delta.autoOptimize.autoCompact=false keeps every file.
func TestAutoCompactionOff(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	if _, err := Create(ctx, dir, SinkSchema(), WithConfiguration(map[string]string{"delta.autoOptimize.autoCompact": "false"})); err != nil {
		t.Fatal(err)
	}
	s := newSink(t, dir, 64)
	for b := 0; b < 80; b++ {
		if _, err := s.AddBatch(ctx, int64(b), mkBatch([]refRow{row(b, "live", minerName(b), 1)})); err != nil {
			t.Fatal(err)
		}
		s.waitMaintenance()
	}
	if n := liveFiles(t, dir); n != 80 {
		t.Fatalf("%d live files, want 80 (compaction off)", n)
	}
}

// TestAutoVacuumHonoursRetention: files removed longer ago than
// delta.deletedFileRetentionDuration are deleted by the sink itself; the
// younger ones stay, so recent versions still read.
func TestAutoVacuumHonoursRetention(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	clk := streamtest.NewClock(time.Now())
	clock := clk.Now
	if _, err := Create(ctx, dir, SinkSchema(), WithClock(clock),
		WithConfiguration(map[string]string{"delta.deletedFileRetentionDuration": "interval 1 hour"})); err != nil {
		t.Fatal(err)
	}
	s, err := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: dir, TargetFileRows: 64, Logger: quietLog, Clock: clock})
	closeAtEnd(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(ctx, stream.SinkEnv{QueryID: "query-1"}); err != nil {
		t.Fatal(err)
	}
	const batches = 400
	for b := 0; b < batches; b++ {
		if _, err := s.AddBatch(ctx, int64(b), mkBatch([]refRow{row(b/5, "live", minerName(b%7), int64(b))})); err != nil {
			t.Fatal(err)
		}
		s.waitMaintenance()
		clk.Advance(time.Minute)
	}
	tbl, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	// Every batch and every compaction wrote files; 400 minutes ran and
	// the retention is 60, so most removed files are gone.
	hist, err := tbl.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	written := 0
	for _, ci := range hist {
		if n, ok := ci.OperationMetrics["numAddedFiles"].(string); ok {
			var k int
			fmt.Sscan(n, &k)
			written += k
		} else if n, ok := ci.OperationMetrics["numTargetFilesAdded"].(string); ok {
			var k int
			fmt.Sscan(n, &k)
			written += k
		}
	}
	n := diskFiles(t, dir)
	t.Logf("%d data files on disk of %d written", n, written)
	if written < batches || n > written*45/100 {
		t.Fatalf("%d data files on disk of %d written, want removed files older than the retention vacuumed", n, written)
	}
	latest, err := tbl.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	// A version from 10 minutes ago still reads: its files were removed
	// less than the retention ago.
	_ = tableRows(t, dir, latest.Version-10)
	_ = tableRows(t, dir, -1)
}

// TestExpiredLogCleanup: with delta.logRetentionDuration, the sink deletes
// the commits and checkpoints below the newest checkpoint older than the
// retention; the latest version reads unchanged and the log stays bounded.
func TestExpiredLogCleanup(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	clk := streamtest.NewClock(time.Now())
	clock := clk.Now
	if _, err := Create(ctx, dir, SinkSchema(), WithClock(clock),
		WithConfiguration(map[string]string{"delta.logRetentionDuration": "interval 1 hour"})); err != nil {
		t.Fatal(err)
	}
	s, err := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: dir, TargetFileRows: 64, Logger: quietLog, Clock: clock})
	closeAtEnd(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(ctx, stream.SinkEnv{QueryID: "query-1"}); err != nil {
		t.Fatal(err)
	}
	oracle := map[oracleKey]int64{}
	const batches = 300
	for b := 0; b < batches; b++ {
		r := row(b/5, "live", minerName(b), 1)
		oracle[oracleKey{r.WS, r.Source, r.Miner}] = 1
		if _, err := s.AddBatch(ctx, int64(b), mkBatch([]refRow{r})); err != nil {
			t.Fatal(err)
		}
		s.waitMaintenance()
		clk.Advance(time.Minute) // the files' own times stay real: every checkpoint expires
	}
	tbl, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	l, err := tbl.list()
	if err != nil {
		t.Fatal(err)
	}
	if len(l.commits) == 0 || l.commits[0] == 0 || len(l.commits) > 100 {
		t.Fatalf("%d commits left, first %v: want the expired ones cleaned up", len(l.commits), l.commits[:min(1, len(l.commits))])
	}
	if len(l.checkpoints) == 0 || l.checkpoints[0] > l.commits[0] {
		t.Fatalf("log does not start at a checkpoint: checkpoints %v, first commit %d", l.checkpoints, l.commits[0])
	}
	got := tableRows(t, dir, -1)
	if len(got) != len(oracle) {
		t.Fatalf("%d rows after the cleanup, want %d", len(got), len(oracle))
	}
	// The sink keeps writing on the cleaned log, and a fresh sink reopens it.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := newSink(t, dir, 64)
	if _, err := s2.AddBatch(ctx, batches, mkBatch([]refRow{row(0, "live", minerName(0), 5)})); err != nil {
		t.Fatal(err)
	}
	s2.waitMaintenance()
	if got := tableRows(t, dir, -1); got[oracleKey{baseTS, "live", minerName(0)}] != 5 {
		t.Fatalf("update after the cleanup: %v", got[oracleKey{baseTS, "live", minerName(0)}])
	}
}

// TestOptimizeRebase: an OPTIMIZE whose snapshot fell behind commits that
// left its input files live is committed at the next free version without
// rewriting anything, and the table keeps every row; one behind a commit
// that removed an input file is refused (errVersionTaken: start over).
func TestOptimizeRebase(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := newSink(t, dir, 64)
	s.o.AutoCompactMinFiles = -1
	oracle := map[oracleKey]int64{}
	add := func(b, win int, miner string) {
		r := row(win, "live", miner, int64(b+1))
		oracle[oracleKey{r.WS, r.Source, r.Miner}] = r.Count
		if _, err := s.AddBatch(ctx, int64(b), mkBatch([]refRow{r})); err != nil {
			t.Fatal(err)
		}
	}
	for b := range 4 {
		add(b, b, minerName(b)) // one file per window
	}
	plan := func() (*Snapshot, []action) {
		snap, err := s.table.Snapshot(ctx, -1)
		if err != nil {
			t.Fatal(err)
		}
		// Compact windows 0 and 1 into nothing but their removes: enough
		// to see which commits conflict.
		var removes []action
		for _, f := range snap.files {
			if r := snap.rangeOf(f); r.minWS <= baseTS+window {
				ts := time.Now().UnixMilli()
				removes = append(removes, action{Remove: &RemoveFile{Path: f.Path, DeletionTimestamp: &ts, DataChange: false}})
			}
		}
		if len(removes) != 2 {
			t.Fatalf("%d files in windows 0-1, want 2", len(removes))
		}
		return snap, removes
	}
	snap, removes := plan()
	add(4, 3, minerName(9)) // rewrites window 3's file only
	add(5, 5, minerName(5)) // a new window
	acts := append([]action{{CommitInfo: &CommitInfo{Operation: "OPTIMIZE"}}}, removes...)
	rebased, err := snap.commitRebasing(ctx, &s.mu, acts, removes, nil)
	if err != nil || rebased != 1 {
		t.Fatalf("commit past two unrelated batches = %d rebases, %v; want 1, nil", rebased, err)
	}
	if v := s.Version(); snap.Version != v+1 {
		t.Fatalf("OPTIMIZE committed at %d, the sink's last batch at %d", snap.Version, v)
	}
	got := tableRows(t, dir, -1)
	for k := range oracle {
		if k.ws <= baseTS+window {
			delete(oracle, k) // the test's OPTIMIZE dropped them on purpose
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(oracle) {
		t.Fatalf("table %v, want %v", got, oracle)
	}
	// A batch that rewrites an input file is a conflict.
	add(6, 2, minerName(2))
	snap, removes = plan2(t, s, ctx)
	add(7, 2, minerName(2)) // updates the key in that file: rewrites it
	acts = append([]action{{CommitInfo: &CommitInfo{Operation: "OPTIMIZE"}}}, removes...)
	if _, err := snap.commitRebasing(ctx, &s.mu, acts, removes, nil); err != errVersionTaken {
		t.Fatalf("commit past a batch that rewrote its input = %v, want errVersionTaken", err)
	}
}

// plan2 removes window 2's file from a fresh snapshot.
func plan2(t *testing.T, s *MergeSink, ctx context.Context) (*Snapshot, []action) {
	snap, err := s.table.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	var removes []action
	for _, f := range snap.files {
		if r := snap.rangeOf(f); r.minWS == baseTS+2*window {
			removes = append(removes, action{Remove: &RemoveFile{Path: f.Path, DataChange: false}})
		}
	}
	if len(removes) != 1 {
		t.Fatalf("%d files in window 2, want 1", len(removes))
	}
	return snap, removes
}

// TestAutoVacuumInSteps: the sink's own vacuum deletes at most
// maxVacuumPerRun files a run, the next maintenance continues at once (not
// half a retention later), and together they delete every expired file.
func TestAutoVacuumInSteps(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	clk := streamtest.NewClock(time.Now())
	clock := clk.Now
	if _, err := Create(ctx, dir, SinkSchema(), WithClock(clock),
		WithConfiguration(map[string]string{"delta.deletedFileRetentionDuration": "interval 1 hour"})); err != nil {
		t.Fatal(err)
	}
	s, err := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: dir, Logger: quietLog, Clock: clock, AutoCompactMinFiles: -1})
	closeAtEnd(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(ctx, stream.SinkEnv{QueryID: "query-1"}); err != nil {
		t.Fatal(err)
	}
	// Each batch rewrites the table's one file: 2*maxVacuumPerRun+10 files
	// removed, all expired two hours later.
	const removed = 2*maxVacuumPerRun + 10
	for b := int64(0); b <= removed; b++ {
		if _, err := s.AddBatch(ctx, b, mkBatch([]refRow{row(0, "live", minerName(0), b+1)})); err != nil {
			t.Fatal(err)
		}
	}
	if n := diskFiles(t, dir); n != removed+1 {
		t.Fatalf("%d data files on disk, want %d", n, removed+1)
	}
	clk.Advance(2 * time.Hour)
	var runs []int
	for range 4 {
		before := diskFiles(t, dir)
		s.vacuum(ctx, time.Hour)
		runs = append(runs, before-diskFiles(t, dir))
	}
	if want := []int{maxVacuumPerRun, maxVacuumPerRun, 10, 0}; !slices.Equal(runs, want) {
		t.Fatalf("files deleted per maintenance run %v, want %v", runs, want)
	}
	if rows := tableRows(t, dir, -1); rows[oracleKey{baseTS, "live", minerName(0)}] != removed+1 {
		t.Fatalf("rows after the vacuums = %v", rows)
	}
}

// TestMaintenanceWithoutCompaction: a live query of one-row batches, each
// rewriting its window's one file, never has the small files a compaction
// needs; vacuum and log cleanup still run on their own schedule, so the
// files on disk stay bounded by the retentions (they grew with every batch
// when both ran only after a compaction: a 10,000-block live run left
// 4,737 data files and 5,510 log entries).
func TestMaintenanceWithoutCompaction(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	clk := streamtest.NewClock(time.Now())
	clock := clk.Now
	if _, err := Create(ctx, dir, SinkSchema(), WithClock(clock), WithConfiguration(map[string]string{
		"delta.deletedFileRetentionDuration": "interval 1 hour",
		"delta.logRetentionDuration":         "interval 1 hour"})); err != nil {
		t.Fatal(err)
	}
	s, err := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: dir, Logger: quietLog, Clock: clock})
	closeAtEnd(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(ctx, stream.SinkEnv{QueryID: "query-1"}); err != nil {
		t.Fatal(err)
	}
	// 300 batches two minutes apart: ten hours, ten retentions.
	const batches = 300
	for b := int64(0); b < batches; b++ {
		if _, err := s.AddBatch(ctx, b, mkBatch([]refRow{row(0, "live", minerName(0), b+1)})); err != nil {
			t.Fatal(err)
		}
		s.waitMaintenance()
		clk.Advance(2 * time.Minute)
	}
	// Kept: the live file, those removed in the last hour (30), and up to
	// half a retention more (15) until the next vacuum is due.
	if n := diskFiles(t, dir); n > 1+30+15+2 {
		t.Fatalf("%d data files on disk after %d batches, want them bounded by the retention (at most 48)", n, batches)
	}
	des, err := os.ReadDir(filepath.Join(dir, "_delta_log"))
	if err != nil {
		t.Fatal(err)
	}
	commits := 0
	for _, de := range des {
		if strings.HasSuffix(de.Name(), ".json") {
			commits++
		}
	}
	// The log keeps the commits after the newest checkpoint older than the
	// retention: an hour of commits (30), half a retention more and a
	// checkpoint interval.
	if commits > 30+15+CheckpointInterval+2 {
		t.Fatalf("%d commits in the log after %d batches, want them bounded by the log retention", commits, batches)
	}
	if rows := tableRows(t, dir, -1); rows[oracleKey{baseTS, "live", minerName(0)}] != batches {
		t.Fatalf("rows after the maintenance = %v", rows)
	}
}
