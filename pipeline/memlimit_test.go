package pipeline

import (
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// TestMemoryLimitFor: against an oracle that picks the least of the
// candidates (the floor, 7/4 of the live heap) that lies in [lo, hi] and
// leaves the live heap 3/4 of itself as headroom, or hi when none does.
func TestMemoryLimitFor(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const lo, hi = 480 << 20, 1100 << 20
	for range 100000 {
		live := r.Uint64N(2 << 30)
		if r.IntN(4) == 0 {
			live = r.Uint64N(1 << 12)
		}
		want := int64(hi)
		for _, c := range []int64{lo, int64(live) / 4 * 7} {
			if c >= lo && c <= hi && c >= int64(live)/4*7 && c < want {
				want = c
			}
		}
		if got := memoryLimitFor(live, lo, hi); got != want {
			t.Fatalf("memoryLimitFor(%d) = %d, want %d", live, got, want)
		}
	}
	// The seed backfill's live heap at its peak (245-290 MB) gets the floor
	// up to 287 MB;
	// one past MaxMemoryLimit's reach gets MaxMemoryLimit.
	if got := memoryLimitFor(287e6, MinMemoryLimit, MaxMemoryLimit); got != MinMemoryLimit {
		t.Fatalf("a 287 MB live heap: limit %d", got)
	}
	if got := memoryLimitFor(700<<20, MinMemoryLimit, MaxMemoryLimit); got != MaxMemoryLimit {
		t.Fatalf("a 700 MiB live heap: limit %d", got)
	}
}

// TestMemoryLimitFollowsLiveHeap: while a Run holds the limit, a collection
// that finds more live raises the limit to 7/4 of it; after the Run the
// process is back at the upper bound (bounds made small for the test).
func TestMemoryLimitFollowsLiveHeap(t *testing.T) {
	if os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOMEMLIMIT set: the limit is not Run's")
	}
	m := &memLimit
	m.Lock()
	lo, hi := m.lo, m.hi
	m.lo, m.hi = 8<<20, 4<<30
	m.Unlock()
	defer func() {
		m.Lock()
		m.lo, m.hi = lo, hi
		m.Unlock()
	}()
	release := applyMemoryLimit()
	if !m.owned {
		release()
		t.Skip("the process's limit was set before the first Run")
	}
	// With little live, the limit is near the floor (a fixed limit is not).
	var got int64
	for range 3 {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if got = debug.SetMemoryLimit(-1); got >= 96<<20/4*7 {
		release()
		t.Fatalf("limit %d with %d live, want it under %d", got, liveHeap(), 96<<20/4*7)
	}
	live := make([]byte, 96<<20)
	for i := range live {
		live[i] = byte(i)
	}
	// The tick runs after a collection, on the finalizer goroutine: collect
	// until it has seen the heap live (bounded by a count, not a clock).
	for range 500 {
		runtime.GC()
		if got = debug.SetMemoryLimit(-1); got >= 96<<20/4*7 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	runtime.KeepAlive(live)
	if got < 96<<20/4*7 || got > 4<<30 {
		release()
		t.Fatalf("limit %d with 96 MiB live, want at least %d", got, 96<<20/4*7)
	}
	release()
	if got := debug.SetMemoryLimit(-1); got != 4<<30 {
		t.Fatalf("limit %d after the Run, want the upper bound %d", got, 4<<30)
	}
}
