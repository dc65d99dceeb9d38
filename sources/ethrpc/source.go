package ethrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/ethtables"
	"github.com/ethstream/ethstream/stream"
	"golang.org/x/sync/errgroup"
)

// emitChunkRows bounds the rows of one emitted stream.Batch, so a large
// catch-up batch does not build one huge columnar chunk.
const emitChunkRows = 4096

// Source is the live block source over Ethereum JSON-RPC. It implements
// stream.Source, stream.ReportingSource and stream.AvailableNowSource.
// The engine calls LatestOffset/ReadBatch/Commit from one goroutine;
// Metrics and ReportLatestOffset may be called concurrently with them.
type Source struct {
	o   Options
	env stream.SourceEnv
	// tcols are a table source's projected columns (table.go).
	tcols []string
	log   *slog.Logger
	pool  *pool
	batch atomic.Int64 // current JSON-RPC batch size; halved on "batch too large"

	capSet bool   // PrepareAvailableNow fixed the readable head
	cap    uint64 // that head

	hist historyLog // reorg=retract: the history files in MetadataDir
	seam seam       // overlap: the seam block to check (overlap.go)

	watch *headWatch // the newHeads subscription; nil when polling

	mu struct {
		sync.Mutex
		report *Offset // newest readable block, for ReportLatestOffset
		// reorg=retract: the reorgs of the current batch, and totals.
		reorgs                                []Reorg
		reorgsTotal, retractedTotal, maxDepth int64
		// learned is when the source first knew each planned end block
		// was readable (freshness.go); freshness is the last commit's.
		learned   map[uint64]time.Time
		freshness time.Duration
		freshSet  bool
	}
}

var (
	_ stream.Source             = (*Source)(nil)
	_ stream.ReportingSource    = (*Source)(nil)
	_ stream.AvailableNowSource = (*Source)(nil)
	_ stream.RetractingSource   = (*Source)(nil)
	_ stream.DataNotifier       = (*Source)(nil)
)

// Retracts reports whether the source retracts reorganised blocks (reorg=retract).
func (s *Source) Retracts() bool { return s.o.Reorg == ReorgRetract }

// New validates o, applies defaults and returns a Source; it does not
// contact the endpoints (Open does, lazily).
func New(o Options) (*Source, error) {
	if len(o.Endpoints) == 0 {
		return nil, errcode.New(CodeInvalidOption, "", "give at least one JSON-RPC endpoint URL", "ethrpc source has no endpoint")
	}
	for _, e := range o.Endpoints {
		if err := checkEndpoint(e); err != nil {
			return nil, err
		}
	}
	if o.Finality != "" && o.Finality != "safe" && o.Finality != "finalized" {
		return nil, errcode.New(CodeInvalidOption, "", `use finality "", "safe" or "finalized"`, "unknown finality %q", o.Finality)
	}
	if o.StartParentHash != "" {
		h, err := normHex(o.StartParentHash, 32)
		if err != nil {
			return nil, errcode.New(CodeInvalidOption, "", remedyParentHash, "start_parent_hash %q: want a 0x-prefixed 32-byte hex hash", o.StartParentHash)
		}
		o.StartParentHash = h
	}
	switch o.Reorg {
	case "", ReorgFail:
		if o.ReorgDepth != 0 {
			return nil, errcode.New(CodeInvalidOption, "", "add reorg=retract, or drop reorgDepth", "reorgDepth=%d needs reorg=retract", o.ReorgDepth)
		}
		o.Reorg = ReorgFail
	case ReorgRetract:
		if o.ReorgDepth < 0 || o.ReorgDepth > MaxReorgDepth {
			return nil, errcode.New(CodeInvalidOption, "", fmt.Sprintf("use a reorgDepth from 1 to %d", MaxReorgDepth), "reorgDepth=%d", o.ReorgDepth)
		}
		if o.ReorgDepth == 0 {
			o.ReorgDepth = DefaultReorgDepth
		}
	default:
		return nil, errcode.New(CodeInvalidOption, "", "use reorg=fail (the default) or reorg=retract", "unknown reorg mode %q", o.Reorg)
	}
	switch o.Subscribe {
	case "":
		o.Subscribe = SubscribeAuto
	case SubscribeAuto, SubscribeOff:
	default:
		return nil, errcode.New(CodeInvalidOption, "", "use subscribe=auto (the default) or subscribe=off", "unknown subscribe mode %q", o.Subscribe)
	}
	if o.MaxBlocksPerTrigger < 0 || o.MaxBatchSize < 0 || o.MaxRetries < 0 || o.Timeout < 0 {
		return nil, errcode.New(CodeInvalidOption, "", "use positive limits", "negative ethrpc limit in %+v", o)
	}
	if o.MaxBlocksPerTrigger == 0 {
		o.MaxBlocksPerTrigger = DefaultMaxBlocksPerTrigger
	}
	if o.MaxBatchSize == 0 {
		o.MaxBatchSize = DefaultMaxBatchSize
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = DefaultMaxRetries
	}
	if o.BatchTimeout <= 0 {
		o.BatchTimeout = DefaultBatchTimeout
	}
	if o.MaxResponseSize <= 0 {
		o.MaxResponseSize = DefaultMaxResponseSize
	}
	if o.Parallelism <= 0 {
		o.Parallelism = DefaultParallelism
	}
	s := &Source{o: o}
	if err := s.setOverlap(); err != nil {
		return nil, err
	}
	s.batch.Store(int64(o.MaxBatchSize))
	return s, nil
}

