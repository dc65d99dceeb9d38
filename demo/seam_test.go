package demo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/chain"
)

// TestOverlapSeamPhase runs the overlap_seam phase alone on a one-day
// archive: every check 11 holds (each block counted once, the duplicates
// dropped = the overlap, the start without the deduplication refused), and
// its results are in results/seam.
func TestOverlapSeamPhase(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end phase")
	}
	dir := t.TempDir()
	var out strings.Builder
	o := Options{WorkDir: filepath.Join(dir, "work"), ResultsDir: filepath.Join(dir, "results"), Preset: chain.LastDaysPreset(1), Out: &out}
	o.defaults()
	env, err := Setup(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	phases, checks, batches, err := runOverlapSeam(context.Background(), o, env)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(phases) != 3 || len(checks) < 9 || len(batches) == 0 {
		t.Fatalf("%d phases, %d checks, %d batches", len(phases), len(checks), len(batches))
	}
	for _, c := range checks {
		t.Logf("%s: expected %s, got %s", c.Name, c.Expected, c.Actual)
		if !c.Pass {
			t.Errorf("check failed: %s: expected %s, got %s", c.Name, c.Expected, c.Actual)
		}
	}
	for _, f := range []string{"batches.csv", "sources.csv", "verification.csv"} {
		if st, err := os.Stat(filepath.Join(o.ResultsDir, "seam", f)); err != nil || st.Size() == 0 {
			t.Errorf("results/seam/%s missing or empty: %v", f, err)
		}
	}
}
