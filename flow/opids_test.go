package flow_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/flow"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
)

// TestAggregateThenDedupSparkIDs is Spark's MultiStatefulOperatorsSuite
// case "aggregation -> stream deduplication, append mode" (without an
// event-time column in the deduplication): a 5-second count in append
// mode, then dropDuplicates("count", "windowEnd"). Spark's case reads the
// event times 1, 5, 10 and 15 s with a watermark delay of 0; ethstream's
// aggregation takes a delay of 0 as no watermark, so this one reads 1, 5,
// 10 and 16 s with a delay of 1 s: the same watermark (15 s), windows and
// answers. Spark answers (5, 1), (10, 1), (15, 1) and asserts
// assertNumStateRows(Seq(3, 1)): stateOperators[0] is the deduplication,
// nearest the sink (3 rows), [1] the aggregation (the window [15, 20)
// left), as IncrementalExecution's pre-order numbering gives them.
func TestAggregateThenDedupSparkIDs(t *testing.T) {
	src := streamtest.NewSource("input")
	src.Fields = []stream.Field{{Name: "eventTime", Type: stream.Timestamp}}
	b := &stream.Batch{Len: 4, Columns: []stream.Column{{Name: "eventTime", Type: stream.Timestamp}}}
	for _, s := range []int64{1, 5, 10, 16} {
		b.Columns[0].Int64s = append(b.Columns[0].Int64s, s*1e6)
	}
	if err := src.Append(b); err != nil {
		t.Fatal(err)
	}
	sink := streamtest.NewSink()
	var last *stream.Progress
	dir := t.TempDir()
	opts := engine.Options{CheckpointDir: filepath.Join(dir, "ckpt"), LocalDir: filepath.Join(dir, "local"),
		Listeners: []engine.Listener{engine.ListenerFunc(func(p *stream.Progress) { last = p })}}
	q := flow.New("aggdedup").Read("input", src).WithWatermark("eventTime", time.Second).
		Aggregate(flow.Aggregation{Window: &agg.Window{Column: "eventTime", Size: 5 * time.Second},
			Aggregates: []agg.Aggregate{{Kind: agg.Count, As: "count"}}, Mode: agg.Append}).
		Select(flow.Col(agg.ColWindowEnd).As("windowEnd"), flow.Col("count")).
		DropDuplicates("count", "windowEnd").
		WriteTo(sink).Trigger(engine.Trigger{Kind: engine.AvailableNow}).
		Conf("spark.sql.streaming.queryEvolution.enableSourceEvolution", "true")
	if _, err := q.Run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ap := range sink.Applied() {
		for i := 0; i < ap.Rows.Len; i++ {
			got = append(got, time.UnixMicro(ap.Rows.Column("windowEnd").Int64s[i]).UTC().Format("05")+" "+streamtest.Value(ap.Rows.Column("count"), i))
		}
	}
	slices.Sort(got)
	if want := []string{"05 1", "10 1", "15 1"}; !slices.Equal(got, want) {
		t.Fatalf("answer %q, want Spark's %q", got, want)
	}
	var rows []int64
	var names []string
	for _, so := range last.StateOperators {
		rows, names = append(rows, so.NumRowsTotal), append(names, so.OperatorName)
	}
	if !slices.Equal(rows, []int64{3, 1}) || !slices.Equal(names, []string{"dedupe", "stateStoreSave"}) {
		t.Fatalf("stateOperators %q with numRowsTotal %v, want Spark's Seq(3, 1): the deduplication, then the aggregation", names, rows)
	}
}
