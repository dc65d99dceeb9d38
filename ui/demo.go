package ui

import (
	"strings"
	"time"

	"github.com/ethstream/ethstream/errcode"
)

// The dashboard knows a demo only through these types: the demo's
// observer is adapted to them where the two are wired (cmd/ethstream), so
// the dashboard does not depend on the application it shows.

// DemoLayout names a demo's phases.
type DemoLayout struct {
	// Phases in the order the demo runs them.
	Phases []string
	// OwnCheckpoint is the phase that runs on a checkpoint of its own: its
	// starts ("live_reorgs#1", ...) are shown on its card, never in the
	// header or the charts of the lifecycle's checkpoint.
	OwnCheckpoint string
	// Refused is the phase whose refusal is what it shows.
	Refused string
}

// DemoPhase is one start of a demo's phase, as it starts or ends.
type DemoPhase struct {
	Name     string // "live_reorgs#2" for the second start of a multi-start phase
	Sources  []string
	Trigger  string
	Duration time.Duration // when it ended
	Err      error         // when it ended: the start's error, if any
}

// baseName is a phase's name without the start number of a multi-start phase.
func baseName(name string) string {
	if i := strings.IndexByte(name, '#'); i >= 0 {
		return name[:i]
	}
	return name
}

// DemoObserver shows a demo's lifecycle on a dashboard (`ethstream demo
// --ui-addr`). Safe for concurrent use.
type DemoObserver struct {
	d      *Dashboard
	layout DemoLayout
}

// NewDemo returns the dashboard of a demo whose checkpoint is checkpoint, and
// the observer to tell of its phases and checks.
func NewDemo(checkpoint string, layout DemoLayout) (*Dashboard, *DemoObserver) {
	d := New(Options{Checkpoint: checkpoint, Mode: ModeDemo})
	dm := &Demo{Phases: []Phase{}, Checks: []Check{}}
	for _, name := range layout.Phases {
		dm.Phases = append(dm.Phases, Phase{Name: name, State: PhasePending, Sources: []string{}, OwnCheckpoint: name == layout.OwnCheckpoint})
	}
	d.mu.demo = dm
	return d, &DemoObserver{d: d, layout: layout}
}

func (o *DemoObserver) phase(name string) *Phase {
	for i := range o.d.mu.demo.Phases {
		if o.d.mu.demo.Phases[i].Name == name {
			return &o.d.mu.demo.Phases[i]
		}
	}
	o.d.mu.demo.Phases = append(o.d.mu.demo.Phases, Phase{Name: name, Sources: []string{}})
	return &o.d.mu.demo.Phases[len(o.d.mu.demo.Phases)-1]
}

// PhaseStarted marks phase p running and the query active; the demo's first
// phase starts a new history (the demo cleared the checkpoint before it).
func (o *DemoObserver) PhaseStarted(p DemoPhase) {
	d := o.d
	d.mu.Lock()
	if !d.mu.demoStarted {
		d.mu.demoStarted = true
		d.resetLocked()
	}
	ph := o.phase(baseName(p.Name))
	if ph.State != PhaseRunning || ph.StartedAt == "" {
		ph.StartedAt = d.now()
	}
	ph.State, ph.Trigger = PhaseRunning, p.Trigger
	ph.Sources = append([]string{}, p.Sources...)
	ph.Starts++
	if !ph.OwnCheckpoint {
		d.mu.phase = p.Name
		d.mu.query.Trigger = p.Trigger
		d.mu.query.Status = Status{State: StatusActive, Since: d.now()}
	}
	d.changedLocked()
	d.mu.Unlock()
}

// PhaseEnded reads the checkpoint to the end first, so every batch of the
// phase is attributed to it before the next one starts.
func (o *DemoObserver) PhaseEnded(p DemoPhase) {
	d := o.d
	d.Sync()
	d.mu.Lock()
	defer d.mu.Unlock()
	ph := o.phase(baseName(p.Name))
	ph.DurationMs += p.Duration.Milliseconds()
	ph.State = PhaseDone
	if p.Err != nil {
		ph.State = PhaseFailed
		if p.Name == o.layout.Refused {
			ph.State = PhaseRefused // the refusal is what this phase shows
		}
		ph.Code = errcode.Code(p.Err)
		ph.Message = p.Err.Error()
	}
	if !ph.OwnCheckpoint {
		d.mu.phase = ""
		d.mu.query.Status = StatusOf(p.Err, d.o.Now())
	}
	d.changedLocked()
}

// Checked adds verification lines as the demo decides them; a line decided
// again (the final report repeats the early ones) replaces its first copy.
func (o *DemoObserver) Checked(checks []Check) {
	d := o.d
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, line := range checks {
		c := line
		replaced := false
		for i := range d.mu.demo.Checks {
			if d.mu.demo.Checks[i].Name == c.Name {
				d.mu.demo.Checks[i], replaced = line, true
			}
		}
		if !replaced {
			d.mu.demo.Checks = append(d.mu.demo.Checks, line)
		}
	}
	d.changedLocked()
}

// Finished records the demo's outcome: passed, failed (a check failed) or
// error (the demo could not run to the end).
func (o *DemoObserver) Finished(passed bool, err error) {
	d := o.d
	d.Sync()
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case err != nil:
		d.mu.demo.Result, d.mu.demo.Error = "error", err.Error()
	case passed:
		d.mu.demo.Result = "passed"
	default:
		d.mu.demo.Result = "failed"
	}
	d.mu.query.Status = StatusOf(err, d.o.Now())
	d.changedLocked()
}
