package ethrpc

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethtables"
	"github.com/ethstream/ethstream/stream"
	"golang.org/x/sync/errgroup"
)

// A table source (Options.Table transactions, logs or token_transfers)
// plans, checks and retracts blocks exactly as the block source does, and
// only at emission turns each block into its rows: it reads the block by
// hash with its transactions (eth_getBlockByHash(hash, true)) and its
// receipts (eth_getBlockReceipts(hash)), in JSON-RPC batch requests, and
// derives the rows with package ethtables, the archive writer's own row
// function. A block's contents never change under its hash, so the rows of
// an orphaned block that a batch retracts, read again after a crash, are
// exactly the rows emitted: every row of every orphaned block is retracted
// once.

// tableBlocksPerRequest bounds the blocks of one batch request (two calls
// each): a mainnet block's transactions and receipts are about 1 MB of JSON.
const tableBlocksPerRequest = 8

// isTable reports whether the source emits a table other than blocks.
func (s *Source) isTable() bool { return s.o.Table != "" && s.o.Table != "blocks" }

type hexBig struct{ v uint64 }

func (h *hexBig) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	return h.unmarshalText([]byte(s))
}

func (h *hexBig) unmarshalText(b []byte) error {
	s := string(b)
	n, err := quantity("quantity", &s, 1<<63-1)
	h.v = uint64(n)
	return err
}

// bodyOf is one block's transactions, senders and receipts as the
// endpoint served them, checked against each other and against the
// block's row: the counts agree with transaction_count, each receipt is
// its transaction's (hash recomputed from the decoded transaction) and of
// this block.
func bodyOf(b blockRow, blk *fullBlock, receipts []*types.Receipt) ([]*types.Transaction, []common.Address, error) {
	if blk.Hash.Hex() != b.Hash || blk.Number == nil || int64(blk.Number.v) != b.Number || blk.Timestamp == nil || int64(blk.Timestamp.v)*1_000_000 != b.BlockTS {
		return nil, nil, fmt.Errorf("block %s: the endpoint served another block (%s)", b.Hash, blk.Hash.Hex())
	}
	if len(blk.Txs) != len(receipts) || int64(len(receipts)) != b.TransactionCount {
		return nil, nil, fmt.Errorf("block %d: %d transactions, %d receipts, transaction_count %d", b.Number, len(blk.Txs), len(receipts), b.TransactionCount)
	}
	if blk.TxErr != nil {
		return nil, nil, fmt.Errorf("block %d %w", b.Number, blk.TxErr)
	}
	for i, tx := range blk.Txs {
		rc := receipts[i]
		if rc == nil || rc.TxHash != tx.Hash() || rc.BlockHash.Hex() != b.Hash || rc.TransactionIndex != uint(i) || rc.EffectiveGasPrice == nil {
			return nil, nil, fmt.Errorf("block %d transaction %d (%s): receipt of another transaction or block", b.Number, i, tx.Hash())
		}
		for k, l := range rc.Logs {
			if l == nil || l.TxHash != rc.TxHash || l.BlockHash != rc.BlockHash {
				return nil, nil, fmt.Errorf("block %d transaction %d: log %d missing or of another transaction", b.Number, i, k)
			}
		}
	}
	return blk.Txs, blk.Senders, nil
}

