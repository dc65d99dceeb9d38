package pipeline

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// The Go runtime soft memory limit a Run sets when nothing else set one
// (docs/contracts.md, Targets: backfill peak RSS <= 600 MB). Pebble's
// memtables and block cache live outside the Go heap (cgo), about 30-40 MB
// at a seed backfill's peak.
//
// Why: with GOGC=100 alone the heap grows to twice the live heap before a
// collection, and the runtime returns freed pages lazily (it keeps about
// 1.1x the heap goal), so RSS tracks the goal, not the live heap: each MB
// live at a collection cost about 2.2 MB of peak RSS. A seed backfill keeps
// 245-290 MB live at its peak (the aggregation's partial groups, its
// output columns in Finish, the 200 Pebble instances, the archive's files
// in flight), which let it peak at 600-650 MB on an idle machine.
//
// The limit follows the live heap: after each collection it is 7/4 of the
// heap that collection found live, within [MinMemoryLimit, MaxMemoryLimit]
// (memoryLimitFor). A seed backfill's heap stays (almost) under
// MinMemoryLimit's reach (7/4 x 287 MB = 480 MiB), so its Go memory is held
// near 480 MiB and its RSS near that plus what lies outside the Go runtime
// (at 512 MiB it peaked at 573 MB of the target's 600 at load 15); a heap
// that needs more gets 3/4 of its live size as headroom, never less (GOGC
// 75's pacing at worst, not the collector running back to back as under a
// fixed limit a live heap approaches), up to MaxMemoryLimit (a larger
// heap, a state at scale, is paced by it). Between Runs the process keeps
// MaxMemoryLimit.
//
// MaxMemoryLimit was 800 MiB, the fixed limit Run set before the limit
// followed the heap. The dedup shape's 2.2M-key batches keep 400-600 MB
// live, and under 800 MiB the collector ran back to back: a third of the
// leg's CPU was its marking. At 1100 MiB (GOMEMLIMIT, i50-dedup) the leg
// took 95-116 against 122-132 CPU-s at the same peak RSS (1.19 GB; the
// state at scale's target is 1.5 GB).
const (
	MinMemoryLimit = 480 << 20
	MaxMemoryLimit = 1100 << 20
)

// memoryLimitFor is the soft memory limit for a heap of live bytes live at
// the last collection: 7/4 of it, within [lo, hi].
func memoryLimitFor(live uint64, lo, hi int64) int64 {
	if live > uint64(hi) {
		return hi
	}
	return min(max(int64(live)/4*7, lo), hi)
}

// memLimit is the process's limit while Runs are in progress. The bounds
// are variables for the test alone.
var memLimit memLimiter

type memLimiter struct {
	sync.Mutex
	lo, hi  int64
	decided bool  // whether the limit is Run's has been decided
	owned   bool  // no GOMEMLIMIT and no limit set before the first Run
	runs    int   // Runs in progress
	armed   bool  // a gcTick waits for the next collection
	set     int64 // the limit last set
}

func init() { memLimit.lo, memLimit.hi = MinMemoryLimit, MaxMemoryLimit }

// applyMemoryLimit makes the limit follow the live heap until release is
// called, unless the GOMEMLIMIT environment variable or an earlier
// debug.SetMemoryLimit chose a limit already.
func applyMemoryLimit() (release func()) {
	m := &memLimit
	m.Lock()
	defer m.Unlock()
	if !m.decided {
		m.decided = true
		m.owned = os.Getenv("GOMEMLIMIT") == "" && debug.SetMemoryLimit(-1) == math.MaxInt64
	}
	if !m.owned {
		return func() {}
	}
	m.runs++
	if m.runs == 1 {
		m.setLocked(memoryLimitFor(liveHeap(), m.lo, m.hi))
		if !m.armed {
			m.armed = true
			armGCTick()
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			m.Lock()
			defer m.Unlock()
			if m.runs--; m.runs == 0 && m.owned {
				m.setLocked(m.hi)
			}
		})
	}
}

// setLocked sets the limit, unless someone else set another since the last
// one this file set (then the limit is theirs from now on).
func (m *memLimiter) setLocked(limit int64) {
	if m.set != 0 && debug.SetMemoryLimit(-1) != m.set {
		m.owned = false
		return
	}
	m.set = limit
	debug.SetMemoryLimit(limit)
}

// gcTick is an object no one references: its finalizer runs once after
// each collection (afterGC), which sets the limit for the live heap that
// collection found and arms the next tick while Runs are in progress. It
// holds a pointer so that it is not a tiny allocation (whose finalizers
// may never run).
type gcTick struct{ _ *int }

func armGCTick() { runtime.SetFinalizer(&gcTick{}, afterGC) }

func afterGC(*gcTick) {
	m := &memLimit
	m.Lock()
	defer m.Unlock()
	if m.runs == 0 || !m.owned {
		m.armed = false
		return
	}
	m.setLocked(memoryLimitFor(liveHeap(), m.lo, m.hi))
	armGCTick()
}

// liveHeap is the heap the last collection found live (0 before the first).
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
