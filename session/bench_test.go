package session

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/stream"
)

// BenchmarkBlocks is a miners' sessions query over a chain's blocks: a
// block every 12 seconds from one of 500 miners, a 10-minute gap, batches
// of an hour's 300 blocks, append mode with a 1-hour watermark; b.N
// batches. Reports rows per second through Process, Finish and Commit.
func BenchmarkBlocks(b *testing.B) {
	ctx := context.Background()
	types := map[string]stream.Type{"ts": stream.Timestamp, "miner": stream.String, "gas": stream.Int64}
	op, err := New(Spec{Column: "ts", Gap: 10 * time.Minute, GroupBy: []string{"miner"},
		Aggregates: []agg.Aggregate{{Kind: agg.Count}, {Kind: agg.Sum, Column: "gas"}}, Mode: agg.Append,
		WatermarkDelay: time.Hour, ColumnTypes: types})
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	env := stream.OperatorEnv{StateDir: filepath.Join(dir, "state"), FS: vfs.Default, LocalDir: filepath.Join(dir, "local"), Partitions: 8, Version: -1}
	if err := op.Open(ctx, env); err != nil {
		b.Fatal(err)
	}
	defer op.Close()
	const perBatch = 7200
	miners := make([]string, 500)
	for i := range miners {
		miners[i] = fmt.Sprintf("0x%040x", i*7919)
	}
	var block int64
	b.ResetTimer()
	for id := range int64(b.N) {
		in := &stream.Batch{Len: perBatch, Columns: []stream.Column{{Name: "ts", Type: stream.Timestamp}, {Name: "miner", Type: stream.String}, {Name: "gas", Type: stream.Int64}}}
		for range perBatch {
			in.Columns[0].Int64s = append(in.Columns[0].Int64s, block*12e6)
			// A few miners win most blocks, as on mainnet.
			m := (block * block * 31) % 500
			if block%3 != 0 {
				m = block % 7
			}
			in.Columns[1].Strings = append(in.Columns[1].Strings, miners[m])
			in.Columns[2].Int64s = append(in.Columns[2].Int64s, 15_000_000+block%1000)
			block++
		}
		wmMs := max(0, (block-perBatch)*12e3-time.Hour.Milliseconds())
		if err := op.Process(ctx, id, wmMs, in); err != nil {
			b.Fatal(err)
		}
		if _, _, err := op.Finish(ctx, id, wmMs); err != nil {
			b.Fatal(err)
		}
		if err := op.Commit(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*perBatch)/b.Elapsed().Seconds(), "rows/s")
}
