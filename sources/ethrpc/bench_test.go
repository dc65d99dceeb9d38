package ethrpc

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/stream"
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
			emit := func(bt *stream.Batch) error { got += bt.Len; return nil }
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
	for _, par := range []int{1, 4} {
		b.Run("parallelism="+itoa(uint64(par)), func(b *testing.B) {
			s, _ := openSource(b, Options{Endpoints: []string{n.URL()}, StartBlock: m.LastBlock + 1, Parallelism: par}, nil)
			ctx := context.Background()
			var planMs, readMs []float64
			emit := func(*stream.Batch) error { return nil }
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
		})
	}
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

// cachedBlocks serves blocks rendered once by the embedded node, so a
// benchmark measures the source (HTTP, JSON-RPC batches, decoding, checks)
// without the node's per-request block rendering.
type cachedBlocks struct{ raw map[string]json.RawMessage }

func (c *cachedBlocks) GetBlockByNumber(tag string, full bool) (json.RawMessage, error) {
	if r, ok := c.raw[tag]; ok {
		return r, nil
	}
	return json.RawMessage("null"), nil
}

// BenchmarkFetchBlocksCached: blocks per second and CPU per block of the
// source alone, against a loopback rpc.Server holding pre-rendered blocks.
func BenchmarkFetchBlocksCached(b *testing.B) {
	m := testManifest(b)
	const span = 1000
	n := startChainNode(b, span, chain.NodeFaults{})
	c, err := rpc.Dial(n.URL())
	if err != nil {
		b.Fatal(err)
	}
	cache := &cachedBlocks{raw: map[string]json.RawMessage{}}
	for i := uint64(1); i <= span; i++ {
		tag := hexutil.EncodeUint64(m.LastBlock + i)
		var raw json.RawMessage
		if err := c.Call(&raw, "eth_getBlockByNumber", tag, false); err != nil {
			b.Fatal(err)
		}
		cache.raw[tag] = raw
	}
	c.Close()
	srv := rpc.NewServer()
	if err := srv.RegisterName("eth", cache); err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	for _, par := range []int{1, 4} {
		b.Run("parallelism="+itoa(uint64(par)), func(b *testing.B) {
			s, _ := openSource(b, Options{Endpoints: []string{"http://" + ln.Addr().String()}, Parallelism: par}, nil)
			start := Offset{Block: m.LastBlock, Hash: m.LastHash}.JSON()
			end := Offset{Block: m.LastBlock + span, Hash: lowerHex(n.Header(m.LastBlock + span).Hash().Hex())}.JSON()
			var got int
			emit := func(bt *stream.Batch) error { got += bt.Len; return nil }
			cpu0, t0 := cpuTime(), time.Now()
			for b.Loop() {
				if err := s.ReadBatch(context.Background(), start, end, emit); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(got)/time.Since(t0).Seconds(), "blocks/s")
			b.ReportMetric(float64(cpuTime()-cpu0)/1e3/float64(got), "cpu-µs/block")
		})
	}
}

// BenchmarkRetract measures one live trigger's source work with
// reorg=retract at the head: LatestOffset (which publishes the history file),
// ReadBatch and Commit, after the node either mined one block or
// reorganised its last 3 blocks; median latencies in ms.
func BenchmarkRetract(b *testing.B) {
	m := testManifest(b)
	for _, reorg := range []bool{false, true} {
		name := "mine1"
		if reorg {
			name = "reorg3"
		}
		b.Run(name, func(b *testing.B) {
			n := startChainNode(b, 40, chain.NodeFaults{})
			s, err := New(Options{Endpoints: []string{n.URL()}, StartBlock: m.LastBlock + 1, MaxBlocksPerTrigger: 50,
				Reorg: ReorgRetract})
			if err != nil {
				b.Fatal(err)
			}
			env := stream.SourceEnv{Name: "eth_live", MetadataDir: b.TempDir(), FS: vfs.Default, Clock: newFakeClock(),
				Logger: slog.New(slog.DiscardHandler)}
			if err := s.Open(context.Background(), env); err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			var start stream.Offset
			emit := func(*stream.Batch) error { return nil }
			step := func() (time.Duration, time.Duration) {
				t0 := time.Now()
				end, err := s.LatestOffset(ctx, start)
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := s.ReadBatch(ctx, start, end, emit); err != nil {
					b.Fatal(err)
				}
				if err := s.Commit(ctx, end); err != nil {
					b.Fatal(err)
				}
				start = end
				return t1.Sub(t0), time.Since(t1)
			}
			step()
			var planMs, readMs []float64
			for b.Loop() {
				if reorg {
					n.Reorg(3)
				} else {
					n.Mine(1)
				}
				p, r := step()
				planMs = append(planMs, float64(p)/1e6)
				readMs = append(readMs, float64(r)/1e6)
			}
			b.ReportMetric(median(planMs), "latestOffset-p50-ms")
			b.ReportMetric(median(readMs), "readBatch+commit-p50-ms")
		})
	}
}
