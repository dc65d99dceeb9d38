package ethrpc

import (
	"fmt"
	"testing"

	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/internal/logtest"
)

// TestHistoryLogCodec runs the one checkpoint.Log suite against the history
// files: keyed by the end offset, other names in MetadataDir ignored.
func TestHistoryLogCodec(t *testing.T) {
	hist := func(i int) *history {
		h := &history{}
		parent := fmt.Sprintf("0x%064x", 0)
		for n := 0; n <= i%4; n++ {
			num := 100 + i - i%4 + n
			hash := fmt.Sprintf("0x%064x", 1000+num)
			h.blocks = append(h.blocks, blockRow{Number: int64(num), Hash: hash, ParentHash: parent, BlockTS: int64(num) * 12,
				Miner: fmt.Sprintf("0x%040x", n), TransactionCount: int64(n), GasUsed: int64(n * 21000)})
			parent = hash
		}
		return h
	}
	logtest.Run(t, logtest.Case[Offset, *history]{
		Codec: historyCodec{},
		Key: func(i int) Offset {
			l := hist(i).last()
			return Offset{Block: uint64(l.Number), Hash: l.Hash}
		},
		Value: hist,
		Stray: "notes",
	})
	var _ checkpoint.Codec[Offset, *history] = historyCodec{}
}

// FuzzHistoryName: an accepted history file name is the name of its end
// offset (no second name for one file, so prune cannot miss one).
func FuzzHistoryName(f *testing.F) {
	for _, n := range []string{"history.5.0xab.json", "history.05.0xab.json", "history.5..json", "history.5.0xab.c.json", "history..json", "history.18446744073709551616.0x1.json"} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, name string) { logtest.CheckName(t, historyCodec{}, name) })
}
