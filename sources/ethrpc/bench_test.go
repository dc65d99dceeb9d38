package ethrpc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/ethstream/ethstream/internal/cputime"
	"github.com/ethstream/ethstream/stream"
)

// BenchmarkFetchBlocks measures blocks per second fetched from the embedded
// node over loopback: ReadBatch of 1,000 blocks in batch requests of 100.
func BenchmarkFetchBlocks(b *testing.B) {
	m := testManifest(b)
	const span = 1000
	n := startChainNode(b, span, ethnode.Faults{})
	for _, par := range []int{1, 4} {
		b.Run("parallelism="+itoa(uint64(par)), func(b *testing.B) {
			s, _ := openSource(b, Options{Endpoints: []string{n.URL()}, MaxBlocksPerTrigger: span, Parallelism: par}, nil)
			ctx := context.Background()
			start := Offset{Block: m.LastBlock, Hash: m.LastHash}.JSON()
			end := Offset{Block: m.LastBlock + span, Hash: lowerHex(n.Header(m.LastBlock + span).Hash().Hex())}.JSON()
			var got int
			emit := func(bt *stream.Batch) error { got += bt.Len; return nil }
			cpu0 := cputime.Self()
			t0 := time.Now()
			for b.Loop() {
				if err := s.ReadBatch(ctx, start, end, emit); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(got)/time.Since(t0).Seconds(), "blocks/s")
			// Node and client share the process: CPU per block covers both.
			b.ReportMetric(float64(cputime.Self()-cpu0)/1e3/float64(got), "cpu-µs/block")
		})
	}
}

// BenchmarkReadBatch20 measures one live trigger's source work: LatestOffset
// then ReadBatch of a 20-block batch, reporting the median latency of each.
func BenchmarkReadBatch20(b *testing.B) {
	m := testManifest(b)
	n := startChainNode(b, 20, ethnode.Faults{})
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
	n := startChainNode(b, span, ethnode.Faults{})
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
			cpu0, t0 := cputime.Self(), time.Now()
			for b.Loop() {
				if err := s.ReadBatch(context.Background(), start, end, emit); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(got)/time.Since(t0).Seconds(), "blocks/s")
			b.ReportMetric(float64(cputime.Self()-cpu0)/1e3/float64(got), "cpu-µs/block")
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
			n := startChainNode(b, 40, ethnode.Faults{})
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

// BenchmarkSourceShare20 measures the source's own share of a live
// trigger's getBatch: ReadBatch of 20 blocks (request, HTTP, decode, parse,
// chain check, columns) against a loopback server that replies with the
// node's recorded answer at once, so no node work is in the figure (target:
// <= 5 ms). It reports the median and the CPU per batch.
// Run: go test -run '^$' -bench SourceShare20 ./sources/ethrpc
func BenchmarkSourceShare20(b *testing.B) {
	m := testManifest(b)
	n := startChainNode(b, 20, ethnode.Faults{})
	var req strings.Builder
	req.WriteByte('[')
	for i := uint64(1); i <= 20; i++ {
		if i > 1 {
			req.WriteByte(',')
		}
		fmt.Fprintf(&req, `{"jsonrpc":"2.0","id":%d,"method":"eth_getBlockByNumber","params":["%s",false]}`, i, hexutil.EncodeUint64(m.LastBlock+i))
	}
	req.WriteByte(']')
	resp, err := http.Post(n.URL(), "application/json", strings.NewReader(req.String()))
	if err != nil {
		b.Fatal(err)
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		b.Fatal(err)
	}
	// The source numbers its calls itself: answer each with its own ids, in
	// the recorded order (ids are the only part of the answer it sends).
	var recorded []map[string]json.RawMessage
	if err := json.Unmarshal(answer, &recorded); err != nil || len(recorded) != 20 {
		b.Fatalf("recorded answer: %d, %v", len(recorded), err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var calls []struct {
			ID json.RawMessage `json:"id"`
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &calls); err != nil || len(calls) != len(recorded) {
			http.Error(w, "want the 20-block batch", http.StatusBadRequest)
			return
		}
		out := []byte{'['}
		for i, c := range calls {
			if i > 0 {
				out = append(out, ',')
			}
			out = fmt.Appendf(out, `{"jsonrpc":"2.0","id":%s,"result":%s}`, c.ID, recorded[i]["result"])
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(append(out, ']'))
	})}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	s, _ := openSource(b, Options{Endpoints: []string{"http://" + ln.Addr().String()}}, nil)
	start := Offset{Block: m.LastBlock, Hash: m.LastHash}.JSON()
	end := Offset{Block: m.LastBlock + 20, Hash: lowerHex(n.Header(m.LastBlock + 20).Hash().Hex())}.JSON()
	var rows int
	emit := func(bt *stream.Batch) error { rows += bt.Len; return nil }
	if n := timeReadBatch(b, s, start, end, emit); rows != 20*n {
		b.Fatalf("emitted %d rows in %d batches", rows, n)
	}
}

// BenchmarkGethReadBatch20 is ReadBatch of blocks 21..40 against a real node
// given by ETHSTREAM_GETH_URL (skipped without it): the node's answer plus
// the source's share; BenchmarkGethBatch20 in package chain/ethnode times the
// node's answer alone.
// Run: ETHSTREAM_GETH_URL=http://127.0.0.1:8545 go test -run '^$' -bench GethReadBatch20 ./sources/ethrpc
func BenchmarkGethReadBatch20(b *testing.B) {
	url := os.Getenv("ETHSTREAM_GETH_URL")
	if url == "" {
		b.Skip("set ETHSTREAM_GETH_URL to a node's HTTP endpoint")
	}
	s, _ := openSource(b, Options{Endpoints: []string{url}}, nil)
	ctx := context.Background()
	rows, err := s.fetchRange(ctx, []uint64{20, 40})
	if err != nil {
		b.Fatal(err)
	}
	start := Offset{Block: 20, Hash: rows[0].Hash}.JSON()
	end := Offset{Block: 40, Hash: rows[1].Hash}.JSON()
	timeReadBatch(b, s, start, end, func(*stream.Batch) error { return nil })
}

// BenchmarkTableReadBatch measures a transactions source's ReadBatch of 8
// blocks from the in-repo node (eth_getBlockByHash(h, true) and
// eth_getBlockReceipts, decoded, rows built): CPU per block covers node
// and client, which share the process, as in the freshness bench.
func BenchmarkTableReadBatch(b *testing.B) {
	m := testManifest(b)
	const span = 8
	n := startChainNode(b, span, ethnode.Faults{})
	s, _ := openSource(b, Options{Endpoints: []string{n.URL()}, Table: "transactions", MaxBlocksPerTrigger: span}, nil)
	ctx := context.Background()
	start := Offset{Block: m.LastBlock, Hash: m.LastHash}.JSON()
	end := Offset{Block: m.LastBlock + span, Hash: lowerHex(n.Header(m.LastBlock + span).Hash().Hex())}.JSON()
	var rows, blocks int
	emit := func(bt *stream.Batch) error { rows += bt.Len; return nil }
	b.ReportAllocs()
	cpu0 := cputime.Self()
	for b.Loop() {
		if err := s.ReadBatch(ctx, start, end, emit); err != nil {
			b.Fatal(err)
		}
		blocks += span
	}
	b.ReportMetric(float64(cputime.Self()-cpu0)/1e3/float64(blocks), "cpu-µs/block")
	b.ReportMetric(float64(rows)/float64(blocks), "rows/block")
}

// BenchmarkTableBodyDecode measures decoding one block's hydrated
// transactions and receipts, as the node serves them: go-ethereum's
// decoders through encoding/json (reference), and bodyjson.go's (fast).
func BenchmarkTableBodyDecode(b *testing.B) {
	n := startChainNode(b, 4, ethnode.Faults{})
	c, err := rpc.Dial(n.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var blk, rcs json.RawMessage
	if err := c.CallContext(context.Background(), &blk, "eth_getBlockByNumber", hexutil.EncodeUint64(n.Head()), true); err != nil {
		b.Fatal(err)
	}
	var hash struct{ Hash string }
	_ = json.Unmarshal(blk, &hash)
	if err := c.CallContext(context.Background(), &rcs, "eth_getBlockReceipts", hash.Hash); err != nil {
		b.Fatal(err)
	}
	b.Run("reference", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(blk) + len(rcs)))
		defer reportCPUPerOp(b, cputime.Self())
		for b.Loop() {
			var ref refFullBlock
			var rs []*types.Receipt
			if json.Unmarshal(blk, &ref) != nil || json.Unmarshal(rcs, &rs) != nil {
				b.Fatal("decode")
			}
			for _, raw := range ref.Transactions {
				if _, _, err := refTx(raw); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(blk) + len(rcs)))
		defer reportCPUPerOp(b, cputime.Self())
		for b.Loop() {
			var fb fullBlock
			var rs blockReceipts
			if json.Unmarshal(blk, &fb) != nil || json.Unmarshal(rcs, &rs) != nil || fb.TxErr != nil {
				b.Fatal("decode")
			}
		}
	})
}

