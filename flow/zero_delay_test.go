package flow_test

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/flow"
	"github.com/ethstream/ethstream/sink/console"
	"github.com/ethstream/ethstream/stream"
)

// TestZeroDelayRestart: the watermark delay is not state, so a restart
// may change it to 0 (allowed, as in Spark: the restart rules let a delay
// shrink), and the aggregation then drops and evicts by the max event
// time seen; a restart that raises it again is WATERMARK_DELAY_INCREASED
// (ethstream refuses any larger delay, a documented difference).
func TestZeroDelayRestart(t *testing.T) {
	dir := t.TempDir()
	feed := &Feed{}
	var dropped int64
	opts := engine.Options{CheckpointDir: filepath.Join(dir, "checkpoint"), LocalDir: filepath.Join(dir, "local"),
		Listeners: []engine.Listener{engine.ListenerFunc(func(p *stream.Progress) {
			for _, op := range p.StateOperators {
				dropped += op.NumRowsDroppedByWatermark
			}
		})}}
	run := func(delay time.Duration) error {
		t.Helper()
		_, err := flow.New("counts").
			Read("feed", feed).
			WithWatermark("at", delay).
			Aggregate(flow.Aggregation{Window: &agg.Window{Column: "at", Size: 5 * time.Minute}, GroupBy: []string{"pair"},
				Aggregates: []agg.Aggregate{{Kind: agg.Count, As: "trades"}}, Mode: agg.Update}).
			WriteTo(&console.Sink{W: io.Discard}).
			Trigger(engine.Trigger{Kind: engine.AvailableNow}).
			Conf("spark.sql.streaming.queryEvolution.enableSourceEvolution", "true").
			Run(context.Background(), opts)
		return err
	}
	// Watermark 12:10 after the first run.
	feed.Publish(Trade{at("12:01"), "ETH-USD", 1}, Trade{at("12:20"), "ETH-USD", 1})
	if err := run(10 * time.Minute); err != nil {
		t.Fatal(err)
	}
	// Delay 0: 12:15 is not late by 12:10; the watermark becomes 12:25.
	feed.Publish(Trade{at("12:15"), "ETH-USD", 1}, Trade{at("12:25"), "ETH-USD", 1})
	if err := run(0); err != nil {
		t.Fatalf("restart with a delay of 0: %v", err)
	}
	if dropped != 0 {
		t.Fatalf("%d rows dropped before the late one", dropped)
	}
	// [12:20, 12:25) ends at the watermark: late by a delay of 0.
	feed.Publish(Trade{at("12:21"), "ETH-USD", 1}, Trade{at("12:26"), "ETH-USD", 1})
	if err := run(0); err != nil {
		t.Fatal(err)
	}
	if dropped != 1 {
		t.Fatalf("%d rows dropped by a watermark of delay 0, want 1 (12:21)", dropped)
	}
	if err := run(time.Minute); errcode.Code(err) != errcode.WatermarkDelayIncreased {
		t.Fatalf("restart with the delay raised from 0: %v, want %s", err, errcode.WatermarkDelayIncreased)
	}
	// Spark's withWatermark refuses a negative delay.
	if err := run(-time.Minute); errcode.Code(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), "should not be negative") {
		t.Fatalf("a negative delay: %v, want %s", err, errcode.InvalidArgument)
	}
}
