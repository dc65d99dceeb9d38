package flow_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/flow"
	"github.com/ethstream/ethstream/join"
	"github.com/ethstream/ethstream/sink/console"
)

// A stream-stream left outer join of two feeds: each quote is joined with
// the trades of its pair in the two minutes after it; a quote no trade
// followed appears with nulls once both watermarks passed it. The feeds
// have their own watermarks, combined by min (the default of
// spark.sql.streaming.multipleWatermarkPolicy).
func ExampleQuery_Join() {
	dir, _ := os.MkdirTemp("", "flow-join-example")
	defer os.RemoveAll(dir)
	quotes, trades := &Feed{}, &Feed{}
	quotes.Publish(Trade{at("12:00"), "ETH-USD", 3100}, Trade{at("12:01"), "BTC-USD", 61000})
	trades.Publish(Trade{at("12:01"), "ETH-USD", 3101})
	run := func() {
		_, err := flow.New("quotes_to_trades").
			Join(
				flow.From("q").Read("quotes", quotes).WithWatermark("at", 5*time.Minute),
				flow.From("t").Read("trades", trades).WithWatermark("at", 5*time.Minute),
				flow.JoinOn{Type: join.LeftOuter, LeftKeys: []string{"pair"}, RightKeys: []string{"pair"},
					// t.at BETWEEN q.at AND q.at + 2 minutes
					Range: []join.Bound{
						{LeftColumn: "at", Op: join.LE, RightColumn: "at"},
						{LeftColumn: "at", LeftOffset: 2 * time.Minute, Op: join.GE, RightColumn: "at"},
					}}).
			Select(flow.Col("q_at"), flow.Col("q_pair"), flow.Col("q_price"), flow.Col("t_price")).
			WriteTo(&console.Sink{W: os.Stdout, Sorted: true, SkipEmpty: true}).
			Trigger(engine.Trigger{Kind: engine.AvailableNow}).
			Conf("spark.sql.shuffle.partitions", "2").
			Conf("spark.sql.streaming.queryEvolution.enableSourceEvolution", "true").
			Run(context.Background(), engine.Options{CheckpointDir: filepath.Join(dir, "checkpoint"), LocalDir: filepath.Join(dir, "local")})
		if err != nil {
			fmt.Println(err)
		}
	}
	run() // batch 0, then a no-data batch 1: the watermark moved (Spark's rule for a join)
	// Both feeds move past 12:08: the BTC quote's two minutes are over.
	quotes.Publish(Trade{at("12:10"), "ETH-USD", 3150})
	trades.Publish(Trade{at("12:10"), "SOL-USD", 140})
	run()
	// Output:
	// -------------------------------------------
	// Batch: 0
	// -------------------------------------------
	// +-------------------+-------+-------+-------+
	// |               q_at| q_pair|q_price|t_price|
	// +-------------------+-------+-------+-------+
	// |2024-03-01 12:00:00|ETH-USD|   3100|   3101|
	// +-------------------+-------+-------+-------+
	// -------------------------------------------
	// Batch: 3
	// -------------------------------------------
	// +-------------------+-------+-------+-------+
	// |               q_at| q_pair|q_price|t_price|
	// +-------------------+-------+-------+-------+
	// |2024-03-01 12:01:00|BTC-USD|  61000|   NULL|
	// +-------------------+-------+-------+-------+
}
