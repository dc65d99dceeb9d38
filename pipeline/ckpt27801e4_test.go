package pipeline

import (
	"bytes"
	"encoding/json"
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
	"github.com/ethstream/ethstream/shape"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/storage/s3serve"
	"github.com/ethstream/ethstream/stream"
)

// TestCheckpoint27801e4Resumes restarts a checkpoint and table of the
// reference query that main at 27801e4 wrote (one batch over the first of
// two archive days; testdata/ckpt27801e4/README.md), before a query's
// operators formed a plan: its aggregation is operator 0 with the same
// files. The query keeps its id and continues at batch 1, the state stays
// in state/0 (no other operator directory appears), progress reports one
// stateOperators entry, the shape is still recorded in its one-operator
// form (not v3), and the table equals a recount of both days.
func TestCheckpoint27801e4Resumes(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	root := filepath.Join(dir, "s3")
	archive := filepath.Join(root, "aws-public-blockchain")
	from := time.Date(2021, 8, 5, 0, 0, 0, 0, time.UTC)
	if _, err := archivegen.Generate(ctx, archivegen.Options{Out: archive, Preset: chain.RangePreset(from, 2), Seed: 1}); err != nil {
		t.Fatal(err)
	}
	srv, err := s3serve.Start(ctx, s3serve.Options{Root: root, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ckpt, table := filepath.Join(dir, "checkpoint"), filepath.Join(dir, "table")
	copyTree(t, "testdata/ckpt27801e4/checkpoint", ckpt)
	copyTree(t, "testdata/ckpt27801e4/table", table)
	shape0, err := os.ReadFile(filepath.Join(ckpt, "shape", "0"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Checkpoint: ckpt, Table: table, LocalDir: filepath.Join(dir, "local"),
		Sources: []SourceSpec{{Name: "arch", Format: "s3archive", URI: "s3://aws-public-blockchain/v1.0/eth/blocks?endpoint=" +
			url.QueryEscape(srv.URL()) + "&region=us-east-2&anonymous=true&maxFilesPerTrigger=1"}},
		Conf: map[string]string{"spark.sql.shuffle.partitions": "2",
			"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
		Trigger: engine.Trigger{Kind: engine.AvailableNow},
		Logger:  slog.New(slog.DiscardHandler),
		Clock:   stream.SystemClock{},
	}
	var events []*stream.Progress
	cfg.Listeners = []engine.Listener{engine.ListenerFunc(func(p *stream.Progress) { events = append(events, p) })}
	sum, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if sum.NewCheckpoint || sum.QueryID != "921ae9ae-7f67-4602-95a8-42732446599f" || sum.FirstBatchID != 1 || sum.DataBatches != 1 {
		t.Fatalf("resume: %+v, want the fixture's query id and data batch 1", sum)
	}
	for _, p := range events {
		if len(p.StateOperators) != 1 || p.StateOperators[0].OperatorName != "stateStoreSave" {
			t.Fatalf("batch %d reports state operators %+v, want the one aggregation", p.BatchID, p.StateOperators)
		}
	}
	ops, err := os.ReadDir(filepath.Join(ckpt, "state"))
	if err != nil || len(ops) != 1 || ops[0].Name() != engine.OperatorID {
		t.Fatalf("state/ holds %v (%v), want operator 0 alone", ops, err)
	}
	if _, err := os.Stat(filepath.Join(ckpt, "state", "0", "00000000000000000001.0.meta")); err != nil {
		t.Fatalf("operator 0 did not commit version 1 in its directory: %v", err)
	}
	// The recorded shape: shape/0 untouched; the endpoint and the table
	// moved, so a new record differs from it in the source's options and
	// the table's location alone, in the same one-operator form (v2: the
	// table's id).
	if now, err := os.ReadFile(filepath.Join(ckpt, "shape", "0")); err != nil || !bytes.Equal(now, shape0) {
		t.Fatalf("shape/0 changed (%v)", err)
	}
	latest, err := shape.ReadLatest(vfs.Default, ckpt)
	if err != nil {
		t.Fatal(err)
	}
	if raw, err := os.ReadFile(latest.Path); err != nil || !strings.HasPrefix(string(raw), "v2\n") {
		t.Fatalf("the resumed shape is not recorded as v2: %.40q (%v)", raw, err)
	}
	old, err := shape.Parse("shape/0", shape0)
	if err != nil {
		t.Fatal(err)
	}
	resumed := latest.Shape
	resumed.Sources[0].Options = old.Shape.Sources[0].Options
	resumed.Sink.Location = old.Shape.Sink.Location
	if !resumed.Equal(old.Shape) {
		a, _ := json.Marshal(old.Shape)
		b, _ := json.Marshal(resumed)
		t.Fatalf("the resumed query's shape differs from 27801e4's beyond the endpoint:\n%s\n%s", a, b)
	}
	want := referenceRecount(t, archive)
	got := referenceTable(t, table)
	if len(got) != len(want) || len(want) < 1000 {
		t.Fatalf("table has %d keys, the recount %d", len(got), len(want))
	}
	for k, w := range want {
		if got[k] != w {
			t.Fatalf("%v: table %d, recount %d", k, got[k], w)
		}
	}
}

// referenceKey is a row key of the reference query: window start (µs),
// source, miner.
type referenceKey struct {
	start         int64
	source, miner string
}

// referenceRecount counts the archive's blocks per 5-minute window and
// miner, all read by source arch.
func referenceRecount(t *testing.T, archive string) map[referenceKey]int64 {
	t.Helper()
	type blockRow struct {
		Timestamp int64  `parquet:"timestamp"`
		Miner     string `parquet:"miner"`
	}
	five := (5 * time.Minute).Microseconds()
	want := map[referenceKey]int64{}
	archiveRows(t, archive, func(b blockRow) {
		want[referenceKey{b.Timestamp - b.Timestamp%five, "arch", b.Miner}]++
	})
	return want
}

// referenceTable reads the reference query's Delta table, failing on a
// duplicate key.
func referenceTable(t *testing.T, path string) map[referenceKey]int64 {
	t.Helper()
	ctx := t.Context()
	tbl, err := delta.OpenFS(ctx, vfs.Default, path)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	got := map[referenceKey]int64{}
	err = snap.Rows(ctx, func(r map[string]any) error {
		w := r["window"].(map[string]any)
		k := referenceKey{w["start"].(time.Time).UnixMicro(), r["source"].(string), r["miner"].(string)}
		if _, dup := got[k]; dup {
			return fmt.Errorf("duplicate row %v", k)
		}
		got[k] = r["count"].(int64)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}
