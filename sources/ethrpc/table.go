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

// fetchBodies reads the blocks' transactions and receipts by hash.
func (s *Source) fetchBodies(ctx context.Context, rows []blockRow) ([]fullBlock, []blockReceipts, error) {
	blks := make([]fullBlock, len(rows))
	rcs := make([]blockReceipts, len(rows))
	for lo := 0; lo < len(rows); lo += tableBlocksPerRequest {
		hi := min(lo+tableBlocksPerRequest, len(rows))
		err := s.pool.call(ctx, fmt.Sprintf("bodies of blocks %d..%d", rows[lo].Number, rows[hi-1].Number), func(ctx context.Context, c *rpc.Client) error {
			if post := s.pool.batchPoster(c); post != nil {
				return batchBodies(ctx, post, rows[lo:hi], blks[lo:hi], rcs[lo:hi])
			}
			elems := make([]rpc.BatchElem, 0, 2*(hi-lo))
			for i := lo; i < hi; i++ {
				elems = append(elems,
					rpc.BatchElem{Method: "eth_getBlockByHash", Args: []any{rows[i].Hash, true}, Result: &blks[i]},
					rpc.BatchElem{Method: "eth_getBlockReceipts", Args: []any{rows[i].Hash}, Result: &rcs[i]})
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
		})
		if err != nil {
			return nil, nil, err
		}
	}
	return blks, rcs, nil
}

// batchBodies posts (post: batchhttp.go, batchws.go)
// eth_getBlockByHash(hash, true) and eth_getBlockReceipts(hash) for every
// block of rows in one batch and decodes the answers into blks and rcs
// (decodeBatch: one validation pass,
// then the one-pass decoders of bodyjson.go, where go-ethereum's client
// scanned each megabyte five times through encoding/json before them). The
// first call's error is returned, as the go-ethereum path does.
func batchBodies(ctx context.Context, post func(context.Context, []byte) ([]byte, error), rows []blockRow, blks []fullBlock, rcs []blockReceipts) error {
	body := make([]byte, 0, 220*len(rows)+2)
	body = append(body, '[')
	for i, r := range rows {
		if i > 0 {
			body = append(body, ',')
		}
		body = fmt.Appendf(body, `{"jsonrpc":"2.0","id":%d,"method":"eth_getBlockByHash","params":[%q,true]},`+
			`{"jsonrpc":"2.0","id":%d,"method":"eth_getBlockReceipts","params":[%q]}`, 2*i+1, r.Hash, 2*i+2, r.Hash)
	}
	body = append(body, ']')
	data, err := post(ctx, body)
	if err != nil {
		return err
	}
	errs, err := decodeBatch(data, 2*len(rows), func(k int, result []byte) error {
		if k%2 == 0 {
			return blks[k/2].UnmarshalJSON(result)
		}
		return rcs[k/2].UnmarshalJSON(result)
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