// fetchBodies reads the blocks' transactions and receipts by hash: per
// chunk of tableBlocksPerRequest blocks, the transactions
// (eth_getBlockByHash(hash, true)) and the receipts
// (eth_getBlockReceipts(hash)) as two batch requests, up to parallelism in
// flight. A node serves one batch request's calls in sequence and answers
// them in one message, so the two at once halve a live block's wait: the
// node renders the receipts while the source decodes the transactions.
// With parallelism=1 a chunk stays one request of both. The first call's
// error, in block order, is returned, as one sequential request did.
func (s *Source) fetchBodies(ctx context.Context, rows []blockRow) ([]fullBlock, []blockReceipts, error) {
	blks := make([]fullBlock, len(rows))
	rcs := make([]blockReceipts, len(rows))
	type job struct {
		lo, hi     int
		txs, rcpts bool
	}
	var jobs []job
	for lo := 0; lo < len(rows); lo += tableBlocksPerRequest {
		hi := min(lo+tableBlocksPerRequest, len(rows))
		if s.o.Parallelism > 1 {
			jobs = append(jobs, job{lo, hi, true, false}, job{lo, hi, false, true})
		} else {
			jobs = append(jobs, job{lo, hi, true, true})
		}
	}
	errs := make([]error, len(jobs))
	var g errgroup.Group
	g.SetLimit(max(1, s.o.Parallelism))
	for k, j := range jobs {
		g.Go(func() error {
			errs[k] = s.pool.call(ctx, fmt.Sprintf("%s of blocks %d..%d", bodiesWhat(j.txs, j.rcpts), rows[j.lo].Number, rows[j.hi-1].Number), func(ctx context.Context, c *rpc.Client) error {
				var bl []fullBlock
				var rc []blockReceipts
				if j.txs {
					bl = blks[j.lo:j.hi]
				}
				if j.rcpts {
					rc = rcs[j.lo:j.hi]
				}
				if post := s.pool.batchPoster(c); post != nil {
					return batchBodies(ctx, post, rows[j.lo:j.hi], bl, rc)
				}
				return clientBodies(ctx, c, rows[j.lo:j.hi], bl, rc)
			})
			return nil
		})
	}
	_ = g.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, nil, err
		}
	}
	return blks, rcs, nil
}

func bodiesWhat(txs, rcpts bool) string {
	switch {
	case txs && rcpts:
		return "bodies"
	case txs:
		return "transactions"
	}
	return "receipts"
}

// bodyCalls are the calls of rows' bodies, in order: per block
// eth_getBlockByHash(hash, true) when blks is not nil, then
// eth_getBlockReceipts(hash) when rcs is not nil. dst(k) is call k's
// destination.
func bodyCalls(rows []blockRow, blks []fullBlock, rcs []blockReceipts) (methods []string, hashes []string, dst []json.Unmarshaler) {
	for i, r := range rows {
		if blks != nil {
			methods, hashes, dst = append(methods, "eth_getBlockByHash"), append(hashes, r.Hash), append(dst, &blks[i])
		}
		if rcs != nil {
			methods, hashes, dst = append(methods, "eth_getBlockReceipts"), append(hashes, r.Hash), append(dst, &rcs[i])
		}
	}
	return methods, hashes, dst
}

// clientBodies is batchBodies through go-ethereum's client.
func clientBodies(ctx context.Context, c *rpc.Client, rows []blockRow, blks []fullBlock, rcs []blockReceipts) error {
	methods, hashes, dst := bodyCalls(rows, blks, rcs)
	elems := make([]rpc.BatchElem, len(methods))
	for k, m := range methods {
		args := []any{hashes[k]}
		if m == "eth_getBlockByHash" {
			args = append(args, true)
		}
		elems[k] = rpc.BatchElem{Method: m, Args: args, Result: dst[k]}
	}
	if err := c.BatchCallContext(ctx, elems); err != nil {
		return err
	}
	for _, e := range elems {
		if e.Error != nil {
			return e.Error
		}
	}
	return nil
}

