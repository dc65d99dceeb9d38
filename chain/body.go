package chain

import (
	"math"
	"math/big"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/trie"
)

// Fork heights the body model follows (mainnet's): which transaction
// types a block may hold and how its receipts encode their outcome.
const (
	// SpuriousDragonBlock is the first block whose legacy transactions
	// carry EIP-155 replay protection (v = 37 or 38 on mainnet).
	SpuriousDragonBlock uint64 = 2_675_000
	// ByzantiumBlock is the first block whose receipts hold a status
	// (EIP-658) instead of an intermediate state root.
	ByzantiumBlock uint64 = 4_370_000
	// BerlinBlock is the first block that may hold access-list (EIP-2930)
	// transactions; EIP-1559 ones start at LondonBlock.
	BerlinBlock uint64 = 12_244_000
)

// TransferTopic is the ERC-20 Transfer(address,address,uint256) event's
// topic 0, the logs the token_transfers table is made of.
var TransferTopic = crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)"))

// transferSelector is the ERC-20 transfer(address,uint256) selector.
var transferSelector = []byte{0xa9, 0x05, 0x9c, 0xbb}

// Body is one block's transactions with their senders and receipts (the
// logs inside them), as the model derives them from the header's facts
// (MakeBody). Receipts carry TxHash, TransactionIndex, BlockNumber and
// their logs' block-wide Index; the block hash is the caller's to set
// (SetBlockHash), since it depends on the roots computed from the body.
// A Body is not safe for concurrent use.
type Body struct {
	Txs      types.Transactions
	Enc      EncodedTxs // each transaction's consensus encoding
	Senders  []common.Address
	Receipts types.Receipts
}

// Roots are the header fields a body fixes: its transactions and receipts
// trie roots (types.DeriveSha) and the logs bloom (types.MergeBloom).
func (b *Body) Roots() (txs, receipts common.Hash, bloom types.Bloom) {
	if len(b.Txs) == 0 {
		return types.EmptyTxsHash, types.EmptyReceiptsHash, types.Bloom{}
	}
	st := trie.NewStackTrie(nil)
	txs = types.DeriveSha(b.Enc, st)
	st.Reset()
	receipts = types.DeriveSha(b.Receipts, st)
	return txs, receipts, types.MergeBloom(b.Receipts)
}

// SetBlockHash records the block's hash in every receipt and log.
func (b *Body) SetBlockHash(h common.Hash) {
	for _, r := range b.Receipts {
		r.BlockHash = h
		for _, l := range r.Logs {
			l.BlockHash = h
		}
	}
}

// Logs is the block's logs in log-index order.
func (b *Body) Logs() []*types.Log {
	var out []*types.Log
	for _, r := range b.Receipts {
		out = append(out, r.Logs...)
	}
	return out
}

// bodyCtx is what a block's body derives from: the header's number, time
// and base fee (nil before London) and the block's gas limit.
type bodyCtx struct {
	num, limit uint64
	time       int64
	baseFee    *big.Int
}

func ctxOf(h *types.Header) bodyCtx {
	return bodyCtx{num: h.Number.Uint64(), limit: h.GasLimit, time: int64(h.Time), baseFee: h.BaseFee}
}

// dayBody derives the body of a block of the model's history from its
// header's number, time, base fee and gas (count transactions whose gas
// used adds up to the header's GasUsed). It is deterministic in (seed,
// those fields) and reads neither the header's roots nor its bloom, which
// Roots computes from it.
func dayBody(seed int64, h *types.Header, count int) *Body {
	r := rng(seed, purposeBody, h.Number.Uint64(), 0)
	c := ctxOf(h)
	kinds := drawKinds(r, c, count)
	return makeBody(r, c, kinds, splitGas(r, h.GasUsed, kinds))
}

