package agg

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/stream"
)

// TestMergeReadsOnlyStoredWindows: the merge reads state only for keys of
// windows within the range state holds (noneBelowUs, noneAboveUs): a
// window newer than every stored one (a backfill's) costs no read, one
// that state may hold does, and after a restart of a non-empty state, when
// the range is not known, every key is read. The values stay Spark's (count 2 for the key
// merged with its stored value).
func TestMergeReadsOnlyStoredWindows(t *testing.T) {
	spec := Spec{Window: &Window{Column: ethblock.ColBlockTS, Size: 10 * time.Minute},
		GroupBy: []string{ethblock.ColMiner}, Aggregates: []Aggregate{{Kind: Count, As: "count"}},
		HasWatermark: true, WatermarkDelay: time.Hour, Mode: Update, ColumnTypes: testColumnTypes}
	h := newHarness(t, spec, vfs.NewMem(), 4)
	min := func(m int64) int64 { return m * int64(time.Minute/time.Microsecond) }
	batches := []struct {
		rows    []testRow
		restart bool
		reads   int64
		out     string
	}{
		// An empty store: nothing to read.
		{rows: []testRow{{source: "s", miner: "0xaa", ts: min(1)}, {source: "s", miner: "0xbb", ts: min(12)}}, reads: 0,
			out: "[00:00 0xaa 1][00:10 0xbb 1]"},
		// [00:10) is stored (0xbb read and found; 0xcc read, missing),
		// [00:20) is newer than any stored window.
		{rows: []testRow{{source: "s", miner: "0xbb", ts: min(13)}, {source: "s", miner: "0xcc", ts: min(14)},
			{source: "s", miner: "0xaa", ts: min(25)}}, reads: 2,
			out: "[00:10 0xbb 2][00:10 0xcc 1][00:20 0xaa 1]"},
		// After a restart the range is unknown: every key is read.
		{rows: []testRow{{source: "s", miner: "0xaa", ts: min(26)}, {source: "s", miner: "0xdd", ts: min(41)}},
			restart: true, reads: 2, out: "[00:20 0xaa 2][00:40 0xdd 1]"},
		// Still unknown: only Open learns it, of an empty store.
		{rows: []testRow{{source: "s", miner: "0xdd", ts: min(42)}, {source: "s", miner: "0xee", ts: min(55)}}, reads: 2,
			out: "[00:40 0xdd 2][00:50 0xee 1]"},
	}
	for id, b := range batches {
		if b.restart {
			h.restart(false)
		}
		chunks := [][]testRow{b.rows}
		h.process(int64(id), chunks)
		out, _ := h.finishCommit(int64(id), chunks)
		if got := renderMinerCounts(t, h.op.p, out); got != b.out {
			t.Errorf("batch %d: output %s, want %s", id, got, b.out)
		}
		if h.op.stateReads != b.reads {
			t.Errorf("batch %d: %d state reads, want %d", id, h.op.stateReads, b.reads)
		}
	}
}

// renderMinerCounts renders an output of (window, miner, count) as
// "[HH:MM miner count]" per row.
func renderMinerCounts(t *testing.T, p *plan, b *stream.Batch) string {
	t.Helper()
	var s string
	for i, r := range decodeOutput(t, p, b) {
		s += "[" + time.UnixMicro(b.Columns[0].Int64s[i]).UTC().Format("15:04") + " " + b.Columns[2].Strings[i] + " " + r.vals[0] + "]"
	}
	return s
}