// reportCPUPerOp reports the process's CPU time since cpu0 per iteration:
// on a loaded machine wall time per op measures the load, CPU time the code.
func reportCPUPerOp(b *testing.B, cpu0 time.Duration) {
	b.ReportMetric(float64(cputime.Self()-cpu0)/1e3/float64(b.N), "cpu-µs/op")
}

// BenchmarkTableReadLiveBlock measures a transactions source's ReadBatch of
// one block (the live batch at the head, the freshness bench's
// getBatch) from the in-repo node over websocket: wall per batch (p50),
// and CPU per batch of node and client, which share the process.
func BenchmarkTableReadLiveBlock(b *testing.B) {
	m := testManifest(b)
	n := startChainNode(b, 1, ethnode.Faults{})
	s, _ := openSource(b, Options{Endpoints: []string{"ws" + strings.TrimPrefix(n.URL(), "http")}, Table: "transactions", MaxBlocksPerTrigger: 1}, nil)
	start := Offset{Block: m.LastBlock, Hash: m.LastHash}.JSON()
	end := Offset{Block: m.LastBlock + 1, Hash: lowerHex(n.Header(m.LastBlock + 1).Hash().Hex())}.JSON()
	timeReadBatch(b, s, start, end, func(*stream.Batch) error { return nil })
}

// timeReadBatch times s.ReadBatch(start, end, emit) in b's loop, reports
// the median wall per batch and the process's CPU per batch, and returns
// the batches read.
func timeReadBatch(b *testing.B, s *Source, start, end stream.Offset, emit func(*stream.Batch) error) int {
	var ms []float64
	cpu0 := cputime.Self()
	for b.Loop() {
		t0 := time.Now()
		if err := s.ReadBatch(context.Background(), start, end, emit); err != nil {
			b.Fatal(err)
		}
		ms = append(ms, float64(time.Since(t0))/1e6)
	}
	b.ReportMetric(median(ms), "readBatch-p50-ms")
	b.ReportMetric(float64(cputime.Self()-cpu0)/1e6/float64(len(ms)), "cpu-ms/batch")
	return len(ms)
}