// NextBody is the body of a block Next made (its header, branch and
// transaction count): what the node serves, regenerated on each request.
func NextBody(seed int64, h *types.Header, branch uint64, count int) *Body {
	return nextBody(seed, ctxOf(h), branch, count)
}

// nextBody is NextBody from the header's facts: the block's gas used is
// nextGas's sum, shared by kind as a history block's is.
func nextBody(seed int64, c bodyCtx, branch uint64, count int) *Body {
	var used uint64
	for _, g := range nextGas(seed, c.num, branch, count, c.limit) {
		used += g
	}
	r := rng(seed, purposeBody, c.num, branch)
	kinds := drawKinds(r, c, count)
	return makeBody(r, c, kinds, splitGas(r, used, kinds))
}

// nextGas is the gas used by each of the count transactions of a block
// Next makes: 21,000 plus a uniform share of the block's gas limit divided
// by count. That is above the EIP-1559 target on average, which
// MaxNextBaseFee bounds.
func nextGas(seed int64, num, branch uint64, count int, limit uint64) []uint64 {
	if count == 0 {
		return nil
	}
	r := rng(seed, purposeTxs, num, branch)
	budget := int64(max(limit/uint64(count), 21000))
	out := make([]uint64, count)
	for i := range out {
		out[i] = uint64(21000 + r.Int64N(budget-21000+1))
	}
	return out
}

// AddBodies derives every block's body and sets the headers' transactions
// root, receipts root and logs bloom from it; call it before LinkTo. The
// bodies are not kept (a day's would take gigabytes from 2017 on): Body
// regenerates one. It is the expensive part of a day (doc.go, Bodies),
// done only for archives with the transaction tables.
func (db *Day) AddBodies(seed int64) {
	db.bodySeed, db.bodies = seed, true
	for i, h := range db.Headers {
		b := dayBody(seed, h, int(db.TxCount[i]))
		h.TxHash, h.ReceiptHash, h.Bloom = b.Roots()
	}
}

// Body regenerates block i's body, with its block hash once the day is
// linked. It panics unless AddBodies derived the day's roots: without it
// the headers' roots are placeholders no body matches.
func (db *Day) Body(i int) *Body {
	if !db.bodies {
		panic("chain: Day.Body of a day without AddBodies")
	}
	b := dayBody(db.bodySeed, db.Headers[i], int(db.TxCount[i]))
	if db.Hashes != nil {
		b.SetBlockHash(db.Hashes[i])
	}
	return b
}

// drawKinds decides what each of count transactions does, by the date's
// shares (tokenShare, callShare; 0.4% creations, 2% failures, ether
// transfers the rest).
func drawKinds(r *rand.Rand, c bodyCtx, count int) []txKind {
	t := time.Unix(c.time, 0).UTC()
	tok, call := interp(tokenShare, t, false), interp(callShare, t, false)
	out := make([]txKind, count)
	for i := range out {
		switch u := r.Float64(); {
		case u < 0.004:
			out[i] = kindCreate
		case u < 0.024:
			out[i] = kindFailed
		case u < 0.024+tok:
			out[i] = kindToken
		case u < 0.024+tok+call:
			out[i] = kindCall
		default:
			out[i] = kindPlain
		}
	}
	return out
}

// splitGas divides used gas over the transactions (the model's counts
// guarantee used >= 21,000 each): an ether transfer uses exactly 21,000,
// the others 21,000 plus a share of the rest by random weight (the last
// takes the remainder), so the sum is exact. With gas left and only
// ether transfers, the last becomes a contract call.
func splitGas(r *rand.Rand, used uint64, kinds []txKind) []uint64 {
	count := len(kinds)
	if count == 0 {
		return nil
	}
	out := make([]uint64, count)
	spare := used - min(used, 21000*uint64(count))
	ws := make([]float64, count)
	var sum float64
	last := -1
	for i, k := range kinds {
		if k != kindPlain {
			ws[i] = r.ExpFloat64()
			sum += ws[i]
			last = i
		}
	}
	if last < 0 && spare > 0 {
		last = count - 1
		kinds[last], ws[last], sum = kindCall, 1, 1
	}
	var given uint64
	for i := range out {
		var share uint64
		if ws[i] > 0 {
			share = min(uint64(float64(spare)*ws[i]/sum), spare-given)
			if i == last {
				share = spare - given
			}
		}
		given += share
		out[i] = 21000 + share
	}
	return out
}

