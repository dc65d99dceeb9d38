package demo

import (
	"bytes"
	"fmt"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"sync"
	"time"
)

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

// stop ends the sampling and returns the heap profile taken at the highest
// peak (nil without profiles).
func (s *peakSampler) stop() []byte {
	close(s.done)
	s.wg.Wait()
	return s.profile
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
