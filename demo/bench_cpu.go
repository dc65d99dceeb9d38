package demo

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/internal/cputime"
)

// StepCPU is the wall and CPU time of one kind of batch step summed over a
// run (engine.StepListener): the process's CPU time while the driver ran
// the step, every goroutine's (the source's decode workers, the
// aggregation's second shard, the sink's writers, the state commit beside
// the sink write). CPUMs / WallMs is the cores the step kept busy: 1.0 is
// a serial step, the host's CPU count its bound.
type StepCPU struct {
	Step   string `json:"step"`
	WallMs int64  `json:"wallMs"`
	CPUMs  int64  `json:"cpuMs"`
}

// Cores is the step's CPU time over its wall time.
func (s StepCPU) Cores() float64 { return float64(s.CPUMs) / float64(max(s.WallMs, 1)) }

// stepClock accumulates StepCPU per step name; the driver calls it from one
// goroutine (engine.StepListener).
type stepClock struct {
	wall0 time.Time
	cpu0  time.Duration
	steps []StepCPU
}

func (c *stepClock) onStep(step string, begin bool) {
	if begin {
		c.wall0, c.cpu0 = time.Now(), cputime.Self()
		return
	}
	wall, cpu := time.Since(c.wall0).Milliseconds(), (cputime.Self() - c.cpu0).Milliseconds()
	for i := range c.steps {
		if c.steps[i].Step == step {
			c.steps[i].WallMs += wall
			c.steps[i].CPUMs += cpu
			return
		}
	}
	c.steps = append(c.steps, StepCPU{Step: step, WallMs: wall, CPUMs: cpu})
}

// OnStep records a step's wall and CPU time (engine.StepListener).
func (r *recorder) OnStep(_ int64, step string, begin bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clock.onStep(step, begin)
}

var _ engine.StepListener = (*recorder)(nil)

// runSteps returns the run's steps, with "outside steps" the rest of the
// run's wall and CPU time (opening and closing the query, planning, listing
// between batches).
func (r *recorder) runSteps(wallMs, cpuMs int64) []StepCPU {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.clock.steps)
	var w, c int64
	for _, s := range out {
		w, c = w+s.WallMs, c+s.CPUMs
	}
	return append(out, StepCPU{Step: "outside steps", WallMs: max(wallMs-w, 0), CPUMs: max(cpuMs-c, 0)})
}

// printSteps prints a run's steps: wall, CPU and the cores each kept busy.
func printSteps(w io.Writer, what string, steps []StepCPU) {
	if len(steps) == 0 {
		return
	}
	var tw, tc int64
	for _, s := range steps {
		tw, tc = tw+s.WallMs, tc+s.CPUMs
	}
	fmt.Fprintf(w, "\n| %s: step | wall ms | of wall | CPU-s | cores busy (CPU/wall) |\n|---|---|---|---|---|\n", what)
	for _, s := range steps {
		fmt.Fprintf(w, "| %s | %d | %.0f%% | %.2f | %.2f |\n", s.Step, s.WallMs, 100*float64(s.WallMs)/float64(max(tw, 1)),
			float64(s.CPUMs)/1000, s.Cores())
	}
	fmt.Fprintf(w, "| total | %d | 100%% | %.2f | %.2f |\n", tw, float64(tc)/1000, float64(tc)/float64(max(tw, 1)))
}

// Host is what a reader needs to weigh a ratio measured on a machine: its
// CPUs, the load beside the bench (another process's work takes cores from
// both sides of a ratio, not equally: DuckDB spreads over every core it
// sees, the engine's serial steps do not), and DuckDB's thread count.
type Host struct {
	NumCPU     int `json:"numCpu"`
	GoMaxProcs int `json:"gomaxprocs"`
	// LoadBefore and LoadAfter are /proc/loadavg's 1, 5 and 15-minute
	// figures at the bench's start and end (nil off Linux).
	LoadBefore []float64 `json:"loadBefore,omitempty"`
	LoadAfter  []float64 `json:"loadAfter,omitempty"`
	// DuckDBThreads is DuckDB's threads setting as its COPY ran (0: not
	// run or not reported).
	DuckDBThreads int `json:"duckdbThreads,omitempty"`
}

// loadAvg reads /proc/loadavg's three figures, nil if it cannot.
func loadAvg() []float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return nil
	}
	out := make([]float64, 3)
	for i := range out {
		if _, err := fmt.Sscan(f[i], &out[i]); err != nil {
			return nil
		}
	}
	return out
}

