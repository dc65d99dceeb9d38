package flow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/flow"
	"github.com/ethstream/ethstream/sink/console"
	"github.com/ethstream/ethstream/stream"
)

// hourlyOverFiveMinutes is a plan of two stateful operators: a 5-minute
// volume per pair (operator 1), then the hourly volume of those windows
// (operator 0: Spark numbers from the sink), each window once, in append
// mode, as Spark 3.4+ chains aggregations with window_time.
func hourlyOverFiveMinutes(feed *Feed, out *console.Sink, partitions string) *flow.Query {
	return flow.New("hourly_volume").
		Read("feed", feed).
		WithWatermark("at", time.Minute).
		Aggregate(flow.Aggregation{
			Window:     &agg.Window{Column: "at", Size: 5 * time.Minute},
			GroupBy:    []string{"pair"},
			Aggregates: []agg.Aggregate{{Kind: agg.Sum, Column: "price", As: "volume"}, {Kind: agg.Count, As: "trades"}},
			Mode:       agg.Append,
		}).
		Select(flow.WindowTime().As("at"), flow.Col("pair"), flow.Col("volume"), flow.Col("trades")).
		Aggregate(flow.Aggregation{
			Window:     &agg.Window{Column: "at", Size: time.Hour},
			GroupBy:    []string{"pair"},
			Aggregates: []agg.Aggregate{{Kind: agg.Sum, Column: "volume", As: "volume"}, {Kind: agg.Sum, Column: "trades", As: "trades"}, {Kind: agg.Count, As: "windows"}},
			Mode:       agg.Append,
		}).
		WriteTo(out).
		Trigger(engine.Trigger{Kind: engine.AvailableNow}).
		Conf("spark.sql.streaming.queryEvolution.enableSourceEvolution", "true").
		Conf("spark.sql.shuffle.partitions", "2").
		Conf("spark.sql.streaming.stateStore.partitions", partitions)
}

// Two chained aggregations with state, restart and repartition per
// operator: the first run leaves both operators' state in the checkpoint
// (state/0 and state/1); the second resumes it, repartitions both
// operators from 2 to 3 partitions in one control batch (batch 2, one
// stateOperators[] entry each), and emits each hour once the watermark
// passes it: the 5-minute windows reach the hourly operator only once the
// watermark closes them, in the same batch as the hour they complete.
func ExampleQuery_chained() {
	dir, _ := os.MkdirTemp("", "flow-chain")
	defer os.RemoveAll(dir)
	opts := engine.Options{CheckpointDir: filepath.Join(dir, "checkpoint"), LocalDir: filepath.Join(dir, "local"),
		Listeners: []engine.Listener{engine.ListenerFunc(printOperators)}}
	out := &console.Sink{W: os.Stdout, Sorted: true, SkipEmpty: true}
	feed := &Feed{}
	feed.Publish(Trade{at("12:01"), "ETH-USD", 10}, Trade{at("12:03"), "ETH-USD", 20}, Trade{at("12:07"), "ETH-USD", 5},
		Trade{at("12:58"), "ETH-USD", 1}, Trade{at("12:30"), "BTC-USD", 100})
	if _, err := hourlyOverFiveMinutes(feed, out, "2").Run(context.Background(), opts); err != nil {
		fmt.Println(err)
	}
	printState(opts.CheckpointDir)

	fmt.Println("restart with 3 state partitions")
	feed.Publish(Trade{at("13:02"), "ETH-USD", 7}, Trade{at("14:05"), "ETH-USD", 2})
	if _, err := hourlyOverFiveMinutes(feed, out, "3").Run(context.Background(), opts); err != nil {
		fmt.Println(err)
	}
	printState(opts.CheckpointDir)
	// Output:
	// batch 0 data: stateStoreSave total=0 updated=0 | stateStoreSave total=4 updated=4
	// batch 1 noData: stateStoreSave total=2 updated=2 | stateStoreSave total=1 updated=0
	// state/0: version 1, 2 partitions, 2 rows
	// state/1: version 1, 2 partitions, 1 rows
	// restart with 3 state partitions
	// batch 2 repartition: repartition total=2 | repartition total=1
	// batch 3 data: stateStoreSave total=2 updated=0 | stateStoreSave total=3 updated=2
	// -------------------------------------------
	// Batch: 4
	// -------------------------------------------
	// +-------------------+-------------------+-------+------+------+-------+
	// |       window_start|         window_end|   pair|volume|trades|windows|
	// +-------------------+-------------------+-------+------+------+-------+
	// |2024-03-01 12:00:00|2024-03-01 13:00:00|BTC-USD|   100|     1|      1|
	// |2024-03-01 12:00:00|2024-03-01 13:00:00|ETH-USD|    36|     4|      3|
	// |2024-03-01 13:00:00|2024-03-01 14:00:00|ETH-USD|     7|     1|      1|
	// +-------------------+-------------------+-------+------+------+-------+
	// batch 4 noData: stateStoreSave total=0 updated=2 | stateStoreSave total=1 updated=0
	// state/0: version 4, 3 partitions, 0 rows
	// state/1: version 4, 3 partitions, 1 rows
}

// printState shows each operator's newest state version, read from its
// own directory <checkpoint>/state/<operator id>: the version's partition
// count and rows (the .meta file's record, state/doc.go).
func printState(ckpt string) {
	for _, op := range []string{"0", "1"} {
		files, _ := os.ReadDir(filepath.Join(ckpt, "state", op))
		var meta struct{ Version, Partitions, Rows int64 }
		for _, f := range files {
			if strings.HasSuffix(f.Name(), ".meta") {
				data, _ := os.ReadFile(filepath.Join(ckpt, "state", op, f.Name()))
				_ = json.Unmarshal([]byte(strings.Split(string(data), "\n")[1]), &meta)
			}
		}
		fmt.Printf("state/%s: version %d, %d partitions, %d rows\n", op, meta.Version, meta.Partitions, meta.Rows)
	}
}

// printOperators prints each batch's stateOperators[], one entry per
// stateful operator in id order.
func printOperators(p *stream.Progress) {
	kind := "data"
	switch {
	case p.NumInputRows == 0 && len(p.StateOperators) > 0 && p.StateOperators[0].OperatorName == "repartition":
		kind = "repartition"
	case p.NumInputRows == 0:
		kind = "noData"
	}
	var ops []string
	for _, o := range p.StateOperators {
		s := fmt.Sprintf("%s total=%d", o.OperatorName, o.NumRowsTotal)
		if kind != "repartition" {
			s += fmt.Sprintf(" updated=%d", o.NumRowsUpdated)
		}
		ops = append(ops, s)
	}
	fmt.Printf("batch %d %s: %s\n", p.BatchID, kind, strings.Join(ops, " | "))
}
