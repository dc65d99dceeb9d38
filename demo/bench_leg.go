package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/internal/cputime"
	"github.com/ethstream/ethstream/pipeline"
	"github.com/ethstream/ethstream/stream"
)

// A backfill leg (the S3 backfill, the file:// backfill, a query shape's
// run) runs in a process of its own when BenchOptions.Leg names the command (the CLI: its own
// executable and the hidden "bench-leg"), so that each leg's peak RSS is
// its own: run one after another in the bench's process, each leg started
// on the heap, the freed pages and the collector's pacing the previous
// ones left, and the S3 backfill's peak RSS climbed round by round (603 ->
// 715 MB over five rounds), and the live leg's after them (148-151 MB
// after one round, 172-218 MB after five).

// LegSpec is what a leg's process runs: the bench's query (EvolutionConf,
// availableNow) from Sources on a checkpoint, table and local cache of its
// own. It travels as JSON on the process's standard input.
type LegSpec struct {
	Checkpoint string                `json:"checkpoint"`
	Table      string                `json:"table"`
	LocalDir   string                `json:"localDir"`
	Sources    []pipeline.SourceSpec `json:"sources"`
	Conf       map[string]string     `json:"conf"`
	// Shape, when set, names the query shape (BenchShape) the leg runs:
	// its Config sets the query over Sources[0], with ShapeDir as the
	// shapes' directory. Without it the leg runs the bench's own query.
	Shape    string `json:"shape,omitempty"`
	ShapeDir string `json:"shapeDir,omitempty"`
}

// LegResult is what a leg's process measured of its run, as JSON on its
// standard output's last line: the run's wall and this process's CPU time
// (user+system) around it, its peak RSS (the highest of VmHWM and an RSS
// polled every 20 ms: VmHWM alone read 25 MB under the polled peak in some
// runs), and the recorder's progress events and steps.
type LegResult struct {
	WallMs       int64              `json:"wallMs"`
	CPUMs        int64              `json:"cpuMs"`
	PeakRSSBytes int64              `json:"peakRssBytes"`
	Events       []*stream.Progress `json:"events"`
	Steps        []StepCPU          `json:"steps"`
}

// RunLeg is the leg's process: it reads a LegSpec from in, runs it and
// writes its LegResult to out.
func RunLeg(ctx context.Context, in io.Reader, out io.Writer) error {
	var spec LegSpec
	if err := json.NewDecoder(in).Decode(&spec); err != nil {
		return fmt.Errorf("read the bench leg's spec: %w", err)
	}
	sampler := startPeakSampler(false)
	res, _, err := runLegHere(ctx, spec)
	sampler.stop()
	if err != nil {
		return err
	}
	res.PeakRSSBytes = max(res.PeakRSSBytes, sampler.peak())
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	_, err = out.Write(append(b, '\n'))
	return err
}

// runLegHere runs spec in this process, from its heap returned to the OS
// and VmHWM restarted (resetPeakRSS).
func runLegHere(ctx context.Context, spec LegSpec) (LegResult, *recorder, error) {
	cfg := pipeline.Config{Checkpoint: spec.Checkpoint, Table: spec.Table, LocalDir: spec.LocalDir,
		Sources: spec.Sources, Conf: spec.Conf, Trigger: engine.Trigger{Kind: engine.AvailableNow}}
	if spec.Shape != "" {
		i := slices.IndexFunc(benchShapes, func(s BenchShape) bool { return s.Name == spec.Shape })
		if i < 0 || len(spec.Sources) == 0 {
			return LegResult{}, nil, fmt.Errorf("the bench leg: no shape %q over %d sources", spec.Shape, len(spec.Sources))
		}
		benchShapes[i].Config(&cfg, spec.Sources[0], spec.ShapeDir)
	}
	resetPeakRSS()
	rec := &recorder{start: time.Now()}
	c0 := cputime.Self()
	cfg.Logger, cfg.Listeners = slog.New(slog.NewTextHandler(io.Discard, nil)), []engine.Listener{rec}
	_, err := pipeline.Run(ctx, cfg)
	if err != nil {
		return LegResult{}, nil, err
	}
	res := LegResult{WallMs: time.Since(rec.start).Milliseconds(), CPUMs: (cputime.Self() - c0).Milliseconds(), PeakRSSBytes: peakRSS()}
	rec.mu.Lock()
	res.Events, res.Steps = rec.events, slices.Clone(rec.clock.steps)
	rec.mu.Unlock()
	return res, rec, nil
}

// runLegProcess runs spec as command's process and returns what it
// measured, with a recorder holding its events and steps.
func runLegProcess(ctx context.Context, command []string, spec LegSpec) (LegResult, *recorder, error) {
	in, err := json.Marshal(spec)
	if err != nil {
		return LegResult{}, nil, err
	}
	cmd := exec.CommandContext(ctx, command[0], command[1:]...)
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return LegResult{}, nil, fmt.Errorf("the bench leg %s: %w\n%s", strings.Join(command, " "), err, stderr.String())
	}
	var last string
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 256<<20)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			last = l
		}
	}
	var res LegResult
	if err := json.Unmarshal([]byte(last), &res); err != nil {
		return LegResult{}, nil, fmt.Errorf("the bench leg %s printed no result: %w\n%s", strings.Join(command, " "), err, stderr.String())
	}
	rec := &recorder{events: res.Events}
	rec.clock.steps = res.Steps
	return res, rec, nil
}

// runLeg runs spec in a process of its own (BenchOptions.Leg) or, with no
// such command, in this one.
func (b *benchRun) runLeg(ctx context.Context, spec LegSpec) (LegResult, *recorder, error) {
	if len(b.o.Leg) > 0 {
		return runLegProcess(ctx, b.o.Leg, spec)
	}
	return runLegHere(ctx, spec)
}
