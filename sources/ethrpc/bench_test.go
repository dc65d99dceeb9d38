package ethrpc

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/engine"
)

// BenchmarkFetchBlocks measures blocks per second fetched from the embedded
// node over loopback: ReadBatch of 1,000 blocks in batch requests of 100.
func BenchmarkFetchBlocks(b *testing.B) {
	m := testManifest(b)
	const span = 1000
	n := startChainNode(b, span, chain.NodeFaults{})
	for _, par := range []int{1, 4} {
		b.Run("parallelism="+itoa(uint64(par)), func(b *testing.B) {
			s, _ := openSource(b, Options{Endpoints: []string{n.URL()}, MaxBlocksPerTrigger: span, Parallelism: par}, nil)
			ctx := context.Background()
			start := Offset{Block: m.LastBlock, Hash: m.LastHash}.JSON()
			end := Offset{Block: m.LastBlock + span, Hash: lowerHex(n.Header(m.LastBlock + span).Hash().Hex())}.JSON()
			var got int
			emit := func(bt *engine.Batch) error { got += bt.Len; return nil }
			cpu0 := cpuTime()
			t0 := time.Now()
			for b.Loop() {
				if err := s.ReadBatch(ctx, start, end, emit); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(got)/time.Since(t0).Seconds(), "blocks/s")
			// Node and client share the process: CPU per block covers both.
			b.ReportMetric(float64(cpuTime()-cpu0)/1e3/float64(got), "cpu-µs/block")
		})
	}
}

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReadBatch20 measures one live trigger's source work: LatestOffset
// then ReadBatch of a 20-block batch, reporting the median latency of each.
func BenchmarkReadBatch20(b *testing.B) {
	m := testManifest(b)
	n := startChainNode(b, 20, chain.NodeFaults{})
	s, _ := openSource(b, Options{Endpoints: []string{n.URL()}, StartBlock: m.LastBlock + 1}, nil)
	ctx := context.Background()
	var planMs, readMs []float64
	emit := func(*engine.Batch) error { return nil }
	for b.Loop() {
		t0 := time.Now()
		end, err := s.LatestOffset(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := s.ReadBatch(ctx, nil, end, emit); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		planMs = append(planMs, float64(t1.Sub(t0))/1e6)
		readMs = append(readMs, float64(t2.Sub(t1))/1e6)
	}
	b.ReportMetric(median(readMs), "readBatch-p50-ms")
	b.ReportMetric(median(planMs), "latestOffset-p50-ms")
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

func lowerHex(s string) string { h, _ := normHex(s, 32); return h }