func newHost() Host {
	return Host{NumCPU: runtime.NumCPU(), GoMaxProcs: runtime.GOMAXPROCS(0), LoadBefore: loadAvg()}
}

// duckThreads reads "threads N" from duckref's output line, 0 if absent.
func duckThreads(out string) int {
	_, rest, ok := strings.Cut(out, "threads ")
	if !ok {
		return 0
	}
	var n int
	fmt.Sscan(rest, &n)
	return n
}

// printHost prints the host's line.
func printHost(w io.Writer, h Host) {
	load := func(l []float64) string {
		if len(l) < 3 {
			return "unknown"
		}
		return fmt.Sprintf("%.2f %.2f %.2f", l[0], l[1], l[2])
	}
	duck := "not run"
	if h.DuckDBThreads > 0 {
		duck = fmt.Sprintf("%d threads", h.DuckDBThreads)
	}
	fmt.Fprintf(w, "\nhost: %d CPUs, GOMAXPROCS %d, DuckDB %s; load average (1, 5, 15 min) at start %s, at end %s",
		h.NumCPU, h.GoMaxProcs, duck, load(h.LoadBefore), load(h.LoadAfter))
	if len(h.LoadBefore) == 3 && float64(h.NumCPU) > 0 && max(h.LoadBefore[0], at(h.LoadAfter, 0)) > 0.5*float64(h.NumCPU) {
		fmt.Fprintf(w, " (a load above half the CPUs: the wall figures and their ratios measure the other processes too; trust the CPU figures more)")
	}
	fmt.Fprintln(w)
}

func at(xs []float64, i int) float64 {
	if i < len(xs) {
		return xs[i]
	}
	return 0
}

// spread is the min, median and max of xs.
func spread(xs []float64) (lo, mid, hi float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[0], median(s), s[len(s)-1]
}

// printSpread prints each backfill-leg figure's min, median and max over
// the rounds, ratios included (each round's own ratio); the file:// and
// DuckDB legs' when they ran (duck).
func printSpread(w io.Writer, rs []BenchRound, duck bool) {
	if len(rs) < 2 {
		return
	}
	row := func(name string, f func(x BenchRound) float64, unit string) {
		xs := make([]float64, len(rs))
		for i, x := range rs {
			xs[i] = f(x)
		}
		lo, mid, hi := spread(xs)
		fmt.Fprintf(w, "| %s | %.2f%s | %.2f%s | %.2f%s | %.0f%% |\n", name, lo, unit, mid, unit, hi, unit, 100*(hi-lo)/max(mid, 1e-9))
	}
	s := func(ms int64) float64 { return float64(ms) / 1000 }
	fmt.Fprintf(w, "\n| figure over %d rounds | min | median | max | (max-min)/median |\n|---|---|---|---|---|\n", len(rs))
	row("backfill S3, wall", func(x BenchRound) float64 { return s(x.BackfillMs) }, " s")
	row("backfill S3, CPU", func(x BenchRound) float64 { return s(x.BackfillCPUMs) }, " CPU-s")
	if duck {
		row("backfill file://, wall", func(x BenchRound) float64 { return s(x.FileBackfillMs) }, " s")
		row("backfill file://, CPU", func(x BenchRound) float64 { return s(x.FileBackfillCPUMs) }, " CPU-s")
		row("backfill file://, cores busy", func(x BenchRound) float64 { return ratio(x.FileBackfillCPUMs, x.FileBackfillMs) }, "")
		row("DuckDB COPY, wall", func(x BenchRound) float64 { return s(x.DuckDBCopyMs) }, " s")
		row("DuckDB COPY, CPU", func(x BenchRound) float64 { return s(x.DuckDBCopyCPUMs) }, " CPU-s")
		row("DuckDB COPY, cores busy", func(x BenchRound) float64 { return ratio(x.DuckDBCopyCPUMs, x.DuckDBCopyMs) }, "")
		row("file:// / COPY, wall", func(x BenchRound) float64 { return ratio(x.FileBackfillMs, x.DuckDBCopyMs) }, "x")
		row("file:// / COPY, CPU", func(x BenchRound) float64 { return ratio(x.FileBackfillCPUMs, x.DuckDBCopyCPUMs) }, "x")
	}
}
