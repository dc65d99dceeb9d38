package demo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"
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

// peakSampler polls the process's RSS and keeps the highest seen, and with
// profiles the heap profile and the runtime's memory figures taken there.
type peakSampler struct {
	done     chan struct{}
	wg       sync.WaitGroup
	profiles bool

	mu      sync.Mutex
	rss     int64 // the highest RSS sampled, bytes
	at      time.Duration
	start   time.Time
	profile []byte
	figures []metrics.Sample
}

// peakFigures are the runtime/metrics read at each new peak.
var peakFigures = []string{
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/stacks:bytes",
	"/memory/classes/total:bytes",
	"/gc/heap/goal:bytes",
	"/gc/heap/live:bytes",
}

func startPeakSampler(profiles bool) *peakSampler {
	s := &peakSampler{done: make(chan struct{}), start: time.Now(), profiles: profiles}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
			}
			rss := currentRSS()
			if !s.profiles {
				s.mu.Lock()
				s.rss = max(s.rss, rss)
				s.mu.Unlock()
				continue
			}
			// A new profile only past 4 MB above the last: taking one
			// costs milliseconds of CPU.
			if rss <= s.rss+4<<20 {
				continue
			}
			var buf bytes.Buffer
			_ = pprof.Lookup("heap").WriteTo(&buf, 0)
			fs := make([]metrics.Sample, len(peakFigures))
			for i, n := range peakFigures {
				fs[i].Name = n
			}
			metrics.Read(fs)
			s.mu.Lock()
			s.rss, s.at, s.profile, s.figures = rss, time.Since(s.start), buf.Bytes(), fs
			s.mu.Unlock()
		}
	}()
	return s
}

// peak is the highest RSS sampled, bytes.
func (s *peakSampler) peak() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rss
}

// stop ends the sampling and writes the profile of the highest peak to out
// (none: "").
func (s *peakSampler) stop(out string) error {
	close(s.done)
	s.wg.Wait()
	if s.profile == nil || out == "" {
		return nil
	}
	return os.WriteFile(out, s.profile, 0o644)
}

// describe is the peak's breakdown: RSS, the Go runtime's figures, and the
// rest (memory the runtime did not map: cgo's, Pebble's).
func (s *peakSampler) describe() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var sb strings.Builder
	fmt.Fprintf(&sb, "peak RSS %.0f MB at %.1f s", float64(s.rss)/1e6, s.at.Seconds())
	var goTotal, released uint64
	for _, f := range s.figures {
		v := f.Value.Uint64()
		fmt.Fprintf(&sb, "; %s %.0f MB", strings.TrimPrefix(f.Name, "/memory/classes/"), float64(v)/1e6)
		switch f.Name {
		case "/memory/classes/total:bytes":
			goTotal = v
		case "/memory/classes/heap/released:bytes":
			released = v
		}
	}
	fmt.Fprintf(&sb, "; RSS beyond the Go runtime's mapped memory %.0f MB", (float64(s.rss)-float64(goTotal-released))/1e6)
	return sb.String()
}
