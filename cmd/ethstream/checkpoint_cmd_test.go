package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
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
	args := []string{"--checkpoint", dir, "--source", "eth_live=ethrpc:http://127.0.0.1:8545",
		"--conf", "spark.sql.streaming.queryEvolution.enableSourceEvolution=true", "--conf", "spark.sql.streaming.stateStore.partitions=4"}
	out, err := run(args...)
	if err != nil || !strings.Contains(out, "repartition state 8 -> 4 in control batch 1") || !strings.Contains(out, "resume sources: eth_live") {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	out, err = run(append(args, "--source", "s3_backfill=s3archive:file:///x", "--json")...)
	if !errcode.Is(err, errcode.TombstoneNameReuse) ||
		!strings.Contains(out, `"errorCode": "STREAMING_QUERY_EVOLUTION_ERROR.TOMBSTONE_SOURCE_NAME_REUSE"`) {
		t.Fatalf("err %v, stdout %s", err, out)
	}
	// Through the CLI entry point: the coded error on stderr, non-zero exit.
	var o, e bytes.Buffer
	if code := execute(context.Background(), []string{"plan", "--checkpoint", dir, "--source", "=s3archive:file:///x"}, &o, &e); code == 0 ||
		!strings.HasPrefix(e.String(), "error: STREAMING_QUERY_EVOLUTION_ERROR.CONFIG_MISMATCH") {
		t.Fatalf("exit %d: %s", code, e.String())
	}
}
