package ethnode

import (
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/ethereum/go-ethereum/trie"
	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/internal/listen"
)

var (
	nodeArchiveOnce sync.Once
	nodeArchiveDir  string
	nodeArchiveM    *archivegen.Manifest
)

// testArchive is a one-day archive (the last day of history), generated once
// per test binary.
func testArchive(t *testing.T) (string, *archivegen.Manifest) {
	t.Helper()
	nodeArchiveOnce.Do(func() {
		dir, err := tempDirForPackage()
		if err != nil {
			t.Fatal(err)
		}
		m, err := archivegen.Generate(context.Background(), archivegen.Options{Out: dir, Preset: chain.LastDaysPreset(1), Seed: 11})
		if err != nil {
			t.Fatal(err)
		}
		nodeArchiveDir, nodeArchiveM = dir, m
	})
	if nodeArchiveM == nil {
		t.Fatal("test archive generation failed earlier")
	}
	return nodeArchiveDir, nodeArchiveM
}

func startTestNode(t *testing.T, o Options) *Node {
	t.Helper()
	if o.Manifest == nil {
		_, o.Manifest = testArchive(t)
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	n, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func TestNodeFollowsArchive(t *testing.T) {
	dir, m := testArchive(t)
	m2, err := archivegen.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := startTestNode(t, Options{Manifest: m2, Seed: m2.Seed, Manual: true, InitialBlocks: 3})
	ctx := context.Background()
	ec, err := ethclient.Dial(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	head, err := ec.BlockNumber(ctx)
	if err != nil || head != m.LastBlock+3 {
		t.Fatalf("head %d %v, want %d", head, err, m.LastBlock+3)
	}
	parent := common.HexToHash(m.LastHash)
	prevTime := uint64(m.LastTimestamp)
	for num := m.LastBlock + 1; num <= head; num++ {
		b, err := ec.BlockByNumber(ctx, new(big.Int).SetUint64(num))
		if err != nil {
			t.Fatalf("block %d: %v", num, err)
		}
		if b.ParentHash() != parent {
			t.Fatalf("block %d parent %s, want %s", num, b.ParentHash(), parent)
		}
		if b.Time() != prevTime+12 {
			t.Fatalf("block %d time %d, parent %d", num, b.Time(), prevTime)
		}
		// The node's reported hash equals what ethclient computes.
		var raw map[string]any
		if err := ec.Client().CallContext(ctx, &raw, "eth_getBlockByNumber", hexutil.EncodeUint64(num), false); err != nil {
			t.Fatal(err)
		}
		if raw["hash"] != b.Hash().Hex() || n.Header(num).Hash() != b.Hash() {
			t.Fatalf("block %d: node hash %v, ethclient %s", num, raw["hash"], b.Hash())
		}
		if got := types.DeriveSha(b.Transactions(), trie.NewStackTrie(nil)); got != b.TxHash() {
			t.Fatalf("block %d: tx root %s, header %s", num, got, b.TxHash())
		}
		if len(b.Transactions()) == 0 || len(raw["transactions"].([]any)) != len(b.Transactions()) {
			t.Fatalf("block %d: %d txs", num, len(b.Transactions()))
		}
		if b.Difficulty().Sign() != 0 || b.BaseFee() == nil || *b.Header().WithdrawalsHash != types.EmptyWithdrawalsHash {
			t.Fatalf("block %d: not a post-merge header: %+v", num, b.Header())
		}
		byHash, err := ec.BlockByHash(ctx, b.Hash())
		if err != nil || byHash.Hash() != b.Hash() || len(byHash.Transactions()) != len(b.Transactions()) {
			t.Fatalf("by hash: %v", err)
		}
		parent, prevTime = b.Hash(), b.Time()
	}
	// Archive blocks and future blocks are unknown to the node.
	for _, num := range []uint64{m.LastBlock, head + 1} {
		if _, err := ec.BlockByNumber(ctx, new(big.Int).SetUint64(num)); !errors.Is(err, ethereum.NotFound) {
			t.Fatalf("block %d: %v", num, err)
		}
	}
	if id, err := ec.ChainID(ctx); err != nil || id.Int64() != 1 {
		t.Fatalf("chain id %v %v", id, err)
	}
	if v, err := ec.NetworkID(ctx); err != nil || v.Int64() != 1 {
		t.Fatalf("net_version %v %v", v, err)
	}
}

func TestNodeBatchTagsAndDeterminism(t *testing.T) {
	n := startTestNode(t, Options{Seed: 11, Manual: true, InitialBlocks: 100})
	c, err := rpc.Dial(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var (
		num                                 hexutil.Uint64
		latest, safe, fin, early, pend, hyd map[string]any
		chainID                             hexutil.Big
		version                             string
	)
	batch := []rpc.BatchElem{
		{Method: "eth_blockNumber", Result: &num},
		{Method: "eth_getBlockByNumber", Args: []any{"latest", false}, Result: &latest},
		{Method: "eth_getBlockByNumber", Args: []any{"safe", false}, Result: &safe},
		{Method: "eth_getBlockByNumber", Args: []any{"finalized", false}, Result: &fin},
		{Method: "eth_getBlockByNumber", Args: []any{"earliest", false}, Result: &early},
		{Method: "eth_getBlockByNumber", Args: []any{"pending", false}, Result: &pend},
		{Method: "eth_getBlockByNumber", Args: []any{"latest", true}, Result: &hyd},
		{Method: "eth_chainId", Result: &chainID},
		{Method: "net_version", Result: &version},
	}
	if err := c.BatchCallContext(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	for _, e := range batch {
		if e.Error != nil {
			t.Fatalf("%s: %v", e.Method, e.Error)
		}
	}
	head := n.Head()
	if uint64(num) != head || latest["number"] != hexutil.EncodeUint64(head) || pend["number"] != latest["number"] ||
		safe["number"] != hexutil.EncodeUint64(head-32) || fin["number"] != hexutil.EncodeUint64(head-64) ||
		early["number"] != hexutil.EncodeUint64(n.base) || (*big.Int)(&chainID).Int64() != 1 || version != "1" {
		t.Fatalf("batch results: num %d latest %v safe %v fin %v early %v", num, latest["number"], safe["number"], fin["number"], early["number"])
	}
	txs := hyd["transactions"].([]any)
	hashes := latest["transactions"].([]any)
	if len(txs) != len(hashes) || len(txs) == 0 {
		t.Fatalf("hydrated %d txs, hashes %d", len(txs), len(hashes))
	}
	if tx := txs[0].(map[string]any); tx["hash"] != hashes[0] || tx["blockHash"] != latest["hash"] {
		t.Fatalf("hydrated tx %v", tx)
	}
	// Same seed and archive: same chain.
	n2 := startTestNode(t, Options{Seed: 11, Manual: true, InitialBlocks: 100})
	if n2.Header(head).Hash() != n.Header(head).Hash() {
		t.Fatal("same seed, different chain")
	}
	n3 := startTestNode(t, Options{Seed: 12, Manual: true, InitialBlocks: 1})
	if n3.Header(n.base).Hash() == n.Header(n.base).Hash() {
		t.Fatal("different seed, same block")
	}
}

func TestNodeReorg(t *testing.T) {
	n := startTestNode(t, Options{Seed: 11, Manual: true, InitialBlocks: 10})
	head := n.Head()
	before := map[uint64]common.Hash{}
	for num := n.base; num <= head; num++ {
		before[num] = n.Header(num).Hash()
	}
	n.Reorg(3)
	if n.Head() != head {
		t.Fatalf("reorg moved head %d -> %d", head, n.Head())
	}
	for num := n.base; num <= head; num++ {
		changed := n.Header(num).Hash() != before[num]
		if changed != (num > head-3) {
			t.Fatalf("block %d changed=%v", num, changed)
		}
		if num > n.base && n.Header(num).ParentHash != n.Header(num-1).Hash() {
			t.Fatalf("block %d not linked after reorg", num)
		}
	}
	ec, _ := ethclient.Dial(n.URL())
	defer ec.Close()
	ctx := context.Background()
	b, err := ec.BlockByNumber(ctx, new(big.Int).SetUint64(head))
	if err != nil || b.Hash() != n.Header(head).Hash() {
		t.Fatalf("new head via rpc: %v", err)
	}
	old, err := ec.BlockByHash(ctx, before[head])
	if err != nil || old.Hash() != before[head] {
		t.Fatalf("orphan by hash: %v", err)
	}
	n.Mine(2)
	if n.Header(head+1).ParentHash != n.Header(head).Hash() {
		t.Fatal("mining after reorg does not extend the new branch")
	}
	n.Reorg(1000) // clamped to the node's blocks
	if n.Header(n.base).ParentHash != common.HexToHash(n.o.Manifest.LastHash) {
		t.Fatal("deep reorg broke the link to the archive")
	}
}

func TestNodeFaults(t *testing.T) {
	n := startTestNode(t, Options{Seed: 11, Manual: true, InitialBlocks: 2,
		Faults: Faults{Rate429: 1, RetryAfter: 2 * time.Second}})
	resp, err := http.Post(n.URL(), "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2" {
		t.Fatalf("status %d retry-after %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	ec, _ := ethclient.Dial(n.URL())
	defer ec.Close()
	_, err = ec.BlockNumber(context.Background())
	var httpErr rpc.HTTPError
	if !errors.As(err, &httpErr) || httpErr.StatusCode != 429 {
		t.Fatalf("ethclient during 429 burst: %v", err)
	}
	n.SetFaults(Faults{Rate5xx: 1})
	_, err = ec.BlockNumber(context.Background())
	if !errors.As(err, &httpErr) || httpErr.StatusCode != 503 {
		t.Fatalf("ethclient during 5xx: %v", err)
	}
	// A burst of 429s at a fractional rate: a client retrying on 429 gets through.
	n.SetFaults(Faults{Rate429: 0.5, Seed: 5})
	ok, limited := 0, 0
	for i := 0; i < 40; i++ {
		if _, err := ec.BlockNumber(context.Background()); err == nil {
			ok++
		} else if errors.As(err, &httpErr) && httpErr.StatusCode == 429 {
			limited++
		} else {
			t.Fatal(err)
		}
	}
	if ok == 0 || limited == 0 {
		t.Fatalf("ok %d limited %d", ok, limited)
	}
	n.SetFaults(Faults{Latency: time.Millisecond})
	if h, err := ec.BlockNumber(context.Background()); err != nil || h != n.Head() {
		t.Fatalf("after faults cleared: %d %v", h, err)
	}
}

func TestNodeClockAndWebsocket(t *testing.T) {
	// 12 s blocks at 600x: a block every 20 ms of wall time.
	n := startTestNode(t, Options{Seed: 11, Speed: 600, InitialBlocks: 1})
	deadline := time.Now().Add(30 * time.Second)
	for n.Head() < n.base+10 {
		if time.Now().After(deadline) {
			t.Fatalf("head stuck at %d", n.Head())
		}
		time.Sleep(5 * time.Millisecond)
	}
	c, err := rpc.Dial("ws" + strings.TrimPrefix(n.URL(), "http"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var num hexutil.Uint64
	if err := c.Call(&num, "eth_blockNumber"); err != nil || uint64(num) < n.base+10 {
		t.Fatalf("ws eth_blockNumber %d %v", num, err)
	}
	var b json.RawMessage
	if err := c.Call(&b, "eth_getBlockByNumber", "latest", true); err != nil || len(b) < 100 {
		t.Fatalf("ws block: %v", err)
	}
}

func TestNodeBadInput(t *testing.T) {
	if _, err := Start(context.Background(), Options{}); err == nil {
		t.Fatal("node without manifest started")
	}
	n := startTestNode(t, Options{Seed: 11, Manual: true})
	if n.Head() != n.o.Manifest.LastBlock {
		t.Fatalf("fresh node head %d", n.Head())
	}
	_, err := Start(context.Background(), Options{Manifest: n.o.Manifest, Addr: strings.TrimPrefix(n.URL(), "http://"), Manual: true})
	if err == nil || !strings.Contains(err.Error(), listen.CodeAddressInUse) {
		t.Fatalf("busy port: %v", err)
	}
}

// TestNodeOnHeadRequest: the hook runs before each head request is
// answered (so the answer shows what it did), not before other calls, and
// not after it is removed.
func TestNodeOnHeadRequest(t *testing.T) {
	n := startTestNode(t, Options{Seed: 11, Manual: true, InitialBlocks: 4})
	calls := 0
	n.OnHeadRequest(func() { calls++; n.Mine(2) })
	ec, _ := ethclient.Dial(n.URL())
	defer ec.Close()
	ctx := context.Background()
	start := n.Head()
	for i := 1; i <= 3; i++ {
		h, err := ec.HeaderByNumber(ctx, nil) // "latest"
		if err != nil {
			t.Fatal(err)
		}
		if want := start + 2*uint64(i); h.Number.Uint64() != want || h.Hash() != n.Header(want).Hash() {
			t.Fatalf("head request %d answered block %d, want %d", i, h.Number.Uint64(), want)
		}
	}
	if _, err := ec.BlockNumber(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ec.HeaderByNumber(ctx, new(big.Int).SetUint64(start)); err != nil {
		t.Fatal(err)
	}
	if calls != 3 {
		t.Fatalf("hook ran %d times for 3 head requests (and a block number and a numbered block)", calls)
	}
	n.OnHeadRequest(nil)
	if h, err := ec.HeaderByNumber(ctx, nil); err != nil || h.Number.Uint64() != start+6 {
		t.Fatalf("after removing the hook: %v, %v", h, err)
	}
}
