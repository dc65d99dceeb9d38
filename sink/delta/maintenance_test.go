package delta

import (
	"bytes"
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/stream"
)

func TestOptimizeCompactsAndKeepsRows(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := newSink(t, dir, 0)
	for b := int64(0); b < 12; b++ {
		var rows []refRow
		for m := 0; m < 5; m++ {
			rows = append(rows, row(int(b), "live", minerName(m), b*10+int64(m)))
		}
		if _, err := s.AddBatch(ctx, b, mkBatch(rows)); err != nil {
			t.Fatal(err)
		}
	}
	before := tableRows(t, dir, -1)
	tbl, _ := Open(ctx, dir)
	snap, _ := tbl.Snapshot(ctx, -1)
	nBefore := len(snap.Files())
	if nBefore != 12 {
		t.Fatalf("%d files before optimize, want 12", nBefore)
	}
	res, err := tbl.Optimize(ctx, OptimizeOptions{TargetFileRows: 25})
	if err != nil {
		t.Fatal(err)
	}
	// 60 rows, 25 per file, runs of small files (5 rows each) in window order.
	if res.FilesRemoved != 12 || res.FilesAdded != 3 || res.Rows != 60 || res.Version != snap.Version+1 {
		t.Fatalf("result = %+v", res)
	}
	after := tableRows(t, dir, -1)
	if len(after) != len(before) {
		t.Fatalf("rows %d -> %d", len(before), len(after))
	}
	for k, v := range before {
		if after[k] != v {
			t.Fatalf("key %v: %d -> %d", k, v, after[k])
		}
	}
	data, _ := os.ReadFile(tbl.commitPath(res.Version))
	if strings.Contains(string(data), `"dataChange":true`) || !strings.Contains(string(data), `"operation":"OPTIMIZE"`) {
		t.Fatalf("optimize commit:\n%s", data)
	}
	// Time travel still sees the old files, and the sink keeps going on
	// top of the optimized table (its cached snapshot catches up).
	if got := tableRows(t, dir, snap.Version); len(got) != 60 {
		t.Fatalf("time travel rows = %d", len(got))
	}
	if _, err := s.AddBatch(ctx, 12, mkBatch([]refRow{row(11, "live", minerName(0), 999)})); err != nil {
		t.Fatal(err)
	}
	if got := tableRows(t, dir, -1); got[oracleKey{baseTS + 11*window, "live", minerName(0)}] != 999 || len(got) != 60 {
		t.Fatalf("after optimize+merge: %d rows", len(got))
	}
	// A second optimize with nothing small left to pair does nothing.
	res2, err := tbl.Optimize(ctx, OptimizeOptions{TargetFileRows: 5})
	if err != nil || res2.FilesRemoved != 0 {
		t.Fatalf("second optimize = %+v, %v", res2, err)
	}
}

