package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestErrorTable covers the mistakes of the CLI's errors contract outside a
// query start (those are TestRefusalsRunAndPlan's): each is one line
// "error: CODE: message. To fix: remedy", exit 2 for a usage error, and a
// refused repartition leaves the checkpoint byte-identical and usable.
func TestErrorTable(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the query")
	}
	ctx := context.Background()
	_, arch := archiveURI(t)
	base := t.TempDir()
	ck, tbl, cache := filepath.Join(base, "ck"), filepath.Join(base, "tbl"), filepath.Join(base, "cache")
	good := []string{"run", "--checkpoint", ck, "--table", tbl, "--local-dir", cache,
		"--source", "s3_backfill=s3archive:" + arch, "--conf", evolution}
	if code, out, errOut := cli(t, ctx, good...); code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	empty := filepath.Join(base, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	damaged := filepath.Join(base, "damaged.jsonl")
	if err := os.WriteFile(damaged, []byte("{\"id\":\nnot json\n{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(base, "missing")
	rows := []struct {
		name string
		args []string
		code string
		exit int
	}{
		{"state dump on a missing checkpoint", []string{"state", "dump", "--checkpoint", missing}, "CHECKPOINT_NOT_FOUND", 1},
		{"state dump without --checkpoint", []string{"state", "dump"}, "MISSING_REQUIRED_FLAG", 2},
		{"state dump DIR on a missing checkpoint", []string{"state", "dump", missing}, "CHECKPOINT_NOT_FOUND", 1},
		{"state dump DIR --batch 9999", []string{"state", "dump", ck, "--batch", "9999"}, "STATE_NOT_FOUND", 1},
		{"state dump DIR --checkpoint OTHER", []string{"state", "dump", ck, "--checkpoint", missing}, "INVALID_ARGUMENT", 2},
		{"state dump --batch 9999", []string{"state", "dump", "--checkpoint", ck, "--batch", "9999"}, "STATE_NOT_FOUND", 1},
		{"state dump --batch -5", []string{"state", "dump", "--checkpoint", ck, "--batch", "-5"}, "INVALID_ARGUMENT", 2},
		{"table show --version -5", []string{"table", "show", tbl, "--version", "-5"}, "INVALID_ARGUMENT", 2},
		{"table show --version 9999", []string{"table", "show", tbl, "--version", "9999"}, "DELTA_VERSION_NOT_FOUND", 1},
		{"table show on a missing table", []string{"table", "show", missing}, "DELTA_TABLE_NOT_FOUND", 1},
		{"serve-s3 --root missing", []string{"serve-s3", "--root", missing, "--addr", "127.0.0.1:0"}, "S3_ROOT_NOT_FOUND", 1},
		{"progress with a missing file", []string{"progress", "--out", filepath.Join(base, "flat"), "--phase", "backfill=" + missing}, "PROGRESS_FILE_NOT_FOUND", 1},
		{"progress with a damaged file", []string{"progress", "--out", filepath.Join(base, "flat"), "--phase", "backfill=" + damaged}, "PROGRESS_FILE_CORRUPT", 1},
		{"unknown command", []string{"no-such-command"}, "INVALID_ARGUMENT", 2},
		{"bench --rounds 0", []string{"bench", "--rounds", "0", "--workdir", filepath.Join(base, "bench")}, "INVALID_ARGUMENT", 2},
		{"--cpuprofile in a missing directory", []string{"--cpuprofile", "/no/such/dir/x.prof", "checkpoint", "inspect", ck}, "INVALID_ARGUMENT", 1},
		{"progress without --phase", []string{"progress", "--out", filepath.Join(base, "flat")}, "INVALID_ARGUMENT", 2},
		{"state dump --format xml", []string{"state", "dump", "--checkpoint", ck, "--format", "xml"}, "INVALID_ARGUMENT", 2},
		{"repartition without --partitions", []string{"checkpoint", "repartition", ck, "--local-dir", cache}, "MISSING_REQUIRED_FLAG", 2},
		{"repartition --partitions 0", []string{"checkpoint", "repartition", ck, "--partitions", "0", "--local-dir", cache}, "STATE_REPARTITION_INVALID_PARAMETER.IS_NOT_GREATER_THAN_ZERO", 2},
		{"repartition --partitions 20000", []string{"checkpoint", "repartition", ck, "--partitions", "20000", "--local-dir", cache}, "INVALID_ARGUMENT", 2},
		{"repartition beyond the open-file limit", []string{"checkpoint", "repartition", ck, "--partitions", "5000", "--local-dir", cache}, "OPEN_FILE_LIMIT_TOO_LOW", 1},
		{"repartition a missing checkpoint", []string{"checkpoint", "repartition", missing, "--partitions", "4", "--local-dir", cache}, "STATE_REPARTITION_INVALID_CHECKPOINT.NO_COMMITTED_BATCH", 1},
		{"repartition an empty directory", []string{"checkpoint", "repartition", empty, "--partitions", "4", "--local-dir", cache}, "STATE_REPARTITION_INVALID_CHECKPOINT.NO_COMMITTED_BATCH", 1},
	}
	for _, r := range rows {
		hashes := []string{treeHash(t, ck), treeHash(t, tbl), treeHash(t, cache), treeHash(t, empty)}
		code, _, stderr := cli(t, ctx, r.args...)
		checkRefusal(t, r.name, code, stderr, r.code, r.exit)
		for i, dir := range []string{ck, tbl, cache, empty} {
			if h := treeHash(t, dir); h != hashes[i] {
				t.Errorf("%s: %s changed", r.name, dir)
			}
		}
		if _, err := os.Stat(missing); !os.IsNotExist(err) {
			t.Fatalf("%s: created %s", r.name, missing)
		}
	}

	// Repartition twice with the same N: the second is success, "already at N".
	for i, want := range []string{"state partitions 200 -> 8", "already at 8 partitions"} {
		code, out, errOut := cli(t, ctx, "checkpoint", "repartition", ck, "--partitions", "8", "--local-dir", cache)
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("repartition %d: exit %d, stdout %q, stderr %q", i+1, code, out, errOut)
		}
	}
	// The query still runs after all of it.
	if code, out, errOut := cli(t, ctx, good...); code != 0 {
		t.Fatalf("run after the refusals: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestAcceptedSpellings: Spark's trigger spellings are accepted by run and
// plan alike, and a conf key typo is refused naming the closest known key.
func TestAcceptedSpellings(t *testing.T) {
	ctx := context.Background()
	_, arch := archiveURI(t)
	base := t.TempDir()
	q := []string{"--checkpoint", filepath.Join(base, "ck"), "--table", filepath.Join(base, "tbl"), "--local-dir", filepath.Join(base, "cache"),
		"--source", "s3_backfill=s3archive:" + arch, "--conf", evolution}
	for _, trig := range []string{"processingTime=5s", "processingTime='5 seconds'", "processing-time=200ms", "availableNow", "available-now", "once"} {
		code, out, errOut := cli(t, ctx, append([]string{"plan", "--trigger", trig}, q...)...)
		if code != 0 || !strings.Contains(out, "new checkpoint") {
			t.Errorf("plan --trigger %s: exit %d, %q %q", trig, code, out, errOut)
		}
	}
	// A conf key a typo away from a known one is refused naming it, by run
	// and plan alike, before anything is written; a Spark key ethstream does
	// not read passes with a warning.
	for _, c := range []string{"plan", "run"} {
		code, _, errOut := cli(t, ctx, append([]string{c, "--conf", "spark.sql.shufle.partitions=8"}, q...)...)
		checkRefusal(t, c+": conf typo", code, errOut, "INVALID_ARGUMENT", 2)
		if !strings.Contains(errOut, "unknown conf spark.sql.shufle.partitions: did you mean spark.sql.shuffle.partitions?") {
			t.Errorf("%s: conf typo: exit %d, stderr %q", c, code, errOut)
		}
	}
	code, _, errOut := cli(t, ctx, append([]string{"plan", "--conf", "spark.sql.streaming.stateStore.compression.codec=zstd"}, q...)...)
	if code != 0 || !strings.Contains(errOut, "unknown conf spark.sql.streaming.stateStore.compression.codec is ignored; did you mean") {
		t.Errorf("unread Spark conf: exit %d, stderr %q", code, errOut)
	}
	if entries(t, base) != nil {
		t.Errorf("plan created %v", entries(t, base))
	}
}
