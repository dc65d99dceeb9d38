package chain

import (
	"sort"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// dayByDate builds the blocks of one date with seed 1.
func dayByDate(t testing.TB, date time.Time) *Day {
	t.Helper()
	p := planFor(1)
	i := int(date.Sub(FirstDay).Hours() / 24)
	return buildDay(p, &p.days[i])
}

func gaps(db *Day) []float64 {
	var g []float64
	for i := 1; i < len(db.Headers); i++ {
		g = append(g, float64(db.Headers[i].Time-db.Headers[i-1].Time))
	}
	return g
}

func meanMedian(x []float64) (float64, float64) {
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	return sum / float64(len(s)), s[len(s)/2]
}

// distinctPerWindow is the mean number of distinct miners per 5-minute
// window (the reference pipeline's grouping).
func distinctPerWindow(db *Day) float64 {
	windows := map[uint64]map[common.Address]bool{}
	for _, h := range db.Headers {
		w := h.Time / 300
		if windows[w] == nil {
			windows[w] = map[common.Address]bool{}
		}
		windows[w][h.Coinbase] = true
	}
	var sum int
	for _, m := range windows {
		sum += len(m)
	}
	return float64(sum) / float64(len(windows))
}

func shares(db *Day) (top1, top5 float64, distinct int) {
	c := map[common.Address]int{}
	for _, h := range db.Headers {
		c[h.Coinbase]++
	}
	var v []int
	for _, n := range c {
		v = append(v, n)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(v)))
	n := float64(len(db.Headers))
	for i := 0; i < 5 && i < len(v); i++ {
		top5 += float64(v[i]) / n
	}
	return float64(v[0]) / n, top5, len(v)
}

func TestStatsBlockTimes(t *testing.T) {
	for _, c := range []struct {
		date       time.Time
		lo, hi     float64 // mean gap range
		powNotSlot bool
	}{
		{d(2016, 3, 1), 13, 16, true},
		{d(2017, 9, 25), 22, 35, true}, // difficulty bomb before Byzantium
		{d(2019, 6, 1), 12.5, 14.5, true},
		{d(2021, 10, 1), 12.5, 14.5, true},
		{d(2024, 6, 1), 12, 12.4, false},
		{d(2026, 9, 1), 12, 12.4, false},
	} {
		db := dayByDate(t, c.date)
		g := gaps(db)
		mean, _ := meanMedian(g)
		t.Logf("%s: %d blocks, mean gap %.2f s", c.date.Format(time.DateOnly), len(db.Headers), mean)
		if mean < c.lo || mean > c.hi {
			t.Errorf("%s: mean gap %.2f outside [%v, %v]", c.date.Format(time.DateOnly), mean, c.lo, c.hi)
		}
		for i, x := range g {
			if x < 1 {
				t.Fatalf("%s: block %d not after its parent", c.date.Format(time.DateOnly), i+1)
			}
			if !c.powNotSlot && int(x)%SlotSeconds != 0 {
				t.Fatalf("%s: post-merge gap %v not a multiple of 12", c.date.Format(time.DateOnly), x)
			}
		}
	}
}

func TestStatsMissedSlots(t *testing.T) {
	// Over the whole post-merge era the miss rate is fixed by the layout.
	p := layoutPlan()
	slots := slotCount(MergeTime.Unix(), FirstDay.AddDate(0, 0, TotalDays).Unix())
	blocks := int64(LastBlockNumber - MergeBlock + 1)
	rate := float64(slots-blocks) / float64(slots)
	t.Logf("post-merge: %d slots, %d blocks, %.3f%% missed", slots, blocks, 100*rate)
	if rate < 0.003 || rate > 0.02 {
		t.Fatalf("missed slot rate %.4f", rate)
	}
	// Per day it varies but stays small.
	for _, i := range []int{2700, 3000, 3500, TotalDays - 1} {
		dp := p.days[i]
		s := slotCount(dp.date.Unix(), dp.date.Unix()+86400)
		r := float64(s-int64(dp.n)) / float64(s)
		if r < 0 || r > 0.03 {
			t.Fatalf("%s: missed %.4f", dp.date.Format(time.DateOnly), r)
		}
	}
}

func TestStatsProducers(t *testing.T) {
	for _, c := range []struct {
		date             time.Time
		minTop1, minTop5 float64
		minDistinct      int
		winLo, winHi     float64
	}{
		{d(2016, 6, 1), 0.12, 0.5, 50, 0, 100},
		{d(2020, 6, 1), 0.15, 0.55, 50, 0, 100},
		{d(2026, 9, 20), 0.3, 0.8, 10, 5, 6.5},
		{d(2026, 9, 29), 0.3, 0.8, 10, 5, 6.5},
	} {
		db := dayByDate(t, c.date)
		top1, top5, distinct := shares(db)
		win := distinctPerWindow(db)
		t.Logf("%s: top1 %.2f top5 %.2f distinct %d, %.2f distinct miners per 5-minute window",
			c.date.Format(time.DateOnly), top1, top5, distinct, win)
		if top1 < c.minTop1 || top5 < c.minTop5 || distinct < c.minDistinct || win < c.winLo || win > c.winHi {
			t.Errorf("%s: producer statistics out of range", c.date.Format(time.DateOnly))
		}
	}
}
