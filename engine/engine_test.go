package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
)

func TestSourceNames(t *testing.T) {
	for _, n := range []string{"mySource", "my_source", "MySource123", "_private", "source_123_test", "123source"} {
		if !ValidSourceName(n) {
			t.Errorf("%q should be valid", n)
		}
		if err := validateNames([]string{n}, settings{evolution: true}, false); err != nil {
			t.Errorf("%q: %v", n, err)
		}
	}
	for _, n := range []string{"my-source", "my source", "my.source", "my.source@123", "naïve", "a:b", "a\nb"} {
		if ValidSourceName(n) {
			t.Errorf("%q should be invalid", n)
		}
		err := validateNames([]string{n}, settings{evolution: true}, false)
		if !errcode.Is(err, errcode.InvalidSourceName) || !strings.Contains(err.Error(), fmt.Sprintf("%q", n)) {
			t.Errorf("%q: %v", n, err)
		}
	}
	cases := []struct {
		names []string
		s     settings
		code  string
	}{
		{[]string{"a", ""}, settings{evolution: true}, errcode.UnnamedSources},
		{[]string{"", ""}, settings{evolution: true}, errcode.UnnamedSources},
		{[]string{"", ""}, settings{}, ""},
		{[]string{"a", ""}, settings{}, errcode.SourceNamingUnsupported},
		{[]string{"a", "a"}, settings{evolution: true}, errcode.DuplicateSourceNames},
		{[]string{"a", "b"}, settings{evolution: true}, ""},
		{[]string{"a"}, settings{evolution: true, formatVersion: 1}, errcode.NamedSourcesRequireV2},
		{[]string{"a"}, settings{evolution: true, formatVersion: 2}, ""},
	}
	for _, c := range cases {
		if got := errcode.Code(validateNames(c.names, c.s, false)); got != c.code {
			t.Errorf("validateNames(%q, %+v) = %q, want %q", c.names, c.s, got, c.code)
		}
	}
	err := validateNames([]string{"a", "", "b", ""}, settings{evolution: true}, false)
	if !strings.Contains(err.Error(), "Leaf position 1; Leaf position 3") {
		t.Errorf("positions not listed: %v", err)
	}
}

// TestCrashAtEveryPoint crashes a run at every step of every batch (losing
// all unsynced bytes, or a random part of them), restarts until done, and
// checks the table against a recount: nothing lost, nothing doubled, and no
// temp file left behind.
func TestCrashAtEveryPoint(t *testing.T) {
	points := []string{"after-offsets", "before-sink", "sink", "after-state-commit", "after-commit"}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, point := range points {
		for nth := 1; nth <= 5; nth++ {
			for _, unsynced := range []int{0, 50} {
				t.Run(fmt.Sprintf("%s@%d/unsynced=%d", point, nth, unsynced), func(t *testing.T) {
					s := newScenario()
					s.sources["a"] = &srcWorld{start: 1, available: 40, max: 10}
					s.sources["b"] = &srcWorld{start: 101, available: 130, max: 7}
					mk := func() (Query, Options) {
						q := Query{Columns: []string{ethblock.ColBlockTS, ethblock.ColMiner, stream.ColSource}, Operator: &countOp{},
							Watermark: &Watermark{Column: ethblock.ColBlockTS, Delay: time.Hour},
							Sink:      streamtest.Plain(s.table), Trigger: Trigger{Kind: AvailableNow},
							Conf: map[string]string{checkpoint.ConfSourceEvolution: "true"},
							Sources: []NamedSource{{"a", &memSource{w: s.sources["a"], name: "a"}},
								{"b", &memSource{w: s.sources["b"], name: "b"}}}}
						return q, Options{CheckpointDir: ckptDir, FS: s.fs, Clock: s.clock}
					}
					q, o := mk()
					hits := 0
					crash := func(p string) error {
						if p == point {
							if hits++; hits == nth {
								return errCrash
							}
						}
						return nil
					}
					o.crash = crash
					if point == "sink" {
						// The process dies right after the sink's nth batch.
						s.table.Points = streamtest.MustPoints(fmt.Sprintf("after-sink@%d", nth))
					}
					_, err := Run(context.Background(), q, o)
					if err != errCrash && !strings.Contains(fmt.Sprint(err), errCrash.Error()) {
						t.Fatalf("run: %v", err)
					}
					cfg := vfs.CrashCloneCfg{UnsyncedDataPercent: unsynced}
					if unsynced > 0 {
						cfg.RNG = rng
					}
					s.fs = s.fs.CrashClone(cfg)
					s.table.Points = nil
					q, o = mk()
					if _, err := Run(context.Background(), q, o); err != nil {
						t.Fatalf("restart: %v", err)
					}
					if got := s.verifyTable(); !strings.HasPrefix(got, "ok: 70 blocks") {
						t.Fatalf("after restart: %s", got)
					}
					for _, dir := range []string{ckptDir, ckptDir + "/offsets", ckptDir + "/commits"} {
						names, _ := s.fs.List(dir)
						for _, n := range names {
							if strings.HasSuffix(n, ".tmp") {
								t.Fatalf("temp file left: %s/%s", dir, n)
							}
						}
					}
				})
			}
		}
	}
}

