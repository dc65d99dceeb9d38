package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/stream"
)

// listSource emits one chunk per batch; its offset is the number of chunks
// read.
type listSource struct{ chunks []*stream.Batch }

func (s *listSource) Open(context.Context, stream.SourceEnv) error { return nil }
func (s *listSource) Description() string                          { return "listSource" }
func (s *listSource) Schema() stream.Schema                        { return ethblock.StreamSchema() }
func (s *listSource) Commit(context.Context, stream.Offset) error  { return nil }
func (s *listSource) Close() error                                 { return nil }

func offsetN(o stream.Offset) int {
	if o == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(o))
	return n
}

func (s *listSource) LatestOffset(_ context.Context, start stream.Offset) (stream.Offset, error) {
	n := offsetN(start)
	if n == len(s.chunks) {
		return start, nil
	}
	return stream.Offset(strconv.Itoa(n + 1)), nil
}

func (s *listSource) ReadBatch(_ context.Context, start, end stream.Offset, emit func(*stream.Batch) error) error {
	for i := offsetN(start); i < offsetN(end); i++ {
		if err := emit(s.chunks[i]); err != nil {
			return err
		}
	}
	return nil
}

// rowSink keeps the last value of every output key.
type rowSink struct{ rows map[string]string }

func (s *rowSink) Open(context.Context, stream.SinkEnv) error { return nil }
func (s *rowSink) Description() string                        { return "rowSink" }
func (s *rowSink) Close() error                               { return nil }
func (s *rowSink) AddBatch(_ context.Context, _ int64, out *stream.Batch) (stream.SinkProgress, error) {
	for r := 0; r < out.Len; r++ {
		ws := time.UnixMicro(out.Column("window_start").Int64s[r]).UTC().Format("15:04")
		s.rows[ws] = fmt.Sprint(out.Column("n").Int64s[r])
	}
	return stream.SinkProgress{NumOutputRows: int64(out.Len)}, nil
}

func blocks(numbers []int64, hhmm []string) *stream.Batch {
	b := &stream.Batch{Len: len(numbers)}
	ts := make([]int64, len(hhmm))
	miners := make([]string, len(hhmm))
	for i, s := range hhmm {
		t, _ := time.Parse("2006-01-02 15:04", "2024-01-01 "+s)
		ts[i], miners[i] = t.UnixMicro(), "0xaa"
	}
	b.Columns = []stream.Column{
		{Name: ethblock.ColNumber, Type: stream.Int64, Int64s: numbers},
		{Name: ethblock.ColBlockTS, Type: stream.Timestamp, Int64s: ts},
		{Name: ethblock.ColMiner, Type: stream.String, Strings: miners},
	}
	return b
}

// TestWhereBeforeWatermark is the worked example of query/doc.go,
// Evaluation order, end to end through the engine: WHERE number < 100 with
// a 1-hour watermark. Batch 0 reads blocks 1 and 2 (00:10, 01:10) and block
// 1000 (10:00), which the WHERE drops; batch 1 reads block 3 (00:20). Spark
// pushes number < 100 below the watermark, so the watermark after batch 0
// is 01:10 - 1 hour = 00:10 and block 3's window [00:00, 01:00) is open: it
// counts 2. Computed from every row read, the watermark would be 09:00 and
// block 3 dropped as late (the count 1 ethstream gave before).
func TestWhereBeforeWatermark(t *testing.T) {
	src := &listSource{chunks: []*stream.Batch{
		blocks([]int64{1, 2, 1000}, []string{"00:10", "01:10", "10:00"}),
		blocks([]int64{3}, []string{"00:20"}),
	}}
	cfg := Config{Table: "t", Sources: []SourceSpec{{Name: "s", Format: "s3archive", URI: "file:///unused"}},
		Query:         "SELECT window(block_ts, '1 hour') AS window, count(*) AS n FROM blocks WHERE number < 100 GROUP BY window",
		WithWatermark: "block_ts, 1 hour"}
	c, err := CompileQuery(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c.q.PreWatermark == nil || c.q.PreWatermark.String() != "(number < 100)" {
		t.Fatalf("pushed %v", c.q.PreWatermark)
	}
	q := engine.Query{Name: "q", Sources: []engine.NamedSource{{Name: "s", Source: src}},
		Trigger: engine.Trigger{Kind: engine.AvailableNow},
		Conf:    map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"}}
	if err := c.plan(&q); err != nil {
		t.Fatal(err)
	}
	sink := &rowSink{rows: map[string]string{}}
	q.Sink = sink
	var progress []*stream.Progress
	opts := engine.Options{CheckpointDir: "/ck", FS: vfs.NewMem(), LocalDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler),
		Listeners: []engine.Listener{engine.ListenerFunc(func(p *stream.Progress) { progress = append(progress, p) })}}
	if _, err := engine.Run(context.Background(), q, opts); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(sink.rows); got != "map[00:00:2 01:00:1]" {
		t.Errorf("table %s, want map[00:00:2 01:00:1]", got)
	}
	// Every row read counts as input, the dropped block too (as in Spark);
	// the watermark and the event-time range come from the kept rows.
	if len(progress) < 2 || progress[0].NumInputRows != 3 || progress[0].EventTime["max"] != "2024-01-01T01:10:00.000Z" ||
		progress[1].EventTime["watermark"] != "2024-01-01T00:10:00.000Z" {
		b, _ := json.Marshal(progress)
		t.Errorf("progress %s", b)
	}
}
