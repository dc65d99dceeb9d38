package chain

import (
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// producer is a block producer: a mining pool before the merge, a block
// builder (or a validator's own fee recipient) after it.
type producer struct {
	name  string
	extra []byte
	// share knots: relative weight over time; zero outside [from, to).
	from, to   time.Time
	wFrom, wTo float64
}

// pools are mainnet-like proof-of-work pools. Weights are relative shares of
// the big pools; the tail below takes the rest.
var pools = []producer{
	{"ethermine", []byte("ethermine-eu1"), d(2015, 9, 1), d(2022, 9, 16), 10, 28},
	{"f2pool", []byte("f2pool_2"), d(2015, 8, 1), d(2022, 9, 16), 12, 10},
	{"dwarfpool", []byte("DwarfPool"), d(2015, 8, 1), d(2018, 6, 1), 22, 4},
	{"ethpool", []byte("ethpool.org"), d(2015, 7, 30), d(2017, 6, 1), 14, 3},
	{"nanopool", []byte("nanopool.org"), d(2016, 1, 15), d(2022, 9, 16), 6, 6},
	{"sparkpool", []byte("sparkpool-eth-cn-hz"), d(2017, 6, 1), d(2021, 9, 30), 18, 20},
	{"miningpoolhub", []byte("Miningpoolhub"), d(2017, 1, 1), d(2021, 6, 1), 6, 2},
	{"bw", []byte("bw.com"), d(2017, 6, 1), d(2019, 12, 1), 5, 2},
	{"zhizhu", []byte("zhizhu.top"), d(2018, 11, 1), d(2021, 6, 1), 6, 4},
	{"hiveon", []byte("Hiveon"), d(2020, 6, 1), d(2022, 9, 16), 4, 12},
	{"2miners", []byte("2miners_ETH"), d(2019, 1, 1), d(2022, 9, 16), 2, 5},
	{"flexpool", []byte("flexpool.io"), d(2020, 10, 1), d(2022, 9, 16), 2, 4},
	{"binancepool", []byte("binance.com"), d(2020, 9, 1), d(2022, 9, 16), 3, 6},
	{"poolin", []byte("Poolin.com"), d(2020, 3, 1), d(2022, 9, 16), 4, 4},
}

// builders are post-merge fee recipients. Concentration grows over time, as
// it did on mainnet: by late 2026 two builders produce most blocks.
var builders = []producer{
	{"flashbots", []byte("Illuminate Dmocratize Dstribute"), d(2022, 9, 15), d(2024, 6, 1), 30, 4},
	{"bloxroute", []byte("Powered by bloXroute"), d(2022, 9, 15), d(2026, 12, 31), 12, 1.5},
	{"builder0x69", []byte("@builder0x69"), d(2022, 9, 15), d(2024, 3, 1), 4, 6},
	{"beaverbuild", []byte("beaverbuild.org"), d(2023, 1, 1), d(2026, 12, 31), 5, 40},
	{"rsync", []byte("rsync-builder.xyz"), d(2023, 3, 1), d(2026, 12, 31), 2, 9},
	{"titan", []byte("Titan (titanbuilder.xyz)"), d(2023, 9, 1), d(2026, 12, 31), 3, 32},
	{"quasar", []byte("Quasar (quasar.win)"), d(2024, 6, 1), d(2026, 12, 31), 2, 5},
	{"buildernet", []byte("BuilderNet (Flashbots)"), d(2024, 11, 1), d(2026, 12, 31), 3, 3.5},
}

const (
	poolTail    = 3000  // small solo miners before the merge
	builderTail = 20000 // validators building their own blocks after it
)

// tailShare is the share of blocks produced by the long tail.
func tailShare(t time.Time, pos bool) float64 {
	if !pos {
		// Solo mining faded as pools took over.
		return interp([]knot{{d(2015, 7, 30), 0.35}, {d(2017, 1, 1), 0.15}, {d(2020, 1, 1), 0.08}, {d(2022, 9, 15), 0.06}}, t, false)
	}
	return interp([]knot{{d(2022, 9, 15), 0.45}, {d(2024, 1, 1), 0.12}, {d(2025, 6, 1), 0.05}, {d(2026, 6, 1), 0.035}}, t, false)
}

// addresses are derived from the model, not the seed, so a miner keeps its
// address across presets and seeds (like a real pool).
func producerAddress(kind string, i int) common.Address {
	h := crypto.Keccak256([]byte(kind), []byte{byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)})
	return common.BytesToAddress(h[12:])
}

