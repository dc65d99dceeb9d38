package join

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/internal/cputime"
	"github.com/ethstream/ethstream/stream"
)

// BenchmarkOperatorBlocks drives the operator alone (no engine) through
// the bench's join shape (ethstream bench --shape join): every block
// joined with its parent within a minute, both sides the same blocks
// with one-minute watermarks, 8 batches of 4,000 blocks 12 s apart at 8
// state partitions, each batch evicting the previous one's rows. It
// reports input rows per second; compare allocations and CPU, not wall,
// on a loaded machine (cpu-ms/op: the process's CPU time in the timed part;
// op-cpu-ms/op: the driving goroutine's own, without the collector's and
// Pebble's background work, where the platform measures it). It uses the operator's exported API only, so the
// same file runs against an older join package.
func BenchmarkOperatorBlocks(b *testing.B) {
	const batches, perBatch = 8, 4000
	benchBlocks(b, 8, slices.Repeat([]int{perBatch}, batches), nil)
}

// BenchmarkOperatorShape is the bench's join shape at 7 days
// (ethstream bench --days 7 --stages-only --shape join): 200 state
// partitions, the archive's 7 daily files read 5 a batch (about 35,750
// and 14,300 blocks), each side's columns pruned to those the shape's
// SQL reads, and a batch without data that evicts the rest.
func BenchmarkOperatorShape(b *testing.B) {
	benchBlocks(b, 200, []int{35_750, 14_300, 0}, []string{"number", "miner"})
}

// benchBlocks runs the blocks-with-parents join over batches of the given
// sizes (0: a batch without data) at parts state partitions, each side
// keeping columns (nil: all).
func benchBlocks(b *testing.B, parts int, sizes []int, columns []string) {
	schema := stream.Schema{Fields: []stream.Field{
		{Name: "number", Type: stream.Int64}, {Name: "hash", Type: stream.String}, {Name: "parent_hash", Type: stream.String},
		{Name: "block_ts", Type: stream.Timestamp}, {Name: "miner", Type: stream.String}, {Name: "gas_used", Type: stream.Int64}}}
	// Block hashes look random: their first 16 hex digits are n mixed
	// (a bijection, so hashes stay distinct), not the leading zeros of a
	// small number, which the state's key comparisons would all cross.
	hash := func(n int) string { return fmt.Sprintf("0x%016x%048x", uint64(n)*0x9E3779B97F4A7C15, n) }
	base := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	in := make([]*stream.Batch, len(sizes))
	blocks := 0
	for bi, size := range sizes {
		bt := &stream.Batch{Len: size}
		for _, f := range schema.Fields {
			bt.Columns = append(bt.Columns, stream.Column{Name: f.Name, Type: f.Type})
		}
		for range size {
			blocks++
			n := blocks
			bt.Columns[0].Int64s = append(bt.Columns[0].Int64s, int64(n))
			bt.Columns[1].Strings = append(bt.Columns[1].Strings, hash(n))
			bt.Columns[2].Strings = append(bt.Columns[2].Strings, hash(n-1))
			bt.Columns[3].Int64s = append(bt.Columns[3].Int64s, base+int64(n)*12e6)
			bt.Columns[4].Strings = append(bt.Columns[4].Strings, fmt.Sprintf("0x%040x", n%50))
			bt.Columns[5].Int64s = append(bt.Columns[5].Int64s, int64(n*7919%30_000_000))
		}
		in[bi] = bt
	}
	side := func(alias string, keys ...string) Side {
		return Side{Alias: alias, Schema: schema, Keys: keys, Watermark: "block_ts", Delay: time.Minute, Columns: columns}
	}
	spec := Spec{Type: Inner, Left: side("c", "parent_hash"), Right: side("p", "hash"), Range: []Bound{
		{LeftColumn: "block_ts", Op: GE, RightColumn: "block_ts"},
		{LeftColumn: "block_ts", Op: LE, RightColumn: "block_ts", RightOffset: time.Minute}}}
	ctx := context.Background()
	out := 0
	var cpu time.Duration // the process's: Pebble's goroutines and the collector too
	var opCPU time.Duration
	threadOK := true
	// The driving goroutine keeps its thread: op-cpu-ms/op is its own CPU
	// time (threadCPU).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for b.Loop() {
		b.StopTimer()
		dir := b.TempDir()
		o, err := New(spec)
		if err != nil {
			b.Fatal(err)
		}
		env := stream.OperatorEnv{StateDir: filepath.Join(dir, "state"), FS: vfs.Default, LocalDir: filepath.Join(dir, "local"), Partitions: parts, Version: -1}
		if err := o.Open(ctx, env); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		c0 := cputime.Self()
		t0, ok0 := threadCPU()
		wmMs := int64(0)
		for id, bt := range in {
			for s := range 2 {
				if err := o.ProcessSide(ctx, int64(id), wmMs, s, bt); err != nil {
					b.Fatal(err)
				}
			}
			res, _, err := o.Finish(ctx, int64(id), wmMs)
			if err != nil {
				b.Fatal(err)
			}
			out += res.Len
			if err := o.Commit(ctx, int64(id)); err != nil {
				b.Fatal(err)
			}
			if bt.Len > 0 {
				wmMs = bt.Columns[3].Int64s[bt.Len-1]/1000 - 60_000
			} else {
				wmMs += 3_600_000 // a batch without data: the watermark moved on
			}
		}
		b.StopTimer()
		cpu += cputime.Self() - c0
		t1, ok1 := threadCPU()
		opCPU += t1 - t0
		threadOK = threadOK && ok0 && ok1
		if err := o.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	if out != b.N*(blocks-1) {
		b.Fatalf("%d joined rows in %d runs, want %d a run", out, b.N, blocks-1)
	}
	b.ReportMetric(float64(2*blocks*b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
	if threadOK {
		b.ReportMetric(float64(opCPU.Milliseconds())/float64(b.N), "op-cpu-ms/op")
	}
}