// batchBodies posts (post: batchhttp.go, batchws.go) rows' body calls
// (bodyCalls: the transactions when blks is not nil, the receipts when rcs
// is not nil) in one batch and decodes the answers into blks and rcs
// (decodeBatch: one validation pass,
// then the one-pass decoders of bodyjson.go, where go-ethereum's client
// scanned each megabyte five times through encoding/json before them). The
// first call's error is returned, as the go-ethereum path does.
func batchBodies(ctx context.Context, post func(context.Context, []byte) ([]byte, error), rows []blockRow, blks []fullBlock, rcs []blockReceipts) error {
	methods, hashes, dst := bodyCalls(rows, blks, rcs)
	body := make([]byte, 0, 110*len(methods)+2)
	body = append(body, '[')
	for k, m := range methods {
		if k > 0 {
			body = append(body, ',')
		}
		full := ""
		if m == "eth_getBlockByHash" {
			full = ",true"
		}
		body = fmt.Appendf(body, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":[%q%s]}`, k+1, m, hashes[k], full)
	}
	body = append(body, ']')
	data, err := post(ctx, body)
	if err != nil {
		return err
	}
	errs, err := decodeBatch(data, len(methods), func(k int, result []byte) error {
		return dst[k].UnmarshalJSON(result)
	})
	if err != nil {
		return err
	}
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// emitTable emits the table's rows of rows (blocks), the first nRetract
// blocks' rows retracted (Sign -1), in chunks.
func (s *Source) emitTable(ctx context.Context, rows []blockRow, nRetract int, emit func(*stream.Batch) error) error {
	blks, rcs, err := s.fetchBodies(ctx, rows)
	if err != nil {
		return err
	}
	return s.emitBodies(rows, blks, rcs, nRetract, emit)
}

// emitBodies is emitTable's emission of bodies fetched already.
func (s *Source) emitBodies(rows []blockRow, blks []fullBlock, rcs []blockReceipts, nRetract int, emit func(*stream.Batch) error) error {
	set := ethtables.NewRowSet(s.o.Table)
	for i, b := range rows {
		if blks[i].Hash == (common.Hash{}) {
			return errcode.New(CodeReorgDetected, "", remedyReorgDepth, "the endpoint does not know block %s", b.Hash)
		}
		txs, senders, err := bodyOf(b, &blks[i], rcs[i])
		if err != nil {
			return errcode.Wrap(err, CodeBadBlock, "", "the endpoint returned a malformed block; try another endpoint", "block %d", b.Number)
		}
		sign := int8(1)
		if i < nRetract {
			sign = -1
		}
		set.Add(ethtables.Block{Number: uint64(b.Number), Hash: common.HexToHash(b.Hash), Time: uint64(b.BlockTS / 1_000_000)}, txs, senders, rcs[i], sign)
	}
	for lo := 0; lo < set.Len(); lo += emitChunkRows {
		if err := emit(set.Batch(s.tcols, lo, min(lo+emitChunkRows, set.Len()))); err != nil {
			return err
		}
	}
	return nil
}

// openTable checks a table source's projection: the table's columns only.
func (s *Source) openTable(cols []string) error {
	all, _ := ethtables.Columns(s.o.Table)
	names := make([]string, len(all))
	for i, c := range all {
		names[i] = c.Name
	}
	for _, c := range cols {
		if !contains(names, c) {
			return errcode.New(CodeInvalidOption, "", fmt.Sprintf("project only the %s columns %v", s.o.Table, names),
				"ethrpc source (table=%s) cannot produce column %q", s.o.Table, c)
		}
	}
	if cols == nil {
		cols = names
	}
	s.tcols = cols
	return nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// readTableBlock is ReadBatch of a table source's one-block batch (a live
// batch at the head): the planned end's hash names the block, so its
// bodies are fetched by that hash while its header is fetched by number,
// rather than after it, which saves a round trip on a batch's critical
// path. The header is verified as ReadBatch does, and its error wins over
// the bodies': a block replaced at that number is a reorg, reported as one.
func (s *Source) readTableBlock(ctx context.Context, nums []uint64, st Offset, haveStart bool, en Offset, emit func(*stream.Batch) error) error {
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var blks []fullBlock
	var rcs []blockReceipts
	var berr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		blks, rcs, berr = s.fetchBodies(bctx, []blockRow{{Number: int64(en.Block), Hash: en.Hash}})
	}()
	rows, err := s.fetchRange(ctx, nums)
	if err == nil {
		err = s.verify(rows, st, haveStart, en)
	}
	if err != nil {
		cancel()
		<-done
		return err
	}
	<-done
	if berr != nil {
		return berr
	}
	return s.emitBodies(rows, blks, rcs, 0, emit)
}
