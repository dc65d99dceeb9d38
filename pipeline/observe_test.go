package pipeline

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/storage/s3serve"
	"github.com/ethstream/ethstream/stream"
)

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// sample returns the value of the sample line that starts with series
// (name{labels}), or -1 if the scrape has none.
func sample(body, series string) float64 {
	for _, l := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(l, series+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

func TestMetricsFromProgress(t *testing.T) {
	now := time.Date(2026, 9, 30, 0, 0, 0, 0, time.UTC)
	m := NewMetrics(func() time.Time { return now })
	rate := 125.0
	name := "eth_live"
	m.OnProgress(&stream.Progress{
		BatchID: 41, NumInputRows: 20, InputRowsPerSecond: &rate,
		DurationMs:     map[string]int64{stream.DurTriggerExecution: 37, stream.DurAddBatch: 30, stream.DurWalCommit: 3},
		EventTime:      map[string]string{"watermark": "2026-09-28T00:00:00.000Z"},
		StateOperators: []stream.OperatorProgress{{NumRowsTotal: 3283, NumShufflePartitions: 8, CommitTimeMs: 9, MemoryUsedBytes: 4096}},
		Sources: []stream.SourceProgress{{Name: &name, NumInputRows: 20,
			StartOffset: stream.Offset(`{"block":1}`), EndOffset: stream.Offset(`{"block":21}`),
			Metrics: map[string]string{"requests": "7", "retries": "2", "throttles": "1", "failovers": "0", "head": "25"}}},
		Sink: stream.SinkProgress{NumOutputRows: 20, Metrics: map[string]string{"tableVersion": "5",
			"numTargetFilesAdded": "2", "numTargetFilesRemoved": "1", "executionTimeMs": "4"}},
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := m.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	body := scrape(t, addr)
	for series, want := range map[string]float64{
		"ethstream_last_batch_id":                                       41,
		"ethstream_input_rows_per_second":                               125,
		`ethstream_batch_duration_seconds_sum{kind="data"}`:             0.037,
		`ethstream_batch_duration_seconds_count{kind="data"}`:           1,
		`ethstream_batch_phase_duration_seconds_sum{phase="addBatch"}`:  0.03,
		`ethstream_batch_phase_duration_seconds_sum{phase="walCommit"}`: 0.003,
		"ethstream_state_commit_duration_seconds_sum":                   0.009,
		"ethstream_delta_merge_duration_seconds_sum":                    0.004,
		"ethstream_state_rows":                                          3283,
		"ethstream_state_memory_bytes":                                  4096,
		"ethstream_state_partitions":                                    8,
		"ethstream_watermark_delay_seconds":                             172800,
		`ethstream_source_rows_total{source="eth_live"}`:                20,
		`ethstream_source_lag_blocks{source="eth_live"}`:                4,
		`ethstream_rpc_requests_total{source="eth_live"}`:               7,
		`ethstream_rpc_retries_total{source="eth_live"}`:                2,
		`ethstream_rpc_throttled_total{source="eth_live"}`:              1,
		`ethstream_batches_total{kind="data"}`:                          1,
		"ethstream_sink_rows_total":                                     20,
		"ethstream_delta_commits_total":                                 1,
		`ethstream_delta_files_total{action="add"}`:                     2,
		`ethstream_delta_files_total{action="remove"}`:                  1,
	} {
		if got := sample(body, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if strings.Contains(body, "ethstream_s3_requests_total") {
		t.Error("an RPC source's requests are exported as S3 requests")
	}
	bi := ReadBuildInfo()
	build := fmt.Sprintf(`ethstream_build_info{goversion=%q,revision=%q,version=%q}`, bi.GoVersion, bi.Revision, bi.Version)
	if got := sample(body, build); got != 1 || bi.GoVersion != runtime.Version() {
		t.Errorf("%s = %v, want 1 (go %s)\n%s", build, got, runtime.Version(), body)
	}
}

// TestMetricsScrapedDuringRun serves the metrics of a real run (the embedded
// S3 endpoint with injected throttling, then the embedded node) and scrapes
// them between batches: every family is there and the counters only grow.
func TestMetricsScrapedDuringRun(t *testing.T) {
	if testing.Short() {
		t.Skip("generates an archive and runs two phases")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	m, err := archivegen.Generate(ctx, archivegen.Options{Out: filepath.Join(dir, "s3", "bucket"), Preset: chain.LastDaysPreset(3), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	s3, err := s3serve.Start(ctx, s3serve.Options{Root: filepath.Join(dir, "s3"), Addr: "127.0.0.1:0",
		Faults: s3serve.Faults{ThrottleRate: 0.3, Seed: 7}})
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	node, err := ethnode.Start(ctx, ethnode.Options{Manifest: m, Seed: 1, Addr: "127.0.0.1:0", InitialBlocks: 200})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()

	metrics := NewMetrics(time.Now)
	addr, err := metrics.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var scrapes []string
	cfg := Config{
		Checkpoint: filepath.Join(dir, "ck"), Table: filepath.Join(dir, "tbl"), LocalDir: filepath.Join(dir, "cache"),
		Conf: map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true", "spark.sql.shuffle.partitions": "4"},
		Sources: []SourceSpec{{Name: "s3_backfill", Format: "s3archive",
			URI: "s3://bucket/v1.0/eth/blocks?endpoint=" + s3.URL() + "&anonymous=true&maxFilesPerTrigger=1"}},
		Trigger: engine.Trigger{Kind: engine.AvailableNow},
		Listeners: []engine.Listener{metrics, engine.ListenerFunc(func(*stream.Progress) {
			scrapes = append(scrapes, scrape(t, addr))
		})},
	}
	if _, err := Run(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Sources = append(cfg.Sources, SourceSpec{Name: "eth_live", Format: "ethrpc", URI: fmt.Sprintf(
		"%s?maxBlocksPerTrigger=20&start_block=%d&confirmations=0&start_parent_hash=%s", node.URL(), m.LastBlock+1, m.LastHash)})
	cfg.Trigger = engine.Trigger{Kind: engine.ProcessingTime, Interval: time.Millisecond}
	cfg.MaxBatches = 3
	if _, err := Run(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if len(scrapes) != 7 {
		t.Fatalf("%d scrapes, want one per batch (4 backfill + 3 live)", len(scrapes))
	}
	first, backfill, last := scrapes[0], scrapes[3], scrapes[len(scrapes)-1]
	for _, family := range []string{
		"ethstream_batch_duration_seconds", "ethstream_batch_phase_duration_seconds",
		"ethstream_state_commit_duration_seconds", "ethstream_delta_merge_duration_seconds",
		"ethstream_batches_total", "ethstream_source_rows_total", "ethstream_sink_rows_total",
		"ethstream_s3_requests_total", "ethstream_s3_throttles_total", "ethstream_s3_read_bytes_total",
		"ethstream_rpc_requests_total", "ethstream_rpc_retries_total", "ethstream_rpc_throttled_total",
		"ethstream_delta_commits_total", "ethstream_delta_files_total",
		"ethstream_state_rows", "ethstream_state_memory_bytes", "ethstream_state_partitions",
		"ethstream_watermark_delay_seconds", "ethstream_source_lag_blocks",
		"go_goroutines", "go_memstats_heap_alloc_bytes", "process_cpu_seconds_total", "process_resident_memory_bytes",
	} {
		if !regexp.MustCompile(`(?m)^# TYPE ` + family + ` `).MatchString(last) {
			t.Errorf("the last scrape lacks %s", family)
		}
	}
	if regexp.MustCompile(`(?m)^ethstream_\w+_ms\b`).MatchString(last) {
		t.Error("a metric in milliseconds: Prometheus wants seconds")
	}
	grows := func(a, b, series string) {
		t.Helper()
		va, vb := sample(a, series), sample(b, series)
		if va < 0 || vb <= va {
			t.Errorf("%s did not increase: %v -> %v", series, va, vb)
		}
	}
	grows(first, backfill, `ethstream_source_rows_total{source="s3_backfill"}`)
	grows(first, backfill, `ethstream_s3_requests_total{source="s3_backfill"}`)
	grows(first, backfill, `ethstream_s3_read_bytes_total{source="s3_backfill"}`)
	grows(first, backfill, `ethstream_delta_commits_total`)
	grows(first, backfill, `ethstream_batch_phase_duration_seconds_count{phase="addBatch"}`)
	if sample(backfill, `ethstream_s3_throttles_total{source="s3_backfill"}`) <= 0 {
		t.Error("injected S3 throttling is not counted")
	}
	grows(scrapes[4], last, `ethstream_source_rows_total{source="eth_live"}`)
	grows(scrapes[4], last, `ethstream_rpc_requests_total{source="eth_live"}`)
	grows(first, last, `ethstream_batches_total{kind="data"}`)
	if v := sample(last, `ethstream_source_lag_blocks{source="eth_live"}`); v < 0 {
		t.Error("no lag for the live source")
	}
	if sample(last, "ethstream_state_partitions") != 4 || sample(last, "ethstream_state_rows") <= 0 {
		t.Errorf("state gauges: partitions %v rows %v", sample(last, "ethstream_state_partitions"), sample(last, "ethstream_state_rows"))
	}
}

func TestBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}}
	if got, want := buildInfo(bi, true), (BuildInfo{"v1.2.3", "abc123+dirty", "go1.26.0"}); got != want {
		t.Errorf("stamped: %+v, want %+v", got, want)
	}
	bi.Settings = bi.Settings[:1]
	if got := buildInfo(bi, true).Revision; got != "abc123" {
		t.Errorf("clean: revision %q", got)
	}
	// A build inside the module: the source's release, never "(devel)" alone.
	for _, v := range []string{"", "(devel)"} {
		if got, want := buildInfo(&debug.BuildInfo{Main: debug.Module{Version: v}}, true), (BuildInfo{delta.EngineVersion + "-devel", "unknown", runtime.Version()}); got != want {
			t.Errorf("unstamped %q: %+v, want %+v", v, got, want)
		}
	}
	if got := buildInfo(nil, false); got.Revision != "unknown" || got.GoVersion != runtime.Version() {
		t.Errorf("no build info: %+v", got)
	}
}

// TestBatchLogLineWidth: a batch's log line, at the widest figures the
// contract names (batch 99,999, 10^7-1 rows, 99,999 ms, a watermark), fits
// 100 columns; a warning still says its level.
func TestBatchLogLineWidth(t *testing.T) {
	var b strings.Builder
	l := NewLogger(&b)
	LogBatches(l).OnProgress(&stream.Progress{BatchID: 99999, NumInputRows: 9999999,
		Sources:    []stream.SourceProgress{{StartOffset: []byte(`{"logOffset":1}`), EndOffset: []byte(`{"logOffset":2}`)}},
		DurationMs: map[string]int64{stream.DurTriggerExecution: 99999},
		EventTime:  map[string]string{"watermark": "2026-09-26T23:59:59.000Z"}})
	line := strings.TrimSuffix(b.String(), "\n")
	if !regexp.MustCompile(`^time=\d\d:\d\d:\d\d msg=batch id=99999 kind=data rows=9999999 ms=99999 watermark=2026-09-26T23:59:59Z$`).MatchString(line) || len(line) > 100 {
		t.Errorf("batch line (%d columns): %q", len(line), line)
	}
	b.Reset()
	l.Warn("slow")
	if !strings.Contains(b.String(), "level=WARN") {
		t.Errorf("a warning without its level: %q", b.String())
	}
}
