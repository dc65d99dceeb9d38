package chain

import (
	"math"
	"math/big"
	"math/bits"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
)

// Day holds one day's blocks: the headers plus the archive columns that a
// header does not carry, one entry per block in each slice. ParentHash of
// Headers[0] is unset and Hashes is nil until LinkTo links the day to its
// predecessor. A Day is not safe for concurrent use.
type Day struct {
	day     *dayPlan // nil for a Day assembled outside the model (a node's blocks)
	Headers []*types.Header
	Hashes  []common.Hash
	TxCount []int64   // transaction_count
	Size    []int64   // size, the block's RLP size in bytes
	TD      []float64 // total_difficulty
	// bodies is set by AddBodies: the headers' roots and blooms are then
	// those of the bodies Body regenerates from bodySeed (otherwise seeded
	// placeholders, see doc.go).
	bodies   bool
	bodySeed int64
}

// BuildDay derives day index (0 = 2015-07-30; see Preset.DayIndex) of the
// seed's chain, every field of its headers except the first ParentHash
// (LinkTo sets it). It panics unless 0 <= index < TotalDays.
func BuildDay(seed int64, index int) *Day {
	p := planFor(seed)
	return buildDay(p, &p.days[index])
}

// DayOfBlock is the index of the day that holds block num, false outside
// the model's blocks.
func DayOfBlock(num uint64) (int, bool) {
	p := layoutPlan()
	i := sort.Search(len(p.days), func(i int) bool { return p.days[i].first+uint64(p.days[i].n) > num })
	if i == len(p.days) || p.days[i].first > num {
		return 0, false
	}
	return i, true
}

// Date is the day's UTC midnight.
func (db *Day) Date() time.Time { return db.day.date }

// Index is the day's position in the model (0 = 2015-07-30).
func (db *Day) Index() int { return db.day.index }

// FirstBlock is the number of the day's first block.
func (db *Day) FirstBlock() uint64 { return db.day.first }

// TrimBefore drops the blocks numbered below first (a window that starts
// inside the day: LastBlocksPreset); call it before LinkTo.
func (db *Day) TrimBefore(first uint64) {
	if len(db.Headers) == 0 || first <= db.Headers[0].Number.Uint64() {
		return
	}
	k := min(int(first-db.Headers[0].Number.Uint64()), len(db.Headers))
	db.Headers, db.TxCount, db.Size, db.TD = db.Headers[k:], db.TxCount[k:], db.Size[k:], db.TD[k:]
}

// Anchor is the ParentHash of a window's first block (see doc.go, Hashes).
func Anchor(seed int64, first uint64) common.Hash { return anchorHash(seed, first) }

// gasLimitAt is mainnet's block gas limit target by date (steps at the
// well-known raises).
func gasLimitAt(t time.Time) uint64 {
	steps := []struct {
		t time.Time
		v uint64
	}{
		{d(2015, 7, 30), 5000}, {d(2015, 8, 2), 3_141_592}, {d(2016, 6, 20), 4_712_388},
		{d(2017, 6, 10), 6_700_000}, {d(2017, 12, 15), 8_000_000}, {d(2019, 9, 20), 10_000_000},
		{d(2020, 8, 1), 12_500_000}, {d(2021, 4, 22), 15_000_000}, {LondonTime, 30_000_000},
		{d(2025, 2, 5), 36_000_000}, {d(2025, 7, 22), 45_000_000}, {d(2025, 11, 25), 60_000_000},
	}
	v := steps[0].v
	for _, s := range steps {
		if !t.Before(s.t) {
			v = s.v
		}
	}
	return v
}

// utilisation is the mean gas_used/gas_limit before London.
var utilisation = []knot{
	{d(2015, 7, 30), 0.01}, {d(2016, 1, 1), 0.08}, {d(2016, 6, 1), 0.2},
	{d(2017, 6, 1), 0.7}, {d(2018, 1, 1), 0.9}, {d(2021, 8, 5), 0.95},
}

// emptyRate is the fraction of blocks without transactions.
var emptyRate = []knot{
	{d(2015, 7, 30), 0.85}, {d(2016, 1, 1), 0.5}, {d(2016, 6, 1), 0.25}, {d(2017, 1, 1), 0.1},
	{d(2018, 1, 1), 0.03}, {d(2020, 1, 1), 0.01}, {d(2022, 9, 15), 0.005}, {d(2026, 12, 31), 0.002},
}

// gasPerTx is the mean gas per transaction.
var gasPerTx = []knot{
	{d(2015, 7, 30), 30_000}, {d(2017, 1, 1), 45_000}, {d(2019, 1, 1), 55_000},
	{d(2021, 1, 1), 70_000}, {d(2022, 9, 15), 100_000}, {d(2025, 6, 1), 120_000}, {d(2026, 12, 31), 160_000},
}

// logRate is the fraction of non-empty blocks whose logs bloom is not zero.
// Blooms are modelled sparse (a few entries) to keep the archive small.
var logRate = []knot{{d(2015, 7, 30), 0.05}, {d(2016, 6, 1), 0.1}, {d(2017, 6, 1), 0.15}, {d(2019, 1, 1), 0.15}}

