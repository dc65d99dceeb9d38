package chain

import (
	"bytes"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/trie"
)

// checkBody checks a block's body against its header, recomputing every
// derived value independently: the count, the gas sum and the receipts'
// running total, the roots from go-ethereum's own encodings
// (types.Transactions, not the cached EncodedTxs), the bloom from each
// log's address and topics, the log indexes, and the transaction types
// the block's fork allows.
func checkBody(t *testing.T, h *types.Header, b *Body, count int64) {
	t.Helper()
	num := h.Number.Uint64()
	if int64(len(b.Txs)) != count || len(b.Receipts) != len(b.Txs) || len(b.Senders) != len(b.Txs) {
		t.Fatalf("block %d: %d txs %d receipts %d senders, header count %d", num, len(b.Txs), len(b.Receipts), len(b.Senders), count)
	}
	if got := types.DeriveSha(b.Txs, trie.NewStackTrie(nil)); got != h.TxHash {
		t.Fatalf("block %d: transactions root %s, header %s", num, got, h.TxHash)
	}
	if got := types.DeriveSha(b.Receipts, trie.NewStackTrie(nil)); got != h.ReceiptHash {
		t.Fatalf("block %d: receipts root %s, header %s", num, got, h.ReceiptHash)
	}
	var bloom types.Bloom
	var cum uint64
	var next uint
	for i, rc := range b.Receipts {
		tx := b.Txs[i]
		cum += rc.GasUsed
		if rc.CumulativeGasUsed != cum || rc.GasUsed > tx.Gas() || rc.GasUsed < 21000 {
			t.Fatalf("block %d tx %d: gas used %d cumulative %d (sum %d), gas limit %d", num, i, rc.GasUsed, rc.CumulativeGasUsed, cum, tx.Gas())
		}
		if rc.TxHash != tx.Hash() || rc.Type != tx.Type() {
			t.Fatalf("block %d tx %d: receipt hash/type %s/%d, tx %s/%d", num, i, rc.TxHash, rc.Type, tx.Hash(), tx.Type())
		}
		switch {
		case tx.Type() == types.DynamicFeeTxType && num < LondonBlock,
			tx.Type() == types.AccessListTxType && num < BerlinBlock,
			tx.Type() > types.DynamicFeeTxType:
			t.Fatalf("block %d: transaction type %d before its fork", num, tx.Type())
		}
		if (h.BaseFee == nil) != (rc.EffectiveGasPrice.Cmp(tx.GasPrice()) == 0 && tx.Type() != types.DynamicFeeTxType) && h.BaseFee == nil {
			t.Fatalf("block %d tx %d: effective price %s, gas price %s", num, i, rc.EffectiveGasPrice, tx.GasPrice())
		}
		if h.BaseFee != nil && rc.EffectiveGasPrice.Cmp(h.BaseFee) < 0 {
			t.Fatalf("block %d tx %d: effective price %s below base fee %s", num, i, rc.EffectiveGasPrice, h.BaseFee)
		}
		if rc.Status == types.ReceiptStatusFailed && len(rc.Logs) > 0 {
			t.Fatalf("block %d tx %d: a failed transaction with logs", num, i)
		}
		if (tx.To() == nil) != (rc.ContractAddress != common.Address{}) {
			t.Fatalf("block %d tx %d: creation %v, contract address %s", num, i, tx.To() == nil, rc.ContractAddress)
		}
		for _, l := range rc.Logs {
			if l.Index != next || l.TxIndex != uint(i) || l.TxHash != rc.TxHash || l.BlockNumber != num {
				t.Fatalf("block %d tx %d: log %+v, want index %d", num, i, l, next)
			}
			next++
			bloom.Add(l.Address.Bytes())
			for _, tp := range l.Topics {
				bloom.Add(tp.Bytes())
			}
		}
	}
	if cum != h.GasUsed {
		t.Fatalf("block %d: transactions use %d gas, header %d", num, cum, h.GasUsed)
	}
	if bloom != h.Bloom {
		t.Fatalf("block %d: logs bloom differs from the header's", num)
	}
}

