package delta

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/stream"
)

const window = 5 * 60 * 1_000_000 // 5 minutes in µs

var baseTS = time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC).UnixMicro()

type oracleKey struct {
	ws         int64
	src, miner string
}

// mkBatch builds an engine batch with the sink's columns (nulls as the
// rows' null bits say).
func mkBatch(rows []refRow) *stream.Batch {
	b := &stream.Batch{Len: len(rows), Columns: []stream.Column{
		{Name: "window_start", Type: stream.Timestamp}, {Name: "window_end", Type: stream.Timestamp},
		{Name: "source", Type: stream.String}, {Name: "miner", Type: stream.String}, {Name: "count", Type: stream.Int64},
	}}
	for i, r := range rows {
		b.Columns[0].Int64s = append(b.Columns[0].Int64s, r.WS)
		b.Columns[1].Int64s = append(b.Columns[1].Int64s, r.WE)
		b.Columns[2].Strings = append(b.Columns[2].Strings, r.Source)
		b.Columns[3].Strings = append(b.Columns[3].Strings, r.Miner)
		b.Columns[4].Int64s = append(b.Columns[4].Int64s, r.Count)
		for c, bit := range []uint8{nullWS, nullWE, nullSource, nullMiner, nullCount} {
			if r.nulls&bit == 0 {
				continue
			}
			col := &b.Columns[c]
			if col.Valid == nil {
				col.Valid = make([]bool, len(rows))
				for j := range col.Valid {
					col.Valid[j] = true
				}
			}
			col.Valid[i] = false
		}
	}
	return b
}

func row(win int, src, miner string, count int64) refRow {
	ws := baseTS + int64(win)*window
	return refRow{WS: ws, WE: ws + window, Source: src, Miner: miner, Count: count}
}

func minerName(i int) string { return fmt.Sprintf("0x%040x", i) }

func newSink(t testing.TB, dir string, target int) *MergeSink {
	t.Helper()
	s, err := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: dir, TargetFileRows: target, Logger: quietLog})
	closeAtEnd(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(context.Background(), stream.SinkEnv{QueryID: "query-1"}); err != nil {
		t.Fatal(err)
	}
	return s
}

