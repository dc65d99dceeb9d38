package main

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/ethstream/ethstream/demo"
	"github.com/ethstream/ethstream/ui"
)

// TestDemoDashboard: the adapter gives the dashboard the demo's phases in
// order, each check's result (pass, fail, figure) and the outcome.
func TestDemoDashboard(t *testing.T) {
	d, o := ui.NewDemo(filepath.Join(t.TempDir(), "checkpoint"), demoLayout)
	a := demoDashboard{o}
	a.PhaseStarted(demo.PhaseResult{Name: demo.PhaseBackfill, Sources: []string{demo.ArchiveSource}, Trigger: "availableNow"})
	a.PhaseEnded(demo.PhaseResult{Name: demo.PhaseBackfill})
	a.PhaseStarted(demo.PhaseResult{Name: demo.PhaseReuseRefused})
	a.PhaseEnded(demo.PhaseResult{Name: demo.PhaseReuseRefused, Err: errors.New("refused")})
	a.Checked([]demo.Check{{Name: "1. ids", Expected: "a", Actual: "b"}, {Name: "5. refused", Expected: "x", Actual: "x", Pass: true},
		{Name: "9. figure", Actual: "3", Figure: true}})
	a.finished(&demo.Report{Checks: []demo.Check{{Name: "x", Pass: true}}}, nil)
	s := d.Snapshot()
	var names []string
	for _, p := range s.Demo.Phases {
		names = append(names, p.Name)
	}
	if len(names) != 6 || names[0] != demo.PhaseBackfill || names[5] != demo.PhaseLiveReorgs {
		t.Errorf("phases %v", names)
	}
	if p := s.Demo.Phases[3]; p.State != ui.PhaseRefused {
		t.Errorf("the refused phase is %q", p.State)
	}
	if p := s.Demo.Phases[5]; !p.OwnCheckpoint {
		t.Error("live_reorgs is not on its own checkpoint")
	}
	want := []string{"fail", "pass", "figure"}
	for i, c := range s.Demo.Checks {
		if c.Result != want[i] {
			t.Errorf("check %s: result %q, want %q", c.Name, c.Result, want[i])
		}
	}
	if s.Demo.Result != "passed" {
		t.Errorf("result %q", s.Demo.Result)
	}
}
