package ethnode

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/ethstream/ethstream/chain"
)

// body regenerates a mined block's transactions and receipts (the node
// stores neither), with the block's hash in every receipt and log.
func (n *Node) body(b *nodeBlock) *chain.Body {
	body := chain.NextBody(n.o.Seed, b.header, b.branch, b.txCount)
	body.SetBlockHash(b.hash)
	return body
}

// DefaultTxHistory is geth's default --history.transactions: the number
// of blocks, the head included, whose transactions eth_getTransactionReceipt
// and eth_getTransactionByHash find (about a year of mainnet).
const DefaultTxHistory = 2_350_000

// txHistory is Options.TxHistory or its default.
func (n *Node) txHistory() uint64 {
	if n.o.TxHistory > 0 {
		return n.o.TxHistory
	}
	return DefaultTxHistory
}

// txKey is the index's key of a transaction hash: its first 8 bytes. Two
// transactions sharing it (a chance of about n²/2⁶⁵ among n, 3·10⁻⁴ for
// 10⁸) are both kept in txFull, their key marked with collided.
func txKey(h common.Hash) uint64 { return binary.BigEndian.Uint64(h[:8]) }

// collided marks a key whose transactions are in txFull.
var collided = &nodeBlock{}

// indexTxs records b's transaction hashes (the block is the index's value,
// a lookup finds the transaction's position by regenerating the body it
// reads anyway), and forgets the canonical block that falls out of the
// last txHistory blocks; n.mu must be held for writing. Index entries of a
// block a reorg replaced stay (lookups check that the block is
// canonical): a few blocks per reorg.
func (n *Node) indexTxs(b *nodeBlock, hashes []common.Hash) {
	if n.txIndex == nil {
		n.txIndex = make(map[uint64]*nodeBlock)
	}
	for _, h := range hashes {
		k := txKey(h)
		old, ok := n.txIndex[k]
		switch {
		case !ok:
			n.txIndex[k] = b
		case old == collided:
			n.txFull[h] = b
		case slices.Contains(n.txHashes(old), h):
			n.txIndex[k] = b // the same transaction in a later block
		default:
			if n.txFull == nil {
				n.txFull = make(map[common.Hash]*nodeBlock)
			}
			for _, oh := range n.txHashes(old) {
				if txKey(oh) == k {
					n.txFull[oh] = old
				}
			}
			n.txIndex[k], n.txFull[h] = collided, b
		}
	}
}

// unindexTxs forgets b's transactions where the index names b; n.mu must
// be held for writing.
func (n *Node) unindexTxs(b *nodeBlock) {
	for _, h := range n.txHashes(b) {
		k := txKey(h)
		switch n.txIndex[k] {
		case b:
			delete(n.txIndex, k)
		case collided:
			if n.txFull[h] == b {
				delete(n.txFull, h)
			}
		}
	}
}

// txHashes regenerates b's transaction hashes.
func (n *Node) txHashes(b *nodeBlock) []common.Hash {
	if b.txCount == 0 {
		return nil
	}
	return n.body(b).Enc.Hashes()
}

// rpcTransaction is transaction i of a block as eth_getBlockByNumber(n,
// true) and eth_getTransactionByHash render it (go-ethereum's
// RPCTransaction): the transaction's own JSON (types.Transaction) plus
// blockHash, blockNumber, from, transactionIndex, and for an EIP-1559
// transaction the effective gasPrice.
func rpcTransaction(b *nodeBlock, body *chain.Body, i int) (json.RawMessage, error) {
	return appendRPCTransaction(nil, b, body, i)
}

// appendRPCTransaction appends rpcTransaction's answer to buf.
func appendRPCTransaction(buf []byte, b *nodeBlock, body *chain.Body, i int) ([]byte, error) {
	tx := body.Txs[i]
	start := len(buf)
	buf, ok := appendTxJSON(buf, tx)
	if !ok {
		tj, err := json.Marshal(tx)
		if err != nil {
			return nil, err
		}
		buf = append(buf[:start], tj...)
	}
	buf = append(buf[:len(buf)-1], `,"blockHash":"`...)
	buf = append(hex.AppendEncode(append(buf, '0', 'x'), b.hash[:]), `","blockNumber":"0x`...)
	buf = append(strconv.AppendUint(buf, b.header.Number.Uint64(), 16), `","from":"0x`...)
	buf = append(hex.AppendEncode(buf, body.Senders[i][:]), `","transactionIndex":"0x`...)
	buf = append(strconv.AppendUint(buf, uint64(i), 16), '"')
	if tx.Type() == types.DynamicFeeTxType {
		buf = appendBig(buf, "gasPrice", body.Receipts[i].EffectiveGasPrice)
	}
	return append(buf, '}'), nil
}

