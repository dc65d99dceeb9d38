package ethnode

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/listen"
)

// Options configures Start.
type Options struct {
	Manifest *archivegen.Manifest // the archive the chain continues; required
	Seed     int64
	Addr     string // listen address; "127.0.0.1:0" picks a free port
	// BlockInterval is the virtual block time (default 12s); with Speed (default
	// 1) the head advances every BlockInterval/Speed of wall time. Block
	// timestamps are always 12 s apart.
	BlockInterval time.Duration
	Speed         float64
	InitialBlocks int  // blocks already mined at start
	Manual        bool // head moves only through Mine
	Faults        Faults
	// CachedBlocks bounds the rendered-block cache (default
	// maxCachedBlocks); a client that reads each block once (a soak, whose
	// process memory is measured) needs only a few.
	CachedBlocks int
	// TxHistory is geth's --history.transactions: the last blocks, the
	// head included, whose transactions eth_getTransactionReceipt and
	// eth_getTransactionByHash find (default DefaultTxHistory, geth's).
	TxHistory uint64
}

// Faults injects HTTP-level failures in front of the JSON-RPC handler,
// drawn from a generator seeded with Seed.
type Faults struct {
	Latency    time.Duration // added to every HTTP request
	Rate429    float64       // fraction answered 429 Too Many Requests
	Rate5xx    float64       // fraction answered 503 Service Unavailable
	RetryAfter time.Duration // Retry-After of 429 answers (rounded up to seconds; default 1s)
	Seed       int64
}

// nodeBlock is a mined block. Transactions are not stored: they are
// regenerated from (seed, number, branch) when served, which keeps a
// long-running node's memory at a few hundred bytes per block.
type nodeBlock struct {
	header  *types.Header
	hash    common.Hash
	branch  uint64 // 0 for the original chain, >0 for a reorg's replacement
	txCount int
	size    uint64
}

// Node is an embedded Ethereum JSON-RPC node continuing an archive's chain.
// It is safe for concurrent use.
type Node struct {
	o    Options
	url  string
	srv  *http.Server
	rpc  *rpc.Server
	base uint64 // first block the node mines = archive last + 1
	// td is the archive's last total difficulty, which every mined
	// (proof-of-stake) block keeps, so that the node reports the value an
	// archive row of the same block holds.
	td     float64
	start  time.Time
	period time.Duration
	stop   chan struct{}
	wg     sync.WaitGroup

	closeOnce sync.Once
	closeErr  error

	mu       sync.RWMutex
	parent   *types.Header // the archive's last header
	canon    []*nodeBlock  // canon[i] is block base+i
	byHash   map[common.Hash]*nodeBlock
	branches uint64
	mined    int // blocks mined by the clock or Mine (excluding reorgs)

	fmu    sync.Mutex
	faults Faults
	frnd   *rand.Rand

	// hmu serialises the head-request hook (OnHeadRequest) and guards it.
	hmu  sync.Mutex
	hook func()

	// Rendered eth_getBlockByNumber(..., false) answers by block hash, filled
	// when a block is mined (mineBlocks), read ahead of a reader (readAhead)
	// or first read: a block never
	// changes, and rebuilding its transactions costs ~1 ms per request.
	// Bounded FIFO, so a long-running node does not grow without limit.
	cmu    sync.Mutex
	cached map[common.Hash]*compactAnswer
	corder []common.Hash

	// bmu guards the bodies last served (servedBody), oldest first.
	bmu    sync.Mutex
	bodies []cachedBody

	// amu guards the read-ahead (readAhead): whether one runs and whether
	// Close began.
	amu    sync.Mutex
	ahead  bool
	closed bool

	heads heads // newHeads subscribers and announcement times (heads.go)

	// txIndex maps the transactions of the last txHistory blocks to
	// their block by the hash's first 8 bytes, txFull the rare hashes
	// whose 8 bytes another has (receipts.go); under mu. 20 to 40 bytes a
	// transaction (a map slot of 16 bytes, 7/16 to 7/8 full).
	txIndex map[uint64]*nodeBlock
	txFull  map[common.Hash]*nodeBlock
}

// readAheadBlocks is how far past a block read readAhead renders.
const readAheadBlocks = 64

