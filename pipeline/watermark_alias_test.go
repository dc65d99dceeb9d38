package pipeline

import (
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/stream"
)

// TestWatermarkFollowsAlias: Spark's EventTimeWatermark metadata follows
// an alias (block_ts AS ts), so a window over the renamed column keeps the
// watermark: append mode emits each hour once the watermark passes it,
// and a late row is dropped, as over block_ts itself.
func TestWatermarkFollowsAlias(t *testing.T) {
	src := &listSource{chunks: []*stream.Batch{
		blockBatch([]blk{{1, at("00:10"), "a"}, {2, at("00:50"), "b"}, {3, at("01:20"), "a"}}),
		blockBatch([]blk{{4, at("02:30"), "a"}}),
		// Block 5 is late: batch 2 drops input by batch 1's watermark, 01:10
		// (Spark 3.4+'s eventTimeWatermarkForLateEvents).
		blockBatch([]blk{{5, at("00:20"), "c"}, {6, at("05:00"), "a"}}),
	}}
	srcs := map[string]*listSource{"s": src}
	for _, q := range []string{
		"SELECT window, count(*) AS n FROM (SELECT block_ts AS ts, miner FROM blocks) GROUP BY window(ts, '1 hour')",
		"SELECT window, count(*) AS n FROM (SELECT t2 AS ts FROM (SELECT block_ts AS t2, miner FROM blocks)) GROUP BY window(ts, '1 hour')",
		"SELECT window, count(*) AS n FROM blocks GROUP BY window(block_ts, '1 hour')",
	} {
		sink, _, err := runSQL(t, vfs.NewMem(), q, "block_ts, 10 minutes", "append", srcs, "s")
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var got []string
		for _, b := range sink.batches {
			got = append(got, b...)
		}
		want := []string{"window_start=00:00 window_end=01:00 n=2", "window_start=01:00 window_end=02:00 n=1", "window_start=02:00 window_end=03:00 n=1"}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", q, strings.Join(got, "; "), strings.Join(want, "; "))
		}
	}
	// A computed column is a new column without the watermark (Spark's
	// metadata does not follow an expression).
	q := "SELECT window, count(*) AS n FROM (SELECT block_ts + INTERVAL 1 HOUR AS ts FROM blocks) GROUP BY window(ts, '1 hour')"
	if _, _, err := runSQL(t, vfs.NewMem(), q, "block_ts, 10 minutes", "append", srcs, "s"); err == nil {
		t.Errorf("%s: a window over a computed time accepted the watermark of block_ts", q)
	}
}
