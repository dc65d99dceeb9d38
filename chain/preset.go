package chain

import (
	"fmt"
	"strings"
	"time"

	"github.com/ethstream/ethstream/errcode"
)

// Preset is a window of whole days of the one global chain model. Every
// preset of the same seed agrees on block numbers, timestamps and miners;
// only the hash chain differs, because each window's first parent hash is an
// anchor (see doc.go).
type Preset struct {
	Name               string
	FirstDay           time.Time // UTC midnight of the first date partition
	Days               int
	FirstBlock         uint64
	LastBlock          uint64
	MaxFilesPerTrigger int // the maxFilesPerTrigger the reference pipeline uses with it
}

// DefaultSeed is the seed the CLI uses when none is given.
const DefaultSeed int64 = 1

// PresetNames lists the named presets.
var PresetNames = []string{"demo", "seed"}

// PresetByName returns "demo" (the last 60 days, ending at block 26,086,569)
// or "seed" (all 4,080 days, blocks 1..26,086,569).
func PresetByName(name string) (Preset, error) {
	switch name {
	case "demo":
		p := LastDaysPreset(60)
		p.Name = "demo"
		p.MaxFilesPerTrigger = 5
		return p, nil
	case "seed":
		p := RangePreset(FirstDay, TotalDays)
		p.Name = "seed"
		p.MaxFilesPerTrigger = 365
		return p, nil
	}
	return Preset{}, errcode.New(errcode.InvalidArgument, "", "use --preset "+strings.Join(PresetNames, " or "),
		"unknown preset %q (valid: %s)", name, strings.Join(PresetNames, ", "))
}

// LastDaysPreset is the last days of history, ending at block 26,086,569.
// It panics unless 1 <= days <= TotalDays.
func LastDaysPreset(days int) Preset {
	p := RangePreset(FirstDay.AddDate(0, 0, TotalDays-days), days)
	p.Name = fmt.Sprintf("last-%d", days)
	return p
}

// RangePreset is any window of whole days of history, e.g. the days around
// London or Shanghai for schema-drift tests. firstDay is truncated to its
// UTC date. It panics if the window leaves [2015-07-30, 2026-09-29].
func RangePreset(firstDay time.Time, days int) Preset {
	fd := time.Date(firstDay.Year(), firstDay.Month(), firstDay.Day(), 0, 0, 0, 0, time.UTC)
	i := int(fd.Sub(FirstDay).Hours() / 24)
	if days < 1 || i < 0 || i+days > TotalDays {
		panic(fmt.Sprintf("chain: preset window %s + %d days outside the model's %d days", fd.Format(time.DateOnly), days, TotalDays))
	}
	p := layoutPlan()
	last := p.days[i+days-1]
	return Preset{
		Name:               fmt.Sprintf("range-%s-%d", fd.Format(time.DateOnly), days),
		FirstDay:           fd,
		Days:               days,
		FirstBlock:         p.days[i].first,
		LastBlock:          last.first + uint64(last.n) - 1,
		MaxFilesPerTrigger: 5,
	}
}

// LastBlocksPreset is the last n blocks of history, inside the last day
// (ending at block 26,086,569): a window small enough for the transaction
// tables of the demo's transactions query (chain/doc.go, Bodies). It
// panics unless 1 <= n <= the last day's blocks.
func LastBlocksPreset(n int) Preset {
	p := LastDaysPreset(1)
	if n < 1 || uint64(n) > p.LastBlock-p.FirstBlock+1 {
		panic(fmt.Sprintf("chain: last %d blocks outside the last day's %d", n, p.LastBlock-p.FirstBlock+1))
	}
	p.FirstBlock = p.LastBlock - uint64(n) + 1
	p.Name = fmt.Sprintf("last-blocks-%d", n)
	return p
}

// DayIndex is the index of the preset's first day in the model (BuildDay).
func (p Preset) DayIndex() int { return int(p.FirstDay.Sub(FirstDay).Hours() / 24) }