// readAhead keeps the canonical blocks after num rendered, up to
// num+readAheadBlocks, on a goroutine of its own, so that a reader going
// through blocks mined before it asks (the blocks mined at start) finds
// them cached. It starts one when none runs and the block half a window
// past num exists but is not rendered.
func (n *Node) readAhead(num uint64) {
	window := min(readAheadBlocks, uint64(n.cacheLimit()/2))
	n.mu.RLock()
	probe := n.blockLocked(num + window/2)
	n.mu.RUnlock()
	if probe == nil || n.isCached(probe.hash) {
		return
	}
	n.amu.Lock()
	defer n.amu.Unlock()
	if n.closed || n.ahead {
		return
	}
	from, to := num+1, num+window
	n.ahead = true
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer func() {
			n.amu.Lock()
			n.ahead = false
			n.amu.Unlock()
		}()
		for k := from; k <= to; k++ {
			select {
			case <-n.stop:
				return
			default:
			}
			n.mu.RLock()
			b := n.blockLocked(k)
			n.mu.RUnlock()
			if b == nil {
				return
			}
			if n.isCached(b.hash) {
				continue
			}
			if c, err := n.compactAnswer(b); err == nil {
				n.cacheJSON(b.hash, c)
			}
		}
	}()
}

func (n *Node) isCached(h common.Hash) bool {
	n.cmu.Lock()
	defer n.cmu.Unlock()
	_, ok := n.cached[h]
	return ok
}

// maxCachedBlocks bounds the rendered-block cache (~16 KB a block).
const maxCachedBlocks = 4096

func (n *Node) cachedJSON(h common.Hash) (json.RawMessage, bool) {
	n.cmu.Lock()
	c, ok := n.cached[h]
	n.cmu.Unlock()
	if !ok {
		return nil, false
	}
	return c.json(), true
}

func (n *Node) cacheJSON(h common.Hash, b *compactAnswer) {
	n.cmu.Lock()
	defer n.cmu.Unlock()
	if n.cached == nil {
		n.cached = make(map[common.Hash]*compactAnswer)
	}
	if _, ok := n.cached[h]; ok {
		return
	}
	if len(n.corder) >= n.cacheLimit() {
		delete(n.cached, n.corder[0])
		n.corder = n.corder[1:]
	}
	n.cached[h] = b
	n.corder = append(n.corder, h)
}

func (n *Node) cacheLimit() int {
	if n.o.CachedBlocks > 0 {
		return n.o.CachedBlocks
	}
	return maxCachedBlocks
}

// Start starts the node: it mines InitialBlocks blocks, then serves
// JSON-RPC over HTTP and websocket on Addr until Close or ctx is done.
func Start(ctx context.Context, o Options) (*Node, error) {
	if o.Manifest == nil || o.Manifest.LastHeader == nil {
		return nil, errcode.New(archivegen.CodeArchiveNotFound, "", archivegen.GenRemedy, "node needs an archive manifest with its last header")
	}
	if o.BlockInterval <= 0 {
		o.BlockInterval = chain.SlotSeconds * time.Second
	}
	if o.Speed <= 0 {
		o.Speed = 1
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	td, err := archiveTD(o.Manifest)
	if err != nil {
		return nil, err
	}
	n := &Node{
		o:      o,
		td:     td,
		base:   o.Manifest.LastBlock + 1,
		parent: types.CopyHeader(o.Manifest.LastHeader),
		byHash: map[common.Hash]*nodeBlock{},
		period: time.Duration(float64(o.BlockInterval) / o.Speed),
		stop:   make(chan struct{}),
	}
	if n.period <= 0 {
		n.period = time.Nanosecond
	}
	n.SetFaults(o.Faults)
	n.mineBlocks(o.InitialBlocks, true)
	if n.rpc, err = n.newRPCServer(); err != nil {
		return nil, err
	}
	ln, err := listen.TCP(o.Addr)
	if err != nil {
		return nil, err
	}
	n.url = "http://" + ln.Addr().String()
	ws := n.rpc.WebsocketHandler([]string{"*"})
	n.srv = &http.Server{
		Handler: n.faultMiddleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
				ws.ServeHTTP(w, r)
				return
			}
			if n.serveBlockReads(w, r) {
				return
			}
			n.rpc.ServeHTTP(w, r)
		})),
		ReadHeaderTimeout: 10 * time.Second,
		ConnState:         n.heads.trackConn,
	}
	n.start = time.Now()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		_ = n.srv.Serve(ln)
	}()
	if !o.Manual {
		n.wg.Add(1)
		go n.clock()
	}
	go func() {
		select {
		case <-ctx.Done():
			n.Close()
		case <-n.stop:
		}
	}()
	return n, nil
}

// newRPCServer is go-ethereum's JSON-RPC server with the node's eth, net
// and web3 APIs (block reads are answered before it: serveBlockReads).
func (n *Node) newRPCServer() (*rpc.Server, error) {
	srv := rpc.NewServer()
	for name, api := range map[string]any{"eth": &ethAPI{n}, "net": netAPI{}, "web3": web3API{}} {
		if err := srv.RegisterName(name, api); err != nil {
			return nil, err
		}
	}
	return srv, nil
}