// txKind is what a generated transaction does.
type txKind int

const (
	kindPlain  txKind = iota // ether transfer to an account, no logs
	kindToken                // ERC-20 transfer: one Transfer log
	kindCall                 // a contract call emitting 0-4 logs, some Transfers
	kindCreate               // a contract creation
	kindFailed               // a call that reverted: status 0, no logs
)

// tokenShare is the fraction of transactions that are ERC-20 transfers
// (tokens took off in 2017).
var tokenShare = []knot{{d(2015, 7, 30), 0}, {d(2016, 6, 1), 0.03}, {d(2017, 6, 1), 0.2}, {d(2018, 6, 1), 0.3}, {d(2026, 12, 31), 0.3}}

// callShare is the fraction that are other contract calls.
var callShare = []knot{{d(2015, 7, 30), 0.08}, {d(2017, 1, 1), 0.2}, {d(2020, 6, 1), 0.35}, {d(2026, 12, 31), 0.4}}

// gasPriceLevel is the typical gas price (gwei) before London.
var gasPriceLevel = []knot{
	{d(2015, 7, 30), 50}, {d(2016, 6, 1), 20}, {d(2017, 6, 1), 20}, {d(2018, 1, 1), 50},
	{d(2018, 6, 1), 10}, {d(2020, 1, 1), 8}, {d(2020, 8, 15), 150}, {d(2021, 1, 1), 60},
	{d(2021, 5, 15), 80}, {d(2021, 8, 5), 40},
}

// Address pools: senders (4,096 accounts, Zipf, plus fresh ones) and
// tokens (64 contracts, Zipf), keccak-derived once.
const (
	senderPool = 4096
	tokenPool  = 64
)

var pools0 = sync.OnceValue(func() *addrPools {
	p := &addrPools{senders: make([]common.Address, senderPool), tokens: make([]common.Address, tokenPool),
		senderCum: zipfCum(senderPool, 0.9), tokenCum: zipfCum(tokenPool, 1.2)}
	for i := range p.senders {
		p.senders[i] = producerAddress("sender", i)
	}
	for i := range p.tokens {
		p.tokens[i] = producerAddress("token", i)
	}
	return p
})

type addrPools struct {
	senders, tokens     []common.Address
	senderCum, tokenCum []float64
}

func pickZipf(r *rand.Rand, cum []float64) int {
	return min(sort.SearchFloat64s(cum, r.Float64()), len(cum)-1)
}

func (p *addrPools) sender(r *rand.Rand) common.Address {
	if r.IntN(10) < 3 {
		return randAddr(r) // an account seen rarely
	}
	return p.senders[pickZipf(r, p.senderCum)]
}

func randAddr(r *rand.Rand) common.Address {
	h := randHash(r)
	return common.Address(h[:20])
}

func word(a common.Address) common.Hash { return common.BytesToHash(a[:]) }

