package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
)

// tracePhases makes a scenario run print what the driver and the recorder
// do, in order: each batch's header, each phase's begin and end, each step
// and crash point (testdata/phases). After each progress event it prints
// whether the event's durations nest: the phases add up to at most
// triggerExecution (the demo's check 9).
func (s *scenario) tracePhases(o *Options, out *strings.Builder) {
	o.trace = func(p *batchPlan) { out.WriteString(p.Header() + "\n") }
	o.observe = func(ev string) { out.WriteString(ev + "\n") }
	o.Listeners = append(o.Listeners, ListenerFunc(func(p *stream.Progress) {
		fmt.Fprintf(out, "durations %s\n", nesting(p.DurationMs))
	}))
}

// nesting says whether the phases of durationMs add up to at most
// triggerExecution.
func nesting(dur map[string]int64) string {
	var sum int64
	for _, k := range []string{stream.DurLatestOffset, stream.DurQueryPlanning, stream.DurWalCommit, stream.DurGetBatch,
		stream.DurAddBatch, stream.DurRepartition, stream.DurCommitOffsets} {
		sum += dur[k]
	}
	if t := dur[stream.DurTriggerExecution]; sum > t {
		return fmt.Sprintf("overlap: phases %d ms > triggerExecution %d ms", sum, t)
	}
	return "nest"
}

// TestEventStatsOracle checks the event-time statistics the recorder keeps
// (progress eventTime min/max/avg and the commit watermark's max) against
// a brute-force pass over the same rows, nulls and late rows included, for
// random chunkings of random batches.
func TestEventStatsOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 500; iter++ {
		n := rng.IntN(200)
		base := int64(1_700_000_000_000_000) + rng.Int64N(1e12)
		ts := make([]int64, n)
		null := make([]bool, n)
		for i := range ts {
			ts[i] = base + rng.Int64N(4e9) - 2e9 // µs, either side of base
			null[i] = rng.IntN(7) == 0
		}
		var got eventStats
		for lo := 0; lo < n; {
			hi := min(n, lo+1+rng.IntN(40))
			c := stream.Column{Name: "ts", Type: stream.Timestamp, Int64s: ts[lo:hi]}
			if rng.IntN(2) == 0 {
				c.Valid = make([]bool, hi-lo)
				for i := range c.Valid {
					c.Valid[i] = !null[lo+i]
				}
			} else {
				// Without a validity vector every value counts.
				for i := lo; i < hi; i++ {
					null[i] = false
				}
			}
			got.add(&c, nil)
			lo = hi
		}
		var want eventStats
		var sum float64
		for i, v := range ts {
			if null[i] {
				continue
			}
			if want.n == 0 {
				want.min, want.max = v, v
			}
			want.min, want.max = min(want.min, v), max(want.max, v)
			sum += float64(v / 1000)
			want.n++
		}
		if got.n != want.n || got.min != want.min || got.max != want.max {
			t.Fatalf("iteration %d: got n=%d min=%d max=%d, want n=%d min=%d max=%d", iter, got.n, got.min, got.max, want.n, want.min, want.max)
		}
		if want.n > 0 {
			// avg in ms: the float sums may round differently, by at most a ms.
			g, w := got.sumMs/float64(got.n), sum/float64(want.n)
			if math.Abs(g-w) > 1 {
				t.Fatalf("iteration %d: avg %f ms, want %f ms", iter, g, w)
			}
		}
	}
}

// lineRecorder is a LineListener that keeps what it was given.
type lineRecorder struct {
	events []*stream.Progress
	lines  [][]byte
	plain  int // OnProgress calls
}

func (l *lineRecorder) OnProgress(p *stream.Progress) { l.plain++ }
func (l *lineRecorder) OnProgressLine(p *stream.Progress, line []byte) {
	l.events, l.lines = append(l.events, p), append(l.lines, line)
}

// TestProgressEncodedOnce checks that the event is marshalled once: a
// LineListener gets exactly the bytes appended to the checkpoint's progress
// log (and no OnProgress call), the --progress file (JSONLListener) holds
// the same lines, and those bytes are the event's encoding.
func TestProgressEncodedOnce(t *testing.T) {
	s := newScenario()
	w := &srcWorld{start: 1, available: 30, max: 10}
	lr := &lineRecorder{}
	jl := &JSONLListener{FS: s.fs, Path: "/progress.jsonl"}
	q := Query{Name: "blocks", Columns: []string{ethblock.ColBlockTS, ethblock.ColMiner, stream.ColSource},
		Watermark: &Watermark{Column: ethblock.ColBlockTS},
		Sources:   []NamedSource{{Name: "a", Source: &memSource{w: w, name: "a"}}},
		Operator:  &countOp{}, Sink: streamtest.Plain(s.table), Trigger: Trigger{Kind: AvailableNow},
		Conf: map[string]string{checkpoint.ConfSourceEvolution: "true"}}
	sum, err := Run(context.Background(), q, Options{CheckpointDir: ckptDir, FS: s.fs, Clock: s.clock, Listeners: []Listener{lr, jl}})
	if err != nil || sum.DataBatches != 3 {
		t.Fatalf("run: %+v %v", sum, err)
	}
	if jl.Err != nil {
		t.Fatal(jl.Err)
	}
	if lr.plain != 0 || len(lr.lines) != 3 {
		t.Fatalf("line listener: %d OnProgress calls, %d lines", lr.plain, len(lr.lines))
	}
	var want strings.Builder
	for i, line := range lr.lines {
		b, err := json.Marshal(lr.events[i])
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != string(line) {
			t.Fatalf("event %d: line\n%s\nencoding\n%s", i, line, b)
		}
		want.Write(line)
		want.WriteString("\n")
	}
	if got := readAll(t, s.fs, "/progress.jsonl"); got != want.String() {
		t.Fatalf("--progress file\n%s\nwant\n%s", got, want.String())
	}
	var log strings.Builder
	segs, err := checkpoint.Dir{FS: s.fs, Path: ckptDir}.ProgressSegments()
	if err != nil {
		t.Fatal(err)
	}
	for _, seg := range segs {
		log.WriteString(readAll(t, s.fs, seg.Path))
	}
	if log.String() != want.String() {
		t.Fatalf("progress log\n%s\nwant\n%s", log.String(), want.String())
	}
}

func readAll(t *testing.T, fs vfs.FS, path string) string {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
