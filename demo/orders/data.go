package orders

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/stream"
)

// The synthetic orders: deterministic from the seed. Customers c0001 to
// c0200; the three hot ones (c0001-c0003) place about 30% of the orders, so
// their keys dominate the state and the table (the skew the repartitioning
// article is about). Amounts are DOUBLE with cents: the article's amount is
// a DECIMAL(10,2), which the Delta writer does not write yet.

// Epoch is the first event time of every table.
var Epoch = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

const (
	customers    = 200
	hotCustomers = 3
	// hotShare is the share of orders (in percent) the hot customers place.
	hotShare = 30
	// chunk is the event-time span of one commit of order_events.
	chunk = 2 * time.Hour
	// lateness is how far before its chunk an event may lie: less than the
	// query's 20-minute watermark delay, so no event is dropped as late.
	lateness = 15 * time.Minute
)

// Order is one row of orders_us, orders_eu and order_events.
type Order struct {
	OrderID   string
	Customer  string
	Region    string
	Amount    float64 // cents exact: Cents / 100
	Cents     int64
	EventTime time.Time
}

// Schema is the tables' schema.
func Schema() stream.Schema {
	return stream.Schema{Fields: []stream.Field{
		{Name: "order_id", Type: stream.String, Nullable: true},
		{Name: "customer", Type: stream.String, Nullable: true},
		{Name: "region", Type: stream.String, Nullable: true},
		{Name: "amount", Type: stream.Float64, Nullable: true},
		{Name: "event_time", Type: stream.Timestamp, Nullable: true},
	}}
}

// Data is what Generate wrote: each table's commits, in order.
type Data struct {
	// Regions are orders_us's and orders_eu's commits; Events
	// order_events'.
	Regions map[string][][]Order
	Events  [][]Order
}

// generate draws the orders: per region regionCommits commits of
// regionOrders orders over the first day, and eventCommits chunks of
// eventsPerChunk events (each a chunk of event time, a few minutes late at
// most) for order_events.
func generate(seed uint64, regionCommits, regionOrders, eventCommits, eventsPerChunk int) *Data {
	r := rand.New(rand.NewPCG(seed, 40))
	customer := func() string {
		if r.IntN(100) < hotShare {
			return fmt.Sprintf("c%04d", 1+r.IntN(hotCustomers))
		}
		return fmt.Sprintf("c%04d", 1+hotCustomers+r.IntN(customers-hotCustomers))
	}
	d := &Data{Regions: map[string][][]Order{}}
	for _, region := range []string{"us", "eu"} {
		span := 24 * time.Hour / time.Duration(regionCommits)
		for c := range regionCommits {
			var commit []Order
			for i := range regionOrders {
				cents := int64(100 + r.IntN(50000))
				commit = append(commit, Order{OrderID: fmt.Sprintf("%s-%d-%04d", region, c, i), Customer: customer(), Region: region,
					Amount: float64(cents) / 100, Cents: cents, EventTime: Epoch.Add(time.Duration(c)*span + time.Duration(r.Int64N(int64(span))))})
			}
			d.Regions[region] = append(d.Regions[region], commit)
		}
	}
	for c := range eventCommits {
		var commit []Order
		lo := Epoch.Add(time.Duration(c)*chunk - lateness)
		if c == 0 {
			lo = Epoch
		}
		hi := Epoch.Add(time.Duration(c+1) * chunk)
		for i := range eventsPerChunk {
			cents := int64(100 + r.IntN(50000))
			region := []string{"us", "eu"}[r.IntN(2)]
			commit = append(commit, Order{OrderID: fmt.Sprintf("e-%d-%05d", c, i), Customer: customer(), Region: region,
				Amount: float64(cents) / 100, Cents: cents, EventTime: lo.Add(time.Duration(r.Int64N(int64(hi.Sub(lo)/time.Second))) * time.Second)})
		}
		d.Events = append(d.Events, commit)
	}
	return d
}

// batch is rows as an engine batch of Schema.
func batch(rows []Order) *stream.Batch {
	n := len(rows)
	b := &stream.Batch{Len: n, Columns: []stream.Column{
		stream.MakeColumn("order_id", stream.String, 0, n), stream.MakeColumn("customer", stream.String, 0, n),
		stream.MakeColumn("region", stream.String, 0, n), stream.MakeColumn("amount", stream.Float64, 0, n),
		stream.MakeColumn("event_time", stream.Timestamp, 0, n),
	}}
	for _, o := range rows {
		b.Columns[0].Strings = append(b.Columns[0].Strings, o.OrderID)
		b.Columns[1].Strings = append(b.Columns[1].Strings, o.Customer)
		b.Columns[2].Strings = append(b.Columns[2].Strings, o.Region)
		b.Columns[3].Float64s = append(b.Columns[3].Float64s, o.Amount)
		b.Columns[4].Int64s = append(b.Columns[4].Int64s, o.EventTime.UnixMicro())
	}
	return b
}

// writeTable writes commits as the Delta table at path with ethstream's
// own Delta writer (the sink in append mode: one commit per slice, each a
// blind append), on a clock that makes the commits' timestamps the same on
// every run.
func writeTable(ctx context.Context, path string, commits [][]Order) error {
	tick := Epoch
	clock := func() time.Time { tick = tick.Add(time.Second); return tick }
	s, err := delta.NewMergeSink(delta.SinkOptions{Path: path, Schema: Schema(), OutputMode: "append", Clock: clock,
		AutoCompactMinFiles: -1, Logger: discard})
	if err != nil {
		return err
	}
	if err := s.Open(ctx, stream.SinkEnv{QueryID: "ethstream-orders-generator", Schema: Schema(), Append: true, Locked: true}); err != nil {
		return err
	}
	for i, rows := range commits {
		if _, err := s.AddBatch(ctx, int64(i), batch(rows)); err != nil {
			_ = s.Close()
			return fmt.Errorf("write %s commit %d: %w", path, i, err)
		}
	}
	return s.Close()
}
