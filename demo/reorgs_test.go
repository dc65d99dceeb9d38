package demo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/chain"
)

// TestLiveReorgsReproducible runs the live_reorgs phase twice with the same
// seed, each on a fresh node, and compares every figure it reports: the
// checks (reorgs made and retracted with their depths, blocks retracted,
// rows deleted), reorgs.csv (batch ids, ends, forks, tips, rows) and the
// batches' ids, kinds, rows and state. Only durations may differ. The node
// moves on the query's head requests (ethnode.Node.OnHeadRequest), not on the
// clock, so scheduling cannot change what the query sees.
func TestLiveReorgsReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the reorg phase twice")
	}
	dir := t.TempDir()
	run := func(name string) (checks []Check, reorgsCSV string, batches []BatchRecord) {
		t.Helper()
		ctx := context.Background()
		o := Options{WorkDir: filepath.Join(dir, "work"), ResultsDir: filepath.Join(dir, name),
			Preset: chain.LastDaysPreset(1), ReorgBatches: 8}
		o.defaults()
		env, err := Setup(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		defer env.Close()
		_, checks, batches, err = runLiveReorgs(ctx, o, env)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(o.ResultsDir, "reorgs", "reorgs.csv"))
		if err != nil {
			t.Fatal(err)
		}
		return checks, string(b), batches
	}
	c1, r1, b1 := run("results1")
	c2, r2, b2 := run("results2")
	for _, c := range c1 {
		if !c.Figure && !c.Pass {
			t.Errorf("check failed: %s: expected %s, got %s", c.Name, c.Expected, c.Actual)
		}
	}
	if len(c1) != len(c2) {
		t.Fatalf("%d checks, then %d", len(c1), len(c2))
	}
	for i := range c1 {
		if c1[i] != c2[i] {
			t.Errorf("check differs between runs:\n  %+v\n  %+v", c1[i], c2[i])
		}
	}
	if r1 != r2 {
		t.Errorf("reorgs.csv differs between runs:\n%s\n---\n%s", r1, r2)
	}
	if strings.Count(r1, "\n") < 2*8 {
		t.Errorf("reorgs.csv has too few batches:\n%s", r1)
	}
	figures := func(bs []BatchRecord) []BatchRecord {
		out := make([]BatchRecord, len(bs))
		for i, b := range bs {
			out[i] = BatchRecord{Phase: b.Phase, Kind: b.Kind, BatchID: b.BatchID, NumInputRows: b.NumInputRows,
				StateRowsTotal: b.StateRowsTotal, StateRowsUpdated: b.StateRowsUpdated, StateRowsRemoved: b.StateRowsRemoved,
				StatePartitions: b.StatePartitions, StateMemoryBytes: b.StateMemoryBytes, SinkRows: b.SinkRows, Watermark: b.Watermark}
		}
		return out
	}
	f1, f2 := figures(b1), figures(b2)
	if len(f1) != len(f2) {
		t.Fatalf("%d batches, then %d", len(f1), len(f2))
	}
	for i := range f1 {
		if f1[i] != f2[i] {
			t.Errorf("batch %d differs between runs:\n  %+v\n  %+v", i, f1[i], f2[i])
		}
	}
}
