package main

import (
	"github.com/ethstream/ethstream/demo"
	"github.com/ethstream/ethstream/ui"
)

// demoDashboard is the demo.Observer of `demo --ui-addr`: it tells the
// dashboard, which knows nothing of package demo, of each phase and check.
type demoDashboard struct{ o *ui.DemoObserver }

var _ demo.Observer = demoDashboard{}

// demoLayout is the demo's phases as the dashboard lists them.
var demoLayout = ui.DemoLayout{
	Phases: []string{demo.PhaseBackfill, demo.PhaseAddLive, demo.PhaseRetireArchive, demo.PhaseReuseRefused,
		demo.PhaseShrinkState, demo.PhaseLiveReorgs},
	OwnCheckpoint: demo.PhaseLiveReorgs,
	Refused:       demo.PhaseReuseRefused,
}

func uiPhase(p demo.PhaseResult) ui.DemoPhase {
	return ui.DemoPhase{Name: p.Name, Sources: p.Sources, Trigger: p.Trigger, Duration: p.Duration, Err: p.Err}
}

func (a demoDashboard) PhaseStarted(p demo.PhaseResult) { a.o.PhaseStarted(uiPhase(p)) }
func (a demoDashboard) PhaseEnded(p demo.PhaseResult)   { a.o.PhaseEnded(uiPhase(p)) }

func (a demoDashboard) Checked(cs []demo.Check) {
	lines := make([]ui.Check, 0, len(cs))
	for _, c := range cs {
		res := "fail"
		switch {
		case c.Figure:
			res = "figure"
		case c.Pass:
			res = "pass"
		}
		lines = append(lines, ui.Check{Name: c.Name, Expected: c.Expected, Actual: c.Actual, Result: res})
	}
	a.o.Checked(lines)
}

// finished tells the dashboard the demo's outcome.
func (a demoDashboard) finished(rep *demo.Report, err error) {
	a.o.Finished(rep != nil && rep.Passed(), err)
}