// rpcReceipt is receipt i of a block as go-ethereum's
// eth_getTransactionReceipt renders it (internal/ethapi.MarshalReceipt):
// root before Byzantium, status after; contractAddress null unless the
// transaction created one; logs never null.
func rpcReceipt(b *nodeBlock, body *chain.Body, i int) map[string]any {
	rc, tx := body.Receipts[i], body.Txs[i]
	fields := map[string]any{
		"blockHash":         b.hash,
		"blockNumber":       hexutil.Uint64(b.header.Number.Uint64()),
		"transactionHash":   rc.TxHash,
		"transactionIndex":  hexutil.Uint64(i),
		"from":              body.Senders[i],
		"to":                tx.To(),
		"gasUsed":           hexutil.Uint64(rc.GasUsed),
		"cumulativeGasUsed": hexutil.Uint64(rc.CumulativeGasUsed),
		"contractAddress":   nil,
		"logs":              rc.Logs,
		"logsBloom":         rc.Bloom,
		"type":              hexutil.Uint(tx.Type()),
		"effectiveGasPrice": (*hexutil.Big)(rc.EffectiveGasPrice),
	}
	if len(rc.PostState) > 0 {
		fields["root"] = hexutil.Bytes(rc.PostState)
	} else {
		fields["status"] = hexutil.Uint(rc.Status)
	}
	if rc.Logs == nil {
		fields["logs"] = []*types.Log{}
	}
	if rc.ContractAddress != (common.Address{}) {
		fields["contractAddress"] = rc.ContractAddress
	}
	return fields
}

// resolve is the canonical block a number or hash names (tags as
// eth_getBlockByNumber reads them), nil when the node has none.
func (n *Node) resolve(bn rpc.BlockNumberOrHash) *nodeBlock {
	n.catchUp()
	n.mu.RLock()
	defer n.mu.RUnlock()
	if h, ok := bn.Hash(); ok {
		b := n.byHash[h]
		if b != nil && bn.RequireCanonical && n.blockLocked(b.header.Number.Uint64()) != b {
			return nil
		}
		return b
	}
	num, _ := bn.Number()
	return n.blockLocked(n.numberLocked(num))
}

// numberLocked is the block number a tag or number names; n.mu is held.
func (n *Node) numberLocked(number rpc.BlockNumber) uint64 {
	head := n.base - 1 + uint64(len(n.canon))
	switch number {
	case rpc.LatestBlockNumber, rpc.PendingBlockNumber:
		return head
	case rpc.SafeBlockNumber:
		return max(head-min(head, 32), n.base)
	case rpc.FinalizedBlockNumber:
		return max(head-min(head, 64), n.base)
	case rpc.EarliestBlockNumber:
		return n.base
	}
	if number < 0 {
		return 0
	}
	return uint64(number)
}

// GetBlockReceipts is eth_getBlockReceipts: every receipt of a block, null
// for a block the node does not have.
func (api *ethAPI) GetBlockReceipts(ctx context.Context, bn rpc.BlockNumberOrHash) (json.RawMessage, error) {
	n := api.n
	b := n.resolve(bn)
	if b == nil {
		return json.RawMessage("null"), nil
	}
	body := n.servedBody(b)
	buf := make([]byte, 0, 1024*len(body.Receipts)+2)
	buf = append(buf, '[')
	for i := range body.Receipts {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendReceipt(buf, b, body, i)
	}
	return append(buf, ']'), nil
}

// lookupTx is the canonical block, body and index of a transaction,
// false when the node does not have it, its block was reorganised away or
// is older than the last txHistory blocks (geth's --history.transactions:
// blocks head-limit+1..head).
func (n *Node) lookupTx(h common.Hash) (*nodeBlock, *chain.Body, int, bool) {
	n.catchUp()
	n.mu.RLock()
	b := n.txIndex[txKey(h)]
	if b == collided {
		b = n.txFull[h]
	}
	head := n.numberLocked(rpc.LatestBlockNumber)
	if b == nil || n.blockLocked(b.header.Number.Uint64()) != b || head-b.header.Number.Uint64() >= n.txHistory() {
		n.mu.RUnlock()
		return nil, nil, 0, false
	}
	n.mu.RUnlock()
	body := n.body(b)
	for i, th := range body.Enc.Hashes() {
		if th == h {
			return b, body, i, true
		}
	}
	return nil, nil, 0, false // another transaction with the same key
}

// GetTransactionReceipt is eth_getTransactionReceipt: null for a
// transaction not on the canonical chain or older than the last txHistory
// blocks, as geth answers.
func (api *ethAPI) GetTransactionReceipt(ctx context.Context, h common.Hash) (map[string]any, error) {
	b, body, i, ok := api.n.lookupTx(h)
	if !ok {
		return nil, nil
	}
	return rpcReceipt(b, body, i), nil
}

// GetTransactionByHash is eth_getTransactionByHash.
func (api *ethAPI) GetTransactionByHash(ctx context.Context, h common.Hash) (json.RawMessage, error) {
	b, body, i, ok := api.n.lookupTx(h)
	if !ok {
		return json.RawMessage("null"), nil
	}
	return rpcTransaction(b, body, i)
}

// maxLogBlocks bounds an eth_getLogs range, as providers do.
const maxLogBlocks = 10_000

