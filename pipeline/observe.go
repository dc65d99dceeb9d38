package pipeline

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/ethstream/ethstream/stream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/schollz/progressbar/v3"
)

// Metrics exports progress events as Prometheus gauges and counters.
type Metrics struct {
	reg                                 *prometheus.Registry
	inputRate, processedRate, batchMs   prometheus.Gauge
	stateRows, partitions, watermarkLag prometheus.Gauge
	batchID                             prometheus.Gauge
	rows                                *prometheus.CounterVec
	batches                             *prometheus.CounterVec
	now                                 func() time.Time
}

// NewMetrics registers the query's metrics on a fresh registry.
func NewMetrics(now func() time.Time) *Metrics {
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "ethstream", Name: name, Help: help})
	}
	m := &Metrics{
		reg:           prometheus.NewRegistry(),
		inputRate:     g("input_rows_per_second", "Input rows per second of the last batch (rows / time since the previous trigger)."),
		processedRate: g("processed_rows_per_second", "Rows processed per second of the last batch."),
		batchMs:       g("batch_duration_ms", "triggerExecution of the last batch, milliseconds."),
		stateRows:     g("state_rows", "Keys in state after the last batch."),
		partitions:    g("state_partitions", "State partitions in force."),
		watermarkLag:  g("watermark_delay_seconds", "Processing time minus the event-time watermark."),
		batchID:       g("batch_id", "Id of the last completed batch."),
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "ethstream", Name: "input_rows_total",
			Help: "Rows read, per source."}, []string{"source"}),
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "ethstream", Name: "batches_total",
			Help: "Batches completed, per kind (data, no-data, repartition)."}, []string{"kind"}),
		now: now,
	}
	m.reg.MustRegister(m.inputRate, m.processedRate, m.batchMs, m.stateRows, m.partitions, m.watermarkLag, m.batchID, m.rows, m.batches)
	return m
}

// OnProgress updates the metrics from one event.
func (m *Metrics) OnProgress(p *stream.Progress) {
	if p.InputRowsPerSecond != nil {
		m.inputRate.Set(*p.InputRowsPerSecond)
	}
	if p.ProcessedRowsPerSecond != nil {
		m.processedRate.Set(*p.ProcessedRowsPerSecond)
	}
	m.batchMs.Set(float64(p.DurationMs[stream.DurTriggerExecution]))
	m.batchID.Set(float64(p.BatchID))
	for _, op := range p.StateOperators {
		m.stateRows.Set(float64(op.NumRowsTotal))
		m.partitions.Set(float64(op.NumShufflePartitions))
	}
	if w, err := time.Parse(time.RFC3339Nano, p.EventTime["watermark"]); err == nil && w.Unix() > 0 {
		m.watermarkLag.Set(m.now().Sub(w).Seconds())
	}
	for i, s := range p.Sources {
		name := strconv.Itoa(i)
		if s.Name != nil {
			name = *s.Name
		}
		m.rows.WithLabelValues(name).Add(float64(s.NumInputRows))
	}
	m.batches.WithLabelValues(p.Kind()).Inc()
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

// Bar shows a backfill's progress on a terminal: batches, rows, rate.
type Bar struct {
	bar  *progressbar.ProgressBar
	rows int64
}

// NewBar draws on w (a terminal).
func NewBar(w io.Writer) *Bar {
	return &Bar{bar: progressbar.NewOptions64(-1,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("backfill"),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("blocks"),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)}
}

// OnProgress advances the bar by the batch's rows.
func (b *Bar) OnProgress(p *stream.Progress) {
	b.rows += p.NumInputRows
	files := ""
	for _, s := range p.Sources {
		if v, ok := s.Metrics["filesRead"]; ok {
			files += " files " + v
		}
	}
	b.bar.Describe("batch " + strconv.FormatInt(p.BatchID, 10) + files)
	_ = b.bar.Add64(p.NumInputRows)
}

// Close finishes the bar.
func (b *Bar) Close() error { return b.bar.Finish() }