// TestProgressJSONShape pins the key order and omissions of Spark's
// StreamingQueryProgress serialisation.
func TestProgressJSONShape(t *testing.T) {
	name := "s3_backfill"
	p := &stream.Progress{ID: "q", RunID: "r", Timestamp: isoTime(1700000000000), BatchID: 3, BatchDuration: 12, NumInputRows: 5,
		InputRowsPerSecond: rate(5, 0), ProcessedRowsPerSecond: rate(5, 500*time.Millisecond),
		DurationMs:     map[string]int64{stream.DurWalCommit: 1, stream.DurAddBatch: 2, stream.DurTriggerExecution: 12},
		EventTime:      map[string]string{"watermark": isoTime(0), "min": isoTime(1)},
		StateOperators: []stream.OperatorProgress{{OperatorName: "agg", NumRowsTotal: 1, NumShufflePartitions: 8}},
		Sources: []stream.SourceProgress{{Description: "FileStreamSource[x]", Name: &name, EndOffset: json.RawMessage(`{"logOffset":1}`),
			LatestOffset: json.RawMessage(`{"logOffset":1}`), NumInputRows: 5}},
		Sink: stream.SinkProgress{Description: "DeltaSink[t]", NumOutputRows: -1}}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"q","runId":"r","name":null,"timestamp":"2023-11-14T22:13:20.000Z","batchId":3,"batchDuration":12,"numInputRows":5,` +
		`"processedRowsPerSecond":10,"durationMs":{"addBatch":2,"triggerExecution":12,"walCommit":1},` +
		`"eventTime":{"min":"1970-01-01T00:00:00.001Z","watermark":"1970-01-01T00:00:00.000Z"},` +
		`"stateOperators":[{"operatorName":"agg","numRowsTotal":1,"numRowsUpdated":0,"allUpdatesTimeMs":0,"numRowsRemoved":0,"allRemovalsTimeMs":0,"commitTimeMs":0,"memoryUsedBytes":0,"numRowsDroppedByWatermark":0,"numShufflePartitions":8,"numStateStoreInstances":0}],` +
		`"sources":[{"description":"FileStreamSource[x]","name":"s3_backfill","startOffset":null,"endOffset":{"logOffset":1},"latestOffset":{"logOffset":1},"numInputRows":5}],` +
		`"sink":{"description":"DeltaSink[t]","numOutputRows":-1}}`
	if string(b) != want {
		t.Fatalf("got\n%s\nwant\n%s", b, want)
	}
	if p.Kind() != stream.KindData {
		t.Fatalf("kind %s", p.Kind())
	}
}

// TestFlattenProgress runs the seeds' phases and flattens their progress.
func TestFlattenProgress(t *testing.T) {
	s := newScenario()
	s.sources["arch"] = &srcWorld{start: 1, available: 100, max: 30}
	s.sources["live"] = &srcWorld{start: 101, available: 100, max: 20, grow: 20}
	fs := s.fs
	run := func(phase string, srcs []string, conf map[string]string, trig Trigger, maxB int) {
		q := Query{Columns: []string{ethblock.ColBlockTS, ethblock.ColMiner, stream.ColSource}, Operator: &countOp{}, Sink: streamtest.Plain(s.table),
			Watermark: &Watermark{Column: ethblock.ColBlockTS, Delay: time.Hour}, Trigger: trig, MaxDataBatches: maxB,
			Conf: map[string]string{checkpoint.ConfSourceEvolution: "true"}}
		for k, v := range conf {
			q.Conf[k] = v
		}
		for _, n := range srcs {
			q.Sources = append(q.Sources, NamedSource{n, &memSource{w: s.sources[n], name: n}})
		}
		path := "/progress-" + phase + ".jsonl"
		o := Options{CheckpointDir: ckptDir, FS: fs, Clock: s.clock, Listeners: []Listener{ListenerFunc(func(p *stream.Progress) {
			b, _ := json.Marshal(p)
			if err := checkpoint.AppendLine(fs, path, b); err != nil {
				t.Fatal(err)
			}
		})}}
		if _, err := Run(context.Background(), q, o); err != nil {
			t.Fatal(err)
		}
	}
	run("backfill", []string{"arch"}, nil, Trigger{Kind: AvailableNow}, 0)
	run("add_live", []string{"arch", "live"}, nil, Trigger{Kind: ProcessingTime, Interval: time.Second}, 2)
	run("shrink", []string{"live"}, map[string]string{checkpoint.ConfStatePartitions: "8"}, Trigger{Kind: ProcessingTime, Interval: time.Second}, 1)
	err := FlattenProgress(fs, "/out", []PhaseFile{{"backfill", "/progress-backfill.jsonl"}, {"add_live", "/progress-add_live.jsonl"}, {"shrink", "/progress-shrink.jsonl"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := checkpoint.ReadFile(fs, "/out/batches.csv")
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if lines[0] != strings.Join(BatchesCSVHeader, ",") || len(lines) != 1+4+2+2 {
		t.Fatalf("batches.csv:\n%s", b)
	}
	var kinds []string
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		kinds = append(kinds, f[2]+":"+f[3]+":"+f[5])
	}
	want := "backfill:0:data backfill:1:data backfill:2:data backfill:3:data add_live:4:data add_live:5:data shrink:6:repartition shrink:7:data"
	if strings.Join(kinds, " ") != want {
		t.Fatalf("phases/kinds = %v", kinds)
	}
	sb, _ := checkpoint.ReadFile(fs, "/out/sources.csv")
	if !strings.Contains(string(sb), `add_live,4,0,arch,MemorySource[arch],"{""block"":100}","{""block"":100}"`) ||
		!strings.Contains(string(sb), `add_live,4,1,live,MemorySource[live],null,"{""block"":120}"`) {
		t.Fatalf("sources.csv:\n%s", sb)
	}
	// The checkpoint's own progress log has every event as well.
	all, err := ReadProgress(fs, ckptDir+"/progress.jsonl")
	if err != nil || len(all) != 8 {
		t.Fatalf("progress.jsonl: %d events, %v", len(all), err)
	}
}

// TestFileOpFaultLoop fails the i-th file operation of a run for every i
// (pebble's errorfs), then restarts on the surviving bytes: the restart
// always succeeds and the table always equals the recount.
func TestFileOpFaultLoop(t *testing.T) {
	setup := func() (*scenario, func(fs vfs.FS) (Query, Options)) {
		s := newScenario()
		s.sources["a"] = &srcWorld{start: 1, available: 30, max: 10}
		s.sources["b"] = &srcWorld{start: 101, available: 110, max: 4}
		return s, func(fs vfs.FS) (Query, Options) {
			q := Query{Columns: []string{ethblock.ColBlockTS, ethblock.ColMiner, stream.ColSource}, Operator: &countOp{},
				Sink: streamtest.Plain(s.table), Trigger: Trigger{Kind: AvailableNow},
				Conf: map[string]string{checkpoint.ConfSourceEvolution: "true", checkpoint.ConfMinBatchesToRetain: "2"},
				Sources: []NamedSource{{"a", &memSource{w: s.sources["a"], name: "a"}},
					{"b", &memSource{w: s.sources["b"], name: "b"}}}}
			return q, Options{CheckpointDir: ckptDir, FS: fs, Clock: s.clock}
		}
	}
	// Count the file operations of a clean run.
	s, mk := setup()
	// Atomic: commits/N is written alongside the state's commit.
	var count atomic.Int32
	q, o := mk(errorfs.Wrap(s.fs, errorfs.InjectorFunc(func(errorfs.Op) error { count.Add(1); return nil })))
	if _, err := Run(context.Background(), q, o); err != nil {
		t.Fatal(err)
	}
	ops := count.Load()
	failed := 0
	for i := int32(0); i < ops; i++ {
		s, mk := setup()
		q, o := mk(errorfs.Wrap(s.fs, errorfs.OnIndex(i)))
		_, err := Run(context.Background(), q, o)
		if err != nil {
			if !errors.Is(err, errorfs.ErrInjected) {
				t.Fatalf("op %d: unexpected error %v", i, err)
			}
			failed++
			s.fs = s.fs.CrashClone(vfs.CrashCloneCfg{})
			q, o = mk(s.fs)
			if _, err := Run(context.Background(), q, o); err != nil {
				t.Fatalf("op %d: restart: %v", i, err)
			}
		}
		if got := s.verifyTable(); !strings.HasPrefix(got, "ok: 40 blocks") {
			t.Fatalf("op %d: %s", i, got)
		}
	}
	if failed < int(ops)/2 {
		t.Fatalf("only %d of %d injected faults failed the run", failed, ops)
	}
	t.Logf("%d file operations, %d faults failed the run", ops, failed)
}

// TestCancelMidBatch: a cancelled context inside a batch abandons it; the
// next start re-runs it and nothing is lost or doubled. The trigger is
// processingTime: under availableNow the third read is batch 2's
// read-ahead, made while batch 1 finishes (readahead.go).
func TestCancelMidBatch(t *testing.T) {
	s := newScenario()
	s.sources["a"] = &srcWorld{start: 1, available: 50, max: 10}
	ctx, cancel := context.WithCancel(context.Background())
	src := &cancelSource{memSource: memSource{w: s.sources["a"], name: "a"}, cancel: cancel, at: 3}
	q := Query{Columns: []string{ethblock.ColBlockTS, ethblock.ColMiner, stream.ColSource}, Operator: &countOp{}, Sink: streamtest.Plain(s.table),
		Trigger: Trigger{Kind: ProcessingTime}, Conf: map[string]string{checkpoint.ConfSourceEvolution: "true"},
		Sources: []NamedSource{{"a", src}}}
	o := Options{CheckpointDir: ckptDir, FS: s.fs, Clock: s.clock}
	sum, err := Run(ctx, q, o)
	if !errors.Is(err, context.Canceled) || sum.LastBatchID != 1 {
		t.Fatalf("cancelled run: %+v %v", sum, err)
	}
	q.Sources = []NamedSource{{"a", &memSource{w: s.sources["a"], name: "a"}}}
	q.Operator, q.Trigger = &countOp{}, Trigger{Kind: AvailableNow}
	sum, err = Run(context.Background(), q, o)
	if err != nil || sum.RerunBatchID != 2 || sum.LastBatchID != 4 {
		t.Fatalf("restart: %+v %v", sum, err)
	}
	if got := s.verifyTable(); !strings.HasPrefix(got, "ok: 50 blocks") {
		t.Fatal(got)
	}
}

// TestSourcesGetRetention: a source that prunes its own log is handed the
// query's minBatchesToRetain (Spark's default when unset).
func TestSourcesGetRetention(t *testing.T) {
	for conf, want := range map[string]int{"": checkpoint.DefaultMinBatchesToRetain, "7": 7} {
		s := newScenario()
		s.sources["a"] = &srcWorld{start: 1, available: 5, max: 10}
		src := &memSource{w: s.sources["a"], name: "a"}
		q := Query{Columns: []string{ethblock.ColBlockTS, ethblock.ColMiner, stream.ColSource}, Operator: &countOp{}, Sink: streamtest.Plain(s.table),
			Trigger: Trigger{Kind: AvailableNow}, Conf: map[string]string{checkpoint.ConfSourceEvolution: "true"},
			Sources: []NamedSource{{"a", src}}}
		if conf != "" {
			q.Conf[checkpoint.ConfMinBatchesToRetain] = conf
		}
		if _, err := Run(context.Background(), q, Options{CheckpointDir: ckptDir, FS: s.fs, Clock: s.clock}); err != nil {
			t.Fatal(err)
		}
		if src.retain != want {
			t.Fatalf("conf %q: source got minBatchesToRetain %d, want %d", conf, src.retain, want)
		}
	}
}

type cancelSource struct {
	memSource
	cancel func()
	at     int
	reads  int
}

func (c *cancelSource) ReadBatch(ctx context.Context, start, end stream.Offset, emit func(*stream.Batch) error) error {
	if c.reads++; c.reads == c.at {
		c.cancel()
		return ctx.Err()
	}
	return c.memSource.ReadBatch(ctx, start, end, emit)
}

// probeErrOp fails the operator's no-data answer.
type probeErrOp struct {
	countOp
	probes int
}

var errProbe = errors.New("scan for closed windows failed")

func (o *probeErrOp) NeedsNoDataBatch(int64) (bool, error) {
	o.probes++
	return false, errProbe
}

// TestNoDataProbeError: the operator's no-data answer is a value the driver
// obtains only when the planner asks for it, and its error fails the run
// (it was logged and dropped once); the committed batches stay committed.
func TestNoDataProbeError(t *testing.T) {
	s := newScenario()
	s.sources["a"] = &srcWorld{start: 1, available: 20, max: 10}
	op := &probeErrOp{}
	q := Query{Columns: []string{ethblock.ColBlockTS, ethblock.ColMiner, stream.ColSource}, Operator: op, Sink: streamtest.Plain(s.table),
		Watermark: &Watermark{Column: ethblock.ColBlockTS, Delay: time.Minute},
		Trigger:   Trigger{Kind: AvailableNow}, Conf: map[string]string{checkpoint.ConfSourceEvolution: "true"},
		Sources: []NamedSource{{"a", &memSource{w: s.sources["a"], name: "a"}}}}
	sum, err := Run(context.Background(), q, Options{CheckpointDir: ckptDir, FS: s.fs, Clock: s.clock})
	if !errors.Is(err, errProbe) || sum.DataBatches != 2 || op.probes != 1 {
		t.Fatalf("run: %+v probes=%d %v", sum, op.probes, err)
	}
	if got := s.verifyTable(); !strings.HasPrefix(got, "ok: 20 blocks") {
		t.Fatal(got)
	}
}

// pollCancelSource cancels the run inside its at-th LatestOffset and
// returns the context's error, as a node request does on SIGINT.
type pollCancelSource struct {
	memSource
	cancel func()
	at     int
	polls  int
}

func (c *pollCancelSource) LatestOffset(ctx context.Context, start stream.Offset) (stream.Offset, error) {
	if c.polls++; c.polls == c.at {
		c.cancel()
		return nil, fmt.Errorf("poll the node: %w", ctx.Err())
	}
	return c.memSource.LatestOffset(ctx, start)
}

// TestCancelWhilePolling: a cancel that stops the sources' poll for the next
// batch is an interruption (nil error, Interrupted), not a failure, for
// every trigger kind: nothing of the next batch was written.
func TestCancelWhilePolling(t *testing.T) {
	for _, trig := range []Trigger{{Kind: ProcessingTime}, {Kind: RealTime}, {Kind: AvailableNow}} {
		s := newScenario()
		s.sources["a"] = &srcWorld{start: 1, available: 50, max: 10, grow: 5}
		ctx, cancel := context.WithCancel(context.Background())
		src := &pollCancelSource{memSource: memSource{w: s.sources["a"], name: "a"}, cancel: cancel, at: 3}
		q := Query{Columns: []string{ethblock.ColBlockTS, ethblock.ColMiner, stream.ColSource}, Operator: &countOp{}, Sink: streamtest.Plain(s.table),
			Trigger: trig, Conf: map[string]string{checkpoint.ConfSourceEvolution: "true"},
			Sources: []NamedSource{{"a", src}}}
		sum, err := Run(ctx, q, Options{CheckpointDir: ckptDir, FS: s.fs, Clock: s.clock})
		if err != nil || !sum.Interrupted || sum.LastBatchID != 1 {
			t.Fatalf("%v: cancelled while polling: %+v %v", trig.Kind, sum, err)
		}
		if got := s.verifyTable(); !strings.HasPrefix(got, "ok: 20 blocks") {
			t.Fatalf("%v: %s", trig.Kind, got)
		}
	}
}
