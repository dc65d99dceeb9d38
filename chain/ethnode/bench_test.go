package ethnode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
)

// BenchmarkNodeMine1000 measures mining 1,000 late-2026 blocks with their
// transactions (target: well under 2 s).
func BenchmarkNodeMine1000(b *testing.B) {
	dir := b.TempDir()
	m, err := archivegen.Generate(context.Background(), archivegen.Options{Out: dir, Preset: chain.LastDaysPreset(1), Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n, err := Start(context.Background(), Options{Manifest: m, Seed: 1, Manual: true, Addr: "127.0.0.1:0"})
		if err != nil {
			b.Fatal(err)
		}
		n.Mine(1000)
		n.Close()
	}
}

// BenchmarkNodeBatch20 measures the node answering one live trigger's read:
// a JSON-RPC batch of 20 eth_getBlockByNumber(n, false) calls (the form the
// ethrpc source sends) over loopback HTTP with keep-alive, the answer read
// whole. "fresh" asks for the 20 blocks mined just before (what a live
// source reads); "again" repeats one batch. It reports the median answer
// time (target: <= 5 ms) and, for fresh, the mining time per block, which
// is where a node that renders a block once at import pays for it.
// Run: go test -run '^$' -bench NodeBatch20 ./chain/ethnode
func BenchmarkNodeBatch20(b *testing.B) {
	dir := b.TempDir()
	m, err := archivegen.Generate(context.Background(), archivegen.Options{Out: dir, Preset: chain.LastDaysPreset(1), Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	for _, fresh := range []bool{true, false} {
		name := "again"
		if fresh {
			name = "fresh"
		}
		b.Run(name, func(b *testing.B) {
			n, err := Start(context.Background(), Options{Manifest: m, Seed: 1, Manual: true, InitialBlocks: 20})
			if err != nil {
				b.Fatal(err)
			}
			defer n.Close()
			c := &http.Client{}
			var askMs, mineMs []float64
			var size int
			for b.Loop() {
				if fresh {
					t0 := time.Now()
					n.Mine(20)
					mineMs = append(mineMs, float64(time.Since(t0))/1e6/20)
				}
				head := n.Head()
				t0 := time.Now()
				body := postBatch20(b, c, n.URL(), head-19)
				askMs = append(askMs, float64(time.Since(t0))/1e6)
				checkBatch20(b, body)
				size = len(body)
			}
			b.ReportMetric(medianOf(askMs), "batch-p50-ms")
			b.ReportMetric(float64(size)/1e3, "answer-KB")
			if fresh {
				b.ReportMetric(medianOf(mineMs), "mine-ms/block")
			}
		})
	}
}

// postBatch20 posts the batch for blocks first..first+19 and returns the
// answer.
func postBatch20(b *testing.B, c *http.Client, url string, first uint64) []byte {
	var req bytes.Buffer
	req.WriteByte('[')
	for i := uint64(0); i < 20; i++ {
		if i > 0 {
			req.WriteByte(',')
		}
		fmt.Fprintf(&req, `{"jsonrpc":"2.0","id":%d,"method":"eth_getBlockByNumber","params":["%s",false]}`, i+1, hexutil.EncodeUint64(first+i))
	}
	req.WriteByte(']')
	resp, err := c.Post(url, "application/json", &req)
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("batch answer %d: %v", resp.StatusCode, err)
	}
	return body
}

// checkBatch20 fails b unless every call of the answer returned a block.
func checkBatch20(b *testing.B, body []byte) {
	var msgs []struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(body, &msgs); err != nil || len(msgs) != 20 {
		b.Fatalf("batch answer: %d messages, %v", len(msgs), err)
	}
	for i, m := range msgs {
		if len(m.Result) < 100 {
			b.Fatalf("call %d answered %s", i, m.Result)
		}
	}
}

func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// BenchmarkGethBatch20 is BenchmarkNodeBatch20/again against a real node,
// given by ETHSTREAM_GETH_URL (e.g. geth --dev --dev.period 1 --http on
// loopback, with at least 40 blocks); skipped without it. It asks for
// blocks 21..40 every time.
// Run: ETHSTREAM_GETH_URL=http://127.0.0.1:8545 go test -run '^$' -bench GethBatch20 ./chain/ethnode
func BenchmarkGethBatch20(b *testing.B) {
	url := os.Getenv("ETHSTREAM_GETH_URL")
	if url == "" {
		b.Skip("set ETHSTREAM_GETH_URL to a node's HTTP endpoint")
	}
	c := &http.Client{}
	var askMs []float64
	var size int
	for b.Loop() {
		t0 := time.Now()
		body := postBatch20(b, c, url, 21)
		askMs = append(askMs, float64(time.Since(t0))/1e6)
		checkBatch20(b, body)
		size = len(body)
	}
	b.ReportMetric(medianOf(askMs), "batch-p50-ms")
	b.ReportMetric(float64(size)/1e3, "answer-KB")
}
