package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/storage/s3serve"
	"github.com/ethstream/ethstream/stream"

	"github.com/ethstream/ethstream/engine"
)

// twoOpsConfig is the query of testdata/main3501b3e-twoops (README.md):
// dropDuplicatesWithinWatermark(hash), then an hourly sum per miner, over
// the two-day archive served at endpoint, in checkpoint dir/name.
func twoOpsConfig(dir, name, endpoint string) Config {
	return Config{
		Checkpoint: filepath.Join(dir, name, "checkpoint"), Table: filepath.Join(dir, name, "table"), LocalDir: filepath.Join(dir, name, "local"),
		Sources: []SourceSpec{{Name: "arch", Format: "s3archive", URI: "s3://aws-public-blockchain/v1.0/eth/blocks?endpoint=" +
			url.QueryEscape(endpoint) + "&region=us-east-2&anonymous=true&maxFilesPerTrigger=1"}},
		Conf: map[string]string{"spark.sql.shuffle.partitions": "2",
			"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
		Query:                         "SELECT window, miner, sum(gas_used) AS gas FROM blocks GROUP BY window(block_ts, '1 hour'), miner",
		WithWatermark:                 "block_ts, 1 hour",
		DropDuplicatesWithinWatermark: "hash",
		Trigger:                       engine.Trigger{Kind: engine.AvailableNow},
		Logger:                        slog.New(slog.DiscardHandler),
		Clock:                         stream.SystemClock{},
	}
}

// serveTwoDays serves the archive the fixture was written from (seed 1, two
// days from 2021-08-05) over loopback S3 and returns its endpoint.
func serveTwoDays(t *testing.T, dir string) string {
	t.Helper()
	root := filepath.Join(dir, "s3")
	if _, err := archivegen.Generate(t.Context(), archivegen.Options{Out: filepath.Join(root, "aws-public-blockchain"),
		Preset: chain.RangePreset(time.Date(2021, 8, 5, 0, 0, 0, 0, time.UTC), 2), Seed: 1}); err != nil {
		t.Fatal(err)
	}
	srv, err := s3serve.Start(t.Context(), s3serve.Options{Root: root, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv.URL()
}

// runNames runs c and returns the operator names of its last data batch's
// stateOperators[], in order.
func runNames(t *testing.T, c Config) []string {
	t.Helper()
	var names []string
	c.Listeners = []engine.Listener{engine.ListenerFunc(func(p *stream.Progress) {
		if p.Kind() != stream.KindData {
			return
		}
		names = names[:0]
		for _, so := range p.StateOperators {
			names = append(names, so.OperatorName)
		}
	})}
	if _, err := Run(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	return names
}

// opRows is `state dump --op op` of checkpoint ck's last committed state,
// as sorted CSV rows without the partition column.
func opRows(t *testing.T, ck string, op int) []string {
	t.Helper()
	var b bytes.Buffer
	if _, err := state.Dump(context.Background(), state.DumpOptions{FS: vfs.Default, Checkpoint: ck, Operator: op, Batch: -1}, &b); err != nil {
		t.Fatal(fmt.Errorf("dump %s operator %d: %w", ck, op, err))
	}
	return csvRows(t, &b, 1<<20)
}

// allTableRows is every row of the Delta table at path, each its columns
// as name=value in name order, sorted.
func allTableRows(t *testing.T, path string) []string {
	t.Helper()
	ctx := context.Background()
	tbl, err := delta.OpenFS(ctx, vfs.Default, path)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	if err := snap.Rows(ctx, func(r map[string]any) error {
		var cols []string
		for k, v := range r {
			cols = append(cols, fmt.Sprintf("%s=%v", k, v))
		}
		sort.Strings(cols)
		rows = append(rows, strings.Join(cols, " "))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(rows)
	return rows
}

// shapeHead is the version line and numbering of checkpoint ck's newest
// query shape record.
func shapeHead(t *testing.T, ck string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(ck, "shape", "*"))
	slices.Sort(files)
	if len(files) == 0 {
		t.Fatalf("%s has no shape record", ck)
	}
	b, err := os.ReadFile(files[len(files)-1])
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := bytes.Cut(b, []byte("\n"))
	return string(head)
}

// TestSparkOperatorIDs: a new checkpoint of dropDuplicatesWithinWatermark
// followed by an aggregation numbers its operators as Spark does
// (IncrementalExecution's pre-order walk from the sink): the aggregation
// is operator 0 (state/0, stateOperators[0]), the deduplication 1, and the
// shape record says so (v5, numbering preOrder). On main the deduplication
// was operator 0.
func TestSparkOperatorIDs(t *testing.T) {
	dir := t.TempDir()
	c := twoOpsConfig(dir, "new", serveTwoDays(t, dir))
	names := runNames(t, c)
	if want := []string{"stateStoreSave", "dedupeWithinWatermark"}; !slices.Equal(names, want) {
		t.Fatalf("stateOperators %q, want %q (Spark's ids)", names, want)
	}
	if h := shapeHead(t, c.Checkpoint); h != "v5" {
		t.Fatalf("shape record version %q, want v5", h)
	}
	agg, dd := opRows(t, c.Checkpoint, 0), opRows(t, c.Checkpoint, 1)
	if len(agg) == 0 || len(dd) == 0 || !strings.HasPrefix(dd[0], "0x") || strings.HasPrefix(agg[0], "0x") {
		t.Fatalf("state/0 should hold the aggregation's windows and state/1 the deduplication's hashes: %d rows (%v), %d rows (%v)",
			len(agg), head(agg), len(dd), head(dd))
	}
	// A restart of the same query finds its shape as recorded: no new
	// record.
	runNames(t, c)
	if files, _ := filepath.Glob(filepath.Join(c.Checkpoint, "shape", "*")); len(files) != 1 {
		t.Fatalf("shape records after a restart: %v, want shape/0 only", files)
	}
}

// TestMainTwoOperatorCheckpointResumes restarts a checkpoint that main at
// 3501b3e wrote (testdata/main3501b3e-twoops, README.md), whose two
// operators are numbered in flow order (the deduplication state/0, the
// aggregation state/1; shape record v3). It resumes with that numbering:
// no new shape record, each operator on its own directory, stateOperators[]
// in its ids' order, and it ends with the table and the state of a run
// from scratch (which numbers them as Spark does, so its directories are
// the other way round).
func TestMainTwoOperatorCheckpointResumes(t *testing.T) {
	dir := t.TempDir()
	endpoint := serveTwoDays(t, dir)
	scratch := twoOpsConfig(dir, "scratch", endpoint)
	if names := runNames(t, scratch); !slices.Equal(names, []string{"stateStoreSave", "dedupeWithinWatermark"}) {
		t.Fatalf("from scratch: stateOperators %q", names)
	}

	resumed := twoOpsConfig(dir, "resumed", endpoint)
	copyTree(t, "testdata/main3501b3e-twoops/checkpoint", resumed.Checkpoint)
	copyTree(t, "testdata/main3501b3e-twoops/table", resumed.Table)
	if h := shapeHead(t, resumed.Checkpoint); h != "v3" {
		t.Fatalf("the fixture's shape record is %q, want v3 (flow order)", h)
	}
	fixtureDedup := opRows(t, resumed.Checkpoint, 0)
	if len(fixtureDedup) < 1000 || !strings.HasPrefix(fixtureDedup[0], "0x") {
		t.Fatalf("the fixture's state/0 is not the deduplication's: %d rows (%v)", len(fixtureDedup), head(fixtureDedup))
	}
	if names := runNames(t, resumed); !slices.Equal(names, []string{"dedupeWithinWatermark", "stateStoreSave"}) {
		t.Fatalf("resumed: stateOperators %q, want the checkpoint's flow order", names)
	}
	if h := shapeHead(t, resumed.Checkpoint); h != "v3" {
		t.Fatalf("the resumed checkpoint's shape record is %q, want v3 (its numbering kept)", h)
	}
	sameRows(t, "the deduplication's state", opRows(t, scratch.Checkpoint, 1), opRows(t, resumed.Checkpoint, 0))
	sameRows(t, "the aggregation's state", opRows(t, scratch.Checkpoint, 0), opRows(t, resumed.Checkpoint, 1))
	sameRows(t, "the table", allTableRows(t, scratch.Table), allTableRows(t, resumed.Table))

	// Offline repartitioning moves each directory's state as it is, and the
	// query resumes on it again.
	_, opts, err := Build(resumed)
	if err != nil {
		t.Fatal(err)
	}
	before := [2][]string{opRows(t, resumed.Checkpoint, 0), opRows(t, resumed.Checkpoint, 1)}
	if _, err := engine.RepartitionOffline(t.Context(), opts, state.Recorded{}, 3); err != nil {
		t.Fatal(err)
	}
	for op := range 2 {
		sameRows(t, fmt.Sprintf("operator %d repartitioned", op), before[op], opRows(t, resumed.Checkpoint, op))
	}
	runNames(t, resumed)
	sameRows(t, "the table after the repartition", allTableRows(t, scratch.Table), allTableRows(t, resumed.Table))
}

// TestDropDuplicatesAddedToReferenceQueryRefused: --drop-duplicates added
// to a checkpoint of the reference query, through Run as the CLI starts
// it, is refused STATE_SCHEMA_MISMATCH by the restart rules (an operator
// added) with the checkpoint unchanged. With Spark's ids the aggregation
// keeps id 0 and the deduplication would open an empty state/1; the state
// format adoption once rebuilt the query's shape without the
// deduplication, so the rules saw one operator on each side and the start
// failed later, CHECKPOINT_CORRUPT on the missing state/1.
func TestDropDuplicatesAddedToReferenceQueryRefused(t *testing.T) {
	archive, err := faultArchive()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := Config{
		Checkpoint: filepath.Join(dir, "ck"), Table: filepath.Join(dir, "table"), LocalDir: filepath.Join(dir, "local"),
		Sources: []SourceSpec{{Name: "a", Format: "s3archive", URI: "file://" + filepath.ToSlash(archive) + "/v1.0/eth/blocks?maxFilesPerTrigger=1"}},
		Conf:    map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
		Trigger: engine.Trigger{Kind: engine.AvailableNow}, MaxBatches: 1,
		Logger: slog.New(slog.DiscardHandler), Clock: stream.SystemClock{},
	}
	if _, err := Run(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	before := treeHash(t, c.Checkpoint)
	c.DropDuplicates = "hash"
	if _, err := Run(t.Context(), c); errcode.Code(err) != errcode.StateSchemaMismatch || !strings.Contains(err.Error(), "2 stateful operators") {
		t.Fatalf("got %v, want STATE_SCHEMA_MISMATCH for the operator added", err)
	}
	if after := treeHash(t, c.Checkpoint); after != before {
		t.Fatal("a refused start changed the checkpoint")
	}
}
