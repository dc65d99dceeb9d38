package delta

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ethstream/ethstream/internal/cputime"
	"github.com/ethstream/ethstream/stream"
)

var benchRows = flag.Int("delta.benchrows", 1_000_000, "rows in the table BenchmarkMergeLive20 builds (9000000 for the full-backfill case)")

const rowsPerWindow = 8 // about 5-8 distinct miners per 5-minute window

// backfillRows returns n rows of consecutive windows starting at window w0.
func backfillRows(w0, n int) []refRow {
	rows := make([]refRow, 0, n)
	for i := 0; i < n; i++ {
		w := w0 + i/rowsPerWindow
		rows = append(rows, row(w, "s3_backfill", minerName((w*7+i%rowsPerWindow)%200), int64(1+i%13)))
	}
	return rows
}

// buildTable backfills n rows in batches of 700k keys, like the engine does.
func buildTable(b *testing.B, dir string, n int) (*MergeSink, int64, int) {
	b.Helper()
	s, err := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: dir, Logger: quietLog})
	closeAtEnd(b, s)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Open(context.Background(), stream.SinkEnv{QueryID: "bench"}); err != nil {
		b.Fatal(err)
	}
	const batch = 700_000
	batchID := int64(0)
	w := 0
	for done := 0; done < n; done += batch {
		k := min(batch, n-done)
		if _, err := s.commitBatch(context.Background(), batchID, s.rows(backfillRows(w, k))); err != nil {
			b.Fatal(err)
		}
		w += k / rowsPerWindow
		batchID++
	}
	return s, batchID, w
}

// BenchmarkMergeLive20 measures the live case: a 20-key batch (updates to
// the open window, inserts into the next) into a large backfilled table,
// from txn check to published commit (and a checkpoint every 10 commits).
func BenchmarkMergeLive20(b *testing.B) {
	dir := b.TempDir()
	start := time.Now()
	s, batchID, w := buildTable(b, dir, *benchRows)
	b.Logf("setup: %d rows, %d files, version %d in %v", *benchRows, len(s.snap.files), s.snap.Version, time.Since(start))
	ctx := context.Background()
	b.ResetTimer()
	cpu0 := cputime.Self()
	var removed, touchedRows int64
	for i := 0; i < b.N; i++ {
		var rows []refRow
		for m := 0; m < 12; m++ { // the open window: new counts for its 8 keys, 4 new keys
			rows = append(rows, row(w-1, "eth_live", minerName(m), int64(100+i)))
		}
		for m := 0; m < 8; m++ { // the next window appears
			rows = append(rows, row(w, "eth_live", minerName(m), int64(1+m)))
		}
		res, err := s.commitBatch(ctx, batchID, s.rows(rows))
		if err != nil {
			b.Fatal(err)
		}
		removed += res.metrics.NumTargetFilesRemoved
		touchedRows += res.metrics.NumTargetRowsCopied + res.metrics.NumTargetRowsUpdated
		batchID++
		w++
	}
	b.ReportMetric(float64(cputime.Self()-cpu0)/1e6/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(removed)/float64(b.N), "filesRewritten/op")
	b.ReportMetric(float64(touchedRows)/float64(b.N), "rowsRewritten/op")
}

// BenchmarkMergeBackfill700k measures one 700k-key backfill batch into a
// table that already holds 700k rows, 10% of the batch updating them.
func BenchmarkMergeBackfill700k(b *testing.B) {
	ctx := context.Background()
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir := b.TempDir()
		s, _, w := buildTable(b, dir, 700_000)
		rows := backfillRows(w-70_000/rowsPerWindow, 700_000)
		b.StartTimer()
		cpu0 := cputime.Self()
		res, err := s.commitBatch(ctx, 100, s.rows(rows))
		if err != nil {
			b.Fatal(err)
		}
		cpu += cputime.Self() - cpu0
		if res.metrics.NumTargetRowsUpdated != 70_000 {
			b.Fatalf("updated %d rows, want 70000", res.metrics.NumTargetRowsUpdated)
		}
	}
	b.ReportMetric(float64(cpu)/1e6/float64(b.N), "cpu-ms/op")
}