// tableRows reads the table back through the generic reader.
func tableRows(t testing.TB, dir string, version int64) map[oracleKey]int64 {
	t.Helper()
	ctx := context.Background()
	tbl, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := tbl.Snapshot(ctx, version)
	if err != nil {
		t.Fatal(err)
	}
	got := map[oracleKey]int64{}
	err = s.Rows(ctx, func(r map[string]any) error {
		w := r["window"].(map[string]any)
		k := oracleKey{w["start"].(time.Time).UnixMicro(), r["source"].(string), r["miner"].(string)}
		if end := w["end"].(time.Time).UnixMicro(); end != k.ws+window {
			return fmt.Errorf("window end %d for start %d", end, k.ws)
		}
		if _, dup := got[k]; dup {
			return fmt.Errorf("duplicate key %v", k)
		}
		got[k] = r["count"].(int64)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestSinkMergeMatchesOracle(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := newSink(t, dir, 50)
	rng := rand.New(rand.NewSource(1))
	oracle := map[oracleKey]int64{}
	for batch := int64(0); batch < 25; batch++ {
		var rows []refRow
		// Mostly recent windows (live-like), sometimes old ones (late data).
		for i := 0; i < 1+rng.Intn(40); i++ {
			win := int(batch)*2 + rng.Intn(3)
			if rng.Intn(10) == 0 {
				win = rng.Intn(int(batch) + 1)
			}
			r := row(win, []string{"s3_backfill", "eth_live"}[rng.Intn(2)], minerName(rng.Intn(6)), int64(rng.Intn(1000)))
			rows = append(rows, r)
		}
		if _, err := s.AddBatch(ctx, batch, mkBatch(rows)); err != nil {
			t.Fatal(err)
		}
		// A checkpoint still queued when the next is due is replaced by it:
		// wait, so that every one is written.
		s.waitMaintenance()
		for _, r := range rows {
			oracle[oracleKey{r.WS, r.Source, r.Miner}] = r.Count
		}
		got := tableRows(t, dir, -1)
		if len(got) != len(oracle) {
			t.Fatalf("batch %d: %d rows, oracle %d", batch, len(got), len(oracle))
		}
		for k, v := range oracle {
			if got[k] != v {
				t.Fatalf("batch %d: key %v = %d, oracle %d", batch, k, got[k], v)
			}
		}
	}
	// v0 create + 25 batches; checkpoints at 10 and 20.
	if v := s.Version(); v != 25 {
		t.Fatalf("version = %d, want 25", v)
	}
	for _, v := range []int64{10, 20} {
		if _, err := os.Stat(filepath.Join(dir, "_delta_log", fmt.Sprintf("%020d.checkpoint.parquet", v))); err != nil {
			t.Errorf("checkpoint %d: %v", v, err)
		}
	}
	tbl, _ := Open(ctx, dir)
	lc, ok, err := tbl.readLastCheckpoint()
	if err != nil || !ok || lc.Version != 20 || lc.NumOfAddFiles == nil {
		t.Fatalf("_last_checkpoint = %+v %v %v", lc, ok, err)
	}
	// Checkpoint replay equals JSON-only replay.
	cp, err := tbl.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := tbl.list()
	l.checkpoints = nil
	js, err := tbl.replay(ctx, l, cp.Version)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(pathsOf(js.Files())) != fmt.Sprint(pathsOf(cp.Files())) {
		t.Fatal("checkpoint replay differs from JSON replay")
	}
	if v, _ := cp.Txn("query-1"); v != 24 {
		t.Fatalf("txn = %d, want 24", v)
	}
	// Commits carry dataChange=true; the checkpoint rewrites it to false.
	for _, f := range js.Files() {
		if !f.DataChange {
			t.Fatalf("add %s has dataChange false in a commit", f.Path)
		}
	}
	// Stats numRecords add up.
	if n, ok := cp.NumRecords(); !ok || n != int64(len(oracle)) {
		t.Fatalf("numRecords = %d %v, want %d", n, ok, len(oracle))
	}
}

func TestSinkIdempotentBatch(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := newSink(t, dir, 0)
	rows := []refRow{row(0, "a", "m1", 3), row(0, "a", "m2", 4)}
	p1, err := s.AddBatch(ctx, 7, mkBatch(rows))
	if err != nil {
		t.Fatal(err)
	}
	p2, err := s.AddBatch(ctx, 7, mkBatch([]refRow{row(0, "a", "m1", 99)}))
	if err != nil {
		t.Fatal(err)
	}
	if p1.NumOutputRows != 2 || p2.Metrics["skipped"] != "true" {
		t.Fatalf("progress = %+v / %+v", p1, p2)
	}
	// A fresh sink (a restarted process) skips it as well.
	s2 := newSink(t, dir, 0)
	if p, err := s2.AddBatch(ctx, 6, mkBatch(rows)); err != nil || p.Metrics["skipped"] != "true" {
		t.Fatalf("older batch: %+v %v", p, err)
	}
	if v := s2.Version(); v != 1 {
		t.Fatalf("version = %d, want 1 (one commit for batch 7)", v)
	}
	got := tableRows(t, dir, -1)
	if got[oracleKey{baseTS, "a", "m1"}] != 3 || len(got) != 2 {
		t.Fatalf("rows = %v", got)
	}
	// A new batch id goes ahead, and an empty batch still records its txn.
	if _, err := s2.AddBatch(ctx, 8, &stream.Batch{}); err != nil {
		t.Fatal(err)
	}
	tbl, _ := Open(ctx, dir)
	snap, _ := tbl.Snapshot(ctx, -1)
	if v, _ := snap.Txn("query-1"); v != 8 || snap.Version != 2 {
		t.Fatalf("txn %d version %d", v, snap.Version)
	}
}

func TestSinkRacingWriters(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	// Both writers open the same version, then commit concurrently.
	const writers = 4
	sinks := make([]*MergeSink, writers)
	for i := range sinks {
		s, err := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: dir, Logger: quietLog})
		closeAtEnd(t, s)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Open(ctx, stream.SinkEnv{QueryID: fmt.Sprintf("query-%d", i%2)}); err != nil {
			t.Fatal(err)
		}
		sinks[i] = s
	}
	var wg sync.WaitGroup
	results := make([]batchResult, writers)
	errs := make([]error, writers)
	for i, s := range sinks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows := []refRow{row(0, "a", minerName(i), int64(i+1)), row(0, "shared", "m", int64(100+i))}
			results[i], errs[i] = s.commitBatch(ctx, 0, s.rows(rows))
		}()
	}
	wg.Wait()
	committed := 0
	for i := range sinks {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !results[i].skipped {
			committed++
		}
	}
	// Two distinct appIds: exactly one commit per appId; the loser of each
	// appId saw the winner's txn after its lost race and stopped.
	if committed != 2 {
		t.Fatalf("%d writers committed, want 2: %+v", committed, results)
	}
	tbl, _ := Open(ctx, dir)
	snap, err := tbl.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Version != 2 {
		t.Fatalf("version = %d, want 2", snap.Version)
	}
	got := tableRows(t, dir, -1)
	if len(got) != 3 {
		t.Fatalf("rows = %v", got)
	}
	// No temp files left behind, and no unreferenced data files: losers
	// delete the files of abandoned attempts.
	ents, _ := os.ReadDir(filepath.Join(dir, "_delta_log"))
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temp file left: %s", e.Name())
		}
	}
	live := map[string]bool{}
	for _, f := range snap.Files() {
		live[f.Path] = true
	}
	for _, r := range snap.Tombstones() {
		live[r.Path] = true
	}
	ents, _ = os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".parquet") && !live[e.Name()] {
			t.Errorf("orphan data file %s", e.Name())
		}
	}
}

