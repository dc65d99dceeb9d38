package ethnode

import (
	"context"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/ethereum/go-ethereum/trie"
	"github.com/ethstream/ethstream/chain"
)

// TestNodeServesReceiptsAndLogs reads blocks, receipts and logs through
// go-ethereum's own client, which decodes the answers with go-ethereum's
// types: the full block's transactions hash to its transactions root, the
// block's receipts to its receipts root and bloom, a transaction's receipt
// equals its entry in the block's receipts, and eth_getLogs finds the
// blocks' Transfer logs. After a reorg the replaced block's transactions
// are no longer found and the answers follow the new branch.
func TestNodeServesReceiptsAndLogs(t *testing.T) {
	n := startTestNode(t, Options{Seed: 11, Manual: true, InitialBlocks: 4})
	ctx := context.Background()
	ec, err := ethclient.Dial(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	rc, _ := rpc.Dial(n.URL())
	defer rc.Close()
	head := n.Head()
	var transfers int
	for num := head - 3; num <= head; num++ {
		blk, err := ec.BlockByNumber(ctx, new(big.Int).SetUint64(num))
		if err != nil {
			t.Fatal(err)
		}
		if got := types.DeriveSha(blk.Transactions(), trie.NewStackTrie(nil)); got != blk.TxHash() || blk.Hash() != n.Header(num).Hash() {
			t.Fatalf("block %d: transactions root %s, header %s", num, got, blk.TxHash())
		}
		rs, err := ec.BlockReceipts(ctx, rpc.BlockNumberOrHashWithNumber(rpc.BlockNumber(num)))
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != len(blk.Transactions()) || len(rs) == 0 {
			t.Fatalf("block %d: %d receipts, %d transactions", num, len(rs), len(blk.Transactions()))
		}
		if got := types.DeriveSha(types.Receipts(rs), trie.NewStackTrie(nil)); got != blk.ReceiptHash() {
			t.Fatalf("block %d: receipts root %s, header %s", num, got, blk.ReceiptHash())
		}
		if got := types.MergeBloom(rs); got != blk.Bloom() {
			t.Fatalf("block %d: receipts' bloom differs from the header's", num)
		}
		var gas uint64
		for i, r := range rs {
			gas += r.GasUsed
			if r.TxHash != blk.Transactions()[i].Hash() || r.BlockHash != blk.Hash() {
				t.Fatalf("block %d receipt %d: tx %s block %s", num, i, r.TxHash, r.BlockHash)
			}
		}
		if gas != blk.GasUsed() {
			t.Fatalf("block %d: receipts use %d gas, header %d", num, gas, blk.GasUsed())
		}
		one, err := ec.TransactionReceipt(ctx, rs[len(rs)/2].TxHash)
		if err != nil || one.CumulativeGasUsed != rs[len(rs)/2].CumulativeGasUsed || one.TransactionIndex != uint(len(rs)/2) {
			t.Fatalf("block %d: receipt by hash %+v, %v", num, one, err)
		}
		tx, pending, err := ec.TransactionByHash(ctx, rs[0].TxHash)
		if err != nil || pending || tx.Hash() != rs[0].TxHash {
			t.Fatalf("block %d: transaction by hash: %v", num, err)
		}
		var sender struct {
			From common.Address `json:"from"`
		}
		if err := rc.CallContext(ctx, &sender, "eth_getTransactionByHash", rs[0].TxHash); err != nil {
			t.Fatal(err)
		}
		if want := chain.NextBody(11, n.Header(num), 0, len(rs)).Senders[0]; sender.From != want {
			t.Fatalf("block %d: from %s, model %s", num, sender.From, want)
		}
		for _, r := range rs {
			for _, l := range r.Logs {
				if l.Topics[0] == chain.TransferTopic {
					transfers++
				}
			}
		}
	}
	logs, err := ec.FilterLogs(ctx, ethereum.FilterQuery{FromBlock: new(big.Int).SetUint64(head - 3), ToBlock: new(big.Int).SetUint64(head),
		Topics: [][]common.Hash{{chain.TransferTopic}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) != transfers || transfers == 0 {
		t.Fatalf("eth_getLogs found %d Transfer logs, the receipts hold %d", len(logs), transfers)
	}
	// A reorg of the head: its old transactions are gone, the new ones found.
	old, _ := ec.BlockReceipts(ctx, rpc.BlockNumberOrHashWithNumber(rpc.BlockNumber(head)))
	n.Reorg(1)
	if r, err := ec.TransactionReceipt(ctx, old[0].TxHash); err == nil {
		t.Fatalf("receipt of an orphaned transaction: %+v", r)
	}
	fresh, err := ec.BlockReceipts(ctx, rpc.BlockNumberOrHashWithNumber(rpc.BlockNumber(head)))
	if err != nil || len(fresh) == 0 || fresh[0].BlockHash != n.Header(head).Hash() {
		t.Fatalf("receipts after the reorg: %v", err)
	}
	if _, err := ec.TransactionReceipt(ctx, fresh[0].TxHash); err != nil {
		t.Fatal(err)
	}
	got, err := ec.FilterLogs(ctx, ethereum.FilterQuery{BlockHash: ptrHash(n.Header(head).Hash())})
	if err != nil {
		t.Fatal(err)
	}
	var want int
	for _, r := range fresh {
		want += len(r.Logs)
	}
	if len(got) != want {
		t.Fatalf("eth_getLogs by block hash: %d logs, receipts hold %d", len(got), want)
	}
}

func ptrHash(h common.Hash) *common.Hash { return &h }