// makeBody builds len(kinds) transactions, transaction i doing kinds[i]
// and using gas[i], their senders and receipts. Draws come from r in a
// fixed order per transaction: sender, type, fields, logs.
func makeBody(r *rand.Rand, c bodyCtx, kinds []txKind, gas []uint64) *Body {
	b := &Body{Txs: make(types.Transactions, len(gas)), Senders: make([]common.Address, len(gas)),
		Receipts: make(types.Receipts, len(gas))}
	if len(gas) == 0 {
		return b
	}
	p := pools0()
	gwei := interp(gasPriceLevel, time.Unix(c.time, 0).UTC(), true)
	var cum uint64
	logIndex := uint(0)
	for i, used := range gas {
		kind := kinds[i]
		from := p.sender(r)
		nonce := r.Uint64N(1 << uint(4+r.IntN(16)))
		limit := used
		if kind != kindPlain {
			limit = min(c.limit, used+used*uint64(r.IntN(30))/100)
		}
		var to *common.Address
		var data []byte
		value := new(big.Int)
		var logs []*types.Log
		switch kind {
		case kindPlain:
			a := p.sender(r)
			to = &a
			value.SetUint64(r.Uint64N(5e18) + 1)
		case kindToken:
			tk := p.tokens[pickZipf(r, p.tokenCum)]
			to = &tk
			dst := p.sender(r)
			amount := tokenAmount(r)
			data = make([]byte, 0, 68)
			data = append(data, transferSelector...)
			data = append(data, word(dst).Bytes()...)
			data = append(data, amount...)
			logs = append(logs, &types.Log{Address: tk, Topics: []common.Hash{TransferTopic, word(from), word(dst)}, Data: amount})
		case kindCall, kindFailed:
			a := randAddr(r)
			if r.IntN(2) == 0 {
				a = p.tokens[pickZipf(r, p.tokenCum)]
			}
			to = &a
			if r.IntN(5) == 0 {
				value.SetUint64(r.Uint64N(1e18))
			}
			data = randBytes(r, 4+32*r.IntN(5))
			if kind == kindCall {
				for k := r.IntN(5); k > 0; k-- {
					logs = append(logs, callLog(r, p, from))
				}
			}
		case kindCreate:
			data = randBytes(r, 64+r.IntN(512))
		}
		tx := b.newTx(r, c, gwei, nonce, limit, to, value, data)
		b.Txs[i], b.Senders[i] = tx, from
		cum += used
		rc := &types.Receipt{Type: tx.Type(), CumulativeGasUsed: cum, GasUsed: used,
			TransactionIndex: uint(i), BlockNumber: new(big.Int).SetUint64(c.num)}
		switch {
		case c.num < ByzantiumBlock:
			h := randHash(r)
			rc.PostState = h[:]
			rc.Status = types.ReceiptStatusSuccessful // implied; not encoded
		case kind == kindFailed:
			rc.Status = types.ReceiptStatusFailed
		default:
			rc.Status = types.ReceiptStatusSuccessful
		}
		if kind == kindCreate {
			rc.ContractAddress = crypto.CreateAddress(from, nonce)
		}
		rc.EffectiveGasPrice = effectivePrice(tx, c.baseFee)
		b.Receipts[i] = rc
		for _, l := range logs {
			l.BlockNumber, l.TxIndex, l.Index = c.num, uint(i), logIndex
			logIndex++
		}
		rc.Logs = logs
	}
	b.Enc = EncodeTxs(b.Txs)
	for i, h := range b.Enc.Hashes() {
		rc := b.Receipts[i]
		rc.TxHash = h
		for _, l := range rc.Logs {
			l.TxHash = h
		}
		if len(rc.Logs) > 0 {
			rc.Bloom = types.CreateBloom(rc)
		}
	}
	return b
}

// callLog is one log of a contract call: half the time an ERC-20 Transfer
// of a token (a swap or a transferFrom), otherwise another event with 1-4
// topics.
func callLog(r *rand.Rand, p *addrPools, from common.Address) *types.Log {
	if r.IntN(2) == 0 {
		tk := p.tokens[pickZipf(r, p.tokenCum)]
		src, dst := from, p.sender(r)
		if r.IntN(2) == 0 {
			src, dst = randAddr(r), from
		}
		return &types.Log{Address: tk, Topics: []common.Hash{TransferTopic, word(src), word(dst)}, Data: tokenAmount(r)}
	}
	l := &types.Log{Address: randAddr(r), Data: randBytes(r, 32*r.IntN(4))}
	for k := 1 + r.IntN(4); k > 0; k-- {
		l.Topics = append(l.Topics, randHash(r))
	}
	return l
}

