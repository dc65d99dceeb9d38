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

// A feed that re-sends its quotes, deduplicated before the join (Spark's
// quotes.dropDuplicates("pair", "at").join(trades, ...)): the
// retransmitted ETH quote joins its trade once. The deduplication is
// operator 1, below the join (operator 0), with its own state.
func ExampleSide_DropDuplicates() {
	dir, _ := os.MkdirTemp("", "flow-join-side-example")
	defer os.RemoveAll(dir)
	quotes, trades := &Feed{}, &Feed{}
	quotes.Publish(Trade{at("12:00"), "ETH-USD", 3100}, Trade{at("12:00"), "ETH-USD", 3100})
	trades.Publish(Trade{at("12:01"), "ETH-USD", 3101})
	_, err := flow.New("quotes_to_trades").
		Join(
			flow.From("q").Read("quotes", quotes).WithWatermark("at", 5*time.Minute).DropDuplicates("pair", "at"),
			flow.From("t").Read("trades", trades).WithWatermark("at", 5*time.Minute),
			flow.JoinOn{Type: join.Inner, LeftKeys: []string{"pair"}, RightKeys: []string{"pair"},
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
	// Output:
	// -------------------------------------------
	// Batch: 0
	// -------------------------------------------
	// +-------------------+-------+-------+-------+
	// |               q_at| q_pair|q_price|t_price|
	// +-------------------+-------+-------+-------+
	// |2024-03-01 12:00:00|ETH-USD|   3100|   3101|
	// +-------------------+-------+-------+-------+
}
