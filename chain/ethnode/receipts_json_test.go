package ethnode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethstream/ethstream/chain"
	"github.com/holiman/uint256"
)

// TestReceiptJSONMatchesMap: appendReceipt writes, byte for byte, what
// encoding/json makes of rpcReceipt's map, for every receipt of the node's
// blocks and for the shapes the model rarely draws (a pre-Byzantium root,
// a created contract, no logs, a log without topics or data, no price).
func TestReceiptJSONMatchesMap(t *testing.T) {
	n := startTestNode(t, Options{Seed: 11, Manual: true, InitialBlocks: 3})
	check := func(b *nodeBlock, body *chain.Body) int {
		for i := range body.Receipts {
			want, err := json.Marshal(rpcReceipt(b, body, i))
			if err != nil {
				t.Fatal(err)
			}
			if got := appendReceipt(nil, b, body, i); !bytes.Equal(got, want) {
				t.Fatalf("block %d receipt %d:\ngot  %s\nwant %s", b.header.Number, i, got, want)
			}
		}
		return len(body.Receipts)
	}
	checked := 0
	var last *nodeBlock
	for num := n.Head() - 2; num <= n.Head(); num++ {
		n.mu.RLock()
		last = n.blockLocked(num)
		n.mu.RUnlock()
		checked += check(last, n.servedBody(last))
	}
	if checked < 10 {
		t.Fatalf("only %d receipts checked", checked)
	}
	body := n.body(last)
	rc := body.Receipts[0]
	rc.PostState, rc.ContractAddress, rc.EffectiveGasPrice = []byte{1, 2, 3}, common.Address{9}, nil
	body.Receipts[1].Logs = nil
	body.Receipts[2].Logs = []*types.Log{{Removed: true, BlockNumber: 1 << 40}}
	body.Receipts[3].EffectiveGasPrice = new(big.Int).Lsh(big.NewInt(1), 100)
	check(last, body)
}

// oldRPCTransaction is rpcTransaction as it was before appendTxJSON:
// go-ethereum's MarshalJSON plus the RPC fields, the oracle.
func oldRPCTransaction(b *nodeBlock, body *chain.Body, i int) []byte {
	tx := body.Txs[i]
	tj, err := json.Marshal(tx)
	if err != nil {
		panic(err)
	}
	buf := append(tj[:len(tj)-1:len(tj)-1], fmt.Sprintf(`,"blockHash":"%s","blockNumber":"%s","from":"%s","transactionIndex":"%s"`,
		b.hash.Hex(), hexutil.EncodeUint64(b.header.Number.Uint64()), strings.ToLower(body.Senders[i].Hex()), hexutil.EncodeUint64(uint64(i)))...)
	if tx.Type() == types.DynamicFeeTxType {
		buf = fmt.Appendf(buf, `,"gasPrice":"%s"`, hexutil.EncodeBig(body.Receipts[i].EffectiveGasPrice))
	}
	return append(buf, '}')
}

// TestTxJSONMatchesMarshal: rpcTransaction writes, byte for byte, what
// go-ethereum's MarshalJSON plus the RPC fields wrote, for every
// transaction of the node's blocks and for every type (the model draws
// legacy, EIP-2930 and EIP-1559; blob and set-code ones take MarshalJSON).
func TestTxJSONMatchesMarshal(t *testing.T) {
	n := startTestNode(t, Options{Seed: 11, Manual: true, InitialBlocks: 3})
	kinds := map[uint8]int{}
	check := func(b *nodeBlock, body *chain.Body) {
		for i, tx := range body.Txs {
			got, err := rpcTransaction(b, body, i)
			if err != nil {
				t.Fatal(err)
			}
			if want := oldRPCTransaction(b, body, i); !bytes.Equal(got, want) {
				t.Fatalf("block %d transaction %d:\ngot  %s\nwant %s", b.header.Number, i, got, want)
			}
			kinds[tx.Type()]++
		}
	}
	var last *nodeBlock
	for num := n.Head() - 2; num <= n.Head(); num++ {
		n.mu.RLock()
		last = n.blockLocked(num)
		n.mu.RUnlock()
		check(last, n.servedBody(last))
	}
	if kinds[types.LegacyTxType] == 0 || kinds[types.DynamicFeeTxType] == 0 {
		t.Fatalf("the blocks hold transactions of types %v only", kinds)
	}
	key, _ := crypto.GenerateKey()
	to := common.Address{0xaa}
	chainID := big.NewInt(1)
	signer := types.NewPragueSigner(chainID)
	body := n.body(last)
	for i, inner := range []types.TxData{
		&types.LegacyTx{Nonce: 1, GasPrice: big.NewInt(7), Gas: 21000, To: &to, Value: big.NewInt(1)},
		&types.LegacyTx{Nonce: 2, GasPrice: big.NewInt(7), Gas: 53000, Value: new(big.Int), Data: []byte{0x60}},
		&types.AccessListTx{ChainID: chainID, Nonce: 3, GasPrice: big.NewInt(9), Gas: 30000, To: &to, Value: big.NewInt(5),
			AccessList: types.AccessList{{Address: to, StorageKeys: []common.Hash{{1}}}, {Address: to}}},
		&types.DynamicFeeTx{ChainID: chainID, Nonce: 4, GasTipCap: big.NewInt(1), GasFeeCap: big.NewInt(100), Gas: 21000,
			Value: new(big.Int).Lsh(big.NewInt(1), 200)},
		&types.BlobTx{ChainID: uint256.NewInt(1), Nonce: 6, GasTipCap: uint256.NewInt(1), GasFeeCap: uint256.NewInt(100), Gas: 21000,
			To: to, Value: uint256.NewInt(0), BlobFeeCap: uint256.NewInt(3), BlobHashes: []common.Hash{{0x01, 9}}},
	} {
		s := signer
		if i == 0 {
			s = types.HomesteadSigner{} // unprotected: no chainId
		}
		tx, err := types.SignNewTx(key, s, inner)
		if err != nil {
			t.Fatal(err)
		}
		body.Txs[i] = tx
	}
	check(last, body)
}
