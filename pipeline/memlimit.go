package pipeline

import (
	"math"
	"os"
	"runtime/debug"
)

// DefaultMemoryLimit is the Go runtime soft memory limit Run sets when
// nothing else set one (docs/contracts.md, Targets: backfill peak RSS <= 1.0
// GB). Pebble's memtables and block cache live outside the Go heap (cgo),
// about 45 MB at a seed backfill's peak.
//
// Why: with GOGC=100 alone the heap grows to twice the live heap before a
// collection, and the runtime returns freed pages lazily, so RSS tracks the
// limit, not the live heap. A seed backfill batch kept about 400 MB live
// (the aggregation's group table, the sink's rows, the partitions' record
// writers), so 800 MiB still leaves the collector its doubling; since the
// group index holds no key bytes the backfill peaks at 530-600 MB. Measured
// with the seed bench, alternating GOMEMLIMIT=1GiB and 800MiB on an idle
// 2-core machine: peak RSS 983 / 936 MB -> 843 / 858 MB, backfill CPU
// 20.3 / 18.5 s -> 18.2 / 18.4 s (no extra GC work). The limit is soft: a
// heap that truly needs more gets it (the runtime caps GC CPU at about half
// when over the limit).
const DefaultMemoryLimit = 800 << 20

// applyMemoryLimit sets DefaultMemoryLimit unless the GOMEMLIMIT environment
// variable or an earlier debug.SetMemoryLimit chose a limit already.
func applyMemoryLimit() {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	if debug.SetMemoryLimit(-1) != math.MaxInt64 {
		return
	}
	debug.SetMemoryLimit(DefaultMemoryLimit)
}
