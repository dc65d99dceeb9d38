package chain

import (
	"testing"
	"time"

	"github.com/ethstream/ethstream/errcode"
)

func TestLayoutExact(t *testing.T) {
	p := layoutPlan()
	if len(p.days) != TotalDays {
		t.Fatalf("%d days", len(p.days))
	}
	next := uint64(1)
	for i, d := range p.days {
		if d.first != next || d.n < 1 {
			t.Fatalf("day %d (%s): first %d n %d, want first %d", i, d.date.Format(time.DateOnly), d.first, d.n, next)
		}
		next += uint64(d.n)
	}
	if next-1 != LastBlockNumber {
		t.Fatalf("history ends at %d", next-1)
	}
	if got := p.days[TotalDays-1].date.Format(time.DateOnly); got != "2026-09-29" {
		t.Fatalf("last day %s", got)
	}
	// Fork blocks fall on their mainnet dates.
	for _, c := range []struct {
		block uint64
		date  string
	}{{1, "2015-07-30"}, {LondonBlock, "2021-08-05"}, {MergeBlock, "2022-09-15"}, {LastBlockNumber, "2026-09-29"}} {
		i := p.dayOf(c.block)
		if i < 0 || p.days[i].date.Format(time.DateOnly) != c.date {
			t.Fatalf("block %d on day %d, want %s", c.block, i, c.date)
		}
	}
	if p.dayOf(0) != -1 || p.dayOf(LastBlockNumber+1) != -1 {
		t.Fatal("dayOf out of range")
	}
	// The layout does not depend on the seed.
	q := planFor(42)
	for i := range p.days {
		if p.days[i].first != q.days[i].first || p.days[i].n != q.days[i].n {
			t.Fatalf("day %d layout differs between seeds", i)
		}
	}
}

func TestPresets(t *testing.T) {
	seed, err := PresetByName("seed")
	if err != nil {
		t.Fatal(err)
	}
	if seed.FirstBlock != 1 || seed.LastBlock != LastBlockNumber || seed.Days != 4080 || !seed.FirstDay.Equal(FirstDay) {
		t.Fatalf("seed preset %+v", seed)
	}
	demo, err := PresetByName("demo")
	if err != nil {
		t.Fatal(err)
	}
	if demo.LastBlock != LastBlockNumber || demo.Days != 60 || demo.MaxFilesPerTrigger != 5 ||
		demo.FirstDay.Format(time.DateOnly) != "2026-08-01" {
		t.Fatalf("demo preset %+v", demo)
	}
	last2 := LastDaysPreset(2)
	if last2.LastBlock != LastBlockNumber || last2.FirstBlock <= demo.FirstBlock {
		t.Fatalf("last-2 preset %+v", last2)
	}
	london := RangePreset(time.Date(2021, 8, 5, 13, 0, 0, 0, time.UTC), 1)
	if london.FirstBlock >= LondonBlock || london.LastBlock < LondonBlock {
		t.Fatalf("london day %+v", london)
	}
	if _, err := PresetByName("bogus"); errcode.Code(err) != errcode.InvalidArgument {
		t.Fatalf("bogus preset: %v", err)
	}
}
