package session

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/agg"
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
var zeroDelayBatches = [][]int64{{zdAt(0), zdAt(40)}, {zdAt(50)}, {zdAt(5)}}

func zdAt(m int) int64 {
	return time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(m) * time.Minute).UnixMicro()
}

func zeroDelaySpec() Spec {
	return Spec{Column: "ts", Gap: 10 * time.Minute, GroupBy: []string{"k"}, Aggregates: []agg.Aggregate{{Kind: agg.Count, As: "count"}},
		Mode: agg.Complete, HasWatermark: true, ColumnTypes: map[string]stream.Type{"ts": stream.Timestamp, "k": stream.String}}
}

func zdRows(ts []int64) *stream.Batch {
	b := &stream.Batch{Len: len(ts), Columns: []stream.Column{
		{Name: "ts", Type: stream.Timestamp, Int64s: ts},
		{Name: "k", Type: stream.String, Strings: make([]string, len(ts))},
	}}
	for i := range ts {
		b.Columns[1].Strings[i] = "a"
	}
	return b
}

// zdRender renders the output as the generator does (its columns are
// timestamps, a string and a count).
func zdRender(b *stream.Batch) string {
	var lines []string
	for i := 0; i < b.Len; i++ {
		var f []string
		for _, c := range b.Columns {
			var v string
			if c.Type == stream.String {
				v = c.Strings[i]
			} else {
				v = fmt.Sprint(c.Int64s[i])
			}
			f = append(f, c.Name+"="+v)
		}
		lines = append(lines, strings.Join(f, " "))
	}
	return strings.Join(lines, "\n") + "\n"
}

// zdRun plays the engine over zeroDelayBatches from batch `from` on, the
// operator reopened at the version before each; it returns each batch's
// rendered output and dropped-row count.
func zdRun(t *testing.T, stateDir string, from int) (outs []string, dropped []int64) {
	t.Helper()
	ctx := context.Background()
	var prevWm, wm, maxEv int64
	for id, ts := range zeroDelayBatches {
		for _, x := range ts {
			maxEv = max(maxEv, x)
		}
		next := max(wm, maxEv/1000)
		if id >= from {
			o, err := New(zeroDelaySpec())
			if err != nil {
				t.Fatal(err)
			}
			env := stream.OperatorEnv{StateDir: stateDir, FS: vfs.Default, LocalDir: t.TempDir(), Partitions: 2, Version: int64(id - 1),
				Logger: slog.New(slog.DiscardHandler)}
			if err := o.Open(ctx, env); err != nil {
				t.Fatal(err)
			}
			if err := o.Process(ctx, int64(id), prevWm, zdRows(ts)); err != nil {
				t.Fatal(err)
			}
			b, p, err := o.Finish(ctx, int64(id), wm)
			if err != nil {
				t.Fatal(err)
			}
			if err := o.Commit(ctx, int64(id)); err != nil {
				t.Fatal(err)
			}
			if err := o.Close(); err != nil {
				t.Fatal(err)
			}
			outs, dropped = append(outs, zdRender(b)), append(dropped, p.NumRowsDroppedByWatermark)
		}
		prevWm, wm = wm, next
	}
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
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.CopyFS(dir, os.DirFS("fixtures/zero_delay_main/state")); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("fixtures/zero_delay_main/expected.txt")
	if err != nil {
		t.Fatal(err)
	}
	outs, dropped := zdRun(t, dir, 2)
	got := fmt.Sprintf("# batch 2: late watermark %d ms, watermark %d ms\n%snumRowsDroppedByWatermark=%d\n",
		zdAt(40)/1000, zdAt(50)/1000, outs[0], dropped[0])
	if got != string(want) {
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