func TestVacuumRetention(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := newSink(t, dir, 0)
	if _, err := s.AddBatch(ctx, 0, mkBatch([]refRow{row(0, "a", "m", 1)})); err != nil {
		t.Fatal(err)
	}
	first := s.snap.Files()[0].Path
	if _, err := s.AddBatch(ctx, 1, mkBatch([]refRow{row(0, "a", "m", 2)})); err != nil {
		t.Fatal(err)
	}
	live := s.snap.Files()[0].Path
	orphan := filepath.Join(dir, "part-00000-orphan-c000.snappy.parquet")
	os.WriteFile(orphan, []byte("x"), 0o644)
	old := time.Now().Add(-48 * time.Hour)
	os.Chtimes(orphan, old, old)
	tbl, _ := Open(ctx, dir)

	// Within the retention: the tombstoned file is kept, the old orphan goes.
	got, err := tbl.vacuum(ctx, 24*time.Hour, true, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "part-00000-orphan-c000.snappy.parquet" {
		t.Fatalf("dry run = %v", got)
	}
	if _, err := os.Stat(orphan); err != nil {
		t.Fatal("dry run deleted a file")
	}
	// A week later (files are old, the remove is older than the retention):
	// the removed file and the orphan go, the live file stays.
	later := time.Now().Add(8 * 24 * time.Hour)
	got, err = tbl.vacuum(ctx, 168*time.Hour, false, later)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !contains(got, first) || contains(got, live) {
		t.Fatalf("vacuum = %v (first %s live %s)", got, first, live)
	}
	for _, p := range []string{orphan, filepath.Join(dir, first)} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s still there", p)
		}
	}
	if rows := tableRows(t, dir, -1); len(rows) != 1 {
		t.Fatalf("rows after vacuum = %v", rows)
	}
	if _, err := os.Stat(filepath.Join(dir, "_delta_log", "00000000000000000000.json")); err != nil {
		t.Fatal("vacuum touched the log")
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestShowSinkTable(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := newSink(t, dir, 0)
	if _, err := s.AddBatch(ctx, 0, mkBatch([]refRow{row(0, "a", "m1", 3), row(1, "b", "m,2", 4)})); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddBatch(ctx, 1, mkBatch([]refRow{row(0, "a", "m1", 5)})); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Show(ctx, &buf, dir, FormatCSV, -1); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"window_start", "window_end", "source", "miner", "count"},
		{"2024-05-01T10:00:00Z", "2024-05-01T10:05:00Z", "a", "m1", "5"},
		{"2024-05-01T10:05:00Z", "2024-05-01T10:10:00Z", "b", "m,2", "4"},
	}
	if len(recs) != len(want) {
		t.Fatalf("show = %v", recs)
	}
	for i := range want {
		if strings.Join(recs[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("row %d = %v, want %v", i, recs[i], want[i])
		}
	}
	buf.Reset()
	if err := Show(ctx, &buf, "file://"+dir, FormatJSONL, 1); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || lines[0] != `{"window_start":"2024-05-01T10:00:00Z","window_end":"2024-05-01T10:05:00Z","source":"a","miner":"m1","count":3}` {
		t.Fatalf("jsonl v1 = %q", lines)
	}
	if err := Show(ctx, &buf, dir, "xml", -1); codeOf(err) == "" {
		t.Fatalf("bad format err = %v", err)
	}
}

