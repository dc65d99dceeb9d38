package chain

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"time"
)

// Chain-wide constants of the model. They follow mainnet's real history so
// that fork heights and dates line up with what readers of the AWS dataset
// expect.
const (
	// TotalDays is the number of date partitions of the full history.
	TotalDays = 4080
	// LastBlockNumber is the last block of the full history (the seeds' run).
	LastBlockNumber uint64 = 26_086_569
	// LondonBlock is the first block with base_fee_per_gas (EIP-1559).
	LondonBlock uint64 = 12_965_000
	// MergeBlock is the first proof-of-stake block.
	MergeBlock uint64 = 15_537_394
	// SlotSeconds is the proof-of-stake slot length.
	SlotSeconds = 12
)

// Fork timestamps (unix seconds, mainnet's).
var (
	GenesisTime  = time.Date(2015, 7, 30, 15, 26, 13, 0, time.UTC)
	LondonTime   = time.Date(2021, 8, 5, 12, 33, 42, 0, time.UTC)
	MergeTime    = time.Date(2022, 9, 15, 6, 42, 59, 0, time.UTC)
	ShanghaiTime = time.Date(2023, 4, 12, 22, 27, 35, 0, time.UTC)
	CancunTime   = time.Date(2024, 3, 13, 13, 55, 35, 0, time.UTC)
	PragueTime   = time.Date(2025, 5, 7, 10, 5, 11, 0, time.UTC)

	// FirstDay is the UTC midnight of the first date partition.
	FirstDay = time.Date(2015, 7, 30, 0, 0, 0, 0, time.UTC)
)

// dayPiece is the part of one day that belongs to one segment of the model
// (a day containing a fork anchor has two pieces).
type dayPiece struct {
	start, end int64  // unix seconds, [start, end)
	first      uint64 // first block number in the piece
	n          int    // number of blocks
	pos        bool   // proof-of-stake: blocks sit on 12 s slots
	forceFirst bool   // the piece's first block is exactly at start (fork anchor)
}

// dayPlan is the day-level model: everything needed to build a day's blocks
// without looking at any other day.
type dayPlan struct {
	index   int
	date    time.Time
	first   uint64 // first block of the day
	n       int    // blocks in the day
	pieces  []dayPiece
	diff    float64 // mean proof-of-work difficulty of the day's blocks (0 after the merge)
	tdStart float64 // total difficulty before the day's first block
	baseFee float64 // base fee (wei) at the start of the day (0 before London)
}

// plan is the global day table for one seed. It is immutable once built and
// safe for concurrent use.
type plan struct {
	seed    int64
	days    []dayPlan
	mergeTD float64
}

var (
	plansMu sync.Mutex
	plans   = map[int64]*plan{}
)

// planFor returns the (cached) day table of seed. Building it costs a few
// milliseconds: it never touches individual blocks.
func planFor(seed int64) *plan {
	plansMu.Lock()
	defer plansMu.Unlock()
	if p, ok := plans[seed]; ok {
		return p
	}
	p := buildPlan(seed)
	plans[seed] = p
	return p
}

// rng returns a deterministic generator for (seed, purpose, a, b). Every
// random decision in the model draws from a stream named this way, so a day
// can be rebuilt alone.
func rng(seed int64, purpose uint64, a, b uint64) *rand.Rand {
	return rand.New(rand.NewPCG(mix(uint64(seed), purpose, a), mix(b, purpose^0x9e3779b97f4a7c15, uint64(seed))))
}

func mix(a, b, c uint64) uint64 {
	h := a*0x9e3779b97f4a7c15 ^ b*0xbf58476d1ce4e5b9 ^ c*0x94d049bb133111eb
	h ^= h >> 31
	h *= 0xd6e8feb86659fd39
	h ^= h >> 29
	return h
}

// Stream purposes for rng.
const (
	purposeDayWeight uint64 = iota + 1
	purposeDayBlocks
	purposeMissed
	purposeBaseFee
	purposeFields
	purposeNode
	purposeAnchor
	purposeTxs
	purposeBody
)

// knot is a point of a piecewise-linear curve over time.
type knot struct {
	t time.Time
	v float64
}

func d(y int, m time.Month, day int) time.Time { return time.Date(y, m, day, 0, 0, 0, 0, time.UTC) }

