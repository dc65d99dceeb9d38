package ethnode

import (
	"bytes"
	"encoding/json"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethstream/ethstream/chain"
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
