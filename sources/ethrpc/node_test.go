package ethrpc

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/stream"
)

var (
	archiveOnce sync.Once
	archiveM    *archivegen.Manifest
	archiveErr  error
)

// testManifest is a one-day synthetic archive (the last day of history),
// generated once per test binary; only its manifest is used here.
func testManifest(t testing.TB) *archivegen.Manifest {
	t.Helper()
	archiveOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ethrpc-archive-")
		if err != nil {
			archiveErr = err
			return
		}
		defer os.RemoveAll(dir)
		archiveM, archiveErr = archivegen.Generate(context.Background(), archivegen.Options{Out: dir, Preset: chain.LastDaysPreset(1), Seed: 7})
	})
	if archiveErr != nil {
		t.Fatal(archiveErr)
	}
	return archiveM
}

func startChainNode(t testing.TB, initial int, faults ethnode.Faults) *ethnode.Node {
	t.Helper()
	n, err := ethnode.Start(context.Background(), ethnode.Options{Manifest: testManifest(t), Seed: 7, Addr: "127.0.0.1:0",
		Manual: true, InitialBlocks: initial, Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// TestEmbeddedNodeSeamAndFollow is the demo's live phase in miniature:
// start one past the archive, check the seam against the archive's last
// hash, follow the head 20 blocks at a time, restart mid-stream.
func TestEmbeddedNodeSeamAndFollow(t *testing.T) {
	m := testManifest(t)
	n := startChainNode(t, 50, ethnode.Faults{})
	uri := n.URL() + "?maxBlocksPerTrigger=20&start_block=" + itoa(m.LastBlock+1) + "&start_parent_hash=" + m.LastHash + "&confirmations=0"
	o, err := ParseURI(uri)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := openSource(t, o, nil)
	var r rows
	end, ends := drive(t, s, nil, 20, &r)
	if len(ends) != 3 || mustOffset(t, end).Block != m.LastBlock+50 || len(r.number) != 50 {
		t.Fatalf("ends %d end %s rows %d", len(ends), end, len(r.number))
	}
	if r.number[0] != int64(m.LastBlock+1) || r.parent[0] != strings.ToLower(m.LastHash) {
		t.Fatalf("first block %d parent %s, want %d %s", r.number[0], r.parent[0], m.LastBlock+1, m.LastHash)
	}
	for i := range r.number {
		h := n.Header(uint64(r.number[i]))
		if h == nil || r.hash[i] != strings.ToLower(h.Hash().Hex()) || r.ts[i] != int64(h.Time)*1_000_000 ||
			r.miner[i] != strings.ToLower(h.Coinbase.Hex()) || r.gas[i] != int64(h.GasUsed) {
			t.Fatalf("block %d differs from the node's header", r.number[i])
		}
	}
	// Restart: a new source with the committed offset ignores start_block.
	_ = s.Close()
	n.Mine(30)
	s2, _ := openSource(t, o, ends[1])
	var r2 rows
	end2, _ := drive(t, s2, ends[1], 20, &r2)
	if mustOffset(t, end2).Block != m.LastBlock+80 || r2.number[0] != int64(m.LastBlock+41) {
		t.Fatalf("restart read %d.. to %s", r2.number[0], end2)
	}

	// A wrong archive hash is refused before anything is emitted.
	o.StartParentHash = "0x" + strings.Repeat("0", 64)
	s3, _ := openSource(t, o, nil)
	first, _ := s3.LatestOffset(context.Background(), nil)
	var r3 rows
	if err := s3.ReadBatch(context.Background(), nil, first, r3.emit); !errcode.Is(err, CodeSeamMismatch) || len(r3.number) != 0 {
		t.Fatalf("err %v rows %d", err, len(r3.number))
	}
}

func TestEmbeddedNodeReorg(t *testing.T) {
	m := testManifest(t)
	for _, tc := range []struct {
		confirmations uint64
		depth         int
		want          string
	}{{6, 4, ""}, {2, 4, CodeReorgDetected}} {
		n := startChainNode(t, 40, ethnode.Faults{})
		s, _ := openSource(t, Options{Endpoints: []string{n.URL()}, StartBlock: m.LastBlock + 1, MaxBlocksPerTrigger: 100,
			Confirmations: tc.confirmations}, nil)
		ctx := context.Background()
		var r rows
		o1, err := s.LatestOffset(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.ReadBatch(ctx, nil, o1, r.emit); err != nil {
			t.Fatal(err)
		}
		n.Reorg(tc.depth)
		n.Mine(5)
		o2, err := s.LatestOffset(ctx, o1)
		if err != nil {
			t.Fatal(err)
		}
		err = s.ReadBatch(ctx, o1, o2, r.emit)
		if tc.want == "" && err != nil || tc.want != "" && !errcode.Is(err, tc.want) {
			t.Fatalf("confirmations %d depth %d: err %v, want %q", tc.confirmations, tc.depth, err, tc.want)
		}
	}
}

// TestEmbeddedNodeFaults reads through a node answering a third of its
// requests with 429 or 503; every block arrives once and in order.
func TestEmbeddedNodeFaults(t *testing.T) {
	m := testManifest(t)
	n := startChainNode(t, 100, ethnode.Faults{Rate429: 0.2, Rate5xx: 0.15, RetryAfter: 2 * time.Second, Seed: 3})
	s, clk := openSource(t, Options{Endpoints: []string{n.URL()}, StartBlock: m.LastBlock + 1, MaxRetries: 30}, nil)
	var r rows
	end, _ := drive(t, s, nil, 20, &r)
	if mustOffset(t, end).Block != m.LastBlock+100 || len(r.number) != 100 {
		t.Fatalf("end %s rows %d", end, len(r.number))
	}
	for i := range r.number {
		if r.number[i] != int64(m.LastBlock+1)+int64(i) {
			t.Fatalf("row %d is block %d", i, r.number[i])
		}
	}
	mt := s.Metrics()
	if mt["throttles"] == "0" || mt["retries"] == "0" {
		t.Fatalf("no faults seen: %v", mt)
	}
	var honoured bool
	for _, d := range clk.Sleeps() {
		honoured = honoured || d >= 2*time.Second
	}
	if !honoured {
		t.Fatalf("Retry-After never honoured: %v", clk.Sleeps())
	}
}

// TestEmbeddedNodeFailover: a dead endpoint first, then the node over ws.
func TestEmbeddedNodeFailover(t *testing.T) {
	m := testManifest(t)
	n := startChainNode(t, 25, ethnode.Faults{})
	ws := "ws://" + strings.TrimPrefix(n.URL(), "http://")
	s, _ := openSource(t, Options{Endpoints: []string{deadURL(t), ws}, StartBlock: m.LastBlock + 1}, nil)
	var r rows
	end, _ := drive(t, s, nil, 20, &r)
	if mustOffset(t, end).Block != m.LastBlock+25 || s.Metrics()["failovers"] == "0" {
		t.Fatalf("end %s metrics %v", end, s.Metrics())
	}
	var _ stream.Source = s

	// A dead websocket endpoint (dial fails) fails over too.
	dead := "ws://" + strings.TrimPrefix(deadURL(t), "http://")
	s2, _ := openSource(t, Options{Endpoints: []string{dead, n.URL()}, StartBlock: m.LastBlock + 1}, nil)
	var r2 rows
	if end, _ := drive(t, s2, nil, 20, &r2); mustOffset(t, end).Block != m.LastBlock+25 {
		t.Fatalf("end %s", end)
	}
}

// TestEmbeddedNodeTimeouts: a node slower than the per-request timeout is
// retried, then reported as unavailable.
func TestEmbeddedNodeTimeouts(t *testing.T) {
	n := startChainNode(t, 5, ethnode.Faults{Latency: 5 * time.Second})
	s, _ := openSource(t, Options{Endpoints: []string{n.URL()}, Timeout: 50 * time.Millisecond, MaxRetries: 2}, nil)
	_, err := s.LatestOffset(context.Background(), nil)
	if !errcode.Is(err, CodeRPCUnavailable) || s.Metrics()["retries"] != "2" {
		t.Fatalf("err %v metrics %v", err, s.Metrics())
	}

}

// TestWaitForStartBlock: a start_block beyond the head is no data, not an error.
func TestWaitForStartBlock(t *testing.T) {
	m := testManifest(t)
	n := startChainNode(t, 5, ethnode.Faults{})
	s, _ := openSource(t, Options{Endpoints: []string{n.URL()}, StartBlock: m.LastBlock + 10}, nil)
	o, err := s.LatestOffset(context.Background(), nil)
	if err != nil || o != nil {
		t.Fatalf("offset %s err %v, want no data", o, err)
	}
	if got := mustOffset(t, s.ReportLatestOffset()).Block; got != m.LastBlock+5 {
		t.Fatalf("reported head %d", got)
	}
	n.Mine(10)
	o, err = s.LatestOffset(context.Background(), nil)
	if err != nil || mustOffset(t, o).Block != m.LastBlock+15 {
		t.Fatalf("offset %s err %v", o, err)
	}
	var r rows
	if err := s.ReadBatch(context.Background(), nil, o, r.emit); err != nil || r.number[0] != int64(m.LastBlock+10) || len(r.number) != 6 {
		t.Fatalf("rows %v err %v", r.number, err)
	}
}
