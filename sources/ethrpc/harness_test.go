package ethrpc

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/node"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
)

// newFakeClock is the tests' manual clock (the harness's): Sleep records
// the wait and advances time at once, so retry and rate-limit paths run
// without real sleeping.
func newFakeClock() *streamtest.Clock {
	return streamtest.NewClock(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC))
}

// ethProxy is a JSON-RPC service forwarding the methods the source uses
// to the simulated backend's in-process client, so the source talks to a real
// go-ethereum rpc.Server over HTTP on loopback.
type ethProxy struct{ c *rpc.Client }

func (p *ethProxy) BlockNumber(ctx context.Context) (hexutil.Uint64, error) {
	var n hexutil.Uint64
	err := p.c.CallContext(ctx, &n, "eth_blockNumber")
	return n, err
}

func (p *ethProxy) GetBlockByNumber(ctx context.Context, tag string, full bool) (json.RawMessage, error) {
	var raw json.RawMessage
	err := p.c.CallContext(ctx, &raw, "eth_getBlockByNumber", tag, full)
	return raw, err
}

func (p *ethProxy) GetBlockByHash(ctx context.Context, hash string, full bool) (json.RawMessage, error) {
	var raw json.RawMessage
	err := p.c.CallContext(ctx, &raw, "eth_getBlockByHash", hash, full)
	return raw, err
}

// GetBlockReceipts forwards eth_getBlockReceipts (a table source's).
func (p *ethProxy) GetBlockReceipts(ctx context.Context, block string) (json.RawMessage, error) {
	var raw json.RawMessage
	err := p.c.CallContext(ctx, &raw, "eth_getBlockReceipts", block)
	return raw, err
}

// GetLogs forwards eth_getLogs (the tables' oracle, rpcoracle_test.go).
func (p *ethProxy) GetLogs(ctx context.Context, filter json.RawMessage) (json.RawMessage, error) {
	var raw json.RawMessage
	err := p.c.CallContext(ctx, &raw, "eth_getLogs", filter)
	return raw, err
}

// faultHandler wraps an http.Handler: scripted HTTP error statuses for the
// next requests, a kill switch, and a record of batch sizes seen, each with
// the lowest block number its calls ask for.
type faultHandler struct {
	next http.Handler

	mu         sync.Mutex
	script     []int // statuses to answer instead of serving, in order
	retryAfter string
	requests   int
	batchSizes []int
	batchFirst []uint64 // lowest eth_getBlockByNumber block of each batch; 0 if none
}

func (f *faultHandler) inject(retryAfter string, statuses ...int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script = append(f.script, statuses...)
	f.retryAfter = retryAfter
}

func (f *faultHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	f.mu.Lock()
	f.requests++
	if t := bytes.TrimSpace(body); len(t) > 0 && t[0] == '[' {
		var msgs []json.RawMessage
		if json.Unmarshal(t, &msgs) == nil {
			f.batchSizes = append(f.batchSizes, len(msgs))
			low, ok := lowestBlockAsked(msgs)
			if !ok {
				low = math.MaxUint64 // asks for no block: in no range
			}
			f.batchFirst = append(f.batchFirst, low)
		}
	}
	var status int
	if len(f.script) > 0 {
		status, f.script = f.script[0], f.script[1:]
	}
	ra := f.retryAfter
	f.mu.Unlock()
	if status != 0 {
		if ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		http.Error(w, http.StatusText(status), status)
		return
	}
	f.next.ServeHTTP(w, r)
}

func (f *faultHandler) sizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.batchSizes...)
}

// sizesFrom returns the sizes of the batches asking for blocks from first
// on (a batch asking for no block counts in none). A request the client
// cancelled can reach the server late, after requests sent later; its
// block numbers tell it apart where arrival order cannot.
func (f *faultHandler) sizesFrom(first uint64) []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []int
	for i, z := range f.batchSizes {
		if f.batchFirst[i] >= first && f.batchFirst[i] != math.MaxUint64 {
			out = append(out, z)
		}
	}
	return out
}

// lowestBlockAsked is the lowest block number among a batch's
// eth_getBlockByNumber calls; ok is false if it has none.
func lowestBlockAsked(msgs []json.RawMessage) (low uint64, ok bool) {
	for _, m := range msgs {
		var call struct {
			Method string            `json:"method"`
			Params []json.RawMessage `json:"params"`
		}
		if json.Unmarshal(m, &call) != nil || call.Method != "eth_getBlockByNumber" || len(call.Params) == 0 {
			continue
		}
		var hex string
		if json.Unmarshal(call.Params[0], &hex) != nil {
			continue
		}
		if n, err := hexutil.DecodeUint64(hex); err == nil && (!ok || n < low) {
			low, ok = n, true
		}
	}
	return low, ok
}

// simNode is go-ethereum's simulated chain served over HTTP on 127.0.0.1.
type simNode struct {
	t      testing.TB
	sim    *simulated.Backend
	rpc    *rpc.Server
	faults *faultHandler
	url    string
	key    *ecdsa.PrivateKey
	nonce  uint64
}

