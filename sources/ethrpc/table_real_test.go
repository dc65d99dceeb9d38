package ethrpc

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/ethstream/ethstream/ethtables"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
)

// transferInitCode is contract-creation code that emits one ERC-20
// Transfer(0x…01, 0x…02, 42) log and deploys no code: the smallest token
// transfer a real node executes. MSTORE(0, 42); LOG3(0, 32, Transfer,
// 1, 2); STOP.
func transferInitCode() []byte {
	code := []byte{0x60, 0x2a, 0x60, 0x00, 0x52, 0x60, 0x02, 0x60, 0x01, 0x7f}
	code = append(code, ethtables.TransferTopic.Bytes()...)
	return append(code, 0x60, 0x20, 0x60, 0x00, 0xa3, 0x00)
}

// sendCreate queues a signed contract creation with init code.
func (n *simNode) sendCreate(init []byte) common.Hash {
	n.t.Helper()
	ctx := context.Background()
	c := n.sim.Client()
	head, err := c.HeaderByNumber(ctx, nil)
	if err != nil {
		n.t.Fatal(err)
	}
	chainID := big.NewInt(1337)
	tx := types.NewTx(&types.DynamicFeeTx{ChainID: chainID, Nonce: n.nonce, GasTipCap: big.NewInt(params.GWei),
		GasFeeCap: new(big.Int).Add(head.BaseFee, big.NewInt(2*params.GWei)), Gas: 200_000, Data: init})
	signed, err := types.SignTx(tx, types.LatestSignerForChainID(chainID), n.key)
	if err != nil {
		n.t.Fatal(err)
	}
	if err := c.SendTransaction(ctx, signed); err != nil {
		n.t.Fatal(err)
	}
	n.nonce++
	return signed.Hash()
}

// TestTablesFromGoEthereum: the table sources parse go-ethereum's own
// answers (the simulated backend: a real node with internal/ethapi's
// eth_getBlockByHash(hash, true) and eth_getBlockReceipts, behind a real
// rpc.Server on loopback) into the rows go-ethereum's client gives for
// the same transactions: signed EIP-1559 transfers and a contract
// creation whose constructor emits an ERC-20 Transfer; and every row of
// the four tables equals the JSON answers' (checkOracle).
func TestTablesFromGoEthereum(t *testing.T) {
	n := newSimNode(t)
	n.mine(1)
	n.sendTxs(3)
	create := n.sendCreate(transferInitCode())
	n.mine(1)
	n.sendTxs(2)
	n.mine(2)
	checkTables(t, n.url, n.sim.Client(), strings.ToLower(crypto.PubkeyToAddress(n.key.PublicKey).Hex()), create, 6)
	rc, err := rpc.Dial(n.url)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	checkOracle(t, n.url, rc)
}

// txReader is what checkTables asks of go-ethereum's client.
type txReader interface {
	TransactionByHash(ctx context.Context, h common.Hash) (*types.Transaction, bool, error)
	TransactionReceipt(ctx context.Context, h common.Hash) (*types.Receipt, error)
}

// checkTables reads the node at url from block 1 with each table source
// and compares the rows with what go-ethereum's client c gives: wantTxs
// transactions sent by from, create the creation whose constructor emits
// the only log, an ERC-20 Transfer of 42 from 0x…01 to 0x…02.
func checkTables(t *testing.T, url string, c txReader, from string, create common.Hash, wantTxs int) {
	t.Helper()
	ctx := context.Background()
	rc, err := c.TransactionReceipt(ctx, create)
	if err != nil || rc.Status != types.ReceiptStatusSuccessful || len(rc.Logs) != 1 {
		t.Fatalf("creation receipt %+v: %v", rc, err)
	}
	read := func(table string) []map[string]any {
		src, _ := openSource(t, Options{Endpoints: []string{url}, StartBlock: 1, MaxBlocksPerTrigger: 2, Table: table}, nil)
		var vals []map[string]any
		var start stream.Offset
		for {
			end, err := src.LatestOffset(ctx, start)
			if err != nil {
				t.Fatal(err)
			}
			if string(end) == string(start) {
				return vals
			}
			if err := src.ReadBatch(ctx, start, end, func(b *stream.Batch) error {
				for i := range b.Len {
					vals = append(vals, streamtest.Values(b, i))
				}
				return b.Validate()
			}); err != nil {
				t.Fatal(err)
			}
			start = end
		}
	}
	txs := read("transactions")
	if len(txs) != wantTxs {
		t.Fatalf("%d transaction rows, sent %d", len(txs), wantTxs)
	}
	for _, r := range txs {
		h := common.HexToHash(r["hash"].(string))
		tx, _, err := c.TransactionByHash(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		rcpt, err := c.TransactionReceipt(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"hash": strings.ToLower(h.Hex()), "nonce": int64(tx.Nonce()), "transaction_index": int64(rcpt.TransactionIndex),
			"from_address": from, "value": float64(tx.Value().Int64()), "gas": int64(tx.Gas()), "gas_price": rcpt.EffectiveGasPrice.Int64(),
			"receipt_gas_used": int64(rcpt.GasUsed), "receipt_cumulative_gas_used": int64(rcpt.CumulativeGasUsed), "receipt_status": int64(rcpt.Status),
			"block_number": rcpt.BlockNumber.Int64(), "block_hash": strings.ToLower(rcpt.BlockHash.Hex()), "transaction_type": int64(2),
			"max_fee_per_gas": tx.GasFeeCap().Int64(), "max_priority_fee_per_gas": tx.GasTipCap().Int64(),
			"receipt_effective_gas_price": rcpt.EffectiveGasPrice.Int64(), "input": "0x" + common.Bytes2Hex(tx.Data())}
		if tx.To() == nil {
			want["to_address"], want["receipt_contract_address"] = nil, strings.ToLower(rcpt.ContractAddress.Hex())
		} else {
			want["to_address"], want["receipt_contract_address"] = strings.ToLower(tx.To().Hex()), nil
		}
		for k, v := range want {
			if fmt.Sprint(r[k]) != fmt.Sprint(v) {
				t.Fatalf("transaction %s: %s = %v, go-ethereum's client %v", h, k, r[k], v)
			}
		}
	}
	logs := read("logs")
	if len(logs) != 1 || logs[0]["address"] != strings.ToLower(rc.ContractAddress.Hex()) ||
		logs[0]["transaction_hash"] != strings.ToLower(create.Hex()) || logs[0]["data"] != "0x"+common.Bytes2Hex(rc.Logs[0].Data) {
		t.Fatalf("logs %v, receipt %+v", logs, rc.Logs)
	}
	tt := read("token_transfers")
	if len(tt) != 1 || tt[0]["token_address"] != strings.ToLower(rc.ContractAddress.Hex()) || tt[0]["value"] != float64(42) ||
		tt[0]["from_address"] != "0x0000000000000000000000000000000000000001" || tt[0]["to_address"] != "0x0000000000000000000000000000000000000002" {
		t.Fatalf("token transfers %v", tt)
	}
}
