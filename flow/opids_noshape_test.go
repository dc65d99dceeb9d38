package flow_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/flow"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
)

// TestShapeAfterRunsWithoutOne: a deduplication then an aggregation run
// twice without recording their shape (Shape(nil), as a Go-API plan with a
// custom operator does), which numbers the operators in flow order (the
// deduplication's state in state/0, the aggregation's in state/1); then
// the same query recording its shape starts on that checkpoint. It must
// keep flow order, since its state directories are in it: with Spark's ids
// the aggregation would open the deduplication's state. The third run
// records the shape in flow order, and a fourth, recording it too, goes
// on with it.
func TestShapeAfterRunsWithoutOne(t *testing.T) {
	src := streamtest.NewSource("input")
	src.Fields = []stream.Field{{Name: "eventTime", Type: stream.Timestamp}, {Name: "k", Type: stream.String}}
	appendRows := func(secs []int64, keys []string) {
		t.Helper()
		b := &stream.Batch{Len: len(secs), Columns: []stream.Column{{Name: "eventTime", Type: stream.Timestamp}, {Name: "k", Type: stream.String}}}
		for i, s := range secs {
			b.Columns[0].Int64s = append(b.Columns[0].Int64s, s*1e6)
			b.Columns[1].Strings = append(b.Columns[1].Strings, keys[i])
		}
		if err := src.Append(b); err != nil {
			t.Fatal(err)
		}
	}
	sink := streamtest.NewSink()
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt")
	run := func(recordShape bool) []string {
		t.Helper()
		var names []string
		opts := engine.Options{CheckpointDir: ckpt, LocalDir: filepath.Join(dir, "local"),
			Listeners: []engine.Listener{engine.ListenerFunc(func(p *stream.Progress) {
				names = names[:0]
				for _, so := range p.StateOperators {
					names = append(names, so.OperatorName)
				}
			})}}
		q := flow.New("deduptheagg").Read("input", src).Columns("eventTime", "k").WithWatermark("eventTime", time.Second).
			DropDuplicates("k").
			Aggregate(flow.Aggregation{Window: &agg.Window{Column: "eventTime", Size: 10 * time.Second},
				Aggregates: []agg.Aggregate{{Kind: agg.Count, As: "n"}}, Mode: agg.Update}).
			WriteTo(sink).Trigger(engine.Trigger{Kind: engine.AvailableNow}).
			Conf("spark.sql.streaming.queryEvolution.enableSourceEvolution", "true")
		if !recordShape {
			q = q.Shape(nil)
		}
		if _, err := q.Run(context.Background(), opts); err != nil {
			t.Fatalf("run (shape recorded: %v): %v", recordShape, err)
		}
		return names
	}
	appendRows([]int64{1, 2, 3}, []string{"a", "b", "a"})
	run(false)
	appendRows([]int64{4, 12}, []string{"c", "b"})
	run(false)
	appendRows([]int64{13, 14}, []string{"d", "e"})
	if names := run(true); !slices.Equal(names, []string{"dedupe", "stateStoreSave"}) {
		t.Fatalf("stateOperators %q, want flow order (the deduplication first): the checkpoint's state is in it", names)
	}
	rec, err := os.ReadFile(latestShape(t, ckpt))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(rec), "preOrder") {
		t.Fatalf("the shape recorded on a flow-order checkpoint claims Spark's ids:\n%s", rec)
	}
	appendRows([]int64{25}, []string{"f"})
	if names := run(true); !slices.Equal(names, []string{"dedupe", "stateStoreSave"}) {
		t.Fatalf("stateOperators %q after the shape was recorded, want flow order", names)
	}
	// The windows' counts: every key once (b's second row is a duplicate).
	got := map[string]string{}
	for _, ap := range sink.Applied() {
		for i := 0; i < ap.Rows.Len; i++ {
			got[time.UnixMicro(ap.Rows.Column(agg.ColWindowStart).Int64s[i]).UTC().Format("05")] = streamtest.Value(ap.Rows.Column("n"), i)
		}
	}
	if want := map[string]string{"00": "3", "10": "2", "20": "1"}; !maps.Equal(got, want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
}

// latestShape is the path of checkpoint ckpt's newest shape record.
func latestShape(t *testing.T, ckpt string) string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(ckpt, "shape"))
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			last = e.Name()
		}
	}
	if last == "" {
		t.Fatal("no shape record")
	}
	return filepath.Join(ckpt, "shape", last)
}