// Options returns the options with defaults applied (with an overlap,
// StartBlock is the first block read and the seam is checked apart).
func (s *Source) Options() Options { return s.o }

// Schema is the block schema (package ethblock), or with Options.Table
// that table's (package ethtables), whatever the projection.
func (s *Source) Schema() stream.Schema {
	if s.isTable() {
		return ethtables.StreamSchema(s.o.Table)
	}
	return ethblock.StreamSchema()
}

// Open prepares the source for a run: it checks the projection and sets up
// the endpoint pool (connections are made on first use).
func (s *Source) Open(ctx context.Context, env stream.SourceEnv) error {
	if s.isTable() {
		if err := s.openTable(env.Columns); err != nil {
			return err
		}
		// The blocks are planned and checked by their core columns.
		env.Columns = ethblock.Core
	}
	for _, c := range env.Columns {
		if t, ok := ethblock.ColumnType(c); !ok || c == stream.ColSource {
			return errcode.New(CodeInvalidOption, "", "project only the block columns "+strings.Join(ethblock.Columns, ", "),
				"ethrpc source cannot produce column %q (type %v)", c, t)
		}
	}
	if env.Columns == nil {
		env.Columns = ethblock.Columns // no projection: every block column
	}
	if env.Clock == nil {
		env.Clock = stream.SystemClock{}
	}
	s.log = s.o.Logger
	if s.log == nil {
		s.log = env.Logger
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.env = env
	if s.o.Reorg == ReorgRetract {
		if env.FS == nil || env.MetadataDir == "" {
			return errcode.New(CodeInvalidOption, "", "run the source in a query with a checkpoint",
				"reorg=retract keeps its history under the checkpoint's sources/<name>/, and none was given")
		}
		s.hist = historyLog{fs: env.FS, dir: env.MetadataDir}
	}
	s.pool = newPool(s.o.Endpoints, env.Clock, s.o.Timeout, s.o.MaxRetries, s.o.MaxResponseSize, s.log)
	if ws := wsEndpoint(s.o.Endpoints); ws != "" && s.o.Subscribe == SubscribeAuto && s.watch == nil {
		s.watch = startHeadWatch(ws, env.Clock, s.log, s.noteNotified)
	}
	return nil
}

// Description names the source and its first endpoint (host only: provider
// URLs carry API keys).
func (s *Source) Description() string {
	return "EthRPCSource[" + redact(s.o.Endpoints[0]) + "]"
}

// PrepareAvailableNow fixes the readable head: later LatestOffset calls never
// go past it.
func (s *Source) PrepareAvailableNow(ctx context.Context) error {
	head, _, ok, err := s.readableHead(ctx)
	if err != nil {
		return err
	}
	if !ok {
		head = 0
	}
	s.cap, s.capSet = head, true
	return nil
}

// LatestOffset returns the end of the next batch: up to MaxBlocksPerTrigger
// blocks past start, never past the readable head (head - confirmations, or
// the finality tag's block). With start nil (and nothing committed) the first
// block is StartBlock, or the readable head when StartBlock is 0. Returning
// start means no new block.
func (s *Source) LatestOffset(ctx context.Context, start stream.Offset) (stream.Offset, error) {
	end, err := s.latestOffset(ctx, start)
	if err == nil && string(end) != string(start) {
		s.noteLearned(end)
	}
	return end, err
}

func (s *Source) latestOffset(ctx context.Context, start stream.Offset) (stream.Offset, error) {
	ctx, cancel := s.batchDeadline(ctx)
	defer cancel()
	if s.o.Reorg == ReorgRetract {
		s.resetBatchReorgs()
		return s.latestRetract(ctx, start)
	}
	from := start
	if from == nil {
		// Defensive: the engine passes the last planned end; with none
		// planned but one committed, the committed offset wins over start_block.
		from = s.env.Committed
	}
	st, haveStart, err := ParseOffset(from)
	if err != nil {
		return nil, err
	}
	head, known, ok, err := s.readableHead(ctx)
	if err != nil || !ok {
		return start, err
	}
	var first uint64
	if haveStart {
		if st.Block >= head {
			return start, s.noteHead(ctx, head, known)
		}
		first = st.Block + 1
	} else {
		first = s.o.StartBlock
		if first == 0 {
			first = head
		}
		if first > head {
			return start, s.noteHead(ctx, head, known)
		}
	}
	end := min(first+uint64(s.o.MaxBlocksPerTrigger)-1, head)
	var nums []uint64
	if known == nil || end != head {
		nums = append(nums, end)
	}
	if known == nil && head != end {
		nums = append(nums, head)
	}
	var endRow, headRow blockRow
	if known != nil {
		headRow = *known
		endRow = headRow
	}
	if len(nums) > 0 {
		rows, err := s.fetchRange(ctx, nums)
		if err != nil {
			return nil, err
		}
		endRow = rows[0]
		if known == nil {
			headRow = rows[len(rows)-1]
		}
	}
	s.setReport(Offset{Block: uint64(headRow.Number), Hash: headRow.Hash})
	return Offset{Block: end, Hash: endRow.Hash}.JSON(), nil
}

// noteHead records the readable head for ReportLatestOffset when no batch is
// planned; it costs a call only when the head moved and is not known yet.
func (s *Source) noteHead(ctx context.Context, head uint64, known *blockRow) error {
	if known != nil {
		s.setReport(Offset{Block: head, Hash: known.Hash})
		return nil
	}
	s.mu.Lock()
	have := s.mu.report != nil && s.mu.report.Block == head
	s.mu.Unlock()
	if have {
		return nil
	}
	rows, err := s.fetchRange(ctx, []uint64{head})
	if err != nil {
		return err
	}
	s.setReport(Offset{Block: head, Hash: rows[0].Hash})
	return nil
}

func (s *Source) setReport(o Offset) {
	s.mu.Lock()
	s.mu.report = &o
	s.mu.Unlock()
}

// firstBlock is the first block of the very first batch, whose start offset
// is nil: StartBlock, or for StartBlock 0 the end block itself (LatestOffset
// planned a one-block batch at the head). Derived from the end offset alone,
// so a re-run after a crash reads the same range.
func (s *Source) firstBlock(end Offset) uint64 {
	if s.o.StartBlock != 0 && s.o.StartBlock <= end.Block {
		return s.o.StartBlock
	}
	return end.Block
}

// ReadBatch fetches the blocks in (start, end], checks that they extend the
// chain of start (or start_parent_hash for the first batch) and end at end's
// hash, and only then emits them.
func (s *Source) ReadBatch(ctx context.Context, start, end stream.Offset, emit func(*stream.Batch) error) error {
	ctx, cancel := s.batchDeadline(ctx)
	defer cancel()
	if s.o.Reorg == ReorgRetract {
		s.resetBatchReorgs()
		return s.readRetract(ctx, start, end, emit)
	}
	en, ok, err := ParseOffset(end)
	if err != nil || !ok {
		return err
	}
	st, haveStart, err := ParseOffset(start)
	if err != nil {
		return err
	}
	first := s.firstBlock(en)
	if haveStart {
		if en.Block <= st.Block {
			return nil
		}
		first = st.Block + 1
	}
	nums := make([]uint64, 0, en.Block-first+1)
	for n := first; n <= en.Block; n++ {
		nums = append(nums, n)
	}
	var rows []blockRow
	// A load-balanced endpoint may answer parts of one range from replicas
	// on different sides of a reorg; one refetch tells that from a real break.
	for try := 0; ; try++ {
		rows, err = s.fetchRange(ctx, nums)
		if err != nil {
			return err
		}
		err = s.verify(rows, st, haveStart, en)
		if err == nil || try == 1 || !errors.Is(err, errInternalBreak) {
			break
		}
	}
	if err != nil {
		return err
	}
	if s.isTable() {
		return s.emitTable(ctx, rows, 0, emit)
	}
	for i := 0; i < len(rows); i += emitChunkRows {
		if err := emit(s.toBatch(rows[i:min(i+emitChunkRows, len(rows))])); err != nil {
			return err
		}
	}
	return nil
}

var errInternalBreak = errors.New("fetched blocks do not form a chain")

func (s *Source) verify(rows []blockRow, st Offset, haveStart bool, en Offset) error {
	r0 := rows[0]
	switch {
	case haveStart && r0.ParentHash != st.Hash:
		return errcode.New(CodeReorgDetected, "", remedyReorg,
			"block %d has parent hash %s, but block %d, the end of the previous batch, has hash %s",
			r0.Number, r0.ParentHash, st.Block, st.Hash)
	case !haveStart && s.o.StartParentHash != "" && r0.ParentHash != s.o.StartParentHash:
		return errcode.New(CodeSeamMismatch, "", remedySeam,
			"first block %d has parent hash %s, but start_parent_hash (block %d) is %s",
			r0.Number, r0.ParentHash, r0.Number-1, s.o.StartParentHash)
	}
	for i := 1; i < len(rows); i++ {
		if rows[i].ParentHash != rows[i-1].Hash {
			return errcode.Wrap(errInternalBreak, CodeReorgDetected, "", remedyReorg,
				"block %d has parent hash %s, but block %d has hash %s",
				rows[i].Number, rows[i].ParentHash, rows[i-1].Number, rows[i-1].Hash)
		}
	}
	if err := s.checkSeam(rows); err != nil {
		return err
	}
	if last := rows[len(rows)-1]; last.Hash != en.Hash {
		return errcode.New(CodeReorgDetected, "", remedyReorg,
			"block %d now has hash %s, but the planned batch recorded %s",
			last.Number, last.Hash, en.Hash)
	}
	return nil
}

// Commit forgets what precedes end: with reorg=retract it deletes every
// history file but end's; otherwise the source keeps no per-batch state.
func (s *Source) Commit(_ context.Context, end stream.Offset) error {
	s.noteCommitted(end)
	if s.o.Reorg != ReorgRetract {
		return nil
	}
	en, ok, err := ParseOffset(end)
	if err != nil || !ok {
		return err
	}
	return s.hist.prune(en)
}

// Close ends the subscription and releases the endpoint connections.
func (s *Source) Close() error {
	if s.watch != nil {
		s.watch.close()
	}
	if s.pool != nil {
		s.pool.close()
	}
	return nil
}

// ReportLatestOffset is the newest readable block (head minus confirmations,
// or the finality tag's block) seen by the last LatestOffset call.
func (s *Source) ReportLatestOffset() stream.Offset {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.report == nil {
		return nil
	}
	return s.mu.report.JSON()
}

// Metrics reports requests, retries, throttles, failovers, batch splits,
// latency p50/max in ms, the request rate and the readable head.
func (s *Source) Metrics() map[string]string {
	if s.pool == nil {
		return nil
	}
	m := s.pool.metrics()
	s.mu.Lock()
	if s.mu.report != nil {
		m["head"] = strconv.FormatUint(s.mu.report.Block, 10)
	}
	s.reorgMetrics(m)
	if s.mu.freshSet {
		m[stream.MetricFreshnessMs] = strconv.FormatInt(s.mu.freshness.Milliseconds(), 10)
	}
	s.mu.Unlock()
	if s.watch != nil {
		s.watch.metrics(m)
	}
	m["batchSize"] = strconv.FormatInt(s.batch.Load(), 10)
	return m
}

// readableHead is the newest block the source may read; ok is false when the
// chain is shorter than the confirmations. known is that block's header when
// the calls made already returned it (tag "latest" or "safe"/"finalized"
// without confirmations), which saves a round trip per trigger at the head.
func (s *Source) readableHead(ctx context.Context) (head uint64, known *blockRow, ok bool, err error) {
	if s.o.Confirmations == 0 {
		tag := s.o.Finality
		if tag == "" {
			tag = "latest"
		}
		r, err := s.fetchTag(ctx, tag)
		if err != nil {
			return 0, nil, false, err
		}
		head, known = uint64(r.Number), &r
	} else {
		if s.o.Finality != "" {
			r, err := s.fetchTag(ctx, s.o.Finality)
			if err != nil {
				return 0, nil, false, err
			}
			head = uint64(r.Number)
		}
		var bn hexutil.Uint64
		err := s.pool.call(ctx, "eth_blockNumber", func(ctx context.Context, c *rpc.Client) error {
			return c.CallContext(ctx, &bn, "eth_blockNumber")
		})
		if err != nil {
			return 0, nil, false, err
		}
		if uint64(bn) < s.o.Confirmations {
			return 0, nil, false, nil
		}
		if h := uint64(bn) - s.o.Confirmations; s.o.Finality == "" || h < head {
			head = h
		}
	}
	if s.capSet && head > s.cap {
		head, known = s.cap, nil
	}
	return head, known, true, nil
}

func (s *Source) fetchTag(ctx context.Context, tag string) (blockRow, error) {
	var r blockRow
	err := s.pool.call(ctx, "eth_getBlockByNumber "+tag, func(ctx context.Context, c *rpc.Client) error {
		var raw json.RawMessage
		if err := c.CallContext(ctx, &raw, "eth_getBlockByNumber", tag, false); err != nil {
			return err
		}
		var err error
		r, err = parseBlock(raw)
		if err != nil && !errors.Is(err, errBlockNotFound) {
			return errcode.Wrap(err, CodeBadBlock, "", "the endpoint returned a malformed block; try another endpoint", "block %q", tag)
		}
		return err
	})
	return r, err
}

// minParallelChunk is the smallest chunk worth its own request when a range
// is split across parallel requests.
const minParallelChunk = 25

// fetchRange fetches the given blocks in JSON-RPC batch requests of at most
// s.batch calls, up to Parallelism requests in flight (a node serves one
// batch request sequentially, so a range is split to use several cores or
// connections); a live 20-block batch stays one request, which public
// endpoints count against rate limits. The size is halved for good when the
// endpoint refuses it.
func (s *Source) fetchRange(ctx context.Context, nums []uint64) ([]blockRow, error) {
	rows := make([]blockRow, len(nums))
	for {
		size := int(s.batch.Load())
		if per := (len(nums) + s.o.Parallelism - 1) / s.o.Parallelism; per < size {
			size = max(per, min(minParallelChunk, size))
		}
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(s.o.Parallelism)
		for i := 0; i < len(nums); i += size {
			j := min(len(nums), i+size)
			g.Go(func() error {
				got, err := s.fetchChunk(gctx, nums[i:j])
				if err == nil {
					copy(rows[i:j], got)
				} else if errors.Is(err, errBatchTooLarge) && j-i > 1 {
					// Several chunks may refuse at once: keep the smallest halving.
					for half := int64(max(1, (j-i)/2)); ; {
						cur := s.batch.Load()
						if half >= cur || s.batch.CompareAndSwap(cur, half) {
							break
						}
					}
				}
				return err
			})
		}
		err := g.Wait()
		if errors.Is(err, errBatchTooLarge) && size > 1 {
			s.pool.noteSplit()
			s.log.Info("ethrpc endpoint refused the batch size, halving", "size", s.batch.Load())
			continue
		}
		if err != nil {
			return nil, err
		}
		return rows, nil
	}
}

// batchBlocks asks c's endpoint for blocks nums in one batch, decoding
// answer i into res[i]; errs[i] is call i's error. The pool's endpoints
// post the batch themselves (batchhttp.go, batchws.go); another client goes
// through go-ethereum's.
func (s *Source) batchBlocks(ctx context.Context, c *rpc.Client, nums []uint64, res []blockResult) ([]error, error) {
	if post := s.pool.batchPoster(c); post != nil {
		data, err := post(ctx, blocksRequest(nums))
		if err != nil {
			return nil, err
		}
		return decodeBatchAnswer(data, res)
	}
	elems := make([]rpc.BatchElem, len(nums))
	for i, n := range nums {
		elems[i] = rpc.BatchElem{Method: "eth_getBlockByNumber", Args: []any{hexutil.Uint64(n), false}, Result: &res[i]}
	}
	if err := c.BatchCallContext(ctx, elems); err != nil {
		return nil, err
	}
	errs := make([]error, len(nums))
	for i, e := range elems {
		errs[i] = e.Error
	}
	return errs, nil
}

func (s *Source) fetchChunk(ctx context.Context, nums []uint64) ([]blockRow, error) {
	rows := make([]blockRow, len(nums))
	what := fmt.Sprintf("eth_getBlockByNumber %d..%d", nums[0], nums[len(nums)-1])
	err := s.pool.call(ctx, what, func(ctx context.Context, c *rpc.Client) error {
		res := make([]blockResult, len(nums))
		errs, err := s.batchBlocks(ctx, c, nums, res)
		if err != nil {
			return err
		}
		for i, e := range errs {
			if e != nil {
				return fmt.Errorf("block %d: %w", nums[i], e)
			}
			r, err := res[i].row, res[i].err
			if !res[i].set || errors.Is(err, errBlockNotFound) {
				return fmt.Errorf("block %d: %w", nums[i], errBlockNotFound)
			}
			if err == nil && uint64(r.Number) != nums[i] {
				err = fmt.Errorf("asked for block %d, got block %d", nums[i], r.Number)
			}
			if err != nil {
				return errcode.Wrap(err, CodeBadBlock, "", "the endpoint returned a malformed block; try another endpoint", "block %d", nums[i])
			}
			rows[i] = r
		}
		return nil
	})
	return rows, err
}