// GetLogs is eth_getLogs over the canonical chain: a blockHash, or a
// fromBlock..toBlock range (default latest), filtered by address (any of)
// and topics (position by position, each any of; empty matches all).
func (api *ethAPI) GetLogs(ctx context.Context, q logQuery) ([]*types.Log, error) {
	n := api.n
	var blocks []*nodeBlock
	if q.BlockHash != nil {
		b := n.resolve(rpc.BlockNumberOrHashWithHash(*q.BlockHash, false))
		if b == nil {
			return nil, fmt.Errorf("unknown block")
		}
		blocks = append(blocks, b)
	} else {
		n.catchUp()
		n.mu.RLock()
		from, to := n.numberLocked(rpc.LatestBlockNumber), n.numberLocked(rpc.LatestBlockNumber)
		if q.FromBlock != nil {
			from = n.numberLocked(*q.FromBlock)
		}
		if q.ToBlock != nil {
			to = n.numberLocked(*q.ToBlock)
		}
		if to >= from && to-from >= maxLogBlocks {
			n.mu.RUnlock()
			return nil, fmt.Errorf("query exceeds max block range %d", maxLogBlocks)
		}
		for k := from; k <= to; k++ {
			if b := n.blockLocked(k); b != nil {
				blocks = append(blocks, b)
			}
		}
		n.mu.RUnlock()
	}
	out := []*types.Log{}
	for _, b := range blocks {
		if b.txCount == 0 || !q.mayMatch(b.header.Bloom) {
			continue
		}
		for _, l := range n.body(b).Logs() {
			if q.matches(l) {
				out = append(out, l)
			}
		}
	}
	return out, nil
}

// logQuery is eth_getLogs's filter object.
type logQuery struct {
	BlockHash *common.Hash
	FromBlock *rpc.BlockNumber
	ToBlock   *rpc.BlockNumber
	Addresses []common.Address
	Topics    [][]common.Hash
}

// UnmarshalJSON reads the filter as go-ethereum does: address a string or
// an array, each topic position null, a hash or an array of hashes.
func (q *logQuery) UnmarshalJSON(b []byte) error {
	var raw struct {
		BlockHash *common.Hash      `json:"blockHash"`
		FromBlock *rpc.BlockNumber  `json:"fromBlock"`
		ToBlock   *rpc.BlockNumber  `json:"toBlock"`
		Address   json.RawMessage   `json:"address"`
		Topics    []json.RawMessage `json:"topics"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw.BlockHash != nil && (raw.FromBlock != nil || raw.ToBlock != nil) {
		return fmt.Errorf("cannot specify both BlockHash and FromBlock/ToBlock, choose one or the other")
	}
	q.BlockHash, q.FromBlock, q.ToBlock = raw.BlockHash, raw.FromBlock, raw.ToBlock
	if len(raw.Address) > 0 && string(raw.Address) != "null" {
		var one common.Address
		if err := json.Unmarshal(raw.Address, &one); err == nil {
			q.Addresses = []common.Address{one}
		} else if err := json.Unmarshal(raw.Address, &q.Addresses); err != nil {
			return fmt.Errorf("invalid address: %w", err)
		}
	}
	for _, t := range raw.Topics {
		var pos []common.Hash
		switch {
		case len(t) == 0 || string(t) == "null":
		case t[0] == '[':
			if err := json.Unmarshal(t, &pos); err != nil {
				return fmt.Errorf("invalid topic: %w", err)
			}
		default:
			var one common.Hash
			if err := json.Unmarshal(t, &one); err != nil {
				return fmt.Errorf("invalid topic: %w", err)
			}
			pos = []common.Hash{one}
		}
		q.Topics = append(q.Topics, pos)
	}
	return nil
}

// mayMatch checks the block's bloom, as a node does before reading its
// receipts.
func (q *logQuery) mayMatch(bloom types.Bloom) bool {
	if len(q.Addresses) > 0 && !anyIn(bloom, func(yield func([]byte) bool) {
		for _, a := range q.Addresses {
			if !yield(a.Bytes()) {
				return
			}
		}
	}) {
		return false
	}
	for _, pos := range q.Topics {
		if len(pos) > 0 && !anyIn(bloom, func(yield func([]byte) bool) {
			for _, t := range pos {
				if !yield(t.Bytes()) {
					return
				}
			}
		}) {
			return false
		}
	}
	return true
}

func anyIn(bloom types.Bloom, seq func(func([]byte) bool)) bool {
	found := false
	seq(func(v []byte) bool {
		found = bloom.Test(v)
		return !found
	})
	return found
}

// matches is the filter on one log.
func (q *logQuery) matches(l *types.Log) bool {
	if len(q.Addresses) > 0 && !contains(q.Addresses, l.Address) {
		return false
	}
	if len(q.Topics) > len(l.Topics) {
		return false
	}
	for i, pos := range q.Topics {
		if len(pos) > 0 && !contains(pos, l.Topics[i]) {
			return false
		}
	}
	return true
}

func contains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
