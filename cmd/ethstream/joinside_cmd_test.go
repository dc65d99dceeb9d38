package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
)

// TestPlanShowsJoinSideOperators: `plan` of a join with --drop-duplicates
// a.hash lists the tree by Spark's ids (the join 0, the deduplication
// below it on the left side 1), before the first start and after it, and
// `state dump --op 1` prints the deduplication's hashes.
func TestPlanShowsJoinSideOperators(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	archive := filepath.Join(root, "archive")
	if _, err := archivegen.Generate(ctx, archivegen.Options{Out: archive, Preset: chain.RangePreset(chain.FirstDay, 1), Seed: 5}); err != nil {
		t.Fatal(err)
	}
	ck, tbl, cache := filepath.Join(root, "ck"), filepath.Join(root, "tbl"), filepath.Join(root, "cache")
	src := "s3archive:file://" + filepath.ToSlash(archive) + "/v1.0/eth/blocks?maxFilesPerTrigger=1"
	query := []string{"--checkpoint", ck, "--table", tbl, "--local-dir", cache, "--drop-duplicates", "a.hash",
		"--source", "arch=" + src, "--source", "copy=" + src,
		"--query", "SELECT a.number, b.miner FROM arch WATERMARK block_ts DELAY OF INTERVAL 1 HOUR AS a " +
			"JOIN copy WATERMARK block_ts DELAY OF INTERVAL 1 HOUR AS b ON a.hash = b.hash AND b.block_ts BETWEEN a.block_ts AND a.block_ts + INTERVAL 1 MINUTE",
		"--conf", "spark.sql.shuffle.partitions=2", "--conf", "spark.sql.streaming.queryEvolution.enableSourceEvolution=true"}
	want := "stateful operators (Spark's ids, from the sink):\n  0 join (hash=hash): state/0\n    1 deduplicate (hash) on the join's left side: state/1\n"
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