func TestLostRaceRedoesMerge(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	a := newSink(t, dir, 0)
	b, _ := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: dir, Logger: quietLog})
	closeAtEnd(t, b)
	if err := b.Open(ctx, stream.SinkEnv{QueryID: "query-b"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddBatch(ctx, 0, mkBatch([]refRow{row(0, "a", "m", 1)})); err != nil {
		t.Fatal(err)
	}
	// b's cached snapshot is at version 0; its commit of version 1 loses,
	// and it must redo the MERGE on a's file (update, not duplicate).
	if _, err := b.AddBatch(ctx, 0, mkBatch([]refRow{row(0, "a", "m", 5)})); err != nil {
		t.Fatal(err)
	}
	got := tableRows(t, dir, -1)
	if len(got) != 1 || got[oracleKey{baseTS, "a", "m"}] != 5 {
		t.Fatalf("rows = %v", got)
	}
}

func TestCrashBeforeCommitLeavesInvisibleOrphans(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := newSink(t, dir, 0)
	if _, err := s.AddBatch(ctx, 0, mkBatch([]refRow{row(0, "a", "m", 1)})); err != nil {
		t.Fatal(err)
	}
	// Simulate a crash after the data files and the temp commit are written
	// but before the link: plan, write the temp, never publish.
	plan, err := s.snap.planMerge(ctx, s.rows([]refRow{row(0, "a", "m", 2), row(1, "a", "m", 3)}), mergeOptions{targetRows: 100, now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.written) == 0 {
		t.Fatal("plan wrote no files")
	}
	os.WriteFile(filepath.Join(dir, "_delta_log", ".00000000000000000002.json.dead.tmp"), []byte(`{"add":{"path":"x"`), 0o644)
	got := tableRows(t, dir, -1)
	if len(got) != 1 || got[oracleKey{baseTS, "a", "m"}] != 1 {
		t.Fatalf("rows after crash = %v", got)
	}
	// The restarted sink redoes the batch exactly once.
	s2 := newSink(t, dir, 0)
	if _, err := s2.AddBatch(ctx, 1, mkBatch([]refRow{row(0, "a", "m", 2), row(1, "a", "m", 3)})); err != nil {
		t.Fatal(err)
	}
	got = tableRows(t, dir, -1)
	if len(got) != 2 || got[oracleKey{baseTS, "a", "m"}] != 2 {
		t.Fatalf("rows after recovery = %v", got)
	}
	// Vacuum (not dry-run, zero retention) removes the orphans but keeps live files.
	tbl, _ := Open(ctx, dir)
	deleted, err := tbl.Vacuum(ctx, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plan.written {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("orphan %s not vacuumed (deleted %v)", p, deleted)
		}
	}
	if got := tableRows(t, dir, -1); len(got) != 2 {
		t.Fatalf("rows after vacuum = %v", got)
	}
}

func TestMergeTouchesOnlyOverlappingFiles(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := newSink(t, dir, 2000)
	// Backfill: 200 windows x 5 sources x 20 miners = 20,000 rows -> 10 files.
	var rows []refRow
	for w := 0; w < 200; w++ {
		for src := 0; src < 5; src++ {
			for m := 0; m < 20; m++ {
				rows = append(rows, row(w, fmt.Sprintf("src%d", src), minerName(m), 1))
			}
		}
	}
	if _, err := s.AddBatch(ctx, 0, mkBatch(rows)); err != nil {
		t.Fatal(err)
	}
	files := len(s.snap.files)
	if files < 10 {
		t.Fatalf("backfill wrote %d files, want >= 10", files)
	}
	// Update 20 keys of window 57 (inside one file) and insert 5 new ones.
	var upd []refRow
	for m := 0; m < 20; m++ {
		upd = append(upd, row(57, "src2", minerName(m), 42))
	}
	for m := 0; m < 5; m++ {
		upd = append(upd, row(300, "src9", minerName(m), 7))
	}
	res, err := s.commitBatch(ctx, 1, s.rows(upd))
	if err != nil {
		t.Fatal(err)
	}
	if res.metrics.NumTargetFilesRemoved != 1 || res.metrics.NumTargetRowsUpdated != 20 || res.metrics.NumTargetRowsInserted != 5 {
		t.Fatalf("metrics = %+v", res.metrics)
	}
	if res.metrics.NumTargetRowsCopied != 2000-20 {
		t.Fatalf("copied = %d", res.metrics.NumTargetRowsCopied)
	}
	// commitInfo carries the metrics as strings.
	tbl, _ := Open(ctx, dir)
	hist, err := tbl.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if hist[0].Operation != "MERGE" || hist[0].OperationMetrics["numTargetFilesRemoved"] != "1" || *hist[0].ReadVersion != 1 {
		t.Fatalf("history[0] = %+v", hist[0])
	}
	// The timings are filled: a MERGE that scanned and rewrote reports at
	// least 1 ms for each, and the whole covers its parts.
	ms := func(k string) int64 {
		v, err := strconv.ParseInt(fmt.Sprint(hist[0].OperationMetrics[k]), 10, 64)
		if err != nil {
			t.Fatalf("%s = %v", k, hist[0].OperationMetrics[k])
		}
		return v
	}
	if ex, sc, rw := ms("executionTimeMs"), ms("scanTimeMs"), ms("rewriteTimeMs"); sc < 1 || rw < 1 || ex < sc || ex < rw {
		t.Fatalf("executionTimeMs %d, scanTimeMs %d, rewriteTimeMs %d", ex, sc, rw)
	}
	got := tableRows(t, dir, -1)
	if len(got) != 20005 || got[oracleKey{baseTS + 57*window, "src2", minerName(3)}] != 42 {
		t.Fatalf("rows = %d", len(got))
	}
}

func TestSinkSchemaAndStats(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := newSink(t, dir, 0)
	long := strings.Repeat("z", 40)
	if _, err := s.AddBatch(ctx, 0, mkBatch([]refRow{row(0, "a", "m1", 1), row(2, "b", long, 42)})); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "_delta_log", "00000000000000000000.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"schemaString":`+jsonString(SinkSchemaString)) {
		t.Fatalf("commit 0 lacks Spark's schemaString:\n%s", data)
	}
	if !strings.Contains(string(data), `{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}`) {
		t.Fatalf("commit 0 protocol:\n%s", data)
	}
	f := s.snap.Files()[0]
	st, err := parseStats(f.Stats)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"numRecords":2,"minValues":{"window":{"start":"2024-05-01T10:00:00.000Z","end":"2024-05-01T10:05:00.000Z"},"source":"a","miner":"m1","count":1},` +
		`"maxValues":{"window":{"start":"2024-05-01T10:10:00.000Z","end":"2024-05-01T10:15:00.000Z"},"source":"b","miner":"` + strings.Repeat("z", 32) + "\U0010FFFF" + `","count":42},` +
		`"nullCount":{"window":{"start":0,"end":0},"source":0,"miner":0,"count":0}}`
	if f.Stats != want {
		t.Fatalf("stats\n got %s\nwant %s", f.Stats, want)
	}
	_ = st
	// The file itself: INT64 TIMESTAMP(MICROS, UTC), snappy, optional fields.
	pf, fh, err := openParquet(vfs.Default, filepath.Join(dir, f.Path))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	sch := pf.Schema().String()
	for _, want := range []string{"optional int64 start (TIMESTAMP(isAdjustedToUTC=true,unit=MICROS))", "optional binary source (STRING)", "optional int64 count"} {
		if !strings.Contains(sch, want) {
			t.Errorf("schema lacks %q:\n%s", want, sch)
		}
	}
	for _, cc := range pf.Metadata().RowGroups[0].Columns {
		if cc.MetaData.Codec.String() != "SNAPPY" {
			t.Errorf("column %v codec %v", cc.MetaData.PathInSchema, cc.MetaData.Codec)
		}
	}
}

func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	b.WriteString(strings.ReplaceAll(s, `"`, `\"`))
	b.WriteByte('"')
	return b.String()
}