// BenchmarkReplay1000Commits measures opening a snapshot of a table with
// 1,000 commits (checkpoints every 10), and a JSON-only replay of the same.
func BenchmarkReplay1000Commits(b *testing.B) {
	dir := b.TempDir()
	ctx := context.Background()
	s, err := NewMergeSink(SinkOptions{Schema: ReferenceSchema(), Path: dir, Logger: quietLog})
	closeAtEnd(b, s)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Open(ctx, stream.SinkEnv{QueryID: "bench"}); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for i := int64(0); i < 999; i++ {
		rows := []refRow{row(int(i), "eth_live", minerName(int(i%7)), i), row(int(i), "eth_live", minerName(int(i%5)+10), i)}
		if _, err := s.commitBatch(ctx, i, s.rows(rows)); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("setup: 1000 commits, %d live files in %v", len(s.snap.files), time.Since(start))
	tbl, err := Open(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("checkpoint+tail", func(b *testing.B) {
		cpu0 := cputime.Self()
		defer func() { b.ReportMetric(float64(cputime.Self()-cpu0)/1e6/float64(b.N), "cpu-ms/op") }()
		for i := 0; i < b.N; i++ {
			snap, err := tbl.Snapshot(ctx, -1)
			if err != nil || snap.Version != 999 {
				b.Fatal(snap, err)
			}
		}
	})
	b.Run("json-only", func(b *testing.B) {
		cpu0 := cputime.Self()
		defer func() { b.ReportMetric(float64(cputime.Self()-cpu0)/1e6/float64(b.N), "cpu-ms/op") }()
		for i := 0; i < b.N; i++ {
			l, err := tbl.list()
			if err != nil {
				b.Fatal(err)
			}
			l.checkpoints = nil
			snap, err := tbl.replay(ctx, l, 999)
			if err != nil || snap.Version != 999 {
				b.Fatal(fmt.Sprint(err))
			}
		}
	})
}

// BenchmarkReadDataFile measures decoding one 200k-row data file of the
// reference layout (a file a MERGE rewrites or a scan reads), reported per
// row in CPU time.
func BenchmarkReadDataFile(b *testing.B) {
	dir := b.TempDir()
	s, _, _ := buildTable(b, dir, 0)
	add, err := s.table.writeRefFile(backfillRows(0, 200_000), time.Now())
	if err != nil {
		b.Fatal(err)
	}
	path := s.table.filePath(add.Path)
	b.ResetTimer()
	cpu0 := cputime.Self()
	for range b.N {
		rs, err := readDataFile(s.table.fs, path, refLayout())
		if err != nil || rs.n != 200_000 {
			b.Fatalf("read %v rows: %v", rs, err)
		}
	}
	b.ReportMetric(float64(cputime.Self()-cpu0)/float64(b.N)/200_000, "cpu-ns/row")
}

// BenchmarkEncodeRows700k measures encoding one 700k-row backfill file of
// the reference layout (the values with their levels, the column writers,
// snappy), without the file system.
func BenchmarkEncodeRows700k(b *testing.B) {
	benchEncode(b, refRowSet(refLayout(), backfillRows(0, 700_000)))
}

// BenchmarkEncodeRowsSeedFile measures encoding one file of a seed
// backfill's shape (DefaultTargetFileRows rows, about 100 miners an hour
// out of 3,000 random addresses, a few of which mine most blocks).
func BenchmarkEncodeRowsSeedFile(b *testing.B) {
	benchEncode(b, refRowSet(refLayout(), seedShapedRows(DefaultTargetFileRows)))
}

// seedShapedRows returns n rows in key order shaped like a seed backfill's
// output: hourly windows of ~100 distinct miners each.
func seedShapedRows(n int) []refRow {
	r := rand.New(rand.NewPCG(1, 2))
	miners := make([]string, 3000)
	for i := range miners {
		miners[i] = fmt.Sprintf("0x%016x%016x%08x", r.Uint64(), r.Uint64(), r.Uint32())
	}
	const hour = int64(3600 * 1_000_000)
	rows := make([]refRow, 0, n)
	for w := int64(0); len(rows) < n; w++ {
		seen := map[string]int64{}
		for range 300 { // blocks in the hour: the first miners mine most
			seen[miners[min(int(r.ExpFloat64()*60), len(miners)-1)]]++
		}
		names := slices.Sorted(maps.Keys(seen))
		for _, m := range names[:min(len(names), n-len(rows))] {
			ws := baseTS + w*hour
			rows = append(rows, refRow{WS: ws, WE: ws + hour, Source: "s3_backfill", Miner: m, Count: seen[m]})
		}
	}
	return rows
}

// benchEncode measures encodeRows of rows, reporting CPU time and the
// file's size.
func benchEncode(b *testing.B, rows *rowSet) {
	l := rows.l
	var size countWriter
	b.ResetTimer()
	cpu0 := cputime.Self()
	for range b.N {
		size = 0
		if _, err := encodeRows(&size, l.pq, rows); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cputime.Self()-cpu0)/1e6/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(size), "file-bytes")
}

// countWriter counts the bytes written to it.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}

// BenchmarkBackfillBatchSeed measures one seed-shaped backfill batch
// (700k rows in key order, seedShapedRows) into an empty table: the sink's
// part of a seed backfill's batch, from the order check to the commit
// (its six data files written two at a time, their stats, the log).
func BenchmarkBackfillBatchSeed(b *testing.B) {
	ctx := context.Background()
	rows := seedShapedRows(700_000)
	var cpu time.Duration
	for range b.N {
		b.StopTimer()
		s, _, _ := buildTable(b, b.TempDir(), 0)
		batch := s.rows(rows)
		b.StartTimer()
		cpu0 := cputime.Self()
		if _, err := s.commitBatch(ctx, 0, batch); err != nil {
			b.Fatal(err)
		}
		cpu += cputime.Self() - cpu0
	}
	b.ReportMetric(float64(cpu)/1e6/float64(b.N), "cpu-ms/op")
}
