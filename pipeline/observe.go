package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/stream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics exports progress events in Prometheus conventions: durations as
// _seconds histograms, monotonic counts as _total counters, levels as gauges,
// plus the Go runtime and process collectors. Every figure comes from the
// progress events (the query's own record of itself), so a scrape and the
// progress file can never disagree.
//
// Source counters (requests, retries, throttles, bytes) are cumulative in the
// sources' metrics since the process started; they are exported as counters
// holding the last value seen, so a restart resets them as Prometheus expects
// of a process's counters.
type Metrics struct {
	reg *prometheus.Registry
	now func() time.Time

	batchSeconds       *prometheus.HistogramVec
	phaseSeconds       *prometheus.HistogramVec
	stateCommitSeconds prometheus.Histogram
	deltaMergeSeconds  prometheus.Histogram

	batches      *prometheus.CounterVec
	sourceRows   *prometheus.CounterVec
	sinkRows     prometheus.Counter
	deltaCommits prometheus.Counter
	deltaFiles   *prometheus.CounterVec

	stateRows, stateMemory, partitions prometheus.Gauge
	watermarkDelay, lastBatch          prometheus.Gauge
	inputRate, processedRate           prometheus.Gauge
	sourceLag                          *prometheus.GaugeVec
	pendingFiles                       *prometheus.GaugeVec

	mu      sync.Mutex
	sources map[string]map[string]float64 // source name -> metric key -> last cumulative value
}

// Buckets of the duration histograms: 1 ms to about 65 s, doubling.
var secondsBuckets = prometheus.ExponentialBuckets(0.001, 2, 17)

// sourceCounters maps a source metric key (sources[].metrics of a progress
// event) to the counter it is exported as. s3archive reports bytesRead and
// filesRead; ethrpc reports failovers; both report requests, retries and
// throttles (HTTP 429/503 SlowDown on S3, 429 or a rate-limit error on RPC).
var sourceCounters = []struct {
	key, family, name, help string
}{
	{"requests", "s3", "ethstream_s3_requests_total", "S3 requests (every attempt of LIST and GET), per source."},
	{"retries", "s3", "ethstream_s3_retries_total", "S3 requests retried, per source."},
	{"throttles", "s3", "ethstream_s3_throttles_total", "S3 requests answered with a throttling error (503 SlowDown, 429), per source."},
	{"bytesRead", "s3", "ethstream_s3_read_bytes_total", "Bytes of archive objects read, per source."},
	{"filesRead", "s3", "ethstream_s3_files_read_total", "Archive files read, per source."},
	{"requests", "rpc", "ethstream_rpc_requests_total", "JSON-RPC HTTP requests (every attempt; a batch request counts once), per source."},
	{"retries", "rpc", "ethstream_rpc_retries_total", "JSON-RPC requests retried, per source."},
	{"throttles", "rpc", "ethstream_rpc_throttled_total", "JSON-RPC requests answered 429 or with a rate-limit error, per source."},
	{"failovers", "rpc", "ethstream_rpc_failovers_total", "Switches to the next JSON-RPC endpoint, per source."},
}

