package demo

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/chain"
)

// TestRestartRulesScenario runs every restart rule on copies of a two-day
// backfill checkpoint: each row has the outcome its rule states, each
// refusal its code and a byte-identical checkpoint and table, and the CSV
// holds one row per rule.
func TestRestartRulesScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the scenario end to end")
	}
	dir := t.TempDir()
	var out bytes.Buffer
	rows, err := RestartRules(context.Background(), Options{
		WorkDir: filepath.Join(dir, "work"), ResultsDir: filepath.Join(dir, "results"),
		Preset: chain.LastDaysPreset(2), Out: &out,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(rows) != len(restartCases()) {
		t.Fatalf("%d rows for %d cases", len(rows), len(restartCases()))
	}
	refused := 0
	for _, r := range rows {
		if !r.Pass() {
			t.Errorf("%s: expected %s, got %s %s (unchanged %v): %s", r.Change, r.Expected, r.Outcome, r.Code, r.Unchanged, r.Detail)
		}
		if r.Outcome == "refused" {
			refused++
		}
		if r.Outcome == "allowed" && r.FirstBatch < 0 {
			t.Errorf("%s: allowed without a first batch", r.Change)
		}
	}
	if refused < 8 {
		t.Errorf("only %d refusals", refused)
	}
	csv, err := os.ReadFile(filepath.Join(dir, "results", RestartRulesFile))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.TrimSpace(string(csv)), "\n"); n < len(rows) {
		t.Fatalf("csv has %d data lines for %d rows", n, len(rows))
	}
}
