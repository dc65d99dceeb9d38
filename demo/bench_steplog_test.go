package demo

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/ethstream/ethstream/stream"
)

// stepLog (ETHSTREAM_BENCH_STEPLOG=FILE) appends a line per step boundary
// to FILE: the Unix time in nanoseconds, the step, begin or end. An
// outside sampler of the process's threads (scripts/stepcores.py) joins
// its samples to them: the cores each step wanted, a figure that, unlike
// CPU over wall, the shared machine's other load does not lower.
type stepLog struct {
	mu sync.Mutex
	f  *os.File
}

// OnProgress ignores progress events (engine.Listener).
func (l *stepLog) OnProgress(*stream.Progress) {}

// OnStep logs a step boundary (engine.StepListener).
func (l *stepLog) OnStep(_ int64, step string, begin bool) {
	what := "end"
	if begin {
		what = "begin"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.f, "%d %s %s\n", time.Now().UnixNano(), step, what)
}