// powBlockTime is mainnet's mean proof-of-work block time in seconds,
// including the difficulty-bomb slowdowns before Byzantium (2017-10-16),
// Constantinople (2019-02-28), Muir Glacier (2020-01-02), Arrow Glacier
// (2021-12-09) and Gray Glacier (2022-06-30). The model rescales it per
// segment so block counts hit the fork heights exactly.
var powBlockTime = []knot{
	{d(2015, 7, 30), 15.5}, {d(2015, 9, 1), 15.0}, {d(2016, 3, 14), 14.4},
	{d(2016, 9, 1), 14.2}, {d(2016, 11, 22), 14.6}, {d(2017, 3, 1), 14.8},
	{d(2017, 5, 15), 16}, {d(2017, 7, 15), 20}, {d(2017, 9, 15), 27},
	{d(2017, 10, 15), 30}, {d(2017, 10, 17), 14.5}, {d(2018, 7, 1), 14.4},
	{d(2018, 9, 15), 15}, {d(2018, 11, 15), 16.5}, {d(2019, 1, 15), 19},
	{d(2019, 2, 27), 20.5}, {d(2019, 3, 1), 13.6}, {d(2019, 10, 15), 13.6},
	{d(2019, 11, 25), 14.5}, {d(2019, 12, 30), 17.5}, {d(2020, 1, 3), 13.2},
	{d(2021, 11, 1), 13.4}, {d(2021, 12, 7), 14.5}, {d(2021, 12, 10), 13.3},
	{d(2022, 5, 1), 13.5}, {d(2022, 6, 28), 16}, {d(2022, 7, 1), 13.3},
	{d(2022, 9, 16), 13.6},
}

// powDifficulty is mainnet-like mean difficulty (log-interpolated).
var powDifficulty = []knot{
	{d(2015, 7, 30), 1.7e10}, {d(2015, 8, 15), 1.5e12}, {d(2016, 1, 1), 1.1e13},
	{d(2016, 6, 1), 6e13}, {d(2017, 1, 1), 1e14}, {d(2017, 6, 1), 7e14},
	{d(2017, 10, 1), 2.5e15}, {d(2018, 1, 15), 3e15}, {d(2018, 8, 1), 3.3e15},
	{d(2019, 1, 1), 2.5e15}, {d(2019, 3, 1), 1.9e15}, {d(2020, 1, 1), 2.3e15},
	{d(2021, 1, 1), 3.7e15}, {d(2021, 5, 15), 8e15}, {d(2021, 12, 1), 1.2e16},
	{d(2022, 6, 1), 1.3e16}, {d(2022, 9, 16), 1.1e16},
}

// baseFeeLevel is the typical base fee (gwei) by date, log-interpolated.
var baseFeeLevel = []knot{
	{d(2021, 8, 5), 40}, {d(2021, 11, 10), 120}, {d(2022, 1, 1), 90},
	{d(2022, 6, 1), 40}, {d(2022, 9, 15), 12}, {d(2023, 5, 5), 60},
	{d(2023, 10, 1), 10}, {d(2024, 3, 10), 50}, {d(2024, 8, 1), 3},
	{d(2025, 1, 1), 8}, {d(2025, 5, 1), 1}, {d(2025, 10, 1), 0.4},
	{d(2026, 12, 31), 0.3},
}

func interp(ks []knot, t time.Time, logScale bool) float64 {
	if !t.After(ks[0].t) {
		return ks[0].v
	}
	for i := 1; i < len(ks); i++ {
		if t.Before(ks[i].t) {
			a, b := ks[i-1], ks[i]
			f := float64(t.Sub(a.t)) / float64(b.t.Sub(a.t))
			if logScale {
				return math.Exp(math.Log(a.v) + f*(math.Log(b.v)-math.Log(a.v)))
			}
			return a.v + f*(b.v-a.v)
		}
	}
	return ks[len(ks)-1].v
}

