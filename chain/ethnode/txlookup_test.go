package ethnode

import (
	"context"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
)

// receiptOf is eth_getTransactionReceipt's answer, nil for null.
func receiptOf(t *testing.T, ec *ethclient.Client, h common.Hash) *types.Receipt {
	t.Helper()
	var r *types.Receipt
	if err := ec.Client().CallContext(context.Background(), &r, "eth_getTransactionReceipt", h); err != nil {
		t.Fatal(err)
	}
	return r
}

// firstTx is the first transaction of the first non-empty block from num
// on, and its block's number.
func firstTx(t *testing.T, ec *ethclient.Client, num uint64) (common.Hash, uint64) {
	t.Helper()
	for ; ; num++ {
		rs, err := ec.BlockReceipts(context.Background(), rpc.BlockNumberOrHashWithNumber(rpc.BlockNumber(num)))
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) > 0 {
			return rs[0].TxHash, num
		}
	}
}

// TestTxLookupWholeHistory: as geth with its default
// --history.transactions (2,350,000 blocks: DefaultTxHistory is geth's
// own default, ethconfig.Defaults), the node finds the receipt
// and the transaction of a block mined 4,100 blocks before the head; the
// index used to keep only the last 4,096 blocks' (this test failed with
// it: null). Its answer equals the block's receipt.
func TestTxLookupWholeHistory(t *testing.T) {
	if DefaultTxHistory != ethconfig.Defaults.TransactionHistory {
		t.Fatalf("DefaultTxHistory %d, geth's default %d", DefaultTxHistory, ethconfig.Defaults.TransactionHistory)
	}
	n := startTestNode(t, Options{Seed: 5, Manual: true, InitialBlocks: 2, CachedBlocks: 8})
	ec, err := ethclient.Dial(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	h, num := firstTx(t, ec, n.Head()-1)
	n.Mine(4100)
	r := receiptOf(t, ec, h)
	if r == nil {
		t.Fatalf("no receipt for a transaction %d blocks before the head", n.Head()-num)
	}
	rs, err := ec.BlockReceipts(context.Background(), rpc.BlockNumberOrHashWithNumber(rpc.BlockNumber(num)))
	if err != nil || r.BlockNumber.Uint64() != num || r.TxHash != rs[0].TxHash || r.CumulativeGasUsed != rs[0].CumulativeGasUsed {
		t.Fatalf("receipt %+v, the block's %+v (%v)", r, rs[0], err)
	}
	if tx, pending, err := ec.TransactionByHash(context.Background(), h); err != nil || pending || tx.Hash() != h {
		t.Fatalf("eth_getTransactionByHash: %v %v", pending, err)
	}
}

// TestTxLookupHistoryLimit: with TxHistory k the node finds the
// transactions of the last k blocks, the head included, and answers null
// for older ones and for those of a block a reorg replaced, as geth with
// --history.transactions=k; the index forgets what falls out of the window.
func TestTxLookupHistoryLimit(t *testing.T) {
	const k = 6
	n := startTestNode(t, Options{Seed: 5, Manual: true, InitialBlocks: 2, TxHistory: k})
	ec, err := ethclient.Dial(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	h, num := firstTx(t, ec, n.Head()-1)
	n.Mine(int(num + k - 1 - n.Head())) // num is the window's oldest block
	if receiptOf(t, ec, h) == nil {
		t.Fatalf("block %d of head %d: no receipt inside the window", num, n.Head())
	}
	n.Mine(1)
	if r := receiptOf(t, ec, h); r != nil {
		t.Fatalf("block %d of head %d: a receipt outside the window", num, n.Head())
	}
	n.mu.RLock()
	indexed := len(n.txIndex) + len(n.txFull)
	n.mu.RUnlock()
	var window int
	for b := n.Head() - k + 1; b <= n.Head(); b++ {
		rs, _ := ec.BlockReceipts(context.Background(), rpc.BlockNumberOrHashWithNumber(rpc.BlockNumber(b)))
		window += len(rs)
	}
	if indexed != window {
		t.Fatalf("the index holds %d transactions, the window %d", indexed, window)
	}
	head, _ := firstTx(t, ec, n.Head())
	n.Reorg(1)
	if r := receiptOf(t, ec, head); r != nil {
		t.Fatal("a receipt of a transaction a reorg replaced")
	}
}
