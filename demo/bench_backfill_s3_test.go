package demo

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkSeedBackfillS3 runs the bench's S3 backfill leg alone: the
// reference query, 200 state partitions, availableNow, 365 files per
// trigger, reading the archive of $ETHSTREAM_BENCH_WORKDIR from an S3
// endpoint in a process of its own, as `ethstream bench` does
// ($ETHSTREAM_BENCH_SERVE_S3 names the ethstream binary whose serve-s3 it
// starts; skipped when either is unset; $ETHSTREAM_BENCH_S3_OPTIONS adds
// source options, e.g. parallelism=4). Reported per backfill as
// BenchmarkSeedBackfillFile does, plus the endpoint's CPU seconds.
//
// Both benchmarks poll this process's RSS every 20 ms (sampledPeakRSS-MB,
// beside VmHWM's peakRSS-MB). With
// $ETHSTREAM_BENCH_PEAKPROFILE set to a file, the sampler also takes, at
// each new peak, the heap profile (in use as of the last collection) and
// the runtime's memory figures; the profile of the highest peak is written
// to the file and the figures are logged, so that what holds the peak RSS
// is visible (the Go heap's live and unused parts, stacks, and what lies
// outside the Go runtime: Pebble's memtables and block cache).
func BenchmarkSeedBackfillS3(b *testing.B) {
	work, exe := os.Getenv("ETHSTREAM_BENCH_WORKDIR"), os.Getenv("ETHSTREAM_BENCH_SERVE_S3")
	if work == "" || exe == "" {
		b.Skip("ETHSTREAM_BENCH_WORKDIR or ETHSTREAM_BENCH_SERVE_S3 not set")
	}
	ep, err := startEndpoint(context.Background(), []string{exe, "serve-s3"}, filepath.Join(work, "s3"))
	if err != nil {
		b.Fatal(err)
	}
	defer ep.stop()
	e0, err := ep.cpu()
	if err != nil {
		b.Fatal(err)
	}
	src := archiveSourceAt(ep.url, 365)
	if extra := os.Getenv("ETHSTREAM_BENCH_S3_OPTIONS"); extra != "" {
		src.URI += "&" + extra
	}
	runSeedBackfill(b, src)
	e1, err := ep.cpu()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric((e1-e0).Seconds()/float64(b.N), "endpoint-cpu-s/op")
}
