package chain

import (
	"bytes"
	"fmt"
	"math/big"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
)

// Block is a block of the chain's continuation past the model's last day
// (Next): a post-merge header, its transactions encoded, and its size.
type Block struct {
	Header *types.Header
	Txs    EncodedTxs // len(Txs) is the block's transaction count
	Size   uint64     // approximate RLP size in bytes
}

// Next derives block parent+1 of branch (0 for the original chain, >0 for
// a reorg's replacement) from the seed: a post-merge header 12 s after its
// parent, base fee by EIP-1559 from the parent, fork fields by timestamp,
// and a body (NextBody) whose roots and bloom are the header's.
// It is how the node (package chain/ethnode) continues an archive's chain.
func Next(seed int64, parent *types.Header, branch uint64) Block {
	num := parent.Number.Uint64() + 1
	r := rng(seed, purposeNode, num, branch)
	ts := parent.Time + SlotSeconds
	tt := time.Unix(int64(ts), 0).UTC()
	coinbase, extra := nodeMiners(tt).pick(r)
	limit := parent.GasLimit
	if limit == 0 {
		limit = gasLimitAt(tt)
	}
	var parentFee uint64 = 1_000_000_000
	if parent.BaseFee != nil {
		parentFee = nextBaseFee(parent.BaseFee.Uint64(), parent.GasUsed, parent.GasLimit)
	}
	h := &types.Header{
		ParentHash:      parent.Hash(),
		UncleHash:       types.EmptyUncleHash,
		Coinbase:        coinbase,
		Root:            randHash(r),
		TxHash:          types.EmptyTxsHash,
		ReceiptHash:     types.EmptyReceiptsHash,
		Difficulty:      new(big.Int),
		Number:          new(big.Int).SetUint64(num),
		GasLimit:        limit,
		Time:            ts,
		Extra:           extra,
		MixDigest:       randHash(r),
		BaseFee:         new(big.Int).SetUint64(parentFee),
		WithdrawalsHash: ptr(types.EmptyWithdrawalsHash),
	}
	if ts >= uint64(CancunTime.Unix()) {
		var excess uint64
		if parent.ExcessBlobGas != nil && parent.BlobGasUsed != nil {
			if e := *parent.ExcessBlobGas + *parent.BlobGasUsed; e > 6*blobGasPerBlob {
				excess = e - 6*blobGasPerBlob
			}
		}
		h.BlobGasUsed = ptr(uint64(0)) // no blob transactions are served
		h.ExcessBlobGas = ptr(excess)
		h.ParentBeaconRoot = ptr(randHash(r))
	}
	if ts >= uint64(PragueTime.Unix()) {
		h.RequestsHash = ptr(types.EmptyRequestsHash)
	}
	count := 0
	if r.Float64() >= interp(emptyRate, tt, false) {
		u := min(1, max(0.001, 0.5+0.22*r.NormFloat64()))
		perTx := interp(gasPerTx, tt, false) * (0.7 + 0.6*r.Float64())
		count = max(1, int(u*float64(limit)/perTx))
	}
	if parentFee > MaxNextBaseFee {
		count = 0 // demand falls with the price: see MaxNextBaseFee
	}
	b := Block{Size: 600 + uint64(len(extra))}
	if count > 0 {
		h.GasUsed = 0
		body := nextBody(seed, ctxOf(h), branch, count)
		for _, rc := range body.Receipts {
			h.GasUsed += rc.GasUsed
		}
		b.Txs = body.Enc
		h.TxHash, h.ReceiptHash, h.Bloom = body.Roots()
		// Approximate RLP size; tx.Size() would encode every transaction again.
		for _, tx := range body.Txs {
			b.Size += 115 + uint64(len(tx.Data()))
		}
	}
	b.Header = h
	return b
}

// MaxNextBaseFee (1,000 gwei) bounds the base fee of the blocks Next makes. A
// non-empty block's gas is above the EIP-1559 target on average (each
// transaction uses 21,000 plus a uniform share of its budget), so the base
// fee (the EIP-1559 rule's) grows about 0.5% a block: from the archive's
// last fee it passes 1,000 gwei after some 2,500 blocks and overflowed the
// int64 column after some 4,000 (a 10,000-block freshness run met it).
// Above the bound a block is empty, which lowers the fee 12.5%; a run of
// fewer blocks than that is unchanged.
const MaxNextBaseFee = 1_000_000_000_000

// EncodedTxs is a block's transactions in their consensus encoding (type
// byte + RLP), encoded once: DeriveSha reads them through EncodeIndex and
// the transaction hashes are their Keccak-256, so neither encodes again
// (encoding was a third of a block's cost).
type EncodedTxs [][]byte

// EncodeTxs encodes txs once.
func EncodeTxs(txs types.Transactions) EncodedTxs {
	enc := make(EncodedTxs, len(txs))
	for i, tx := range txs {
		b, err := tx.MarshalBinary()
		if err != nil {
			panic(fmt.Sprintf("chain: encode generated transaction %d: %v", i, err))
		}
		enc[i] = b
	}
	return enc
}

// Len implements types.DerivableList.
func (e EncodedTxs) Len() int { return len(e) }

// EncodeIndex implements types.DerivableList.
func (e EncodedTxs) EncodeIndex(i int, w *bytes.Buffer) { w.Write(e[i]) }

// Hashes are the transaction hashes, as Transaction.Hash computes them.
func (e EncodedTxs) Hashes() []common.Hash {
	out := make([]common.Hash, len(e))
	for i, b := range e {
		out[i] = crypto.Keccak256Hash(b)
	}
	return out
}

var (
	nodeMinersMu sync.Mutex
	nodeMinersAt = map[int64]*minerTable{}
)

// nodeMiners caches the fee-recipient table per day.
func nodeMiners(t time.Time) *minerTable {
	day := t.Unix() / 86400
	nodeMinersMu.Lock()
	defer nodeMinersMu.Unlock()
	mt, ok := nodeMinersAt[day]
	if !ok {
		mt = newMinerTable(time.Unix(day*86400+43200, 0).UTC(), true)
		nodeMinersAt[day] = mt
	}
	return mt
}
