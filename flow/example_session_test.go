package flow_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/flow"
	"github.com/ethstream/ethstream/sink/console"
)

// Session windows: each pair's bursts of trades at most 5 minutes apart,
// emitted once the watermark passes a burst's end (append mode). The
// second run's 12:08 trade arrives late, between two bursts of ETH-USD
// still open, and bridges them into one session; the 12:40 trade moves the
// watermark past it. Each run ends with a no-data batch, the watermark
// having moved (batches 1 and 3): the second emits the sessions.
func ExampleQuery_AggregateSessions() {
	dir, _ := os.MkdirTemp("", "flow-sessions")
	defer os.RemoveAll(dir)
	feed := &Feed{}
	feed.Publish(Trade{at("12:01"), "ETH-USD", 3100}, Trade{at("12:04"), "ETH-USD", 3110}, Trade{at("12:02"), "BTC-USD", 61000},
		Trade{at("12:13"), "ETH-USD", 3120})
	run := func() {
		_, err := flow.New("trade_bursts").
			Read("feed", feed).
			WithWatermark("at", 10*time.Minute).
			AggregateSessions(flow.SessionAggregation{
				Column:     "at",
				Gap:        5 * time.Minute,
				GroupBy:    []string{"pair"},
				Aggregates: []agg.Aggregate{{Kind: agg.Count, As: "trades"}, {Kind: agg.Max, Column: "price", As: "high"}},
				Mode:       agg.Append,
			}).
			WriteTo(&console.Sink{W: os.Stdout, Sorted: true, SkipEmpty: true}).
			Trigger(engine.Trigger{Kind: engine.AvailableNow}).
			Conf("spark.sql.shuffle.partitions", "2").
			Conf("spark.sql.streaming.queryEvolution.enableSourceEvolution", "true").
			Run(context.Background(), engine.Options{CheckpointDir: filepath.Join(dir, "checkpoint"), LocalDir: filepath.Join(dir, "local")})
		if err != nil {
			fmt.Println(err)
		}
	}
	run()
	feed.Publish(Trade{at("12:08"), "ETH-USD", 3090}, Trade{at("12:40"), "BTC-USD", 60000})
	run()
	// Output:
	// -------------------------------------------
	// Batch: 3
	// -------------------------------------------
	// +--------------------+-------------------+-------+------+-----+
	// |session_window_start| session_window_end|   pair|trades| high|
	// +--------------------+-------------------+-------+------+-----+
	// | 2024-03-01 12:01:00|2024-03-01 12:18:00|ETH-USD|     4| 3120|
	// | 2024-03-01 12:02:00|2024-03-01 12:07:00|BTC-USD|     1|61000|
	// +--------------------+-------------------+-------+------+-----+
}