// TestDayBodiesConsistent: a day with bodies (one from each fork era)
// agrees with its headers, is deterministic, and holds ERC-20 Transfer
// logs; its block hashes reach the receipts and logs.
func TestDayBodiesConsistent(t *testing.T) {
	days := map[string]time.Time{
		"frontier":  d(2015, 8, 7),
		"byzantium": d(2017, 10, 20),
		"berlin":    d(2021, 5, 1),
		"london":    LondonTime,
		"cancun":    d(2026, 9, 29),
	}
	for name, date := range days {
		t.Run(name, func(t *testing.T) {
			idx := int(date.Truncate(24*time.Hour).Sub(FirstDay).Hours() / 24)
			db := BuildDay(1, idx)
			// A slice of the day keeps the test fast; the rest is the same code.
			n := min(len(db.Headers), 40)
			db.Headers, db.TxCount = db.Headers[:n], db.TxCount[:n]
			db.AddBodies(1)
			db.LinkTo(Anchor(1, db.FirstBlock()))
			var transfers, txs int
			types0 := map[uint8]int{}
			for i, h := range db.Headers {
				b := db.Body(i)
				checkBody(t, h, b, db.TxCount[i])
				for _, tx := range b.Txs {
					types0[tx.Type()]++
				}
				txs += len(b.Txs)
				for _, l := range b.Logs() {
					if l.BlockHash != db.Hashes[i] {
						t.Fatalf("block %d: log block hash %s, block %s", h.Number, l.BlockHash, db.Hashes[i])
					}
					if l.Topics[0] == TransferTopic && len(l.Topics) == 3 {
						transfers++
					}
				}
			}
			if name != "frontier" && transfers == 0 {
				t.Fatalf("%d transactions and no Transfer log", txs)
			}
			if name == "cancun" && (types0[types.DynamicFeeTxType] == 0 || types0[types.LegacyTxType] == 0 || types0[types.AccessListTxType] == 0) {
				t.Fatalf("types after London: %v", types0)
			}
			again := BuildDay(1, idx)
			again.Headers, again.TxCount = again.Headers[:n], again.TxCount[:n]
			again.AddBodies(1)
			again.LinkTo(Anchor(1, again.FirstBlock()))
			for i := range db.Hashes {
				if db.Hashes[i] != again.Hashes[i] || !bytes.Equal(db.Body(i).Enc.encoded(), again.Body(i).Enc.encoded()) {
					t.Fatalf("block %d differs between two builds", db.Headers[i].Number)
				}
			}
		})
	}
}

// TestNextBodyConsistent: a block Next makes agrees with the body
// NextBody regenerates for it.
func TestNextBodyConsistent(t *testing.T) {
	p := LastDaysPreset(1)
	day := BuildDay(1, p.DayIndex())
	day.LinkTo(Anchor(1, p.FirstBlock))
	parent := day.Headers[len(day.Headers)-1]
	for i := 0; i < 20; i++ {
		nb := Next(1, parent, uint64(i%2))
		b := NextBody(1, nb.Header, uint64(i%2), len(nb.Txs))
		checkBody(t, nb.Header, b, int64(len(nb.Txs)))
		parent = nb.Header
	}
}

func (e EncodedTxs) encoded() []byte { return bytes.Join(e, nil) }

// BenchmarkDayBodies is the cost of a day's bodies, per transaction: run
// with -bench DayBodies -benchtime 1x.
func BenchmarkDayBodies(b *testing.B) {
	p := LastDaysPreset(1)
	db := BuildDay(1, p.DayIndex())
	n := 500
	db.Headers, db.TxCount = db.Headers[:n], db.TxCount[:n]
	var txs int64
	for _, c := range db.TxCount {
		txs += c
	}
	b.ResetTimer()
	for range b.N {
		db.AddBodies(1)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*txs), "ns/tx")
}