const blobGasPerBlob = 131072

// nextBaseFee is EIP-1559's base fee update (integer arithmetic as in
// consensus/misc/eip1559).
func nextBaseFee(parentFee, parentUsed, parentLimit uint64) uint64 {
	target := parentLimit / 2
	switch {
	case target == 0 || parentUsed == target:
		return parentFee
	case parentUsed > target:
		hi, lo := bits.Mul64(parentFee, parentUsed-target)
		q, _ := bits.Div64(hi, lo, target)
		q /= 8
		return parentFee + max(q, 1)
	default:
		hi, lo := bits.Mul64(parentFee, target-parentUsed)
		q, _ := bits.Div64(hi, lo, target)
		q /= 8
		if q >= parentFee {
			return 0
		}
		return parentFee - q
	}
}

func randHash(r *rand.Rand) common.Hash {
	var h common.Hash
	for i := 0; i < 32; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			h[i+j] = byte(v >> (8 * j))
		}
	}
	return h
}

// sparseBloom sets the bits of k log entries (3 bits each, as a bloom does).
func sparseBloom(r *rand.Rand, k int) types.Bloom {
	var b types.Bloom
	for i := 0; i < 3*k; i++ {
		bit := r.IntN(2048)
		b[types.BloomByteLength-1-bit/8] |= 1 << (bit % 8)
	}
	return b
}

// anchorHash is the parent hash of a preset's first block: hashing all of
// history before it would cost a minute, so each window starts from a hash
// derived from the seed and the block number (for block 1, a seeded genesis).
func anchorHash(seed int64, first uint64) common.Hash {
	return crypto.Keccak256Hash([]byte("ethstream-anchor"), seedBytes(seed, purposeAnchor, first))
}

func ptr[T any](v T) *T { return &v }

// buildDay derives every field of a day's headers except the first
// ParentHash, from the seed and the day plan alone.
func buildDay(p *plan, dp *dayPlan) *Day {
	db := &Day{day: dp}
	b := newDayBuilder(p, dp)
	n := dp.n
	db.Headers = make([]*types.Header, 0, n)
	db.TxCount = make([]int64, 0, n)
	db.Size = make([]int64, 0, n)
	db.TD = make([]float64, 0, n)
	var times []int64
	for _, pc := range dp.pieces {
		times = append(times, pc.blockTimes(b.r)...)
	}
	for i := 0; i < n; i++ {
		h, txs, size := b.block(i, times[i])
		db.Headers = append(db.Headers, h)
		db.TxCount = append(db.TxCount, txs)
		db.Size = append(db.Size, size)
		db.TD = append(db.TD, b.td)
	}
	return db
}

// dayBuilder builds one day's blocks in order. r draws the model's
// decisions and fr the field values, each block taking its draws in a fixed
// order (the archive's bytes depend on it); the curves are read at the
// day's noon; the rest carries from one block to the next.
type dayBuilder struct {
	dp                       *dayPlan
	r, fr                    *rand.Rand
	powTable, posTable       *minerTable
	util, empty, perTx, logs float64

	// Difficulty jitter telescopes (j_i = r_i - r_{i-1}, last r = 0) so the
	// day's difficulty sums to n*diff exactly and total difficulty at the
	// next day's start is known without building this day.
	prevJ               int64
	td                  float64 // total difficulty up to the last block built
	baseFee             uint64
	prevUsed, prevLimit uint64
}

func newDayBuilder(p *plan, dp *dayPlan) *dayBuilder {
	mid := dp.date.Add(12 * time.Hour)
	return &dayBuilder{
		dp:       dp,
		r:        rng(p.seed, purposeDayBlocks, uint64(dp.index), 0),
		fr:       rng(p.seed, purposeFields, uint64(dp.index), 0),
		powTable: newMinerTable(mid, false),
		posTable: newMinerTable(mid, true),
		util:     interp(utilisation, mid, false),
		empty:    interp(emptyRate, mid, false),
		perTx:    interp(gasPerTx, mid, false),
		logs:     interp(logRate, mid, false),
		td:       dp.tdStart,
		baseFee:  uint64(dp.baseFee),
	}
}

// block builds the day's block i, mined at unix second ts, and returns its
// header, transaction count and size.
func (b *dayBuilder) block(i int, ts int64) (h *types.Header, txs, size int64) {
	num := b.dp.first + uint64(i)
	h = &types.Header{
		Number:      new(big.Int).SetUint64(num),
		Time:        uint64(ts),
		Root:        randHash(b.fr),
		UncleHash:   types.EmptyUncleHash,
		TxHash:      types.EmptyTxsHash,
		ReceiptHash: types.EmptyReceiptsHash,
	}
	b.seal(h, i)
	txs = b.gas(h)
	b.setBaseFee(h, i)
	b.forkFields(h)
	size = 540 + int64(len(h.Extra)) + txs*int64(110+b.r.IntN(240))
	if h.UncleHash != types.EmptyUncleHash {
		size += 530
	}
	return h, txs, size
}

