package ethrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"math/big"
	"reflect"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/holiman/uint256"
)

// sampleTxs are one signed transaction of every type go-ethereum knows,
// as a node renders them in a hydrated block (go-ethereum's own JSON plus
// the RPC fields), and a receipt with logs for each.
func sampleTxs(t testing.TB) (txs, receipts [][]byte) {
	key, err := crypto.HexToECDSA("b71c71a67e1177ad4e901695e1b4b9ee17ae16c6668d313eac2f96dbcda3f291")
	if err != nil {
		t.Fatal(err)
	}
	chainID := big.NewInt(1)
	to := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	al := types.AccessList{{Address: to, StorageKeys: []common.Hash{{1}, {2}}}}
	auth, err := types.SignSetCode(key, types.SetCodeAuthorization{ChainID: *uint256.NewInt(1), Address: to, Nonce: 3})
	if err != nil {
		t.Fatal(err)
	}
	inners := []types.TxData{
		&types.LegacyTx{Nonce: 1, GasPrice: big.NewInt(7), Gas: 21000, To: &to, Value: big.NewInt(1)},
		&types.LegacyTx{Nonce: 2, GasPrice: big.NewInt(7), Gas: 53000, Value: big.NewInt(0), Data: []byte{0x60, 0x80}},
		&types.AccessListTx{ChainID: chainID, Nonce: 3, GasPrice: big.NewInt(9), Gas: 30000, To: &to, Value: big.NewInt(5), AccessList: al},
		&types.DynamicFeeTx{ChainID: chainID, Nonce: 4, GasTipCap: big.NewInt(1), GasFeeCap: big.NewInt(100), Gas: 21000, To: &to,
			Value: new(big.Int).Lsh(big.NewInt(1), 200)},
		&types.DynamicFeeTx{ChainID: chainID, Nonce: 5, GasTipCap: big.NewInt(1), GasFeeCap: big.NewInt(100), Gas: 21000, To: &to,
			Value: big.NewInt(0), AccessList: al, Data: []byte("hello")},
		&types.BlobTx{ChainID: uint256.NewInt(1), Nonce: 6, GasTipCap: uint256.NewInt(1), GasFeeCap: uint256.NewInt(100), Gas: 21000,
			To: to, Value: uint256.NewInt(0), BlobFeeCap: uint256.NewInt(3), BlobHashes: []common.Hash{{0x01, 9}, {0x01, 8}}},
		&types.SetCodeTx{ChainID: uint256.NewInt(1), Nonce: 7, GasTipCap: uint256.NewInt(1), GasFeeCap: uint256.NewInt(100), Gas: 50000,
			To: to, Value: uint256.NewInt(0), AuthList: []types.SetCodeAuthorization{auth}},
	}
	signers := []types.Signer{types.HomesteadSigner{}, types.NewPragueSigner(chainID)}
	block := common.HexToHash("0x5555555555555555555555555555555555555555555555555555555555555555")
	for i, inner := range inners {
		signer := signers[1]
		if i == 1 {
			signer = signers[0] // unprotected legacy: v 27/28
		}
		tx, err := types.SignNewTx(key, signer, inner)
		if err != nil {
			t.Fatal(err)
		}
		tj, err := tx.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		from := crypto.PubkeyToAddress(key.PublicKey)
		extra := `,"blockHash":"` + block.Hex() + `","blockNumber":"0x10","from":"` + strings.ToLower(from.Hex()) +
			`","transactionIndex":"` + hexutil.EncodeUint64(uint64(i)) + `"}`
		txs = append(txs, append(tj[:len(tj)-1:len(tj)-1], extra...))
		rc := &types.Receipt{Type: tx.Type(), Status: 1, CumulativeGasUsed: 21000 * uint64(i+1), GasUsed: 21000, TxHash: tx.Hash(),
			EffectiveGasPrice: big.NewInt(50), BlockHash: block, BlockNumber: big.NewInt(16), TransactionIndex: uint(i),
			Logs: []*types.Log{}}
		if i%2 == 0 {
			rc.Logs = append(rc.Logs, &types.Log{Address: to, Topics: []common.Hash{{3}, {4}}, Data: []byte{1, 2}, BlockNumber: 16,
				TxHash: tx.Hash(), TxIndex: uint(i), BlockHash: block, Index: uint(i)},
				&types.Log{Address: to, Topics: []common.Hash{}, Data: []byte{}, TxHash: tx.Hash(), BlockHash: block, Removed: true})
		}
		if i == 1 {
			rc.ContractAddress = crypto.CreateAddress(from, 2)
		}
		if i == 5 {
			rc.BlobGasUsed, rc.BlobGasPrice = 131072, big.NewInt(1)
		}
		rj, err := rc.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		receipts = append(receipts, rj)
	}
	return txs, receipts
}

