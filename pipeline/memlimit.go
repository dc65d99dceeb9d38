package pipeline

import (
	"math"
	"os"
	"runtime/debug"
)

// DefaultMemoryLimit is the Go runtime soft memory limit Run sets when
// nothing else set one (docs/contracts.md, Targets: backfill peak RSS <= 1.5 GB). Pebble's
// memtables and block cache live outside the Go heap (cgo) and take a few
// hundred MB more, hence 1 GiB for the Go side.
//
// Why: with the default GOGC=100 alone, a backfill batch's live heap (~700 MB
// of pending state changes, partial aggregates and output) lets the heap grow
// to twice that before a collection. Measured on 3 seed batches (2 cores):
// peak RSS 1.94 GB -> 1.03 GB, wall time unchanged (20.5 s vs 19.8 s). The
// limit is soft: a heap that truly needs more gets it (the runtime caps GC
// CPU at about half when over the limit).
const DefaultMemoryLimit = 1 << 30

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