// buildPlan lays out all 4,080 days: three segments (genesis to London,
// London to the merge, the merge to the end), each holding an exact number
// of blocks, distributed over day pieces by cumulative rounding so the
// running totals are exact.
func buildPlan(seed int64) *plan {
	p := &plan{seed: seed, days: make([]dayPlan, TotalDays)}
	for i := range p.days {
		p.days[i].index = i
		p.days[i].date = FirstDay.AddDate(0, 0, i)
	}
	end := FirstDay.AddDate(0, 0, TotalDays).Unix()
	segs := []segment{
		{GenesisTime.Unix() + 15, LondonTime.Unix(), 1, LondonBlock - 1, false},
		{LondonTime.Unix(), MergeTime.Unix(), LondonBlock, MergeBlock - 1, false},
		{MergeTime.Unix(), end, MergeBlock, LastBlockNumber, true},
	}
	for si, s := range segs {
		pcs := p.segmentPieces(si, s)
		if s.pos {
			p.placePoS(s, pcs)
		} else {
			p.placePoW(s, pcs)
		}
	}
	p.fillDays()
	return p
}

// segment is a run of blocks [first, last] over the unix seconds [start,
// end); pos marks proof of stake (blocks on 12 s slots).
type segment struct {
	start, end  int64
	first, last uint64
	pos         bool
}

// segPiece is one day's part [start, end) of a segment, with the weight w
// that sets its share of the segment's blocks.
type segPiece struct {
	day        int
	start, end int64
	w          float64
}

// segmentPieces cuts segment si into its day pieces. A proof-of-stake
// piece weighs its slot count; a proof-of-work piece its expected block
// count at the date's block time, with a ±2% jitter.
func (p *plan) segmentPieces(si int, s segment) []segPiece {
	var pcs []segPiece
	for i := range p.days {
		ds := p.days[i].date.Unix()
		a, b := max(ds, s.start), min(ds+86400, s.end)
		if a >= b {
			continue
		}
		r := rng(0, purposeDayWeight, uint64(i), uint64(si)) // layout is seed-independent
		var w float64
		if s.pos {
			// Slots in [a, b) counted from the merge slot.
			w = float64(slotCount(a, b))
		} else {
			mid := time.Unix((a+b)/2, 0).UTC()
			bt := interp(powBlockTime, mid, false)
			w = float64(b-a) / bt * (1 + 0.04*(r.Float64()-0.5))
		}
		pcs = append(pcs, segPiece{i, a, b, w})
	}
	return pcs
}

// placePoW gives each proof-of-work piece its share of the segment's
// blocks by weight.
func (p *plan) placePoW(s segment, pcs []segPiece) {
	total := int64(s.last - s.first + 1)
	var sum float64
	for _, c := range pcs {
		sum += c.w
	}
	var cum float64
	var prev int64
	first := s.first
	for k, c := range pcs {
		cum += c.w
		m := int64(math.Floor(float64(total) * cum / sum))
		if k == len(pcs)-1 {
			m = total
		}
		n := int(m - prev)
		prev = m
		if n < 1 || int64(n) > c.end-c.start {
			panic("chain model: day piece block count out of range")
		}
		dp := &p.days[c.day]
		dp.pieces = append(dp.pieces, dayPiece{start: c.start, end: c.end, first: first, n: n, forceFirst: k == 0})
		first += uint64(n)
	}
}

// placePoS spreads the segment's missed slots (slots minus blocks) over
// its proof-of-stake pieces, with a day-to-day varying miss rate; each
// piece holds its slots minus its missed ones.
func (p *plan) placePoS(s segment, pcs []segPiece) {
	total := int64(s.last - s.first + 1)
	var slots int64
	for _, c := range pcs {
		slots += int64(c.w)
	}
	missed := slots - total
	if missed < 0 {
		panic("chain model: fewer slots than blocks after the merge")
	}
	ws := make([]float64, len(pcs))
	var sum float64
	for k, c := range pcs {
		r := rng(0, purposeMissed, uint64(c.day), 0)
		ws[k] = c.w * (0.4 + 1.2*r.Float64())
		sum += ws[k]
	}
	var cum float64
	var prevMissed int64
	first := s.first
	for k, c := range pcs {
		cum += ws[k]
		m := int64(math.Floor(float64(missed) * cum / sum))
		if k == len(pcs)-1 {
			m = missed
		}
		dm := m - prevMissed
		prevMissed = m
		n := int(int64(c.w) - dm)
		if k == 0 && dm >= int64(c.w) {
			panic("chain model: merge day has no block")
		}
		dp := &p.days[c.day]
		dp.pieces = append(dp.pieces, dayPiece{start: c.start, end: c.end, first: first, n: n, pos: true, forceFirst: k == 0})
		first += uint64(n)
	}
}

