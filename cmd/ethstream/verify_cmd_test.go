package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
)

// TestVerifyCommandReportsCrossChecks: `checkpoint verify` exits 1 with
// CHECKPOINT_CORRUPT when files that each parse disagree (a gap in the
// offsets log, a commit whose watermark is not the next batch's), printing
// the path of each finding; and `progress` refuses a Spark event log.
func TestVerifyCommandReportsCrossChecks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the query")
	}
	ctx := context.Background()
	base := t.TempDir()
	archive := filepath.Join(base, "archive")
	if _, err := archivegen.Generate(ctx, archivegen.Options{Out: archive, Preset: chain.RangePreset(chain.FirstDay, 2), Seed: 3}); err != nil {
		t.Fatal(err)
	}
	arch := "file://" + filepath.ToSlash(archive) + "/v1.0/eth/blocks"
	ck, tbl, cache := filepath.Join(base, "ck"), filepath.Join(base, "tbl"), filepath.Join(base, "cache")
	if code, out, errOut := cli(t, ctx, "run", "--checkpoint", ck, "--table", tbl, "--local-dir", cache,
		"--source", "s3_backfill=s3archive:"+arch+"?maxFilesPerTrigger=1", "--conf", evolution, "--max-batches", "2"); code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, errOut := cli(t, ctx, "checkpoint", "verify", ck, "--table", tbl); code != 0 {
		t.Fatalf("verify of an intact checkpoint: exit %d\n%s\n%s", code, out, errOut)
	}
	off1, err := os.ReadFile(filepath.Join(ck, "offsets", "1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ck, "offsets", "3"), off1, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ck, "commits", "0"), []byte("v1\n{\"nextBatchWatermarkMs\":2100}"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli(t, ctx, "checkpoint", "verify", ck, "--table", tbl)
	if code != 1 || !strings.Contains(errOut, "CHECKPOINT_CORRUPT") {
		t.Fatalf("verify of a damaged checkpoint: exit %d\n%s", code, errOut)
	}
	for _, p := range []string{filepath.Join(ck, "offsets", "2"), filepath.Join(ck, "commits", "0")} {
		if !strings.Contains(out, "DAMAGED  "+p+" (") {
			t.Errorf("no finding at %s:\n%s", p, out)
		}
	}
	if !strings.Contains(out, "nextBatchWatermarkMs 2100") || !strings.Contains(out, filepath.Join(ck, "offsets", "1")) {
		t.Errorf("the watermark finding does not name both files:\n%s", out)
	}

	events := filepath.Join(base, "eventlog")
	log := `{"Event":"SparkListenerLogStart","Spark Version":"2.0.2"}` + "\n" +
		`{"Event":"org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent","progress":{"id":"q","runId":"r","name":null,"timestamp":"2016-12-05T20:54:20.827Z","batchId":0}}` + "\n"
	if err := os.WriteFile(events, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = cli(t, ctx, "progress", "--out", filepath.Join(base, "flat"), "--phase", "x="+events)
	if code != 1 || !strings.Contains(errOut, "PROGRESS_FILE_CORRUPT") || !strings.Contains(errOut, "Spark listener event") {
		t.Fatalf("progress of a Spark event log: exit %d\n%s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(base, "flat")); !os.IsNotExist(err) {
		t.Fatalf("a refused progress wrote its output: %v", err)
	}
}
