package flow_test

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/sink/console"
	"github.com/ethstream/ethstream/state"
)

// TestOfflineRepartitionOfChainedOperators: `checkpoint repartition`'s
// procedure (engine.RepartitionOffline with state.Recorded: no query
// definition) on the checkpoint of two chained aggregations moves both
// operators' state in one control batch, every row kept (each operator's
// state dump before = after, partition aside); the query then resumes on
// it and ends with the state a run repartitioned online ends with.
func TestOfflineRepartitionOfChainedOperators(t *testing.T) {
	ctx := context.Background()
	trades := func(feed *Feed, second bool) {
		if !second {
			feed.Publish(Trade{at("12:01"), "ETH-USD", 10}, Trade{at("12:03"), "ETH-USD", 20}, Trade{at("12:07"), "ETH-USD", 5},
				Trade{at("12:58"), "ETH-USD", 1}, Trade{at("12:30"), "BTC-USD", 100}, Trade{at("12:44"), "SOL-USD", 3})
			return
		}
		feed.Publish(Trade{at("13:02"), "ETH-USD", 7}, Trade{at("14:05"), "ETH-USD", 2})
	}
	run := func(dir string, feed *Feed, partitions string) engine.Options {
		t.Helper()
		opts := engine.Options{CheckpointDir: filepath.Join(dir, "checkpoint"), LocalDir: filepath.Join(dir, "local")}
		if _, err := hourlyOverFiveMinutes(feed, &console.Sink{W: io.Discard}, partitions).Run(ctx, opts); err != nil {
			t.Fatal(err)
		}
		return opts
	}
	dump := func(ckpt string, op int) []string {
		t.Helper()
		var b bytes.Buffer
		if _, err := state.Dump(ctx, state.DumpOptions{FS: vfs.Default, Checkpoint: ckpt, Operator: op, Batch: -1}, &b); err != nil {
			t.Fatal(err)
		}
		var rows []string
		for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n")[1:] {
			rows = append(rows, line[:strings.LastIndexByte(line, ',')]) // partition is the last column
		}
		slices.Sort(rows)
		return rows
	}

	online, offline := t.TempDir(), t.TempDir()
	feedOn, feedOff := &Feed{}, &Feed{}
	trades(feedOn, false)
	trades(feedOff, false)
	run(online, feedOn, "2")
	opts := run(offline, feedOff, "2")
	before := [2][]string{dump(opts.CheckpointDir, 0), dump(opts.CheckpointDir, 1)}
	if len(before[0]) == 0 || len(before[1]) == 0 {
		t.Fatalf("operator state %q: both operators must hold rows for the test to mean anything", before)
	}
	res, err := engine.RepartitionOffline(ctx, opts, state.Recorded{}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if n := int64(len(before[0]) + len(before[1])); res.Operators != 2 || res.Stats.KeysBefore != n || res.Stats.KeysAfter != n {
		t.Fatalf("repartition: %+v, want 2 operators and %d keys", res, n)
	}
	for op := range 2 {
		if after := dump(opts.CheckpointDir, op); !slices.Equal(after, before[op]) {
			t.Fatalf("operator %d: state %q after, %q before", op, after, before[op])
		}
	}

	trades(feedOn, true)
	trades(feedOff, true)
	run(online, feedOn, "3")
	run(offline, feedOff, "3")
	for op := range 2 {
		on, off := dump(filepath.Join(online, "checkpoint"), op), dump(opts.CheckpointDir, op)
		if !slices.Equal(on, off) {
			t.Fatalf("operator %d: state %q after the offline repartition, %q after the online one", op, off, on)
		}
	}
}