func TestSinkRefusesForeignSchema(t *testing.T) {
	root := goldenDir(t)
	dir := copyTable(t, filepath.Join(root, "basic-with-inserts-merge"))
	s, _ := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: dir, Logger: quietLog})
	closeAtEnd(t, s)
	err := s.Open(context.Background(), stream.SinkEnv{QueryID: "q"})
	if err == nil || !strings.Contains(err.Error(), CodeSchemaMismatch) {
		t.Fatalf("err = %v", err)
	}
}

func copyTable(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

var quietLog = slog.New(slog.DiscardHandler)

var _ = sort.Strings

func TestSinkCustomKeysAndUnsortedFiles(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: dir, KeyColumns: []string{KeyWindowStart, "source"}, TargetFileRows: 7, Logger: quietLog})
	closeAtEnd(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(ctx, stream.SinkEnv{QueryID: "q"}); err != nil {
		t.Fatal(err)
	}
	// Another writer's file, rows in no particular order.
	unsorted := []refRow{row(5, "b", "x", 1), row(1, "a", "x", 2), row(3, "c", "x", 3), row(1, "b", "x", 4)}
	add, err := s.table.writeRefFile(unsorted, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.snap.commitActions([]action{{Add: add}}, filepath.Join(dir, add.Path)); err != nil {
		t.Fatal(err)
	}
	type k2 struct {
		ws  int64
		src string
	}
	oracle := map[k2]refRow{}
	for _, r := range unsorted {
		oracle[k2{r.WS, r.Source}] = r
	}
	rng := rand.New(rand.NewSource(7))
	for b := int64(0); b < 15; b++ {
		var rows []refRow
		for i := 0; i < 1+rng.Intn(12); i++ {
			// Duplicate keys within a batch: the last one wins.
			rows = append(rows, row(rng.Intn(8), []string{"a", "b", "c"}[rng.Intn(3)], minerName(rng.Intn(3)), rng.Int63n(100)))
		}
		if _, err := s.AddBatch(ctx, b, mkBatch(rows)); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			oracle[k2{r.WS, r.Source}] = r
		}
		got := map[k2]refRow{}
		if err := s.snap.refRows(ctx, func(r *refRow) error {
			k := k2{r.WS, r.Source}
			if _, dup := got[k]; dup {
				return fmt.Errorf("duplicate key %v", k)
			}
			got[k] = *r
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(oracle) {
			t.Fatalf("batch %d: %d rows, oracle %d", b, len(got), len(oracle))
		}
		for k, want := range oracle {
			g := got[k]
			// A matched row keeps its miner (not a key column) and takes the count.
			if g.Count != want.Count {
				t.Fatalf("batch %d key %v: count %d, want %d", b, k, g.Count, want.Count)
			}
		}
	}
}

func TestSinkFileRoundTripWithNulls(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	tbl, err := Create(ctx, dir, SinkSchema())
	if err != nil {
		t.Fatal(err)
	}
	in := []refRow{
		row(0, "a", "m", 1),
		{nulls: nullWindow | nullWS | nullWE, Source: "b", Miner: "m", Count: 2},
		{WS: baseTS, nulls: nullWE, Source: "c", Miner: "m", Count: 3},
		{WS: baseTS, WE: baseTS + window, nulls: nullSource | nullMiner | nullCount},
		row(1, "", "", 0), // empty strings and zero stay values, not nulls
	}
	add, err := tbl.writeRefFile(in, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	got, err := readRefFile(vfs.Default, filepath.Join(dir, add.Path))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(in) {
		t.Fatalf("round trip\n got %v\nwant %v", got, in)
	}
	var generic []string
	if err := readGenericRows(vfs.Default, filepath.Join(dir, add.Path), func(r map[string]any) error {
		generic = append(generic, fmt.Sprintf("%v %v %v", r["window"] == nil, r["source"], r["count"]))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := "[false a 1 true b 2 false c 3 false <nil> <nil> false  0]"; fmt.Sprint(generic) != want {
		t.Fatalf("generic = %v, want %s", generic, want)
	}
	st, _ := parseStats(add.Stats)
	if fmt.Sprint(st.NullCount) != "map[count:1 miner:1 source:1 window:map[end:2 start:1]]" {
		t.Fatalf("nullCount = %v", st.NullCount)
	}
}

// closeAtEnd closes s when the test ends, before its temp dirs are removed
// (cleanups run last-in first-out): a sink's post-commit maintenance (a Delta
// checkpoint, a compaction) may still be writing into the table until Close
// waits for it.
func closeAtEnd(t testing.TB, s *MergeSink) {
	if s != nil {
		t.Cleanup(func() { _ = s.Close() })
	}
}
