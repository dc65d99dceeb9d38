package ethtables

import (
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
)

// TestIsTokenTransfer: only a three-topic Transfer with a 32-byte amount
// is an ERC-20 transfer (ERC-721's has four topics).
func TestIsTokenTransfer(t *testing.T) {
	a := common.BigToHash(big.NewInt(7)).Bytes()
	for _, c := range []struct {
		topics int
		data   int
		want   bool
	}{{3, 32, true}, {4, 0, false}, {3, 0, false}, {2, 32, false}} {
		l := &types.Log{Topics: make([]common.Hash, c.topics), Data: a[:c.data]}
		l.Topics[0] = TransferTopic
		if IsTokenTransfer(l) != c.want {
			t.Fatalf("%d topics, %d bytes: %v", c.topics, c.data, !c.want)
		}
	}
}
