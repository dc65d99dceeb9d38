package deltasource

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"runtime"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/internal/cputime"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/stream"
)

var benchRows = flag.Int("deltasource.benchrows", 2_000_000, "rows in the table BenchmarkReadTable reads")

// benchTable writes n rows of the stateless bench shape's table (number,
// miner, gas_used) through the Delta sink in append mode, in batches of
// 875,000 rows as the seed bench's stateless shape commits them (files of
// the sink's DefaultTargetFileRows).
func benchTable(b *testing.B, dir string, n int) {
	b.Helper()
	schema := stream.Schema{Fields: []stream.Field{{Name: "number", Type: stream.Int64},
		{Name: "miner", Type: stream.String, Nullable: true}, {Name: "gas_used", Type: stream.Int64}}}
	sink, err := delta.NewMergeSink(delta.SinkOptions{Path: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	if err := sink.Open(context.Background(), stream.SinkEnv{QueryID: "bench", Schema: schema, Append: true, Locked: true}); err != nil {
		b.Fatal(err)
	}
	const batch = 875_000
	for id, lo := int64(0), 0; lo < n; id, lo = id+1, lo+batch {
		k := min(batch, n-lo)
		num, miner, gas := make([]int64, k), make([]string, k), make([]int64, k)
		for i := range k {
			num[i] = int64(lo + i)
			miner[i] = fmt.Sprintf("0x%040x", (lo+i)*7919%211)
			gas[i] = int64((lo + i) * 104729 % 30_000_000)
		}
		out := &stream.Batch{Len: k, Columns: []stream.Column{{Name: "number", Type: stream.Int64, Int64s: num},
			{Name: "miner", Type: stream.String, Strings: miner}, {Name: "gas_used", Type: stream.Int64, Int64s: gas}}}
		if _, err := sink.AddBatch(context.Background(), id, out); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadTable reads the stateless shape's table (the
// delta-to-delta bench shape's input) through the source with the query's
// columns, one availableNow batch after another from the start, and
// reports the process's CPU time per read (wall time on a shared machine
// measures the other processes too), rows/s, and the peak of the heap
// (sampled every fourth emitted chunk) as MB.
func BenchmarkReadTable(b *testing.B) {
	dir := b.TempDir()
	benchTable(b, dir, *benchRows)
	b.ResetTimer()
	cpu0 := cputime.Self()
	var peak uint64
	var rows int64
	for range b.N {
		s, err := NewFromURI(tableURI(dir, ""))
		if err != nil {
			b.Fatal(err)
		}
		fs := vfs.NewMem()
		env := stream.SourceEnv{Name: "t", FS: fs, MetadataDir: "/ckpt/sources/t",
			Columns: []string{"number", "miner", "gas_used"}}
		if err := s.Open(context.Background(), env); err != nil {
			b.Fatal(err)
		}
		var start stream.Offset
		for {
			end, err := s.LatestOffset(context.Background(), start)
			if err != nil {
				b.Fatal(err)
			}
			if string(end) == string(start) {
				break
			}
			var ms runtime.MemStats
			n := 0
			if err := s.ReadBatch(context.Background(), start, end, func(bt *stream.Batch) error {
				rows += int64(bt.Len)
				if n++; n%4 == 0 {
					runtime.ReadMemStats(&ms)
					peak = max(peak, ms.HeapAlloc)
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
			start = end
		}
	}
	b.ReportMetric(float64((cputime.Self()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(peak)/1e6, "peak-heap-MB")
}
