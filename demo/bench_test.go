package demo

import (
	"context"
	"os"
	"path/filepath"
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
	// DuckDB is a separate module (cgo); a script stands in for its binary
	// here, so that the file:// backfill, the timing of the child process and
	// the ratios are exercised.
	duck := filepath.Join(t.TempDir(), "duckref")
	if err := os.WriteFile(duck, []byte("#!/bin/sh\necho \"duckdb: globbed $1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	res, err := Bench(context.Background(), BenchOptions{WorkDir: t.TempDir(), Preset: chain.LastDaysPreset(2),
		LiveBatches: 3, Out: &out, DuckDB: duck})
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
	if !strings.Contains(out.String(), "repartition 200 -> 8") || !strings.Contains(out.String(), "backfill file:// / DuckDB") {
		t.Fatalf("table:\n%s", out.String())
	}
	if res.BackfillCPUMs <= 0 || res.FileBackfillMs <= 0 || res.FileBackfillCPUMs <= 0 || res.DuckDBMs < 0 ||
		!strings.HasPrefix(res.DuckDBOutput, "duckdb: globbed ") || !strings.HasSuffix(res.DuckDBOutput, "*.parquet") {
		t.Fatalf("file:// backfill or DuckDB figures missing: %+v", res)
	}
}
