package agg

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/internal/cputime"
	"github.com/ethstream/ethstream/stream"
)

const (
	benchRowsN  = 1_000_000
	benchChunkN = 8192 // rows per chunk, as a source hands them over
)

func benchChunks(b *testing.B) []*stream.Batch {
	rows := benchRows(benchRowsN, 0)
	var chunks []*stream.Batch
	for len(rows) > 0 {
		n := min(len(rows), benchChunkN)
		chunks = append(chunks, makeBatch(rows[:n]))
		rows = rows[n:]
	}
	return chunks
}

func reportRows(b *testing.B, rows int64, before *runtime.MemStats, cpu time.Duration) {
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	total := float64(rows) * float64(b.N)
	b.ReportMetric(total/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(total/cpu.Seconds(), "rows/cpu-s")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/total, "allocs/row")
}

// BenchmarkReferenceQuery measures the reference aggregation (5-minute
// windows by source and miner, count, update mode, 2-day watermark) over 1M
// synthetic 12-second blocks (about 240k window keys), on one goroutine:
//
//	process: hash aggregation of the chunks only
//	batch:   one whole batch: Process, Finish (one Get and Put per key into
//	         the real Pebble store, output rows) and Commit (durable)
func BenchmarkReferenceQuery(b *testing.B) {
	chunks := benchChunks(b)
	ctx := context.Background()
	b.Run("process", func(b *testing.B) { benchProcess(b, chunks) })
	b.Run("process-seedlike", func(b *testing.B) {
		chunks := seedlikeChunks(benchRowsN)
		for _, c := range chunks {
			withViews(c)
		}
		benchProcess(b, chunks)
	})
	b.Run("process-seedlike-noview", func(b *testing.B) {
		benchProcess(b, seedlikeChunks(benchRowsN))
	})
	b.Run("batch", func(b *testing.B) {
		var before runtime.MemStats
		var cpu time.Duration
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			h := newHarness(b, refSpec(), vfs.NewMem(), 8)
			runtime.GC()
			runtime.ReadMemStats(&before) // count only the batch itself
			b.StartTimer()
			c0 := cputime.Self()
			for _, c := range chunks {
				if err := h.op.Process(ctx, 0, 0, c); err != nil {
					b.Fatal(err)
				}
			}
			if _, _, err := h.op.Finish(ctx, 0, 0); err != nil {
				b.Fatal(err)
			}
			if err := h.op.Commit(ctx, 0); err != nil {
				b.Fatal(err)
			}
			cpu += cputime.Self() - c0
			b.StopTimer()
			_ = h.op.Close()
		}
		reportRows(b, benchRowsN, &before, cpu)
	})
}

// benchProcess times the hash aggregation of chunks (Process only, one
// batch per iteration, aborted outside the timer).
func benchProcess(b *testing.B, chunks []*stream.Batch) {
	ctx := context.Background()
	h := newHarness(b, refSpec(), vfs.NewMem(), 1)
	defer h.op.Close()
	rows := 0
	for _, c := range chunks {
		rows += c.Len
	}
	runtime.GC() // finish collecting the setup's garbage outside the measurement
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var cpu time.Duration
	b.ResetTimer()
	for i := range b.N {
		c0 := cputime.Self()
		for _, c := range chunks {
			if err := h.op.Process(ctx, int64(i), 0, c); err != nil {
				b.Fatal(err)
			}
		}
		cpu += cputime.Self() - c0
		b.StopTimer()
		h.op.Abort()
		b.StartTimer()
	}
	b.StopTimer()
	reportRows(b, int64(rows), &before, cpu)
}

// seedlikeChunks is n rows shaped as the seed archive's reach the
// aggregation: 12-second blocks whose miners are drawn from 3,000
// addresses by a Zipf law (about 9 distinct miners per 5-minute window, as
// the seed backfill's 9.6M keys over 26M blocks), in chunks of 3,200 rows
// (a row group of a daily file) whose equal miners share the memory of the
// chunk's own dictionary; process-seedlike adds the dictionary views
// (withViews) the Parquet decoder and the engine's source column hand
// over, process-seedlike-noview has none.
func seedlikeChunks(n int) []*stream.Batch {
	const t0 = int64(1_793_491_200_000_000)
	const chunkRows = 3200
	rng := rand.New(rand.NewPCG(11, 12))
	miners := make([]string, 3000)
	for i := range miners {
		miners[i] = fmt.Sprintf("0x%016x%016x%08x", rng.Uint64(), rng.Uint64(), rng.Uint32())
	}
	z := rand.NewZipf(rng, 1.7, 1, uint64(len(miners)-1))
	var chunks []*stream.Batch
	for lo := 0; lo < n; lo += chunkRows {
		rows := make([]testRow, min(chunkRows, n-lo))
		dict := map[int]string{}
		for i := range rows {
			m := int(z.Uint64())
			s, ok := dict[m]
			if !ok {
				s = strings.Clone(miners[m]) // the chunk's dictionary's copy
				dict[m] = s
			}
			rows[i] = testRow{source: "s3_backfill", miner: s, ts: t0 + int64(lo+i)*12*int64(time.Second/time.Microsecond)}
		}
		chunks = append(chunks, makeBatch(rows))
	}
	return chunks
}

// BenchmarkClosedAtCommit measures a backfill batch of the reference query
// whose next watermark closes nearly every window (1M rows over 139 days, a
// 2-day delay): Process, Finish with the carry of ~240k closed keys, and the
// durable commit, on the real file system. cpu-s/op counts every goroutine
// (the carry's publish too); carryMB is the carry's size on disk.
func BenchmarkClosedAtCommit(b *testing.B) {
	chunks := benchChunks(b)
	ctx := context.Background()
	var cpu time.Duration
	var carryBytes int64
	for range b.N {
		b.StopTimer()
		h := newHarness(b, refSpec(), vfs.Default, 8)
		h.lookahead = true
		var maxTs int64
		for _, c := range chunks {
			for _, ts := range c.Columns[0].Int64s {
				maxTs = max(maxTs, ts)
			}
		}
		runtime.GC()
		b.StartTimer()
		c0 := cputime.Self()
		for _, c := range chunks {
			if err := h.op.Process(ctx, 0, 0, c); err != nil {
				b.Fatal(err)
			}
		}
		h.op.NextWatermark(0, maxTs/1000-(2*24*time.Hour).Milliseconds())
		if _, _, err := h.op.Finish(ctx, 0, 0); err != nil {
			b.Fatal(err)
		}
		if err := h.op.PrepareCommit(ctx, 0); err != nil {
			b.Fatal(err)
		}
		if err := h.op.Commit(ctx, 0); err != nil {
			b.Fatal(err)
		}
		cpu += cputime.Self() - c0
		b.StopTimer()
		if h.op.committed.ClosedRows < 200_000 {
			b.Fatalf("closed %d keys at commit, want most of the batch's", h.op.committed.ClosedRows)
		}
		carryBytes += carryFileBytes(h.op)
		_ = h.op.Close()
		b.StartTimer()
	}
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(carryBytes)/float64(b.N)/(1<<20), "carryMB")
}