// clock mines the blocks due by wall time: InitialBlocks plus one per
// period since start. Computing the due count from elapsed time, rather
// than counting ticks, keeps the head right when the process is starved.
func (n *Node) clock() {
	defer n.wg.Done()
	t := time.NewTicker(min(n.period, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
			n.catchUp()
		}
	}
}

// maxCatchUp bounds the blocks mined per catch-up step, so a speed the
// machine cannot sustain makes the head lag instead of holding the lock (and
// blocking Close and RPC calls) for an ever-growing backlog.
const maxCatchUp = 32

func (n *Node) catchUp() {
	if n.o.Manual {
		return
	}
	select {
	case <-n.stop:
		return
	default:
	}
	due := n.o.InitialBlocks + int(time.Since(n.start)/n.period)
	n.mu.Lock()
	defer n.mu.Unlock()
	if due > n.mined {
		n.mineBlocks(min(due-n.mined, maxCatchUp), true)
	}
}

// URL is the HTTP endpoint, "http://127.0.0.1:PORT" (websocket: ws://...).
func (n *Node) URL() string { return n.url }

// Head is the latest block number (the archive's last block before the
// first block is mined).
func (n *Node) Head() uint64 {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.base - 1 + uint64(len(n.canon))
}

// Mine advances the head by k blocks now.
func (n *Node) Mine(k int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mineBlocks(k, true)
}

// mineBlocks mines k blocks; n.mu must be held. With render it renders
// the answers of the last blocks it mines, as many as the cache keeps
// (older ones would be evicted before anyone asks), as a node imports a
// block once: a live reader asks for each new block right after it is
// mined, and rendering at read time was 1 ms a block of its batch answer.
// The blocks mined at start are rendered too (~8 KB each): rendering them
// on a goroutine ahead of the reader instead (readAhead, which still covers
// blocks the cache evicted) measured no faster than rendering on read on a
// busy 2-core machine, the goroutine competing with the engine it serves.
func (n *Node) mineBlocks(k int, render bool) {
	keep := 0
	if render {
		keep = n.cacheLimit()
	}
	for i := 0; i < k; i++ {
		parent := n.parent
		if len(n.canon) > 0 {
			parent = n.canon[len(n.canon)-1].header
		}
		b := n.makeBlock(parent, 0, k-i <= keep)
		n.canon = append(n.canon, b)
		n.byHash[b.hash] = b
		if limit := n.txHistory(); uint64(len(n.canon)) > limit {
			n.unindexTxs(n.canon[uint64(len(n.canon))-1-limit])
		}
		n.heads.announce(b, true, time.Now())
	}
	n.mined += k
}

// Reorg replaces the last depth blocks with an alternative branch: same
// heights and timestamps, different producers, transactions and hashes.
// The replaced blocks stay retrievable by hash, as on a real node. Blocks of
// the archive cannot be reorganised; depth is clamped to the mined blocks.
func (n *Node) Reorg(depth int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	depth = min(depth, len(n.canon))
	if depth <= 0 {
		return
	}
	n.branches++
	from := len(n.canon) - depth
	for i := from; i < len(n.canon); i++ {
		parent := n.parent
		if i > 0 {
			parent = n.canon[i-1].header
		}
		b := n.makeBlock(parent, n.branches, true)
		n.canon[i] = b
		n.byHash[b.hash] = b
		n.heads.announce(b, i == len(n.canon)-1, time.Now())
	}
}

// OnHeadRequest sets f to run before the node answers each request for the
// head block (eth_getBlockByNumber "latest" or "pending"), one call at a
// time; nil removes it. f may Mine and Reorg. A driver that moves the chain
// in f moves it at fixed points of the client's protocol (a head-following
// client asks for the head once per poll) instead of at wall-clock times, so
// a seeded schedule produces the same chains and the same client reads on
// every run, however the processes are scheduled. Use it with Manual.
func (n *Node) OnHeadRequest(f func()) {
	n.hmu.Lock()
	defer n.hmu.Unlock()
	n.hook = f
}

func (n *Node) headRequested() {
	n.hmu.Lock()
	defer n.hmu.Unlock()
	if n.hook != nil {
		n.hook()
	}
}

// SetFaults replaces the fault injection settings.
func (n *Node) SetFaults(f Faults) {
	n.fmu.Lock()
	defer n.fmu.Unlock()
	n.faults = f
	n.frnd = rand.New(rand.NewPCG(uint64(f.Seed), 0x4e4f4445))
}

