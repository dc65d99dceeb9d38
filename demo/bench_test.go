package demo

import (
	"context"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/chain"
)

// TestBenchSmallArchive runs the bench end to end on two days and checks that
// every figure comes from the run it names.
func TestBenchSmallArchive(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end bench")
	}
	var out strings.Builder
	res, err := Bench(context.Background(), BenchOptions{WorkDir: t.TempDir(), Preset: chain.LastDaysPreset(2),
		LiveBatches: 3, Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != 2 || res.Blocks <= 0 {
		t.Fatalf("archive: %d files, %d blocks", res.Files, res.Blocks)
	}
	if res.BackfillMs <= 0 || res.BackfillRowsPerSec <= 0 || res.KeysAfterBackfill <= 0 {
		t.Fatalf("backfill figures missing: %+v", res)
	}
	if res.RepartitionKeys <= 0 {
		t.Fatalf("no repartition measured: %+v", res)
	}
	if res.LiveMedianMs8 <= 0 || res.LiveMedianMs200 <= 0 || res.RestartToFirstCommitMs <= 0 {
		t.Fatalf("live figures missing: %+v", res)
	}
	if res.BackfillPeakRSSBytes <= 0 || res.LivePeakRSSBytes <= 0 {
		t.Fatalf("RSS not measured: %+v", res)
	}
	if !strings.Contains(out.String(), "repartition 200 -> 8") {
		t.Fatalf("table:\n%s", out.String())
	}
}
