package pipeline

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/stream"
)

func TestMetricsFromProgress(t *testing.T) {
	now := time.Date(2026, 9, 30, 0, 0, 0, 0, time.UTC)
	m := NewMetrics(func() time.Time { return now })
	rate := 125.0
	name := "eth_live"
	m.OnProgress(&stream.Progress{
		BatchID: 41, NumInputRows: 20, InputRowsPerSecond: &rate,
		DurationMs:     map[string]int64{stream.DurTriggerExecution: 37},
		EventTime:      map[string]string{"watermark": "2026-09-28T00:00:00.000Z"},
		StateOperators: []stream.OperatorProgress{{NumRowsTotal: 3283, NumShufflePartitions: 8}},
		Sources: []stream.SourceProgress{{Name: &name, NumInputRows: 20,
			StartOffset: stream.Offset(`{"block":1}`), EndOffset: stream.Offset(`{"block":21}`)}},
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := m.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		"ethstream_batch_id 41",
		"ethstream_input_rows_per_second 125",
		"ethstream_batch_duration_ms 37",
		"ethstream_state_rows 3283",
		"ethstream_state_partitions 8",
		"ethstream_watermark_delay_seconds 172800",
		`ethstream_input_rows_total{source="eth_live"} 20`,
		`ethstream_batches_total{kind="data"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
}