// TestVacuumStaleTemps: vacuum removes the temp files a killed writer left
// in _delta_log and the root once they are older than any publish in
// progress, and keeps younger ones (another writer's publish).
func TestVacuumStaleTemps(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := newSink(t, dir, 0)
	if _, err := s.AddBatch(ctx, 0, mkBatch([]refRow{row(0, "a", "m", 1)})); err != nil {
		t.Fatal(err)
	}
	logTmp := filepath.Join(dir, "_delta_log", ".00000000000000000002.json.0123456789abcdef.tmp")
	dataTmp := filepath.Join(dir, ".part-00000-x-c000.snappy.parquet.0123456789abcdef.tmp")
	young := filepath.Join(dir, "_delta_log", ".00000000000000000003.json.fedcba9876543210.tmp")
	old := time.Now().Add(-2 * time.Hour)
	for _, p := range []string{logTmp, dataTmp, young} {
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{logTmp, dataTmp} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	tbl, _ := Open(ctx, dir)
	got, err := tbl.vacuum(ctx, 168*time.Hour, true, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !contains(got, "_delta_log/.00000000000000000002.json.0123456789abcdef.tmp") || !contains(got, ".part-00000-x-c000.snappy.parquet.0123456789abcdef.tmp") {
		t.Fatalf("dry run = %v", got)
	}
	if _, err := tbl.vacuum(ctx, 168*time.Hour, false, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{logTmp, dataTmp} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s still there", p)
		}
	}
	if _, err := os.Stat(young); err != nil {
		t.Fatal("vacuum removed a temp file of a publish that may be in progress")
	}
}

// TestVacuumAtMost: a bounded vacuum deletes at most its limit, a later run
// continues, the union is what one unbounded vacuum deletes, and the live
// files stay throughout.
func TestVacuumAtMost(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := newSink(t, dir, 0)
	for b := int64(0); b < 8; b++ {
		if _, err := s.AddBatch(ctx, b, mkBatch([]refRow{row(0, "a", "m", b+1)})); err != nil {
			t.Fatal(err)
		}
	}
	live := s.snap.Files()[0].Path
	tbl, _ := Open(ctx, dir)
	later := time.Now().Add(8 * 24 * time.Hour)
	want, err := tbl.vacuum(ctx, 168*time.Hour, true, later)
	if err != nil || len(want) != 7 {
		t.Fatalf("dry run = %v, %v: want the 7 replaced files", want, err)
	}
	var all []string
	for run := 0; run < 4; run++ {
		got, err := tbl.vacuumAtMost(ctx, 168*time.Hour, false, later, 3, true)
		if err != nil {
			t.Fatal(err)
		}
		if n := min(3, 7-len(all)); len(got) != n {
			t.Fatalf("run %d deleted %d files, want %d", run, len(got), n)
		}
		all = append(all, got...)
	}
	slices.Sort(all)
	slices.Sort(want)
	if !slices.Equal(all, want) {
		t.Fatalf("bounded runs deleted %v, one vacuum would delete %v", all, want)
	}
	if _, err := os.Stat(filepath.Join(dir, live)); err != nil {
		t.Fatalf("the live file went: %v", err)
	}
	if rows := tableRows(t, dir, -1); len(rows) != 1 || rows[oracleKey{baseTS, "a", "m"}] != 8 {
		t.Fatalf("rows after the vacuums = %v", rows)
	}
}

// TestOptimizeAnyTable: OPTIMIZE compacts a table of any query's output
// (not only the reference table's) without changing a row, the compacted
// file sorted by the key, and the MERGE goes on updating its rows; a table
// of a schema the sink does not write is refused.
func TestOptimizeAnyTable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m, err := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: dir, Logger: quietLog, TargetFileRows: 1, AutoCompactMinFiles: -1})
	closeAtEnd(t, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Open(ctx, stream.SinkEnv{QueryID: "q", Schema: generalSchema()}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.AddBatch(ctx, 0, generalBatch(nil, [4]any{int64(2), "0xbb", int64(1), 1.5}, [4]any{int64(1), "0xaa", int64(5), nil}, [4]any{int64(1), "0xbb", int64(7), 7.0})); err != nil {
		t.Fatal(err)
	}
	before := showCSV(t, dir)
	tbl, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tbl.Optimize(ctx, OptimizeOptions{TargetFileRows: 100})
	if err != nil || res.FilesRemoved != 3 || res.FilesAdded != 1 || res.Rows != 3 {
		t.Fatalf("optimize: %+v %v", res, err)
	}
	// One file, in key order: Show prints its rows as they are stored.
	want := "window_start,window_end,miner,gas,avg_gas\n" +
		"1970-01-01T01:00:00Z,1970-01-01T02:00:00Z,0xaa,5,\n" +
		"1970-01-01T01:00:00Z,1970-01-01T02:00:00Z,0xbb,7,7\n" +
		"1970-01-01T02:00:00Z,1970-01-01T03:00:00Z,0xbb,1,1.5\n"
	if got := showCSV(t, dir); got != want || !sort3(got, before) {
		t.Fatalf("after optimize\n%s\nwant\n%s", got, want)
	}
	if _, err := m.AddBatch(ctx, 1, generalBatch(nil, [4]any{int64(1), "0xaa", int64(6), 2.0})); err != nil {
		t.Fatal(err)
	}
	if got := showCSV(t, dir); !sort3(got, strings.Replace(want, "0xaa,5,\n", "0xaa,6,2\n", 1)) {
		t.Fatalf("after a MERGE\n%s", got)
	}
	foreign := copyTable(t, filepath.Join(goldenDir(t), "table_with_null_stats_in_notnull_struct"))
	ft, err := Open(ctx, foreign)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ft.Optimize(ctx, OptimizeOptions{}); codeOf(err) != CodeUnsupportedFeature {
		t.Fatalf("a foreign table: %v", err)
	}
}
