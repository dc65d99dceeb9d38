package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/internal/cputime"
	"github.com/ethstream/ethstream/pipeline"
)

// BenchmarkSeedBackfillFile runs the bench's file:// backfill leg alone
// (the reference query, 200 state partitions, availableNow, 365 files per
// trigger) over the archive of a bench work directory named by
// $ETHSTREAM_BENCH_WORKDIR (e.g. /work/seedbench; skipped when unset), so
// that -cpuprofile and -memprofile see the backfill and nothing else.
// Reported per backfill: CPU seconds, bytes and objects allocated, GC
// cycles and the peak RSS, and each step's CPU and wall seconds (engine
// steps); with ETHSTREAM_BENCH_STEPLOG=FILE it logs the steps' bounds for
// scripts/stepcores.py.
func BenchmarkSeedBackfillFile(b *testing.B) {
	work := os.Getenv("ETHSTREAM_BENCH_WORKDIR")
	if work == "" {
		b.Skip("ETHSTREAM_BENCH_WORKDIR not set")
	}
	blocks := filepath.Join(work, "s3", Bucket, "v1.0", "eth", "blocks")
	runSeedBackfill(b, pipeline.SourceSpec{Name: ArchiveSource, Format: "s3archive",
		URI: fmt.Sprintf("file://%s?maxFilesPerTrigger=%d", filepath.ToSlash(blocks), 365)})
}

// runSeedBackfill runs b.N backfills of the reference query from src, each
// on a checkpoint of its own, and reports their CPU, allocations, GC
// cycles, peak RSS and each step's CPU.
func runSeedBackfill(b *testing.B, src pipeline.SourceSpec) {
	var cpu time.Duration
	var peak int64
	var allocs, mallocs, gcs uint64
	var m0, m1 runtime.MemStats
	var gcCPU float64
	gcm := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	steps, walls := map[string]int64{}, map[string]int64{}
	// The sampler polls the RSS itself: VmHWM (peakRSS) is kept lazily by
	// Linux and read 25 MB under the sampled peak in some runs.
	sampler := startPeakSampler(os.Getenv("ETHSTREAM_BENCH_PEAKPROFILE") != "")
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		resetPeakRSS()
		runtime.ReadMemStats(&m0)
		metrics.Read(gcm)
		gc0 := gcm[0].Value.Float64()
		b.StartTimer()
		c0 := cputime.Self()
		rec := &recorder{start: time.Now()}
		listeners := []engine.Listener{rec}
		var steplog *os.File
		if path := os.Getenv("ETHSTREAM_BENCH_STEPLOG"); path != "" {
			var err error
			if steplog, err = os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
				b.Fatal(err)
			}
			listeners = append(listeners, &stepLog{f: steplog})
		}
		_, err := pipeline.Run(context.Background(), pipeline.Config{Checkpoint: filepath.Join(dir, "checkpoint"),
			Table: filepath.Join(dir, "table"), LocalDir: filepath.Join(dir, "state-cache"), Sources: []pipeline.SourceSpec{src},
			Conf: EvolutionConf(200), Trigger: engine.Trigger{Kind: engine.AvailableNow}, Listeners: listeners})
		if err != nil {
			b.Fatal(err)
		}
		if steplog != nil {
			if err := steplog.Close(); err != nil {
				b.Fatal(err)
			}
		}
		cpu += cputime.Self() - c0
		b.StopTimer()
		runtime.ReadMemStats(&m1)
		metrics.Read(gcm)
		gcCPU += gcm[0].Value.Float64() - gc0
		allocs, mallocs, gcs = allocs+m1.TotalAlloc-m0.TotalAlloc, mallocs+m1.Mallocs-m0.Mallocs, gcs+uint64(m1.NumGC-m0.NumGC)
		peak = max(peak, peakRSS())
		for _, s := range rec.runSteps(0, 0) {
			steps[s.Step] += s.CPUMs
			walls[s.Step] += s.WallMs
		}
		b.StartTimer()
	}
	if out := os.Getenv("ETHSTREAM_BENCH_PEAKPROFILE"); out != "" {
		if prof := sampler.stop(); prof != nil {
			if err := os.WriteFile(out, prof, 0o644); err != nil {
				b.Error(err)
			}
		}
		b.Log(sampler.describe())
	} else {
		sampler.stop()
	}
	n := float64(b.N)
	b.ReportMetric(cpu.Seconds()/n, "cpu-s/op")
	b.ReportMetric(gcCPU/n, "gc-cpu-s/op")
	b.ReportMetric(float64(sampler.peak())/(1<<20), "sampledPeakRSS-MB")
	b.ReportMetric(float64(allocs)/n/(1<<20), "allocMB/op")
	b.ReportMetric(float64(mallocs)/n/1e6, "Mallocs/op")
	b.ReportMetric(float64(gcs)/n, "gcs/op")
	b.ReportMetric(float64(peak)/(1<<20), "peakRSS-MB")
	for s, ms := range steps {
		if ms > 0 {
			b.ReportMetric(float64(ms)/1000/n, s+"-cpu-s/op")
			b.ReportMetric(float64(walls[s])/1000/n, s+"-wall-s/op")
		}
	}
}
