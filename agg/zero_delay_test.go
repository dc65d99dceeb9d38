package agg

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// The zero-delay scenario: a 10-minute tumbling count by k in update mode,
// withWatermark(ts, "0 seconds"), the engine's watermark the max event time
// seen. fixtures/zero_delay_main holds the state after batches 0 and 1
// as main's build (daeb9a8, which read a delay of 0 as no watermark) wrote
// it, and the output of batch 2 it then gave (expected.txt); the generator
// is wm0gen.go.txt (fixtures/README.md says how to run it).
//
//	batch 0: 00:05 00:35              watermark 0, next 00:35
//	batch 1: 00:41 00:50              late 0, watermark 00:35, next 00:50
//	batch 2: 00:07 00:44              late 00:35, watermark 00:50
//
// Spark drops 00:07 in batch 2 (its window [00:00, 00:10) ended at or
// before the previous batch's watermark) and merges 00:44 into [00:40,
// 00:50), which batch 2's watermark then evicts.
var zeroDelay = streamtest.ZeroDelay{Batches: [][]int64{{zdAt(5), zdAt(35)}, {zdAt(41), zdAt(50)}, {zdAt(7), zdAt(44)}}}

var zdAt = streamtest.ZeroDelayAt

func zeroDelaySpec() Spec {
	return Spec{Window: &Window{Column: "ts", Size: 10 * time.Minute}, GroupBy: []string{"k"},
		Aggregates: []Aggregate{{Kind: Count, As: "count"}}, Mode: Update, HasWatermark: true,
		ColumnTypes: map[string]stream.Type{"ts": stream.Timestamp, "k": stream.String}}
}

// zdRun plays the engine over zeroDelay from batch `from` on, the operator
// opened at version from-1 of stateDir and reopened before each batch; it
// returns each batch's rendered output and dropped-row count.
func zdRun(t *testing.T, spec Spec, stateDir string, from int) (outs []string, dropped []int64, last *Operator) {
	t.Helper()
	ctx := context.Background()
	open := func(version int64) *Operator {
		o, err := New(spec)
		if err != nil {
			t.Fatal(err)
		}
		env := stream.OperatorEnv{StateDir: stateDir, FS: vfs.Default, LocalDir: t.TempDir(), Partitions: 2, Version: version,
			Logger: slog.New(slog.DiscardHandler)}
		if err := o.Open(ctx, env); err != nil {
			t.Fatal(err)
		}
		return o
	}
	o := open(int64(from - 1))
	defer func() { o.Close() }()
	zeroDelay.Play(from, func(id int, ts []int64, lateMs, wmMs, nextMs int64) {
		if id > from {
			// A restart before each batch: the rule the checkpoint
			// reads a delay of 0 by is in its state.
			if err := o.Close(); err != nil {
				t.Fatal(err)
			}
			o = open(int64(id - 1))
		}
		if err := o.Process(ctx, int64(id), lateMs, streamtest.KeyedRows(ts, "0xaa")); err != nil {
			t.Fatal(err)
		}
		o.NextWatermark(int64(id), nextMs)
		b, p, err := o.Finish(ctx, int64(id), wmMs)
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Commit(ctx, int64(id)); err != nil {
			t.Fatal(err)
		}
		outs, dropped = append(outs, streamtest.RowsText(b)), append(dropped, p.NumRowsDroppedByWatermark)
	})
	return outs, dropped, o
}

// TestZeroDelayWatermark: a delay of 0 is a watermark (Spark's
// withWatermark(col, "0 seconds")): batch 2 drops the row whose window
// ended at or before batch 1's watermark and evicts the window its own
// watermark closes. Main read the delay as no watermark and kept both.
func TestZeroDelayWatermark(t *testing.T) {
	outs, dropped, _ := zdRun(t, zeroDelaySpec(), filepath.Join(t.TempDir(), "state"), 0)
	want := fmt.Sprintf("window_start=%d window_end=%d k=0xaa count=2\n", zdAt(40), zdAt(50))
	if outs[2] != want || dropped[2] != 1 {
		t.Fatalf("batch 2: output\n%s%d dropped, want\n%s1 dropped", outs[2], dropped[2], want)
	}
}

// TestZeroDelayMainCheckpoint: a checkpoint whose state main's build wrote
// with a delay of 0 (no watermark then) resumes exactly as main resumed
// it: batch 2's output is main's, and the versions this build writes keep
// that reading (legacyZeroDelay), so the batch after another restart
// still merges a row of a window the watermark would have closed.
func TestZeroDelayMainCheckpoint(t *testing.T) {
	dir, want := streamtest.ZeroDelayMain(t, "fixtures/zero_delay_main")
	outs, dropped, o := zdRun(t, zeroDelaySpec(), dir, 2)
	if got := streamtest.ZeroDelayOutput(2, zdAt(35)/1000, zdAt(50)/1000, outs[0], dropped[0]); got != want {
		t.Fatalf("batch 2 over main's checkpoint:\n%s\nmain gave\n%s", got, want)
	}
	r, ok, err := state.ReadRecord(vfs.Default, dir, 2)
	if err != nil || !ok {
		t.Fatalf("read version 2's record: %v %v", ok, err)
	}
	if rec, err := decodeOpRecord(r.Operator, r.Path); err != nil || !rec.LegacyZeroDelay || rec.Format != opRecordFormatZero {
		t.Fatalf("version 2's record %s (%v): want format %d with legacyZeroDelay", r.Operator, err, opRecordFormatZero)
	}
	// Batch 3 after a restart: a row of [00:00, 00:10) still merges.
	ctx := context.Background()
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	o2, err := New(zeroDelaySpec())
	if err != nil {
		t.Fatal(err)
	}
	defer o2.Close()
	if err := o2.Open(ctx, stream.OperatorEnv{StateDir: dir, FS: vfs.Default, LocalDir: t.TempDir(), Partitions: 2, Version: 2,
		Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	if err := o2.Process(ctx, 3, zdAt(50)/1000, streamtest.KeyedRows([]int64{zdAt(1)}, "0xaa")); err != nil {
		t.Fatal(err)
	}
	b, _, err := o2.Finish(ctx, 3, zdAt(50)/1000)
	if err != nil {
		t.Fatal(err)
	}
	if w := fmt.Sprintf("window_start=%d window_end=%d k=0xaa count=3\n", zdAt(0), zdAt(10)); streamtest.RowsText(b) != w {
		t.Fatalf("batch 3 after a restart: %s, want %s", streamtest.RowsText(b), w)
	}
	// The state files main wrote are read, never rewritten.
	for _, n := range []string{"00000000000000000000.0.delta", "00000000000000000001.0.meta"} {
		a, _ := os.ReadFile(filepath.Join("fixtures/zero_delay_main/state", n))
		b, _ := os.ReadFile(filepath.Join(dir, n))
		if string(a) != string(b) {
			t.Fatalf("%s changed", n)
		}
	}
}