// fillDays sets each day's totals from its pieces, then its difficulty,
// the total difficulty before it and (from London on) its base fee level.
func (p *plan) fillDays() {
	var td float64
	var walk float64
	for i := range p.days {
		dp := &p.days[i]
		dp.first = dp.pieces[0].first
		for _, pc := range dp.pieces {
			dp.n += pc.n
		}
		mid := dp.date.Add(12 * time.Hour)
		dp.tdStart = td
		var powBlocks int
		for _, pc := range dp.pieces {
			if !pc.pos {
				powBlocks += pc.n
			}
		}
		if powBlocks > 0 {
			dp.diff = math.Round(interp(powDifficulty, mid, true))
			td += float64(powBlocks) * dp.diff
		}
		if !dp.date.Add(24 * time.Hour).After(LondonTime) {
			continue
		}
		r := rng(p.seed, purposeBaseFee, uint64(i), 0)
		walk = 0.8*walk + 0.35*r.NormFloat64()
		dp.baseFee = math.Round(interp(baseFeeLevel, mid, true) * 1e9 * math.Exp(walk))
	}
	p.mergeTD = td
}

// slotCount is the number of 12 s slots (counted from the merge) whose time
// falls in [a, b).
func slotCount(a, b int64) int64 {
	m := MergeTime.Unix()
	first := (a - m + SlotSeconds - 1) / SlotSeconds
	last := (b - 1 - m) / SlotSeconds
	return last - first + 1
}

// blockTimes returns the timestamps of the piece's blocks, strictly
// increasing. Proof-of-work pieces pick n distinct seconds uniformly, which
// makes the gaps geometric, like real mining; proof-of-stake pieces drop
// missed slots uniformly from the piece's slots.
func (pc dayPiece) blockTimes(r *rand.Rand) []int64 {
	span := pc.end - pc.start
	out := make([]int64, 0, pc.n)
	if pc.pos {
		m := MergeTime.Unix()
		first := (pc.start - m + SlotSeconds - 1) / SlotSeconds
		slots := int(slotCount(pc.start, pc.end))
		missed := pickDistinct(r, slots, slots-pc.n, pc.forceFirst)
		for s := 0; s < slots; s++ {
			if !missed[s] {
				out = append(out, m+(first+int64(s))*SlotSeconds)
			}
		}
		return out
	}
	taken := pickDistinct(r, int(span), pc.n, false)
	if pc.forceFirst && !taken[0] {
		// Move one pick to the anchor second.
		for s := int(span) - 1; s >= 0; s-- {
			if taken[s] {
				taken[s] = false
				break
			}
		}
		taken[0] = true
	}
	for s := 0; s < int(span); s++ {
		if taken[s] {
			out = append(out, pc.start+int64(s))
		}
	}
	return out
}

// pickDistinct marks k distinct positions of [0, n), never position 0 when
// avoidZero is set.
func pickDistinct(r *rand.Rand, n, k int, avoidZero bool) []bool {
	taken := make([]bool, n)
	lo := 0
	if avoidZero {
		lo = 1
	}
	if k > (n-lo)/2 {
		// Dense: shuffle instead of rejection sampling.
		idx := make([]int, n-lo)
		for i := range idx {
			idx[i] = lo + i
		}
		r.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
		for _, v := range idx[:k] {
			taken[v] = true
		}
		return taken
	}
	for c := 0; c < k; {
		v := lo + r.IntN(n-lo)
		if !taken[v] {
			taken[v] = true
			c++
		}
	}
	return taken
}

// dayOf returns the index of the day containing block num, or -1.
func (p *plan) dayOf(num uint64) int {
	i := sort.Search(len(p.days), func(i int) bool { return p.days[i].first+uint64(p.days[i].n) > num })
	if i == len(p.days) || num < p.days[i].first {
		return -1
	}
	return i
}

func seedBytes(seed int64, purpose uint64, x uint64) []byte {
	var b [24]byte
	binary.BigEndian.PutUint64(b[:], uint64(seed))
	binary.BigEndian.PutUint64(b[8:], purpose)
	binary.BigEndian.PutUint64(b[16:], x)
	return b[:]
}

// layoutPlan is a plan whose block layout (days, block numbers, slot
// counts) every seed shares: the layout draws only from seed-independent
// streams.
func layoutPlan() *plan { return planFor(DefaultSeed) }