// minerTable samples block producers for one day. Not safe for concurrent use
// (it holds no state but the caller's rng).
type minerTable struct {
	cum    []float64 // cumulative weights: named producers then the tail bucket
	addrs  []common.Address
	extras [][]byte
	tail   tailTable
	pos    bool
}

func zipfCum(n int, s float64) []float64 {
	c := make([]float64, n)
	var sum float64
	for i := range c {
		sum += 1 / math.Pow(float64(i+1), s)
		c[i] = sum
	}
	for i := range c {
		c[i] /= sum
	}
	return c
}

// tailTable is the long tail of one kind of producer: its cumulative Zipf
// weights and addresses.
type tailTable struct {
	cum   []float64
	addrs []common.Address
}

// tails holds the pools' and the builders' tails, built when a block is
// first generated: 23,000 keccaks, which at init cost every process of the
// binary 30-47 ms (a bench leg's too, that generates nothing).
var tails = sync.OnceValue(func() map[string]tailTable {
	t := map[string]tailTable{}
	for kind, z := range map[string]struct {
		n int
		s float64
	}{"pool": {poolTail, 1.05}, "builder": {builderTail, 0.6}} {
		a := make([]common.Address, z.n)
		for i := range a {
			a[i] = producerAddress(kind+"-tail", i)
		}
		t[kind] = tailTable{cum: zipfCum(z.n, z.s), addrs: a}
	}
	return t
})

func newMinerTable(t time.Time, pos bool) *minerTable {
	ps, kind := pools, "pool"
	if pos {
		ps, kind = builders, "builder"
	}
	mt := &minerTable{pos: pos, tail: tails()[kind]}
	var named float64
	ws := make([]float64, len(ps))
	for i, p := range ps {
		if t.Before(p.from) || !t.Before(p.to) {
			continue
		}
		f := float64(t.Sub(p.from)) / float64(p.to.Sub(p.from))
		ws[i] = p.wFrom + f*(p.wTo-p.wFrom)
		named += ws[i]
	}
	ts := tailShare(t, pos)
	var cum float64
	for i, p := range ps {
		if ws[i] == 0 {
			continue
		}
		cum += ws[i] / named * (1 - ts)
		mt.cum = append(mt.cum, cum)
		mt.addrs = append(mt.addrs, producerAddress(kind, i))
		mt.extras = append(mt.extras, p.extra)
	}
	return mt
}

// tail extra data: client version strings, as solo miners and home stakers
// leave them.
var tailExtras = [][]byte{
	[]byte("geth-go1.4.2-linux"), []byte("Geth/v1.8.27-stable/linux"), []byte("parity-ethereum/v2.7.2"),
	[]byte("nethermind"), []byte("reth/v1.1.0/linux"), []byte("besu 25.1"), {},
}

// pick returns the producer of one block.
func (mt *minerTable) pick(r *rand.Rand) (common.Address, []byte) {
	u := r.Float64()
	i := sort.SearchFloat64s(mt.cum, u)
	if i < len(mt.cum) {
		return mt.addrs[i], mt.extras[i]
	}
	j := sort.SearchFloat64s(mt.tail.cum, r.Float64())
	if j >= len(mt.tail.cum) {
		j = len(mt.tail.cum) - 1
	}
	return mt.tail.addrs[j], tailExtras[j%len(tailExtras)]
}
