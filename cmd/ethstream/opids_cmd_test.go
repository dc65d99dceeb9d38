package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
)

// TestPlanShowsSparkOperatorIDs: `plan` of --drop-duplicates before an
// aggregation lists the operators by Spark's ids (the aggregation, nearest
// the sink, 0; the deduplication 1), before the first start and after it
// (from the recorded shape), and `state dump --op 1` prints the
// deduplication's hashes.
func TestPlanShowsSparkOperatorIDs(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	archive := filepath.Join(root, "archive")
	if _, err := archivegen.Generate(ctx, archivegen.Options{Out: archive, Preset: chain.RangePreset(chain.FirstDay, 1), Seed: 5}); err != nil {
		t.Fatal(err)
	}
	ck, tbl, cache := filepath.Join(root, "ck"), filepath.Join(root, "tbl"), filepath.Join(root, "cache")
	query := []string{"--checkpoint", ck, "--table", tbl, "--local-dir", cache, "--drop-duplicates", "hash",
		"--source", "arch=s3archive:file://" + filepath.ToSlash(archive) + "/v1.0/eth/blocks?maxFilesPerTrigger=1",
		"--query", "SELECT window, miner, sum(gas_used) AS gas FROM blocks GROUP BY window(block_ts, '1 hour'), miner",
		"--conf", "spark.sql.shuffle.partitions=2", "--conf", "spark.sql.streaming.queryEvolution.enableSourceEvolution=true"}
	want := "stateful operators (Spark's ids, from the sink):\n  0 aggregate (window(block_ts), miner): state/0\n  1 deduplicate (hash): state/1\n"
	if out := mustCLI(t, ctx, append([]string{"plan"}, query...)...); !strings.Contains(out, want) {
		t.Fatalf("plan of a new checkpoint:\n%s\nwant\n%s", out, want)
	}
	mustCLI(t, ctx, append([]string{"run"}, query...)...)
	if out := mustCLI(t, ctx, append([]string{"plan"}, query...)...); !strings.Contains(out, want) {
		t.Fatalf("plan after the first start:\n%s\nwant\n%s", out, want)
	}
	dump := mustCLI(t, ctx, "state", "dump", "--checkpoint", ck, "--op", "1")
	if lines := strings.Split(strings.TrimSpace(dump), "\n"); len(lines) < 2 || !strings.HasPrefix(lines[0], "hash") || !strings.HasPrefix(lines[1], "0x") {
		t.Fatalf("state dump --op 1 is not the deduplication's hashes:\n%.300s", dump)
	}
}