// Header returns a copy of the canonical header at num, or nil if the node
// has not mined it (archive blocks included).
func (n *Node) Header(num uint64) *types.Header {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if b := n.blockLocked(num); b != nil {
		return types.CopyHeader(b.header)
	}
	return nil
}

// Close stops the clock and the server. It may be called more than once.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		close(n.stop)
		err := n.srv.Close()
		n.rpc.Stop()
		n.amu.Lock()
		n.closed = true // no read-ahead starts after this
		n.amu.Unlock()
		n.wg.Wait()
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		n.closeErr = err
	})
	return n.closeErr
}

func (n *Node) blockLocked(num uint64) *nodeBlock {
	if num < n.base || num-n.base >= uint64(len(n.canon)) {
		return nil
	}
	return n.canon[num-n.base]
}

// makeBlock is block parent+1 of branch, as the model continues the chain
// (chain.Next). With render, it also caches the block's
// eth_getBlockByNumber(..., false) answer, from the transactions the model
// built anyway.
func (n *Node) makeBlock(parent *types.Header, branch uint64, render bool) *nodeBlock {
	nb := chain.Next(n.o.Seed, parent, branch)
	b := &nodeBlock{header: nb.Header, hash: nb.Header.Hash(), branch: branch, txCount: len(nb.Txs), size: nb.Size}
	hashes := nb.Txs.Hashes()
	n.indexTxs(b, hashes)
	if render {
		if c, err := n.compact(b, hashes); err == nil {
			n.cacheJSON(b.hash, c)
		}
	}
	return b
}

// blockJSON renders b as eth_getBlockByNumber does: the header fields
// (go-ethereum's own JSON, including "hash"), size, total difficulty,
// transactions (hashes, or full objects when full), uncles and withdrawals.
func (n *Node) blockJSON(b *nodeBlock, full bool) (json.RawMessage, error) {
	if !full {
		if j, ok := n.cachedJSON(b.hash); ok {
			return j, nil
		}
		c, err := n.compactAnswer(b)
		if err != nil {
			return nil, err
		}
		n.cacheJSON(b.hash, c)
		return c.json(), nil
	}
	return n.renderBlock(b, true)
}

// renderHead is a block's JSON up to its transactions array, open.
func (n *Node) renderHead(b *nodeBlock) ([]byte, error) {
	hj, err := json.Marshal(b.header)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 0, len(hj)+200)
	buf = append(buf, hj[:len(hj)-1]...)
	td, _ := new(big.Float).SetFloat64(n.td).Int(nil)
	buf = fmt.Appendf(buf, `,"size":"%s","totalDifficulty":"%s","uncles":[],"withdrawals":[],"transactions":[`,
		hexutil.EncodeUint64(b.size), hexutil.EncodeBig(td))
	return buf, nil
}

// compactAnswer is a block's full=false answer as the cache keeps it: the
// JSON up to its transactions array, and the transaction hashes raw. That
// is ~8 KB a block instead of the answer's ~16 KB (a hash takes 69 bytes of
// JSON), which keeps a bench's process within its memory target; json
// renders it in microseconds.
type compactAnswer struct {
	head   []byte
	hashes []byte // 32 bytes per transaction
}

// json is the answer.
func (c *compactAnswer) json() json.RawMessage {
	k := len(c.hashes) / 32
	buf := make([]byte, 0, len(c.head)+69*k+2)
	buf = append(buf, c.head...)
	for i := range k {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, '"', '0', 'x')
		buf = hex.AppendEncode(buf, c.hashes[32*i:32*i+32])
		buf = append(buf, '"')
	}
	return append(buf, "]}"...)
}

// compact builds a block's compactAnswer from its transaction hashes.
func (n *Node) compact(b *nodeBlock, hashes []common.Hash) (*compactAnswer, error) {
	head, err := n.renderHead(b)
	if err != nil {
		return nil, err
	}
	c := &compactAnswer{head: head, hashes: make([]byte, 0, 32*len(hashes))}
	for _, h := range hashes {
		c.hashes = append(c.hashes, h[:]...)
	}
	return c, nil
}

// compactAnswer builds a block's compactAnswer from regenerated
// transactions.
func (n *Node) compactAnswer(b *nodeBlock) (*compactAnswer, error) {
	if b.txCount == 0 {
		return n.compact(b, nil)
	}
	return n.compact(b, n.body(b).Enc.Hashes())
}

