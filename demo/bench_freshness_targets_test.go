package demo

import (
	"strings"
	"testing"

	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/interval"
)

// TestFreshnessTargets judges made-up runs: a run whose files keep growing
// fails "bounded", a short run does not judge the files at all, and RSS that
// doubles fails "flat".
func TestFreshnessTargets(t *testing.T) {
	status := func(ts []Target) map[string]string {
		m := map[string]string{}
		for _, x := range ts {
			m[strings.SplitN(x.Name, ",", 2)[0]] = x.Status
		}
		return m
	}
	steady := &FreshnessResult{P50Ms: 10, P99Ms: 25, RSSStart: 90e6, RSSEnd: 105e6, TableFiles: 600, LogFiles: 650, CkptFiles: 440,
		Mid: fileCounts{AtMs: 500_000, TableFiles: 590, LogFiles: 640, CkptFiles: 441}}
	for k, v := range status(freshnessTargets(steady)) {
		if v != TargetPass {
			t.Errorf("steady run: %s is %s", k, v)
		}
	}
	if err := MissedTargets(freshnessTargets(steady)); err != nil {
		t.Errorf("steady run: %v", err)
	}
	growing := *steady
	growing.TableFiles, growing.LogFiles, growing.RSSEnd, growing.P99Ms = 1200, 1300, 200e6, 3500
	got := status(freshnessTargets(&growing))
	for _, k := range []string{"head to table", "RSS", "table data files + _delta_log entries"} {
		if got[k] != TargetFail {
			t.Errorf("growing run: %s is %s, want fail (%v)", k, got[k], got)
		}
	}
	if got["checkpoint files"] != TargetPass {
		t.Errorf("growing run: checkpoint files %s", got["checkpoint files"])
	}
	err := MissedTargets(freshnessTargets(&growing))
	if !errcode.Is(err, errcode.TargetMissed) || !strings.Contains(err.Error(), "3500.0 ms, limit <= 100 ms") ||
		!strings.Contains(err.Error(), "3 of 5 targets missed") {
		t.Errorf("growing run: %v", err)
	}
	short := *steady
	short.Mid.AtMs = 30_000
	got = status(freshnessTargets(&short))
	if got["table data files + _delta_log entries"] != TargetNotMeasured || got["checkpoint files"] != TargetNotMeasured {
		t.Errorf("short run judged its files: %v", got)
	}
	if err := MissedTargets(freshnessTargets(&short)); err != nil {
		t.Errorf("not measured counted as missed: %v", err)
	}
}

// TestFreshnessRetentionIsTheTables: the retention the targets reason with
// is the one the run's table is given, as the sink will parse it.
func TestFreshnessRetentionIsTheTables(t *testing.T) {
	for k, v := range freshnessTableProps {
		d, err := interval.Parse(strings.TrimPrefix(v, "interval "))
		if err != nil || d != freshnessRetention {
			t.Errorf("%s = %q: %v, %v; want %v", k, v, d, err, freshnessRetention)
		}
	}
}
