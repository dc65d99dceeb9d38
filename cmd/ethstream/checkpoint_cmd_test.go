package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

func writeTestCheckpoint(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "ckpt")
	w, err := checkpoint.Lock(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Prepare(); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMetadata(checkpoint.Metadata{ID: "6f1c1f3e-8a4b-4c3e-9b8e-3f0e2b7d9a10"}); err != nil {
		t.Fatal(err)
	}
	e := &checkpoint.OffsetEntry{Version: checkpoint.OffsetsV2, Metadata: checkpoint.OffsetMetadata{
		Conf:               map[string]string{checkpoint.ConfShufflePartitions: "8", checkpoint.ConfSourceEvolution: "true", checkpoint.ConfProviderClass: checkpoint.ProviderPebble},
		SourceMetadataInfo: map[string]checkpoint.SourceMetadata{"eth_live": {SourceID: "eth_live"}},
		Tombstones:         map[string]checkpoint.Tombstone{"s3_backfill": {RemovedInBatch: 29, LastOffset: json.RawMessage(`{"logOffset":11}`)}},
	}, Sources: []checkpoint.SourceOffset{{Key: "eth_live", Offset: json.RawMessage(`{"block":26087209}`)}}}
	if err := w.WriteOffsets(0, e); err != nil {
		t.Fatal(err)
	}
	// State version 0, written before commits/0 as a run writes it: a start
	// (and plan) refuses a commit whose state version is missing.
	s, err := state.Open(context.Background(), state.Options{
		Dir: filepath.Join(dir, "state", "0"), FS: vfs.Default, LocalDir: t.TempDir(), Partitions: 8,
		Schema: state.Schema{OperatorName: "aggregate", Key: []state.Field{{Name: "miner", Type: stream.String}},
			Value: []state.Field{{Name: "count", Type: stream.Int64}}},
	}, -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteCommit(0, &checkpoint.CommitEntry{}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCheckpointInspect(t *testing.T) {
	dir := writeTestCheckpoint(t)
	var out, errOut bytes.Buffer
	if code := execute(context.Background(), []string{"checkpoint", "inspect", dir, "--json"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var rep map[string]any
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	for _, k := range []string{"queryId", "formatVersion", "latestBatchId", "latestCommittedBatchId", "sources", "tombstones", "statePartitions", "conf", "controlBatches"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("inspect --json lacks %q", k)
		}
	}
	out.Reset()
	if code := execute(context.Background(), []string{"checkpoint", "inspect", dir, "--json=false"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "s3_backfill") || !strings.Contains(out.String(), "removed in batch 29") {
		t.Fatalf("text inspect:\n%s", out.String())
	}
	// A damaged file: coded error naming it.
	if err := os.WriteFile(filepath.Join(dir, "commits", "0"), []byte("v1\n{"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errOut.Reset()
	if code := execute(context.Background(), []string{"checkpoint", "inspect", dir, "--json=false"}, &out, &errOut); code == 0 ||
		!strings.HasPrefix(errOut.String(), "error: CHECKPOINT_CORRUPT: ") || !strings.Contains(errOut.String(), filepath.Join(dir, "commits", "0")) {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}

func TestProgressCommandNeedsPhases(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := execute(context.Background(), []string{"progress", "--out", t.TempDir()}, &out, &errOut); code == 0 ||
		!strings.HasPrefix(errOut.String(), "error: INVALID_ARGUMENT") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}

func TestPlanCommand(t *testing.T) {
	dir := writeTestCheckpoint(t)
	// A fresh command per call: cobra keeps repeatable flag values between
	// executions of one command value.
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		c := planCmd()
		c.SetArgs(args)
		c.SetOut(&out)
		c.SetErr(&out)
		c.SilenceUsage, c.SilenceErrors = true, true
		err := c.ExecuteContext(context.Background())
		return out.String(), err
	}
	// plan probes the sources as run does: a real node over loopback.
	table := filepath.Join(t.TempDir(), "table")
	args := []string{"--checkpoint", dir, "--table", table, "--source", "eth_live=ethrpc:" + startNode(t),
		"--conf", "spark.sql.streaming.queryEvolution.enableSourceEvolution=true", "--conf", "spark.sql.streaming.stateStore.partitions=4"}
	out, err := run(args...)
	if err != nil || !strings.Contains(out, "repartition state 8 -> 4 in control batch 1") || !strings.Contains(out, "resume sources: eth_live") {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	// The dry run's steps: the control batch, then the poll.
	for _, want := range []string{"  batch 1: repartition 8 -> 4\n", "    write offsets/1\n",
		"    repartition state version 0 -> 1: 8 -> 4 partitions\n", "    write commits/1\n", "  poll sources eth_live: batch 2"} {
		if !strings.Contains(out, want) {
			t.Fatalf("plan steps: no %q in\n%s", want, out)
		}
	}
	out, err = run(append(args, "--source", "s3_backfill=s3archive:file:///x", "--json")...)
	if !errcode.Is(err, errcode.TombstoneNameReuse) ||
		!strings.Contains(out, `"errorCode": "STREAMING_QUERY_EVOLUTION_ERROR.TOMBSTONE_SOURCE_NAME_REUSE"`) {
		t.Fatalf("err %v, stdout %s", err, out)
	}
	// Through the CLI entry point: the coded error on stderr, non-zero exit.
	var o, e bytes.Buffer
	if code := execute(context.Background(), []string{"plan", "--checkpoint", dir, "--table", table, "--source", "=s3archive:file:///x"}, &o, &e); code == 0 ||
		!strings.HasPrefix(e.String(), "error: STREAMING_QUERY_EVOLUTION_ERROR.CONFIG_MISMATCH") {
		t.Fatalf("exit %d: %s", code, e.String())
	}
}

// TestCheckpointRepartitionCommand: the dry run prints the control batch's
// steps and writes nothing; the count already matching is exit 0.
func TestCheckpointRepartitionCommand(t *testing.T) {
	dir := writeTestCheckpoint(t)
	before := dirListing(t, dir)
	var out, errOut bytes.Buffer
	code := execute(context.Background(), []string{"checkpoint", "repartition", dir, "--partitions", "4", "--dry-run"}, &out, &errOut)
	if code != 0 || !strings.Contains(out.String(), "batch 1: repartition 8 -> 4\n  write offsets/1\n") {
		t.Fatalf("dry run: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	out.Reset()
	code = execute(context.Background(), []string{"checkpoint", "repartition", dir, "--partitions", "8"}, &out, &errOut)
	if code != 0 || out.String() != "state already at 8 partitions (batch 0): nothing to do\n" {
		t.Fatalf("same count: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if after := dirListing(t, dir); after != before {
		t.Fatalf("checkpoint changed:\n%s\nvs\n%s", before, after)
	}
}

// dirListing is every file under dir with its content.
func dirListing(t *testing.T, dir string) string {
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		fmt.Fprintf(&b, "%s %q\n", p, data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestCheckpointRepartitionAnyQuery: the checkpoint of a query other than
// the reference one (an hourly sum(gas_used) per miner, no watermark) is
// repartitioned from the checkpoint alone, and `state dump` after lists the
// rows it listed before (partition column aside). It was STATE_SCHEMA_MISMATCH
// when the command built the reference query's aggregation.
func TestCheckpointRepartitionAnyQuery(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	archive := filepath.Join(root, "archive")
	if _, err := archivegen.Generate(ctx, archivegen.Options{Out: archive, Preset: chain.RangePreset(chain.FirstDay, 2), Seed: 5}); err != nil {
		t.Fatal(err)
	}
	ck, tbl, cache := filepath.Join(root, "ck"), filepath.Join(root, "tbl"), filepath.Join(root, "cache")
	mustCLI(t, ctx, "run", "--checkpoint", ck, "--table", tbl, "--local-dir", cache,
		"--source", "arch=s3archive:file://"+filepath.ToSlash(archive)+"/v1.0/eth/blocks?maxFilesPerTrigger=1",
		"--query", "SELECT window, miner, sum(gas_used) AS gas FROM blocks GROUP BY window(block_ts, '1 hour'), miner",
		"--conf", "spark.sql.shuffle.partitions=2", "--conf", "spark.sql.streaming.queryEvolution.enableSourceEvolution=true")
	rows := func(dump string) []string {
		var rs []string
		for _, line := range strings.Split(strings.TrimSpace(dump), "\n")[1:] {
			rs = append(rs, line[:strings.LastIndexByte(line, ',')]) // partition is the last column
		}
		slices.Sort(rs)
		return rs
	}
	before := rows(mustCLI(t, ctx, "state", "dump", "--checkpoint", ck))
	out := mustCLI(t, ctx, "checkpoint", "repartition", ck, "--partitions", "4", "--local-dir", cache)
	want := fmt.Sprintf("state partitions 2 -> 4, %d keys before, %d after", len(before), len(before))
	if !strings.Contains(out, want) {
		t.Fatalf("repartition said %q, want %q", out, want)
	}
	if after := rows(mustCLI(t, ctx, "state", "dump", "--checkpoint", ck)); len(before) == 0 || !slices.Equal(before, after) {
		t.Fatalf("state dump before (%d rows) and after (%d rows) differ", len(before), len(after))
	}
}

// TestCheckpointRepartitionRefusesNoState: a checkpoint whose state/ holds
// no operator (a query without a stateful operator), or skips operator 0,
// is refused before anything is written, dry run or not.
func TestCheckpointRepartitionRefusesNoState(t *testing.T) {
	for _, c := range []struct {
		name, code string
		damage     func(dir string) error
	}{
		{"no operator", "INVALID_ARGUMENT", func(dir string) error { return os.RemoveAll(filepath.Join(dir, "state")) }},
		{"operator 0 missing", "CHECKPOINT_CORRUPT", func(dir string) error {
			return os.Rename(filepath.Join(dir, "state", "0"), filepath.Join(dir, "state", "1"))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := writeTestCheckpoint(t)
			if err := c.damage(dir); err != nil {
				t.Fatal(err)
			}
			before := dirListing(t, dir)
			for _, dry := range []bool{true, false} {
				args := []string{"checkpoint", "repartition", dir, "--partitions", "4", "--local-dir", t.TempDir()}
				if dry {
					args = append(args, "--dry-run")
				}
				resetFlags(rootCmd)
				var out, errOut bytes.Buffer
				if code := execute(context.Background(), args, &out, &errOut); code == 0 || !strings.HasPrefix(errOut.String(), "error: "+c.code+": ") {
					t.Fatalf("%v: exit %d: %s", args, code, errOut.String())
				}
			}
			if after := dirListing(t, dir); after != before {
				t.Fatal("the refused repartition changed the checkpoint")
			}
		})
	}
}