// tokenAmount is a 32-byte big-endian amount, up to ~10^24 base units.
func tokenAmount(r *rand.Rand) []byte {
	v := new(big.Int).SetUint64(r.Uint64N(1e12) + 1)
	v.Mul(v, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(r.IntN(13))), nil))
	return common.BigToHash(v).Bytes()
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// sigValues are signature values in the valid secp256k1 range; they are
// not real signatures (senders are served, not recovered).
func sigValues(r *rand.Rand) (rs, ss *big.Int) {
	rh, sh := randHash(r), randHash(r)
	rh[0] &= 0x7f
	sh[0] &= 0x7f
	return new(big.Int).SetBytes(rh[:]), new(big.Int).SetBytes(sh[:])
}

var mainnetID = big.NewInt(1)

// newTx makes a transaction of a type the block's fork allows: legacy only
// before Berlin (EIP-155 from Spurious Dragon), then 5% access-list ones,
// and from London 75% EIP-1559, 20% legacy, 5% access-list, priced
// against the base fee.
func (b *Body) newTx(r *rand.Rand, c bodyCtx, gwei float64, nonce, gas uint64, to *common.Address, value *big.Int, data []byte) *types.Transaction {
	typ := types.LegacyTxType
	u := r.IntN(100)
	switch {
	case c.num >= LondonBlock && u < 75:
		typ = types.DynamicFeeTxType
	case c.num >= BerlinBlock && u >= 95:
		typ = types.AccessListTxType
	}
	var price, tip uint64
	if c.baseFee != nil {
		tip = uint64(r.Int64N(2_000_000_000)) + 1
		price = c.baseFee.Uint64() + tip
	} else {
		price = uint64(math.Round(gwei * 1e9 * math.Exp(0.4*r.NormFloat64())))
	}
	rs, ss := sigValues(r)
	v := uint64(r.IntN(2))
	var access types.AccessList
	if typ == types.AccessListTxType {
		access = types.AccessList{{Address: randAddr(r), StorageKeys: []common.Hash{randHash(r)}}}
	}
	switch typ {
	case types.DynamicFeeTxType:
		return types.NewTx(&types.DynamicFeeTx{ChainID: mainnetID, Nonce: nonce, GasTipCap: new(big.Int).SetUint64(tip),
			GasFeeCap: new(big.Int).SetUint64(2*c.baseFee.Uint64() + tip), Gas: gas, To: to, Value: value, Data: data,
			V: new(big.Int).SetUint64(v), R: rs, S: ss})
	case types.AccessListTxType:
		return types.NewTx(&types.AccessListTx{ChainID: mainnetID, Nonce: nonce, GasPrice: new(big.Int).SetUint64(price),
			Gas: gas, To: to, Value: value, Data: data, AccessList: access, V: new(big.Int).SetUint64(v), R: rs, S: ss})
	}
	if c.num >= SpuriousDragonBlock {
		v += 37 // chain id 1: v = 2*1 + 35 + parity
	} else {
		v += 27
	}
	return types.NewTx(&types.LegacyTx{Nonce: nonce, GasPrice: new(big.Int).SetUint64(price), Gas: gas, To: to,
		Value: value, Data: data, V: new(big.Int).SetUint64(v), R: rs, S: ss})
}

// effectivePrice is what the sender paid per gas: the gas price, or from
// London min(fee cap, base fee + tip).
func effectivePrice(tx *types.Transaction, baseFee *big.Int) *big.Int {
	if baseFee == nil {
		return new(big.Int).Set(tx.GasPrice())
	}
	tip := tx.EffectiveGasTipValue(baseFee)
	return tip.Add(tip, baseFee)
}