// checkTxAgrees fails unless decodeTx's answer for raw (valid JSON) is the
// reference's; fast reports whether the fast path answered.
func checkTxAgrees(t *testing.T, raw []byte) (fast bool) {
	t.Helper()
	wantTx, wantFrom, werr := refTx(raw)
	tx, from, ok := fastTx(raw)
	if !ok {
		return false
	}
	if werr != nil {
		t.Fatalf("%s:\nthe fast decoder answered, the reference failed: %v", raw, werr)
	}
	gb, _ := tx.MarshalBinary()
	wb, _ := wantTx.MarshalBinary()
	gj, _ := tx.MarshalJSON()
	wj, _ := wantTx.MarshalJSON()
	if from != wantFrom || !bytes.Equal(gb, wb) || !bytes.Equal(gj, wj) || tx.Hash() != wantTx.Hash() {
		t.Fatalf("%s:\nfast %s from %s\nref  %s from %s", raw, gj, from.Hex(), wj, wantFrom.Hex())
	}
	return true
}

// checkReceiptAgrees is checkTxAgrees for a receipt.
func checkReceiptAgrees(t *testing.T, raw []byte) (fast bool) {
	t.Helper()
	var want *types.Receipt
	werr := json.Unmarshal(raw, &want)
	got, ok := fastReceipt(raw)
	if !ok {
		return false
	}
	if werr != nil || want == nil {
		t.Fatalf("%s:\nthe fast decoder answered, the reference failed: %v", raw, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\nfast %+v\nref  %+v", raw, got, want)
	}
	for i := range got.Logs {
		if !reflect.DeepEqual(got.Logs[i], want.Logs[i]) {
			t.Fatalf("%s: log %d:\nfast %+v\nref  %+v", raw, i, got.Logs[i], want.Logs[i])
		}
	}
	return true
}

// TestTxJSONSamples: every transaction type and its receipt, as a node
// renders them, takes the fast path and decodes as go-ethereum decodes it.
func TestTxJSONSamples(t *testing.T) {
	txs, rcs := sampleTxs(t)
	for i := range txs {
		if !checkTxAgrees(t, txs[i]) {
			t.Errorf("transaction %d left to the reference: %s", i, txs[i])
		}
		if !checkReceiptAgrees(t, rcs[i]) {
			t.Errorf("receipt %d left to the reference: %s", i, rcs[i])
		}
	}
}

// TestBodyJSONFromNode: a hydrated block and its receipts as the in-repo
// node serves them take the fast path for every transaction and receipt,
// and decode as the reference decodes them.
func TestBodyJSONFromNode(t *testing.T) {
	n := startChainNode(t, 4, ethnode.Faults{})
	c, err := rpc.Dial(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	checked := 0
	for num := n.Head(); num > n.Head()-4; num-- {
		var blk json.RawMessage
		var rcs []json.RawMessage
		if err := c.CallContext(context.Background(), &blk, "eth_getBlockByNumber", hexutil.EncodeUint64(num), true); err != nil {
			t.Fatal(err)
		}
		var ref refFullBlock
		if err := json.Unmarshal(blk, &ref); err != nil {
			t.Fatal(err)
		}
		if err := c.CallContext(context.Background(), &rcs, "eth_getBlockReceipts", ref.Hash.Hex()); err != nil {
			t.Fatal(err)
		}
		for i, raw := range ref.Transactions {
			if !checkTxAgrees(t, raw) {
				t.Fatalf("block %d transaction %d left to the reference: %s", num, i, raw)
			}
			if !checkReceiptAgrees(t, rcs[i]) {
				t.Fatalf("block %d receipt %d left to the reference: %s", num, i, rcs[i])
			}
			checked++
		}
		var fb fullBlock
		if err := json.Unmarshal(blk, &fb); err != nil || fb.TxErr != nil || fb.Hash != ref.Hash || len(fb.Txs) != len(ref.Transactions) ||
			fb.Number.v != num {
			t.Fatalf("block %d: %v %v, %d transactions", num, err, fb.TxErr, len(fb.Txs))
		}
	}
	if checked < 20 {
		t.Fatalf("only %d transactions checked", checked)
	}
}

// mutations are edits of a sample the fuzzers start from: the shapes the
// fast path must leave to the reference, or decode as it does.
var mutations = [][2]string{
	{`"nonce"`, `"Nonce"`}, {`"nonce"`, `"n\u006fnce"`}, {`"to"`, `"to":null,"x"`}, {`"type"`, `"type":null,"y"`},
	{`"input"`, `"input":"0x0","z"`}, {`"value"`, `"value":"0x00","w"`}, {`"yParity"`, `"yParity":"0x2","q"`},
	{`"v"`, `"v":"0x25","v2"`}, {`"gas"`, `"gas":"0x1","gas"`}, {`"from"`, `"from":null,"f"`}, {`"hash"`, `"hash":"0x1","h"`},
	{`"accessList":[]`, `"accessList":null`}, {`"logs":[]`, `"logs":null`}, {`"status"`, `"status":null,"t"`},
	{`"topics":[]`, `"topics":[null]`}, {`"removed":false`, `"removed":null`}, {`"removed":false`, `"removed":"false"`},
	{`"0x5555`, `"0X5555`}, {`"logsBloom"`, `"LogsBloom"`}, {`"chainId"`, `"chainId":"0x1","ſ"`}, {`"maxFeePerGas"`, `"blobs":[],"m"`},
}

// FuzzTxJSON: whenever the fast transaction decoder answers, go-ethereum's
// decoder gives the same transaction and from address, without error.
func FuzzTxJSON(f *testing.F) {
	txs, _ := sampleTxs(f)
	for _, tx := range txs {
		f.Add(tx)
		for _, m := range mutations {
			if bytes.Contains(tx, []byte(m[0])) {
				f.Add(bytes.Replace(tx, []byte(m[0]), []byte(m[1]), 1))
			}
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if json.Valid(raw) {
			checkTxAgrees(t, raw)
		}
	})
}

// FuzzReceiptJSON: whenever the fast receipt decoder answers,
// go-ethereum's decoder gives the same receipt, without error; a block's
// receipts decode as the reference decodes them, errors included.
func FuzzReceiptJSON(f *testing.F) {
	_, rcs := sampleTxs(f)
	for _, rc := range rcs {
		f.Add(rc)
		for _, m := range mutations {
			if bytes.Contains(rc, []byte(m[0])) {
				f.Add(bytes.Replace(rc, []byte(m[0]), []byte(m[1]), 1))
			}
		}
	}
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		checkReceiptAgrees(t, raw)
		list := append(append([]byte("["), raw...), ']')
		var want []*types.Receipt
		werr := json.Unmarshal(list, &want)
		var got blockReceipts
		gerr := json.Unmarshal(list, &got)
		// On an error encoding/json leaves a partial answer: only the error counts.
		if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() || werr == nil && !reflect.DeepEqual([]*types.Receipt(got), want) {
			t.Fatalf("%s:\nfast %v %v\nref  %v %v", raw, got, gerr, want, werr)
		}
	})
}