// seal sets who produced the block and how: the miner or validator and its
// extra data; under proof of work the difficulty (adding it to the total
// difficulty), mix digest, nonce and an occasional uncle; under proof of
// stake a zero difficulty and the prevRandao.
func (b *dayBuilder) seal(h *types.Header, i int) {
	num := h.Number.Uint64()
	if num >= MergeBlock {
		h.Coinbase, h.Extra = b.posTable.pick(b.r)
		h.Difficulty = new(big.Int)
		h.MixDigest = randHash(b.fr) // prevRandao
		return
	}
	h.Coinbase, h.Extra = b.powTable.pick(b.r)
	// Mainnet's difficulty moves in steps of parent/2048; the jitter is a
	// multiple of diff/2048 (few distinct values a day).
	var rj int64
	if i < b.dp.n-1 && num < MergeBlock-1 {
		rj = int64(b.r.IntN(21)-10) * int64(b.dp.diff/2048)
	}
	diff := int64(b.dp.diff) + rj - b.prevJ
	b.prevJ = rj
	h.Difficulty = big.NewInt(diff)
	b.td += float64(diff)
	h.MixDigest = randHash(b.fr)
	h.Nonce = types.EncodeNonce(b.fr.Uint64())
	if b.r.Float64() < 0.06 && num > 1000 {
		h.UncleHash = randHash(b.fr)
	}
}

// gas sets the block's gas limit and gas used and, for a block with
// transactions, its transaction and receipt roots and logs bloom; it
// returns the transaction count.
func (b *dayBuilder) gas(h *types.Header) (txs int64) {
	num := h.Number.Uint64()
	limit := gasLimitAt(time.Unix(int64(h.Time), 0).UTC())
	if num < LondonBlock && limit > 100_000 {
		// Miners (all before London) vote the limit up and down by up to
		// 1/1024 per block.
		limit = limit - limit/2048 + uint64(b.r.IntN(int(limit/1024)+1))
	}
	h.GasLimit = limit
	var used uint64
	if b.r.Float64() >= b.empty {
		var u float64
		if num >= LondonBlock {
			u = 0.5 + 0.22*b.r.NormFloat64()
		} else {
			u = b.util + 0.1*b.r.NormFloat64()
		}
		u = math.Min(1, math.Max(0.0005, u))
		used = uint64(u * float64(limit))
		if used < 21000 {
			used = 21000
		}
		if used > limit {
			used = limit
		}
	}
	h.GasUsed = used
	if used > 0 {
		txs = max(1, int64(float64(used)/(b.perTx*(0.7+0.6*b.r.Float64()))))
		h.TxHash = randHash(b.fr)
		h.ReceiptHash = randHash(b.fr)
		if b.r.Float64() < b.logs {
			h.Bloom = sparseBloom(b.r, 1)
		}
	}
	return txs
}

// setBaseFee sets the EIP-1559 base fee from London on: 1 gwei at the fork
// block, then each block's from its parent's gas (the day's first block
// keeps the day plan's level).
func (b *dayBuilder) setBaseFee(h *types.Header, i int) {
	if num := h.Number.Uint64(); num >= LondonBlock {
		if num == LondonBlock {
			b.baseFee = 1_000_000_000
		} else if i > 0 {
			b.baseFee = nextBaseFee(b.baseFee, b.prevUsed, b.prevLimit)
		}
		h.BaseFee = new(big.Int).SetUint64(b.baseFee)
	}
	b.prevUsed, b.prevLimit = h.GasUsed, h.GasLimit
}

// forkFields sets the header fields later forks added: the withdrawals
// root (Shanghai), blob gas and the parent beacon root (Cancun, up to 9
// blobs from Prague), the requests hash (Prague).
func (b *dayBuilder) forkFields(h *types.Header) {
	ts := int64(h.Time)
	if ts >= ShanghaiTime.Unix() {
		h.WithdrawalsHash = ptr(randHash(b.fr))
	}
	if ts >= CancunTime.Unix() {
		maxBlobs := 6
		if ts >= PragueTime.Unix() {
			maxBlobs = 9
		}
		h.BlobGasUsed = ptr(uint64(b.r.IntN(maxBlobs+1)) * blobGasPerBlob)
		h.ExcessBlobGas = ptr(uint64(b.r.IntN(40)) * blobGasPerBlob)
		h.ParentBeaconRoot = ptr(randHash(b.fr))
	}
	if ts >= PragueTime.Unix() {
		h.RequestsHash = ptr(types.EmptyRequestsHash)
	}
}

// LinkTo sets ParentHash of every header, starting from parent, and computes
// the hashes; it returns the last block's hash. It is the only sequential
// part of archive generation.
func (db *Day) LinkTo(parent common.Hash) common.Hash {
	db.Hashes = make([]common.Hash, len(db.Headers))
	for i, h := range db.Headers {
		h.ParentHash = parent
		parent = h.Hash()
		db.Hashes[i] = parent
	}
	return parent
}
