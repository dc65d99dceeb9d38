package session

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// The zero-delay scenario: sessions of gap 10 minutes by k counted in
// complete mode, withWatermark(ts, "0 seconds"), the engine's watermark
// the max event time seen. fixtures/zero_delay_main holds the state after
// batches 0 and 1 as main's build (daeb9a8, which read a delay of 0 as no
// watermark) wrote it, and the output of batch 2 it then gave
// (expected.txt); agg/fixtures/zero_delay_main/wm0gen.go.txt generated
// both.
//
//	batch 0: 00:00 00:40     watermark 0, next 00:40
//	batch 1: 00:50           late 0, watermark 00:40, next 00:50
//	batch 2: 00:05           late 00:40, watermark 00:50
//
// Spark drops 00:05 in batch 2: its session [00:05, 00:15) ends at or
// before the previous batch's watermark.
var zeroDelay = streamtest.ZeroDelay{Batches: [][]int64{{zdAt(0), zdAt(40)}, {zdAt(50)}, {zdAt(5)}}}

var zdAt = streamtest.ZeroDelayAt

func zeroDelaySpec() Spec {
	return Spec{Column: "ts", Gap: 10 * time.Minute, GroupBy: []string{"k"}, Aggregates: []agg.Aggregate{{Kind: agg.Count, As: "count"}},
		Mode: agg.Complete, HasWatermark: true, ColumnTypes: map[string]stream.Type{"ts": stream.Timestamp, "k": stream.String}}
}

// zdRun plays the engine over zeroDelay from batch `from` on, the operator
// reopened at the version before each; it returns each batch's rendered
// output and dropped-row count.
func zdRun(t *testing.T, stateDir string, from int) (outs []string, dropped []int64) {
	t.Helper()
	ctx := context.Background()
	zeroDelay.Play(from, func(id int, ts []int64, lateMs, wmMs, _ int64) {
		o, err := New(zeroDelaySpec())
		if err != nil {
			t.Fatal(err)
		}
		env := stream.OperatorEnv{StateDir: stateDir, FS: vfs.Default, LocalDir: t.TempDir(), Partitions: 2, Version: int64(id - 1),
			Logger: slog.New(slog.DiscardHandler)}
		if err := o.Open(ctx, env); err != nil {
			t.Fatal(err)
		}
		if err := o.Process(ctx, int64(id), lateMs, streamtest.KeyedRows(ts, "a")); err != nil {
			t.Fatal(err)
		}
		b, p, err := o.Finish(ctx, int64(id), wmMs)
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Commit(ctx, int64(id)); err != nil {
			t.Fatal(err)
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
		outs, dropped = append(outs, streamtest.RowsText(b)), append(dropped, p.NumRowsDroppedByWatermark)
	})
	return outs, dropped
}

// TestZeroDelayWatermark: a delay of 0 is a watermark (Spark's
// withWatermark(col, "0 seconds")): batch 2 drops the row whose session
// ends at or before batch 1's watermark. Main read the delay as no
// watermark and merged it.
func TestZeroDelayWatermark(t *testing.T) {
	outs, dropped := zdRun(t, filepath.Join(t.TempDir(), "state"), 0)
	want := fmt.Sprintf("session_window_start=%d session_window_end=%d k=a count=1\nsession_window_start=%d session_window_end=%d k=a count=2\n",
		zdAt(0), zdAt(10), zdAt(40), zdAt(60))
	if outs[2] != want || dropped[2] != 1 {
		t.Fatalf("batch 2: output\n%s%d dropped, want\n%s1 dropped", outs[2], dropped[2], want)
	}
}

// TestZeroDelayMainCheckpoint: a checkpoint whose state main's build wrote
// with a delay of 0 resumes exactly as main resumed it, and the version
// this build writes keeps that reading (legacyZeroDelay).
func TestZeroDelayMainCheckpoint(t *testing.T) {
	dir, want := streamtest.ZeroDelayMain(t, "fixtures/zero_delay_main")
	outs, dropped := zdRun(t, dir, 2)
	if got := streamtest.ZeroDelayOutput(2, zdAt(40)/1000, zdAt(50)/1000, outs[0], dropped[0]); got != want {
		t.Fatalf("batch 2 over main's checkpoint:\n%s\nmain gave\n%s", got, want)
	}
	r, ok, err := state.ReadRecord(vfs.Default, dir, 2)
	if err != nil || !ok {
		t.Fatalf("read version 2's record: %v %v", ok, err)
	}
	if rec, err := decodeOpRecord(r.Operator, r.Path); err != nil || !rec.LegacyZeroDelay {
		t.Fatalf("version 2's record %s (%v): want legacyZeroDelay", r.Operator, err)
	}
}
