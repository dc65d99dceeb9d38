package streamtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/stream"
)

// ZeroDelay is the zero-delay watermark scenario agg's and session's tests
// play: withWatermark(ts, "0 seconds") over batches of event times, the
// engine's watermark the max event time seen, over a fixture of the state
// main's build (daeb9a8, which read a delay of 0 as no watermark) wrote
// (agg/fixtures/zero_delay_main/wm0gen.go.txt generated both fixtures).
type ZeroDelay struct {
	// Batches are each batch's event times (µs), ZeroDelayAt's.
	Batches [][]int64
}

// ZeroDelayAt is 2026-11-01 00:00 UTC plus m minutes, in µs.
func ZeroDelayAt(m int) int64 {
	return time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(m) * time.Minute).UnixMicro()
}

// Play calls batch for each batch from `from` on with its id, its event
// times, the watermark its late rows are dropped by (the previous batch's,
// ms), its own watermark and the next batch's, as the engine computes them.
func (z ZeroDelay) Play(from int, batch func(id int, ts []int64, lateMs, wmMs, nextMs int64)) {
	var prevWm, wm, maxEv int64
	for id, ts := range z.Batches {
		for _, x := range ts {
			maxEv = max(maxEv, x)
		}
		next := max(wm, maxEv/1000)
		if id >= from {
			batch(id, ts, prevWm, wm, next)
		}
		prevWm, wm = wm, next
	}
}

// KeyedRows is a batch of rows (ts TIMESTAMP, k STRING) at ts, all of key k.
func KeyedRows(ts []int64, k string) *stream.Batch {
	b := &stream.Batch{Len: len(ts), Columns: []stream.Column{
		{Name: "ts", Type: stream.Timestamp, Int64s: ts},
		{Name: "k", Type: stream.String, Strings: make([]string, len(ts))},
	}}
	for i := range ts {
		b.Columns[1].Strings[i] = k
	}
	return b
}

// RowsText renders an output batch as wm0gen.go.txt does: a line a row of
// "name=value" in column order (Value: a timestamp as its µs), each line
// ending in a newline.
func RowsText(b *stream.Batch) string {
	var lines []string
	for i := 0; i < b.Len; i++ {
		f := make([]string, len(b.Columns))
		for c := range b.Columns {
			f[c] = b.Columns[c].Name + "=" + Value(&b.Columns[c], i)
		}
		lines = append(lines, strings.Join(f, " "))
	}
	return strings.Join(lines, "\n") + "\n"
}

// ZeroDelayMain copies the state of main's fixture dir (dir/state) into a
// temp directory and returns it with the output main's build gave for the
// batch after it (dir/expected.txt).
func ZeroDelayMain(t testing.TB, dir string) (stateDir, expected string) {
	t.Helper()
	stateDir = filepath.Join(t.TempDir(), "state")
	if err := os.CopyFS(stateDir, os.DirFS(filepath.Join(dir, "state"))); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(dir, "expected.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return stateDir, string(want)
}

// ZeroDelayOutput is a batch's output as expected.txt records it: its
// watermarks, its rows (RowsText) and its count of rows dropped as late.
func ZeroDelayOutput(id int, lateMs, wmMs int64, rows string, dropped int64) string {
	return fmt.Sprintf("# batch %d: late watermark %d ms, watermark %d ms\n%snumRowsDroppedByWatermark=%d\n", id, lateMs, wmMs, rows, dropped)
}