// TestBodyOfRefusesNullLog: a receipt whose logs hold a null is a
// malformed block, not a panic (the check read the nil log's fields).
func TestBodyOfRefusesNullLog(t *testing.T) {
	txs, _ := sampleTxs(t)
	var blk fullBlock
	raw := `{"hash":"0x5555555555555555555555555555555555555555555555555555555555555555","number":"0x10","timestamp":"0x1","transactions":[` +
		string(txs[3]) + `]}`
	if err := json.Unmarshal([]byte(raw), &blk); err != nil || blk.TxErr != nil || len(blk.Txs) != 1 {
		t.Fatalf("decode: %v %v", err, blk.TxErr)
	}
	row := blockRow{Number: 16, Hash: blk.Hash.Hex(), BlockTS: 1_000_000, TransactionCount: 1}
	rc := &types.Receipt{TxHash: blk.Txs[0].Hash(), BlockHash: blk.Hash, EffectiveGasPrice: big.NewInt(1), Logs: []*types.Log{nil}}
	if _, _, err := bodyOf(row, &blk, []*types.Receipt{rc}); err == nil || !strings.Contains(err.Error(), "log 0 missing") {
		t.Fatalf("bodyOf: %v", err)
	}
	rc.Logs = []*types.Log{{TxHash: rc.TxHash, BlockHash: rc.BlockHash}}
	if _, _, err := bodyOf(row, &blk, []*types.Receipt{rc}); err != nil {
		t.Fatalf("bodyOf of a sound body: %v", err)
	}
}