// renderBlock builds a block's JSON, with transaction objects if full.
func (n *Node) renderBlock(b *nodeBlock, full bool) (json.RawMessage, error) {
	if !full {
		c, err := n.compactAnswer(b)
		if err != nil {
			return nil, err
		}
		return c.json(), nil
	}
	buf, err := n.renderHead(b)
	if err != nil {
		return nil, err
	}
	if b.txCount > 0 {
		body := n.servedBody(b)
		for i := range body.Txs {
			if i > 0 {
				buf = append(buf, ',')
			}
			if buf, err = appendRPCTransaction(buf, b, body, i); err != nil {
				return nil, err
			}
		}
	}
	buf = append(buf, "]}"...)
	return buf, nil
}

// archiveTD is the total difficulty of the archive's last block, as its
// archive row holds it: the model rebuilds that block's day (a few
// milliseconds). It is the merge's total difficulty for an archive that
// ends after the merge.
func archiveTD(m *archivegen.Manifest) (float64, error) {
	i, ok := chain.DayOfBlock(m.LastBlock)
	if !ok {
		return 0, errcode.New(archivegen.CodeManifestCorrupt, "", "regenerate the archive with `ethstream gen-archive`",
			"manifest's last block %d is outside the chain model", m.LastBlock)
	}
	db := chain.BuildDay(m.Seed, i)
	return db.TD[m.LastBlock-db.FirstBlock()], nil
}

// ethAPI is the "eth" namespace.
type ethAPI struct{ n *Node }

// ChainId is eth_chainId: mainnet.
func (api *ethAPI) ChainId() *hexutil.Big { return (*hexutil.Big)(big.NewInt(1)) }

// BlockNumber is eth_blockNumber.
func (api *ethAPI) BlockNumber() hexutil.Uint64 {
	api.n.catchUp()
	return hexutil.Uint64(api.n.Head())
}

// Syncing is eth_syncing: never.
func (api *ethAPI) Syncing() bool { return false }

// GetBlockByNumber is eth_getBlockByNumber. Tags: latest and pending = head,
// safe = head-32, finalized = head-64, earliest = the first block this node
// mined (history lives in the archive). Unknown numbers return null.
func (api *ethAPI) GetBlockByNumber(ctx context.Context, number rpc.BlockNumber, full bool) (json.RawMessage, error) {
	n := api.n
	if number == rpc.LatestBlockNumber || number == rpc.PendingBlockNumber {
		n.headRequested()
	}
	n.catchUp()
	n.mu.RLock()
	head := n.base - 1 + uint64(len(n.canon))
	var num uint64
	switch number {
	case rpc.LatestBlockNumber, rpc.PendingBlockNumber:
		num = head
	case rpc.SafeBlockNumber:
		num = max(head-min(head, 32), n.base)
	case rpc.FinalizedBlockNumber:
		num = max(head-min(head, 64), n.base)
	case rpc.EarliestBlockNumber:
		num = n.base
	default:
		if number < 0 {
			n.mu.RUnlock()
			return nil, fmt.Errorf("unsupported block tag %d", number)
		}
		num = uint64(number)
	}
	b := n.blockLocked(num)
	n.mu.RUnlock()
	if b == nil {
		return json.RawMessage("null"), nil
	}
	if number >= 0 {
		n.readAhead(num) // a reader going through numbers, not polling a tag
	}
	return n.blockJSON(b, full)
}

// GetBlockByHash is eth_getBlockByHash; blocks replaced by a reorg are still
// found by hash.
func (api *ethAPI) GetBlockByHash(ctx context.Context, hash common.Hash, full bool) (json.RawMessage, error) {
	n := api.n
	n.catchUp()
	n.mu.RLock()
	b := n.byHash[hash]
	n.mu.RUnlock()
	if b == nil {
		return json.RawMessage("null"), nil
	}
	return n.blockJSON(b, full)
}

type netAPI struct{}

// Version is net_version.
func (netAPI) Version() string { return "1" }

type web3API struct{}

// ClientVersion is web3_clientVersion.
func (web3API) ClientVersion() string { return "ethstream/chain" }

func (n *Node) faultMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.fmu.Lock()
		f := n.faults
		u := n.frnd.Float64()
		n.fmu.Unlock()
		if f.Latency > 0 {
			select {
			case <-time.After(f.Latency):
			case <-r.Context().Done():
				return
			}
		}
		switch {
		case u < f.Rate429:
			ra := f.RetryAfter
			if ra <= 0 {
				ra = time.Second
			}
			w.Header().Set("Retry-After", strconv.Itoa(int((ra+time.Second-1)/time.Second)))
			http.Error(w, "rate limited", http.StatusTooManyRequests)
			return
		case u < f.Rate429+f.Rate5xx:
			http.Error(w, "upstream unavailable", http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
}