func newSimNode(t testing.TB) *simNode {
	t.Helper()
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	addr := crypto.PubkeyToAddress(key.PublicKey)
	// The backend hides its rpc.Client; its node's IPC endpoint gives the
	// proxy a raw JSON-RPC connection to it.
	ipc := filepath.Join(t.TempDir(), "sim.ipc")
	sim := simulated.NewBackend(types.GenesisAlloc{addr: {Balance: new(big.Int).Mul(big.NewInt(1000), big.NewInt(params.Ether))}},
		func(nc *node.Config, _ *ethconfig.Config) { nc.IPCPath = ipc })
	inproc, err := rpc.Dial(ipc)
	if err != nil {
		t.Fatal(err)
	}
	srv := rpc.NewServer()
	if err := srv.RegisterName("eth", &ethProxy{c: inproc}); err != nil {
		t.Fatal(err)
	}
	fh := &faultHandler{next: srv}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: fh, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	n := &simNode{t: t, sim: sim, rpc: srv, faults: fh, url: "http://" + ln.Addr().String(), key: key}
	t.Cleanup(func() {
		_ = hs.Close()
		srv.Stop()
		inproc.Close()
		_ = sim.Close()
	})
	return n
}

// mine seals k blocks.
func (n *simNode) mine(k int) {
	for range k {
		n.sim.Commit()
	}
}

// sendTxs queues k transfers that the next mined block includes.
func (n *simNode) sendTxs(k int) {
	n.t.Helper()
	ctx := context.Background()
	c := n.sim.Client()
	head, err := c.HeaderByNumber(ctx, nil)
	if err != nil {
		n.t.Fatal(err)
	}
	to := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	chainID := big.NewInt(1337)
	for range k {
		tx := types.NewTx(&types.DynamicFeeTx{
			ChainID: chainID, Nonce: n.nonce, GasTipCap: big.NewInt(params.GWei),
			GasFeeCap: new(big.Int).Add(head.BaseFee, big.NewInt(2*params.GWei)), Gas: 21000, To: &to, Value: big.NewInt(1),
		})
		signed, err := types.SignTx(tx, types.LatestSignerForChainID(chainID), n.key)
		if err != nil {
			n.t.Fatal(err)
		}
		if err := c.SendTransaction(ctx, signed); err != nil {
			n.t.Fatal(err)
		}
		n.nonce++
	}
	// SendTransaction returns once the pool has queued the transaction; it
	// makes it pending (minable) on its own goroutine, so a block mined now
	// may hold only some of them. Wait until the pool's pending nonce covers
	// all of them: then the next Commit includes every one.
	addr := crypto.PubkeyToAddress(n.key.PublicKey)
	deadline := time.Now().Add(30 * time.Second)
	for {
		pending, err := c.PendingNonceAt(ctx, addr)
		if err != nil {
			n.t.Fatal(err)
		}
		if pending >= n.nonce {
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("the pool made %d of %d transactions pending", pending, n.nonce)
		}
		time.Sleep(time.Millisecond)
	}
}

func (n *simNode) head() uint64 {
	n.t.Helper()
	h, err := n.sim.Client().BlockNumber(context.Background())
	if err != nil {
		n.t.Fatal(err)
	}
	return h
}

func (n *simNode) block(num uint64) *types.Block {
	n.t.Helper()
	b, err := n.sim.Client().BlockByNumber(context.Background(), new(big.Int).SetUint64(num))
	if err != nil {
		n.t.Fatalf("block %d: %v", num, err)
	}
	return b
}

// reorg replaces the blocks above head-depth with a longer side chain of
// depth+extra blocks, so the new blocks have different hashes.
func (n *simNode) reorg(depth, extra int) {
	n.t.Helper()
	h := n.head()
	parent := n.block(h - uint64(depth))
	if err := n.sim.Fork(parent.Hash()); err != nil {
		n.t.Fatal(err)
	}
	n.mine(depth + extra)
}

// deadURL is an http URL on 127.0.0.1 where nothing listens.
func deadURL(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return "http://" + addr
}

// openSource builds and opens a source with a fake clock and all columns
// (of the blocks, or of its table).
func openSource(t testing.TB, o Options, committed stream.Offset) (*Source, *streamtest.Clock) {
	t.Helper()
	if o.Timeout == 0 {
		o.Timeout = 20 * time.Second
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	clk := newFakeClock()
	cols := ethblock.Columns
	if s.isTable() {
		cols = nil // every column of the table
	}
	env := stream.SourceEnv{Name: "eth_live", Columns: cols, Committed: committed, Clock: clk,
		Logger: slog.New(slog.DiscardHandler)}
	if err := s.Open(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, clk
}

// rows is the decoded content of emitted batches, for comparisons.
type rows struct {
	number, ts, txs, gas []int64
	hash, parent, miner  []string
	batches              int
}

func (r *rows) emit(b *stream.Batch) error {
	if err := b.Validate(); err != nil {
		return err
	}
	r.batches++
	for _, c := range b.Columns {
		switch c.Name {
		case ethblock.ColNumber:
			r.number = append(r.number, c.Int64s...)
		case ethblock.ColBlockTS:
			r.ts = append(r.ts, c.Int64s...)
		case ethblock.ColTransactionCount:
			r.txs = append(r.txs, c.Int64s...)
		case ethblock.ColGasUsed:
			r.gas = append(r.gas, c.Int64s...)
		case ethblock.ColHash:
			r.hash = append(r.hash, c.Strings...)
		case ethblock.ColParentHash:
			r.parent = append(r.parent, c.Strings...)
		case ethblock.ColMiner:
			r.miner = append(r.miner, c.Strings...)
		default:
			// The other block columns are checked against the node by
			// the retraction tests (collect) and TestNodeColumns.
			if _, ok := ethblock.Lookup(c.Name); !ok {
				return errors.New("unexpected column " + c.Name)
			}
		}
	}
	return nil
}

func mustOffset(t testing.TB, raw stream.Offset) Offset {
	t.Helper()
	o, ok, err := ParseOffset(raw)
	if err != nil || !ok {
		t.Fatalf("offset %s: ok=%v err=%v", raw, ok, err)
	}
	return o
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