// NewMetrics registers the query's metrics on a fresh registry.
func NewMetrics(now func() time.Time) *Metrics {
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: "ethstream_" + name, Help: help})
	}
	h := func(name, help string) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ethstream_" + name, Help: help, Buckets: secondsBuckets})
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		now: now,
		batchSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ethstream_batch_duration_seconds",
			Help:    "triggerExecution: trigger to progress event of a batch, per kind (data, no-data, repartition).",
			Buckets: secondsBuckets}, []string{"kind"}),
		phaseSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ethstream_batch_phase_duration_seconds",
			Help: "The durationMs phases of a batch (latestOffset, queryPlanning, walCommit, getBatch, addBatch, " +
				"commitOffsets, controlBatch.REPARTITION); they do not overlap and sum to at most triggerExecution.",
			Buckets: secondsBuckets}, []string{"phase"}),
		stateCommitSeconds: h("state_commit_duration_seconds", "State store commit of a batch (stateOperators[].commitTimeMs, part of addBatch)."),
		deltaMergeSeconds:  h("delta_merge_duration_seconds", "Delta MERGE of a batch: scan of the candidate files and rewrite (operationMetrics executionTimeMs, part of addBatch)."),
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ethstream_batches_total",
			Help: "Batches completed, per kind (data, no-data, repartition)."}, []string{"kind"}),
		sourceRows: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ethstream_source_rows_total",
			Help: "Rows read, per source."}, []string{"source"}),
		sinkRows: prometheus.NewCounter(prometheus.CounterOpts{Name: "ethstream_sink_rows_total",
			Help: "Rows handed to the sink (MERGE source rows)."}),
		deltaCommits: prometheus.NewCounter(prometheus.CounterOpts{Name: "ethstream_delta_commits_total",
			Help: "Delta table versions committed by the sink (a re-run batch already in the table commits none)."}),
		deltaFiles: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ethstream_delta_files_total",
			Help: "Delta data files added or removed by MERGE commits, per action (add, remove)."}, []string{"action"}),
		stateRows:      g("state_rows", "Keys in state after the last batch."),
		stateMemory:    g("state_memory_bytes", "State memory after the last batch (stateOperators[].memoryUsedBytes)."),
		partitions:     g("state_partitions", "State partitions in force."),
		watermarkDelay: g("watermark_delay_seconds", "Wall clock minus the event-time watermark."),
		lastBatch:      g("last_batch_id", "Id of the last completed batch."),
		inputRate:      g("input_rows_per_second", "inputRowsPerSecond of the last batch (rows / time since the previous trigger)."),
		processedRate:  g("processed_rows_per_second", "processedRowsPerSecond of the last batch."),
		sourceLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ethstream_source_lag_blocks",
			Help: "Blocks between a live source's readable head and the end offset of the last batch, per source."}, []string{"source"}),
		pendingFiles: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ethstream_source_pending_files",
			Help: "Archive files listed but not yet admitted into a batch, per source."}, []string{"source"}),
		sources: map[string]map[string]float64{},
	}
	bi := ReadBuildInfo()
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{Name: "ethstream_build_info",
		Help:        "Always 1; its labels are the build's version, VCS revision and Go version (ethstream --version prints the same).",
		ConstLabels: prometheus.Labels{"version": bi.Version, "revision": bi.Revision, "goversion": bi.GoVersion}})
	buildInfo.Set(1)
	m.reg.MustRegister(buildInfo, m.batchSeconds, m.phaseSeconds, m.stateCommitSeconds, m.deltaMergeSeconds,
		m.batches, m.sourceRows, m.sinkRows, m.deltaCommits, m.deltaFiles,
		m.stateRows, m.stateMemory, m.partitions, m.watermarkDelay, m.lastBatch, m.inputRate, m.processedRate,
		m.sourceLag, m.pendingFiles, sourceCollector{m},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func seconds(ms int64) float64 { return float64(ms) / 1000 }

// OnProgress updates the metrics from one event.
func (m *Metrics) OnProgress(p *stream.Progress) {
	kind := p.Kind()
	m.batches.WithLabelValues(kind).Inc()
	m.lastBatch.Set(float64(p.BatchID))
	for phase, ms := range p.DurationMs {
		if phase == stream.DurTriggerExecution {
			m.batchSeconds.WithLabelValues(kind).Observe(seconds(ms))
			continue
		}
		m.phaseSeconds.WithLabelValues(phase).Observe(seconds(ms))
	}
	if p.InputRowsPerSecond != nil {
		m.inputRate.Set(*p.InputRowsPerSecond)
	}
	if p.ProcessedRowsPerSecond != nil {
		m.processedRate.Set(*p.ProcessedRowsPerSecond)
	}
	var rows, mem int64
	for _, op := range p.StateOperators {
		rows += op.NumRowsTotal
		mem += op.MemoryUsedBytes
		m.partitions.Set(float64(op.NumShufflePartitions))
		if kind != stream.KindRepartition {
			m.stateCommitSeconds.Observe(seconds(op.CommitTimeMs))
		}
	}
	if len(p.StateOperators) > 0 {
		m.stateRows.Set(float64(rows))
		m.stateMemory.Set(float64(mem))
	}
	if w, err := time.Parse(time.RFC3339Nano, p.EventTime["watermark"]); err == nil && w.Unix() > 0 {
		m.watermarkDelay.Set(m.now().Sub(w).Seconds())
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, s := range p.Sources {
		name := SourceLabel(i, s)
		m.sourceRows.WithLabelValues(name).Add(float64(s.NumInputRows))
		if lag, ok := SourceLag(s); ok {
			m.sourceLag.WithLabelValues(name).Set(float64(lag))
		}
		if v, ok := s.Metrics["pendingFiles"]; ok {
			m.pendingFiles.WithLabelValues(name).Set(float64(atoi(v)))
		}
		last := m.sources[name]
		if last == nil {
			last = map[string]float64{}
			m.sources[name] = last
		}
		fam := sourceFamily(s)
		for _, c := range sourceCounters {
			if c.family != fam {
				continue
			}
			if v, err := strconv.ParseFloat(s.Metrics[c.key], 64); err == nil {
				last[c.name] = v
			}
		}
	}
	sm := p.Sink.Metrics
	m.sinkRows.Add(float64(p.Sink.NumOutputRows))
	if _, ok := sm["tableVersion"]; ok && sm["skipped"] != "true" && p.Sink.NumOutputRows > 0 {
		m.deltaCommits.Inc()
		m.deltaFiles.WithLabelValues("add").Add(float64(atoi(sm["numTargetFilesAdded"])))
		m.deltaFiles.WithLabelValues("remove").Add(float64(atoi(sm["numTargetFilesRemoved"])))
		m.deltaMergeSeconds.Observe(seconds(atoi(sm["executionTimeMs"])))
	}
}

// sourceFamily tells an archive source (its metrics have bytesRead) from a
// live RPC source (failovers).
func sourceFamily(s stream.SourceProgress) string {
	if _, ok := s.Metrics["bytesRead"]; ok {
		return "s3"
	}
	if _, ok := s.Metrics["failovers"]; ok {
		return "rpc"
	}
	return ""
}

// SourceLabel is a source's name, or its position for an unnamed source.
func SourceLabel(i int, s stream.SourceProgress) string {
	if s.Name != nil && *s.Name != "" {
		return *s.Name
	}
	return strconv.Itoa(i)
}

// SourceLag is how many blocks a live source is behind its readable head
// after the batch: the head metric minus the end offset's block.
func SourceLag(s stream.SourceProgress) (int64, bool) {
	h, ok := s.Metrics["head"]
	if !ok {
		return 0, false
	}
	var off struct {
		Block *int64 `json:"block"`
	}
	if json.Unmarshal(s.EndOffset, &off) != nil || off.Block == nil {
		return 0, false
	}
	return max(0, atoi(h)-*off.Block), true
}

// sourceCollector exports the sources' cumulative counters as last seen.
type sourceCollector struct{ m *Metrics }

var sourceDescs = func() map[string]*prometheus.Desc {
	d := map[string]*prometheus.Desc{}
	for _, c := range sourceCounters {
		d[c.name] = prometheus.NewDesc(c.name, c.help, []string{"source"}, nil)
	}
	return d
}()

func (c sourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range sourceDescs {
		ch <- d
	}
}

func (c sourceCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	for src, vals := range c.m.sources {
		for name, v := range vals {
			ch <- prometheus.MustNewConstMetric(sourceDescs[name], prometheus.CounterValue, v, src)
		}
	}
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler { return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}) }

// Serve listens on addr and serves /metrics until ctx ends. It returns the
// bound address (useful with port 0).
func (m *Metrics) Serve(ctx context.Context, addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("listen for metrics on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	go srv.Serve(ln)
	return ln.Addr().String(), nil
}

// BuildInfo is what the binary records of its own build
// (runtime/debug.ReadBuildInfo): `ethstream --version` prints it and the
// ethstream_build_info metric carries it.
type BuildInfo struct {
	// Version is the module version; a build inside the module (go build,
	// go run, go install ./cmd/ethstream), which has none, is the release
	// its source is, delta.EngineVersion, with "-devel".
	Version   string
	Revision  string // vcs.revision, with "+dirty" when vcs.modified; "unknown" without VCS stamping
	GoVersion string
}

// ReadBuildInfo reads the running binary's build info. The revision is
// "unknown" in a build without VCS stamping: -buildvcs=false, or a git
// worktree, whose .git is a file the go command does not recognise.
// It is read once: a command sets delta.EngineVersion from it, and every
// later reader (the build-info metric) must see the same version.
func ReadBuildInfo() BuildInfo { return readBuildInfo() }

var readBuildInfo = sync.OnceValue(func() BuildInfo { return buildInfo(debug.ReadBuildInfo()) })

func buildInfo(bi *debug.BuildInfo, ok bool) BuildInfo {
	b := BuildInfo{Version: delta.EngineVersion + "-devel", Revision: "unknown", GoVersion: runtime.Version()}
	if !ok {
		return b
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		b.Version = v
	}
	if bi.GoVersion != "" {
		b.GoVersion = bi.GoVersion
	}
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && b.Revision != "unknown" {
		b.Revision += "+dirty"
	}
	return b
}

// NewLogger is the logger of every command: slog text lines, the time as
// hh:mm:ss.mmm UTC (the progress events carry full timestamps), so that a
// line and its attributes fit in 100 columns.
func NewLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey && a.Value.Kind() == slog.KindTime {
				return slog.String(slog.TimeKey, a.Value.Time().UTC().Format("15:04:05"))
			}
			// Only a warning or an error says its level: most lines are
			// INFO, and those 11 columns (with the time in whole seconds:
			// a batch line has its own ms=) keep a batch's line within 100.
			if len(groups) == 0 && a.Key == slog.LevelKey && a.Value.Any() == slog.LevelInfo {
				return slog.Attr{}
			}
			return a
		}}))
}

// LogBatches is the listener that logs each batch as one line, the format
// every command shares (run off a terminal and above its status line, the
// demo's phases):
//
//	time=05:24:11 msg=batch id=3 kind=data rows=7175 ms=484 watermark=2026-09-26T23:59:59Z
//
// The watermark is the one the batch ran with (the progress event's
// eventTime.watermark), in RFC 3339 UTC; "-" before the first.
func LogBatches(l *slog.Logger) engine.Listener {
	return engine.ListenerFunc(func(p *stream.Progress) {
		wm := "-"
		if t, err := time.Parse(time.RFC3339Nano, p.EventTime["watermark"]); err == nil && t.Unix() > 0 {
			wm = t.UTC().Format(time.RFC3339)
		}
		l.Info("batch", "id", p.BatchID, "kind", p.Kind(), "rows", p.NumInputRows,
			"ms", p.DurationMs[stream.DurTriggerExecution], "watermark", wm)
	})
}
