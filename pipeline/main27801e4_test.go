package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/storage/s3serve"
	"github.com/ethstream/ethstream/stream"
)

// TestMain27801e4CheckpointResumes restarts a checkpoint that main at
// 27801e4 wrote (testdata/main27801e4, README.md): its state version 0 is
// metadata format 4, where the state store itself kept the aggregation's
// closedRows and nextWatermarkMs. Resumed as written, and after an offline
// repartition (which writes that record as the operator's own, format 5),
// the query ends with the state and the batch-1 figures of a run from
// scratch: numRowsRemoved counts the 551 rows version 0 closed without
// storing them, which only its record tells. A start also still
// cross-checks commits/0's watermark against the record.
func TestMain27801e4CheckpointResumes(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	root := filepath.Join(dir, "s3")
	if _, err := archivegen.Generate(ctx, archivegen.Options{Out: filepath.Join(root, "aws-public-blockchain"),
		Preset: chain.RangePreset(time.Date(2021, 8, 5, 0, 0, 0, 0, time.UTC), 2), Seed: 1}); err != nil {
		t.Fatal(err)
	}
	srv, err := s3serve.Start(ctx, s3serve.Options{Root: root, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cfg := func(name string) Config {
		return Config{
			Checkpoint: filepath.Join(dir, name, "checkpoint"), Table: filepath.Join(dir, name, "table"), LocalDir: filepath.Join(dir, name, "local"),
			Sources: []SourceSpec{{Name: "arch", Format: "s3archive", URI: "s3://aws-public-blockchain/v1.0/eth/blocks?endpoint=" +
				url.QueryEscape(srv.URL()) + "&region=us-east-2&anonymous=true&maxFilesPerTrigger=1"}},
			Conf: map[string]string{"spark.sql.shuffle.partitions": "2",
				"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
			Query:         "SELECT window, miner, sum(gas_used) AS gas FROM blocks GROUP BY window(block_ts, '1 hour'), miner",
			WithWatermark: "block_ts, 1 hour",
			Trigger:       engine.Trigger{Kind: engine.AvailableNow},
			Logger:        slog.New(slog.DiscardHandler),
			Clock:         stream.SystemClock{},
		}
	}
	// run runs c and returns the stateOperators[0] of its first batch
	// after batch 0 that reads data (batch 1; batch 2 after a repartition).
	run := func(c Config) stream.OperatorProgress {
		t.Helper()
		var batch1 stream.OperatorProgress
		seen := false
		c.Listeners = []engine.Listener{engine.ListenerFunc(func(p *stream.Progress) {
			if p.BatchID >= 1 && !seen && len(p.StateOperators) > 0 && p.StateOperators[0].OperatorName != "repartition" {
				batch1, seen = p.StateOperators[0], true
			}
		})}
		if _, err := Run(ctx, c); err != nil {
			t.Fatal(err)
		}
		return batch1
	}
	fixture := func(name string) Config {
		c := cfg(name)
		copyTree(t, "testdata/main27801e4/checkpoint", c.Checkpoint)
		copyTree(t, "testdata/main27801e4/table", c.Table)
		return c
	}
	scratch := cfg("scratch")
	want := run(scratch)
	wantRows := dumpDir(t, scratch.Checkpoint)
	if want.NumRowsRemoved < 551 {
		t.Fatalf("the run from scratch removed %d rows in batch 1; version 0 closed 551", want.NumRowsRemoved)
	}

	resumed := fixture("resumed")
	meta, err := os.ReadFile(filepath.Join(resumed.Checkpoint, "state/0/00000000000000000000.0.meta"))
	if err != nil || !bytes.Contains(meta, []byte(`"formatVersion":4,`)) || !bytes.Contains(meta, []byte(`"closedRows":551,`)) {
		t.Fatalf("the fixture's version 0 is not format 4 with 551 closed rows (%v)", err)
	}
	if got := run(resumed); got.NumRowsRemoved != want.NumRowsRemoved || got.NumRowsTotal != want.NumRowsTotal {
		t.Fatalf("resumed batch 1: %d removed, %d total; from scratch %d, %d", got.NumRowsRemoved, got.NumRowsTotal, want.NumRowsRemoved, want.NumRowsTotal)
	}
	sameRows(t, "resumed", wantRows, dumpDir(t, resumed.Checkpoint))

	moved := fixture("repartitioned")
	_, opts, err := Build(moved)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.RepartitionOffline(ctx, opts, state.Recorded{}, 3); err != nil {
		t.Fatal(err)
	}
	r, _, err := state.ReadRecord(vfs.Default, filepath.Join(moved.Checkpoint, "state/0"), 1)
	if err != nil || string(r.Operator) != `{"closedRows":551,"nextWatermarkMs":1628204381000}` {
		t.Fatalf("the repartitioned version's operator record: %q (%v)", r.Operator, err)
	}
	if got := run(moved); got.NumRowsRemoved != want.NumRowsRemoved || got.NumRowsTotal != want.NumRowsTotal {
		t.Fatalf("repartitioned, batch 2: %d removed, %d total; from scratch %d, %d", got.NumRowsRemoved, got.NumRowsTotal, want.NumRowsRemoved, want.NumRowsTotal)
	}
	sameRows(t, "repartitioned", wantRows, dumpDir(t, moved.Checkpoint))

	// A commits/0 rewritten with another watermark is refused against the
	// format 4 record, as the build that wrote it refused it.
	tampered := fixture("tampered")
	commit := filepath.Join(tampered.Checkpoint, "commits/0")
	b, err := os.ReadFile(commit)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte("1628204381000"), []byte("1628204381001"), 1)
	if err := os.WriteFile(commit, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(ctx, tampered); err == nil || !strings.Contains(err.Error(), "CHECKPOINT_CORRUPT") {
		t.Fatalf("a replaced commits/0: %v, want CHECKPOINT_CORRUPT", err)
	}
}

// dumpDir is dumpRows of the local checkpoint ck's last committed state.
func dumpDir(t *testing.T, ck string) []string {
	t.Helper()
	var b bytes.Buffer
	if _, err := state.Dump(context.Background(), state.DumpOptions{FS: vfs.Default, Checkpoint: ck, Batch: -1}, &b); err != nil {
		t.Fatal(fmt.Errorf("dump %s: %w", ck, err))
	}
	return csvRows(t, &b, 1<<20)
}
