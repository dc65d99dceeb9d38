package flow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/flow"
	"github.com/ethstream/ethstream/sink/console"
	"github.com/ethstream/ethstream/stream"
)

// Trade is one event of a live feed.
type Trade struct {
	At    time.Time
	Pair  string
	Price float64
}

// Feed is a custom source over a live feed of trades, the counterpart of a
// Spark Python data source: the feed appends, the engine asks for the
// newest position, reads a range of it, and commits what it finished. Its
// offset is {"n": trades so far}, so a restart resumes where the checkpoint
// says. A real feed would subscribe to a socket in Open.
type Feed struct {
	mu     sync.Mutex
	trades []Trade
}

// Publish appends trades to the feed, as they arrive.
func (f *Feed) Publish(t ...Trade) { f.mu.Lock(); f.trades = append(f.trades, t...); f.mu.Unlock() }

// Schema declares the rows the source emits.
func (f *Feed) Schema() stream.Schema {
	return stream.Schema{Fields: []stream.Field{{Name: "at", Type: stream.Timestamp}, {Name: "pair", Type: stream.String}, {Name: "price", Type: stream.Float64}}}
}

func (f *Feed) Open(context.Context, stream.SourceEnv) error { return nil }
func (f *Feed) Description() string                          { return "TradeFeed[memory]" }
func (f *Feed) Commit(context.Context, stream.Offset) error  { return nil }
func (f *Feed) Close() error                                 { return nil }

func (f *Feed) LatestOffset(context.Context, stream.Offset) (stream.Offset, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return json.Marshal(map[string]int{"n": len(f.trades)})
}

// ReadBatch emits the trades in (start, end] as one chunk.
func (f *Feed) ReadBatch(_ context.Context, start, end stream.Offset, emit func(*stream.Batch) error) error {
	var from, to struct{ N int }
	if start != nil {
		if err := json.Unmarshal(start, &from); err != nil {
			return err
		}
	}
	if err := json.Unmarshal(end, &to); err != nil {
		return err
	}
	f.mu.Lock()
	rows := f.trades[from.N:to.N]
	f.mu.Unlock()
	b := &stream.Batch{Len: len(rows), Columns: []stream.Column{
		{Name: "at", Type: stream.Timestamp}, {Name: "pair", Type: stream.String}, {Name: "price", Type: stream.Float64}}}
	for _, t := range rows {
		b.Columns[0].Int64s = append(b.Columns[0].Int64s, t.At.UnixMicro())
		b.Columns[1].Strings = append(b.Columns[1].Strings, t.Pair)
		b.Columns[2].Float64s = append(b.Columns[2].Float64s, t.Price)
	}
	return emit(b)
}

// at is a time of the examples' day.
func at(hhmm string) time.Time {
	t, err := time.Parse("2006-01-02 15:04", "2024-03-01 "+hhmm)
	if err != nil {
		panic(err)
	}
	return t
}

// A custom source, a filter, a projection and a windowed aggregation on a
// checkpoint, without SQL. The query runs twice on the same checkpoint: the
// second run resumes after the trades the first one read (its batch 0, then
// the no-data batch 1 the moved watermark runs, which emits nothing).
func ExampleQuery_customSource() {
	dir, _ := os.MkdirTemp("", "flow-example")
	defer os.RemoveAll(dir)
	feed := &Feed{}
	feed.Publish(Trade{at("12:01"), "ETH-USD", 3100}, Trade{at("12:02"), "ETH-USD", -1}, Trade{at("12:04"), "BTC-USD", 61000},
		Trade{at("12:06"), "ETH-USD", 3120})
	run := func() {
		_, err := flow.New("trades_per_5_minutes").
			Read("feed", feed).
			WithWatermark("at", 10*time.Minute).
			Where(flow.Col("price").Gt(0)).
			Select(flow.Col("at"), flow.Col("pair"), flow.Col("price")).
			Aggregate(flow.Aggregation{
				Window:     &agg.Window{Column: "at", Size: 5 * time.Minute},
				GroupBy:    []string{"pair"},
				Aggregates: []agg.Aggregate{{Kind: agg.Count, As: "trades"}, {Kind: agg.Max, Column: "price", As: "high"}},
			}).
			WriteTo(&console.Sink{W: os.Stdout, Sorted: true, SkipEmpty: true}).
			Trigger(engine.Trigger{Kind: engine.AvailableNow}).
			Conf("spark.sql.shuffle.partitions", "2").
			Conf("spark.sql.streaming.queryEvolution.enableSourceEvolution", "true"). // named sources
			Run(context.Background(), engine.Options{CheckpointDir: filepath.Join(dir, "checkpoint"), LocalDir: filepath.Join(dir, "local")})
		if err != nil {
			fmt.Println(err)
		}
	}
	run()
	feed.Publish(Trade{at("12:08"), "ETH-USD", 3150})
	run()
	// Output:
	// -------------------------------------------
	// Batch: 0
	// -------------------------------------------
	// +-------------------+-------------------+-------+------+-----+
	// |       window_start|         window_end|   pair|trades| high|
	// +-------------------+-------------------+-------+------+-----+
	// |2024-03-01 12:00:00|2024-03-01 12:05:00|BTC-USD|     1|61000|
	// |2024-03-01 12:00:00|2024-03-01 12:05:00|ETH-USD|     1| 3100|
	// |2024-03-01 12:05:00|2024-03-01 12:10:00|ETH-USD|     1| 3120|
	// +-------------------+-------------------+-------+------+-----+
	// -------------------------------------------
	// Batch: 2
	// -------------------------------------------
	// +-------------------+-------------------+-------+------+----+
	// |       window_start|         window_end|   pair|trades|high|
	// +-------------------+-------------------+-------+------+----+
	// |2024-03-01 12:05:00|2024-03-01 12:10:00|ETH-USD|     2|3150|
	// +-------------------+-------------------+-------+------+----+
}
