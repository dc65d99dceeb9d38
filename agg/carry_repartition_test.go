package agg

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/state"
)

// TestCarryAcrossRepartition: the carry of the last batch before a
// repartition (the windows its version closed at commit) is still merged
// by the batch after it, online (a restart with another
// spark.sql.streaming.stateStore.partitions: the REPARTITION control
// batch) and offline (engine.RepartitionOffline, what `checkpoint
// repartition` runs, with no query definition), inline and in a file:
// the answer equals the run without a repartition and Spark's
// (closedAtCommitRun's scenario through the engine, one process start a
// batch: 200 partitions, then 8).
func TestCarryAcrossRepartition(t *testing.T) {
	for _, inline := range []bool{true, false} {
		for _, how := range []string{"none", "online", "offline"} {
			t.Run(fmt.Sprintf("inline=%v/%s", inline, how), func(t *testing.T) {
				if !inline {
					defer setCarryInlineMax(0)()
				}
				got := carryRepartitionRun(t, how, inline)
				// Spark: batch 1 merges 00:07 into [00:00, 00:10) (count 2),
				// batch 2 merges 00:33 into [00:30, 00:40) (count 2).
				want := "[00:00 0xaa 2][00:30 0xaa 2][00:50 0xaa 1]"
				if got != want {
					t.Fatalf("table %s, want %s", got, want)
				}
			})
		}
	}
}

// carryRepartitionRun runs closedAtCommitRun's three batches through
// engine.Run, one data batch per start, repartitioning the state from 200
// to 8 partitions after the first as how says ("none", "online",
// "offline"), and returns the sink's table.
func carryRepartitionRun(t *testing.T, how string, inline bool) string {
	t.Helper()
	ctx := context.Background()
	spec := Spec{Window: &Window{Column: ethblock.ColBlockTS, Size: 10 * time.Minute},
		GroupBy: []string{ethblock.ColMiner}, Aggregates: []Aggregate{{Kind: Count, As: "count"}},
		Mode: Update, WatermarkDelay: 10 * time.Minute, ColumnTypes: testColumnTypes}
	dir := t.TempDir()
	opts := engine.Options{CheckpointDir: filepath.Join(dir, "ckpt"), LocalDir: filepath.Join(dir, "local")}
	stateDir := filepath.Join(opts.CheckpointDir, "state", "0")
	sink := streamtest.NewSink()
	src := streamtest.NewSource("s")
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	at := func(m int) testRow {
		return testRow{miner: "0xaa", ts: t0.Add(time.Duration(m) * time.Minute).UnixMicro()}
	}
	run := func(partitions int) {
		t.Helper()
		op, err := New(spec)
		if err != nil {
			t.Fatal(err)
		}
		col, delay, _ := spec.Watermark()
		_, err = engine.Run(ctx, engine.Query{
			Sources:        []engine.NamedSource{{Name: "s", Source: src}},
			Columns:        spec.InputColumns(),
			Watermark:      &engine.Watermark{Column: col, Delay: delay},
			Operator:       op,
			Sink:           sink,
			Trigger:        engine.Trigger{Kind: engine.ProcessingTime},
			MaxDataBatches: 1,
			Conf: map[string]string{
				checkpoint.ConfSourceEvolution:   "true",
				checkpoint.ConfStatePartitions:   fmt.Sprint(partitions),
				checkpoint.ConfShufflePartitions: "4",
			},
		}, opts)
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	}
	// record is the operator record of state version v.
	record := func(v int64) opRecord {
		t.Helper()
		r, ok, err := state.ReadRecord(vfs.Default, stateDir, v)
		if err != nil || !ok {
			t.Fatalf("read the newest state version's record: %v %v", ok, err)
		}
		rec, err := decodeOpRecord(r.Operator, r.Path)
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	for i, rows := range [][]testRow{{at(5), at(35)}, {at(7), at(50)}, {at(33)}} {
		if err := src.Append(blockRows(rows)); err != nil {
			t.Fatal(err)
		}
		parts := 200
		if i > 0 && how != "none" {
			parts = 8
		}
		if i == 1 {
			before := record(0)
			if !before.hasCarry() || (before.CarryFile == "") != inline {
				t.Fatalf("version 0's record %+v: the scenario needs a carry (inline %v)", before, inline)
			}
			if how == "offline" {
				res, err := engine.RepartitionOffline(ctx, opts, state.Recorded{}, 8)
				if err != nil {
					t.Fatal(err)
				}
				if res.From != 200 || res.To != 8 {
					t.Fatalf("offline repartition %d -> %d, want 200 -> 8", res.From, res.To)
				}
			}
		}
		run(parts)
	}
	if how != "none" {
		cd := checkpoint.Dir{FS: vfs.Default, Path: opts.CheckpointDir}
		e, err := cd.ReadOffsets(1)
		if err != nil {
			t.Fatal(err)
		}
		if e.Metadata.ControlBatchInfo == nil {
			t.Fatalf("batch 1 is not the REPARTITION control batch: %+v", e.Metadata)
		}
	}
	tab := map[string]string{}
	for _, r := range sink.Table() {
		s, err := time.Parse(time.RFC3339Nano, r[ColWindowStart])
		if err != nil {
			t.Fatal(err)
		}
		k := s.UTC().Format("15:04") + " " + r[ethblock.ColMiner]
		tab[k] = r["count"]
	}
	out := ""
	for _, k := range slices.Sorted(maps.Keys(tab)) {
		out += "[" + k + " " + tab[k] + "]"
	}
	return out
}
