package agg

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// blockRows is the source side of rows: block_ts and miner only (the engine
// adds the source column).
func blockRows(rows []testRow) *stream.Batch {
	b := makeBatch(rows)
	b.Columns = []stream.Column{*b.Column(ethblock.ColBlockTS), *b.Column(ethblock.ColMiner)}
	return b
}

// sinkCounts reads the sink's table back as "start|end|source|miner" (µs)
// -> count.
func sinkCounts(t *testing.T, sink *streamtest.Sink) map[string]int64 {
	t.Helper()
	us := func(s string) int64 {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UnixMicro()
	}
	got := map[string]int64{}
	for _, r := range sink.Table() {
		n, err := strconv.ParseInt(r["count"], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		got[fmt.Sprintf("%d|%d|%s|%s", us(r[ColWindowStart]), us(r[ColWindowEnd]), r[stream.ColSource], r[ethblock.ColMiner])] = n
	}
	return got
}

// TestEngineReferencePipeline runs the reference query through engine.Run
// over three process starts, as the demo does: backfill (availableNow),
// archive + live, live only (archive removed). The table must equal a
// recount of every block, and the archive's keys must stay in state exactly
// while their windows are open.
func TestEngineReferencePipeline(t *testing.T) {
	const t0 = int64(1_793_491_200_000_000)
	miners := []string{"0xaa", "0xbb", "0xcc", "0xdd", "0xee", "0xff"}
	block := func(i int) testRow {
		// One block every 7 minutes: the archive spans about 4 days.
		return testRow{miner: miners[(i*i+i/3)%len(miners)], ts: t0 + int64(i)*7*60_000_000}
	}
	var archive, live []testRow
	for i := range 800 {
		archive = append(archive, block(i))
	}
	for i := 800; i < 860; i++ {
		live = append(live, block(i))
	}

	dir := t.TempDir()
	ckpt, local := filepath.Join(dir, "ckpt"), filepath.Join(dir, "local")
	sink := streamtest.NewSink()
	var last *stream.Progress
	run := func(trigger engine.Trigger, maxBatches int, sources ...engine.NamedSource) *engine.RunSummary {
		t.Helper()
		op, err := New(refSpec())
		if err != nil {
			t.Fatal(err)
		}
		sum, err := engine.Run(context.Background(), engine.Query{
			Sources:        sources,
			Columns:        refSpec().InputColumns(),
			Watermark:      refWatermark(),
			Operator:       op,
			Sink:           sink,
			Trigger:        trigger,
			MaxDataBatches: maxBatches,
			Conf: map[string]string{
				checkpoint.ConfSourceEvolution:   "true",
				checkpoint.ConfOffsetLogVersion:  "2",
				checkpoint.ConfShufflePartitions: "4",
			},
		}, engine.Options{CheckpointDir: ckpt, LocalDir: local,
			Listeners: []engine.Listener{engine.ListenerFunc(func(p *stream.Progress) { last = p })}})
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		return sum
	}
	backfill, ethLive := streamtest.NewSource("s3_backfill"), streamtest.NewSource("eth_live")
	backfill.MaxRows, ethLive.MaxRows = 100, 20
	if err := errors.Join(backfill.Append(blockRows(archive)), ethLive.Append(blockRows(live))); err != nil {
		t.Fatal(err)
	}

	sum := run(engine.Trigger{Kind: engine.AvailableNow}, 0, engine.NamedSource{Name: "s3_backfill", Source: backfill})
	if sum.DataBatches != 8 || sum.NoDataBatches != 1 {
		t.Fatalf("backfill: %d data and %d no-data batches, want 8 and 1", sum.DataBatches, sum.NoDataBatches)
	}
	run(engine.Trigger{Kind: engine.ProcessingTime}, 1,
		engine.NamedSource{Name: "s3_backfill", Source: backfill}, engine.NamedSource{Name: "eth_live", Source: ethLive})
	run(engine.Trigger{Kind: engine.ProcessingTime}, 2, engine.NamedSource{Name: "eth_live", Source: ethLive})

	// The table: every block counted once in its window (nothing was late).
	want := map[string]int64{}
	add := func(rows []testRow, src string) {
		for _, r := range rows {
			s := floorDiv(r.ts, 300_000_000) * 300_000_000
			want[fmt.Sprintf("%d|%d|%s|%s", s, s+300_000_000, src, r.miner)]++
		}
	}
	add(archive, "s3_backfill")
	add(live, "eth_live")
	table := sinkCounts(t, sink)
	if fmt.Sprint(table) != fmt.Sprint(want) {
		t.Fatalf("table has %d keys, recount %d:\n%v\n%v", len(table), len(want), table, want)
	}
	var total int64
	for _, c := range table {
		total += c
	}
	if total != int64(len(archive)+len(live)) {
		t.Fatalf("sum(count) = %d, want %d", total, len(archive)+len(live))
	}

	// State: Spark's holds exactly the keys whose window end is after the
	// last batch's watermark, archive keys included although the archive
	// is gone; the stored version leaves out those the next watermark (the
	// last commit's) closes, and counts them in numRowsTotal.
	wm, err := time.Parse(time.RFC3339Nano, last.EventTime["watermark"])
	if err != nil {
		t.Fatal(err)
	}
	cd := checkpoint.Dir{FS: vfs.Default, Path: ckpt}
	commits, err := cd.ListCommits()
	if err != nil {
		t.Fatal(err)
	}
	ce, err := cd.ReadCommit(commits[len(commits)-1])
	if err != nil {
		t.Fatal(err)
	}
	nextWmUs := ce.NextBatchWatermarkMs * 1000
	var wantState []string
	var sparkRows int64
	for k := range want {
		var s, e int64
		var rest string
		if _, err := fmt.Sscanf(strings.ReplaceAll(k, "|", " "), "%d %d %s", &s, &e, &rest); err != nil {
			t.Fatal(err)
		}
		if e > wm.UnixMicro() {
			sparkRows++
		}
		if e > nextWmUs {
			wantState = append(wantState, k)
		}
	}
	var gotState []string
	archiveKeys := 0
	_, err = state.ReadAll(context.Background(), vfs.Default, filepath.Join(ckpt, "state", "0"), -1, func(_ int, key, _ []any) error {
		gotState = append(gotState, fmt.Sprintf("%d|%d|%s|%s", key[1], key[0], key[2], key[3]))
		if key[2] == "s3_backfill" {
			archiveKeys++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(gotState)
	sort.Strings(wantState)
	if fmt.Sprint(gotState) != fmt.Sprint(wantState) {
		t.Fatalf("state at watermark %s:\n%v\nwant\n%v", wm, gotState, wantState)
	}
	if archiveKeys == 0 {
		t.Fatal("no archive keys left in state: the scenario does not test retention")
	}
	op := last.StateOperators[0]
	if op.OperatorName != OperatorName || op.NumRowsTotal != sparkRows ||
		op.CustomMetrics[MetricClosedUnstored] != sparkRows-int64(len(wantState)) {
		t.Fatalf("last progress state operator %+v, want %d rows, %d of them stored", op, sparkRows, len(wantState))
	}
	if sparkRows == int64(len(wantState)) {
		t.Fatal("the last batch closed nothing at commit: the scenario does not test it")
	}
}

// refWatermark is the engine watermark matching refSpec.
func refWatermark() *engine.Watermark {
	col, delay, _ := refSpec().Watermark()
	return &engine.Watermark{Column: col, Delay: delay}
}
