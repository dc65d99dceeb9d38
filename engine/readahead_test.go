package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/checkpoint"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
)

// aheadSource is a memSource that behaves as the archive sources do: it
// scribbles over each chunk once emit returns (its slices decode the next
// file), tells each ReadBatch to the sink, checks that the engine calls it
// from one goroutine at a time (a Commit or a LatestOffset during a
// ReadBatch is a problem, so is any call during a LatestOffset) and that a
// read writes nothing durable early (offsets/N+1 never exists before
// commits/N).
type aheadSource struct {
	memSource
	s        *scenario
	inRead   atomic.Int32
	inPoll   atomic.Int32
	failRead int // the failRead-th ReadBatch fails (0: none)
	failPoll int // the failPoll-th LatestOffset fails (0: none)
	// holdPoll, if set, is called by the n-th LatestOffset before it
	// answers.
	holdPoll func(n int)
	n, polls int
	mu       sync.Mutex
	started  map[string]chan struct{} // by start offset, closed once read
	problems []string
}

// startedCh is closed once a ReadBatch from start has begun.
func (a *aheadSource) startedCh(start string) chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.started == nil {
		a.started = map[string]chan struct{}{}
	}
	ch, ok := a.started[start]
	if !ok {
		ch = make(chan struct{})
		a.started[start] = ch
	}
	return ch
}

var (
	errAheadRead = errors.New("archive file unreadable")
	errAheadPoll = errors.New("archive listing failed")
)

func (a *aheadSource) problem(format string, args ...any) {
	a.mu.Lock()
	a.problems = append(a.problems, fmt.Sprintf(format, args...))
	a.mu.Unlock()
}

func (a *aheadSource) ReadBatch(ctx context.Context, start, end stream.Offset, emit func(*stream.Batch) error) error {
	if a.inRead.Add(1) != 1 {
		a.problem("two ReadBatch calls at once")
	}
	defer a.inRead.Add(-1)
	if a.inPoll.Load() != 0 {
		a.problem("ReadBatch(%s) during a LatestOffset", start)
	}
	offs, _ := a.s.fs.List(ckptDir + "/" + checkpoint.OffsetsDir)
	commits, _ := a.s.fs.List(ckptDir + "/" + checkpoint.CommitsDir)
	if done := len(files(commits)); len(files(offs)) > done+1 {
		a.problem("read %s..%s with %d offsets files and %d commits", start, end, len(files(offs)), done)
	}
	a.mu.Lock()
	a.n++
	fail := a.n == a.failRead
	a.mu.Unlock()
	if ch := a.startedCh(string(start)); ch != nil {
		select {
		case <-ch:
		default:
			close(ch)
		}
	}
	if fail {
		return errAheadRead
	}
	return a.memSource.ReadBatch(ctx, start, end, func(b *stream.Batch) error {
		err := emit(b)
		for i := range b.Columns {
			c := &b.Columns[i]
			for j := range c.Int64s {
				c.Int64s[j] = -1
			}
			for j := range c.Strings {
				c.Strings[j] = "scribbled"
			}
		}
		return err
	})
}

func (a *aheadSource) Commit(ctx context.Context, end stream.Offset) error {
	if a.inRead.Load() != 0 {
		a.problem("Commit(%s) during a ReadBatch", end)
	}
	if a.inPoll.Load() != 0 {
		a.problem("Commit(%s) during a LatestOffset", end)
	}
	return a.memSource.Commit(ctx, end)
}

func (a *aheadSource) LatestOffset(ctx context.Context, start stream.Offset) (stream.Offset, error) {
	if a.inRead.Load() != 0 {
		a.problem("LatestOffset(%s) during a ReadBatch", start)
	}
	if a.inPoll.Add(1) != 1 {
		a.problem("two LatestOffset calls at once")
	}
	defer a.inPoll.Add(-1)
	if a.polls++; a.polls == a.failPoll {
		return nil, errAheadPoll
	}
	if a.holdPoll != nil {
		a.holdPoll(a.polls)
	}
	return a.memSource.LatestOffset(ctx, start)
}

// files drops temp files from a listing.
func files(names []string) []string {
	var out []string
	for _, n := range names {
		if !strings.HasPrefix(n, ".") {
			out = append(out, n)
		}
	}
	return out
}

// waitReadSink holds batch N's sink write until the ReadBatch of batch
// N+1 (from block 10(N+1)) has begun, giving up after 10 s once.
type waitReadSink struct {
	stream.Sink
	src    *aheadSource
	last   int64 // the last batch: nothing is read after it
	missed []int64
}

func (w *waitReadSink) AddBatch(ctx context.Context, id int64, out *stream.Batch) (stream.SinkProgress, error) {
	if id < w.last && len(w.missed) == 0 {
		select {
		case <-w.src.startedCh(fmt.Sprintf(`{"block":%d}`, 10*(id+1))):
		case <-time.After(10 * time.Second): // a serial driver: never
			w.missed = append(w.missed, id)
		}
	}
	return w.Sink.AddBatch(ctx, id, out)
}

func aheadQuery(s *scenario, src *aheadSource, sink stream.Sink) Query {
	return Query{Columns: []string{ethblock.ColBlockTS, ethblock.ColMiner, stream.ColSource}, Operator: &countOp{},
		Watermark: &Watermark{Column: ethblock.ColBlockTS, Delay: time.Hour}, Sink: sink,
		Trigger: Trigger{Kind: AvailableNow}, Conf: map[string]string{checkpoint.ConfSourceEvolution: "true"},
		Sources: []NamedSource{{"a", src}}}
}

// TestReadAheadOverlapsFinish: in an availableNow run, batch N+1's input is
// read while batch N writes its sink (the sink waits for that read: a
// serial driver reads it only after commits/N), each chunk is copied before
// the source re-uses it (the table is right although the source scribbles
// over every chunk after emit), at most a few bytes are held (a budget
// smaller than a chunk still makes progress), nothing durable is written
// early, and the source is never called while its read-ahead reads it.
func TestReadAheadOverlapsFinish(t *testing.T) {
	s := newScenario()
	s.sources["a"] = &srcWorld{start: 1, available: 50, max: 10}
	src := &aheadSource{memSource: memSource{w: s.sources["a"], name: "a"}, s: s}
	sink := &waitReadSink{Sink: streamtest.Plain(s.table), src: src, last: 4}
	sum, err := Run(context.Background(), aheadQuery(s, src, sink),
		Options{CheckpointDir: ckptDir, FS: s.fs, Clock: s.clock, aheadBytes: 64})
	if err != nil || sum.LastBatchID != 4 || sum.DataBatches != 5 {
		t.Fatalf("run: %+v %v", sum, err)
	}
	if len(sink.missed) > 0 {
		t.Errorf("batch %d's sink wrote with no read of the next batch alongside", sink.missed[0])
	}
	for _, p := range src.problems {
		t.Error(p)
	}
	if got := s.verifyTable(); !strings.HasPrefix(got, "ok: 50 blocks") {
		t.Fatal(got)
	}
	want := `[{"block":10} {"block":20} {"block":30} {"block":40} {"block":50}]`
	if got := fmt.Sprint(s.sources["a"].commits); got != want {
		t.Errorf("source commits %s, want %s (each batch's, in order)", got, want)
	}
}

// wroteSink tells on wrote each batch whose sink write began.
type wroteSink struct {
	stream.Sink
	wrote chan int64
}

func (w *wroteSink) AddBatch(ctx context.Context, id int64, out *stream.Batch) (stream.SinkProgress, error) {
	w.wrote <- id
	return w.Sink.AddBatch(ctx, id, out)
}

// TestReadAheadPollsOffTheDriver: the read-ahead's poll for batch N+1 (a
// source's LatestOffset, which may write its own log durably) runs beside
// batch N's finish and sink write, not before them on the driver's
// goroutine: each poll after the first waits for the sink write of the
// batch that started it (a driver polling before its Finish would never
// get there), then a while longer, during which the driver must call the
// source for nothing (batch N's Commit waits for the poll).
func TestReadAheadPollsOffTheDriver(t *testing.T) {
	s := newScenario()
	s.sources["a"] = &srcWorld{start: 1, available: 30, max: 10}
	src := &aheadSource{memSource: memSource{w: s.sources["a"], name: "a"}, s: s}
	sink := &wroteSink{Sink: streamtest.Plain(s.table), wrote: make(chan int64, 16)}
	var missed []int
	src.holdPoll = func(n int) {
		if n == 1 || len(missed) > 0 {
			return // the first trigger's own poll; or the driver is serial
		}
		select {
		case <-sink.wrote:
		case <-time.After(5 * time.Second): // a poll on the driver: never
			missed = append(missed, n)
		}
		// Room for a Commit that would not wait for the poll.
		time.Sleep(20 * time.Millisecond)
	}
	sum, err := Run(context.Background(), aheadQuery(s, src, sink),
		Options{CheckpointDir: ckptDir, FS: s.fs, Clock: s.clock})
	if err != nil || sum.LastBatchID != 2 || sum.DataBatches != 3 {
		t.Fatalf("run: %+v %v", sum, err)
	}
	if len(missed) > 0 {
		t.Errorf("poll %d held the batch's finish: no sink write came while it waited", missed[0])
	}
	for _, p := range src.problems {
		t.Error(p)
	}
	if got := s.verifyTable(); !strings.HasPrefix(got, "ok: 30 blocks") {
		t.Fatal(got)
	}
	want := `[{"block":10} {"block":20} {"block":30}]`
	if got := fmt.Sprint(s.sources["a"].commits); got != want {
		t.Errorf("source commits %s, want %s (each batch's, in order)", got, want)
	}
}

// TestReadAheadFailure: a read-ahead that fails fails the batch it reads
// for, not the batch that was finishing: batch 1 commits, batch 2 fails
// with the source's error (offsets/2 written, as a direct read's failure
// leaves it), and the restart re-runs batch 2 and completes the table.
func TestReadAheadFailure(t *testing.T) {
	s := newScenario()
	s.sources["a"] = &srcWorld{start: 1, available: 50, max: 10}
	src := &aheadSource{memSource: memSource{w: s.sources["a"], name: "a"}, s: s, failRead: 3}
	sum, err := Run(context.Background(), aheadQuery(s, src, streamtest.Plain(s.table)),
		Options{CheckpointDir: ckptDir, FS: s.fs, Clock: s.clock})
	if !errors.Is(err, errAheadRead) || !strings.Contains(err.Error(), `batch 2: read source "a"`) || sum.LastBatchID != 1 {
		t.Fatalf("run: %+v %v", sum, err)
	}
	for _, p := range src.problems {
		t.Error(p)
	}
	src = &aheadSource{memSource: memSource{w: s.sources["a"], name: "a"}, s: s}
	sum, err = Run(context.Background(), aheadQuery(s, src, streamtest.Plain(s.table)),
		Options{CheckpointDir: ckptDir, FS: s.fs, Clock: s.clock})
	if err != nil || sum.RerunBatchID != 2 || sum.LastBatchID != 4 {
		t.Fatalf("restart: %+v %v", sum, err)
	}
	if got := s.verifyTable(); !strings.HasPrefix(got, "ok: 50 blocks") {
		t.Fatal(got)
	}
}

// TestReadAheadCrash crashes the run at each point of batch 1 that follows
// its reads, while batch 2's read-ahead is in flight (blocked on a budget
// of one chunk), and restarts: nothing lost or doubled, and the restart
// plans batch 2 over the range the read-ahead was reading.
func TestReadAheadCrash(t *testing.T) {
	for _, point := range []string{"before-sink", "after-state-commit", "after-commit"} {
		t.Run(point, func(t *testing.T) {
			s := newScenario()
			s.sources["a"] = &srcWorld{start: 1, available: 50, max: 10}
			src := &aheadSource{memSource: memSource{w: s.sources["a"], name: "a"}, s: s}
			o := Options{CheckpointDir: ckptDir, FS: s.fs, Clock: s.clock, aheadBytes: 1}
			hits := 0
			o.crash = func(p string) error {
				if p == point {
					if hits++; hits == 2 {
						return errCrash
					}
				}
				return nil
			}
			_, err := Run(context.Background(), aheadQuery(s, src, streamtest.Plain(s.table)), o)
			if err != errCrash && !strings.Contains(fmt.Sprint(err), errCrash.Error()) {
				t.Fatalf("run: %v", err)
			}
			if src.n != 3 {
				t.Fatalf("%d reads before the crash, want 3 (batch 2's read-ahead among them)", src.n)
			}
			s.fs = s.fs.CrashClone(vfs.CrashCloneCfg{})
			src = &aheadSource{memSource: memSource{w: s.sources["a"], name: "a"}, s: s}
			sum, err := Run(context.Background(), aheadQuery(s, src, streamtest.Plain(s.table)),
				Options{CheckpointDir: ckptDir, FS: s.fs, Clock: s.clock})
			if err != nil || sum.LastBatchID != 4 {
				t.Fatalf("restart: %+v %v", sum, err)
			}
			for _, p := range src.problems {
				t.Error(p)
			}
			if got := s.verifyTable(); !strings.HasPrefix(got, "ok: 50 blocks") {
				t.Fatal(got)
			}
		})
	}
}

// TestReadAheadNotPastMaxBatches: a run that --max-batches ends reads
// nothing ahead of its last batch (the sources would admit a batch that
// no run plans yet), and a poll that fails while a batch finishes fails
// the next trigger, where the poll would have failed.
func TestReadAheadNotPastMaxBatches(t *testing.T) {
	s := newScenario()
	s.sources["a"] = &srcWorld{start: 1, available: 50, max: 10}
	src := &aheadSource{memSource: memSource{w: s.sources["a"], name: "a"}, s: s}
	q := aheadQuery(s, src, streamtest.Plain(s.table))
	q.MaxDataBatches = 2
	sum, err := Run(context.Background(), q, Options{CheckpointDir: ckptDir, FS: s.fs, Clock: s.clock})
	if err != nil || sum.LastBatchID != 1 {
		t.Fatalf("run: %+v %v", sum, err)
	}
	if src.n != 2 || src.polls != 2 {
		t.Errorf("%d reads and %d polls for 2 batches, want 2 of each", src.n, src.polls)
	}
	src = &aheadSource{memSource: memSource{w: s.sources["a"], name: "a"}, s: s, failPoll: 2}
	sum, err = Run(context.Background(), aheadQuery(s, src, streamtest.Plain(s.table)), Options{CheckpointDir: ckptDir, FS: s.fs, Clock: s.clock})
	if !errors.Is(err, errAheadPoll) || sum.LastBatchID != 2 {
		t.Fatalf("failed poll: %+v %v, want batch 2 committed, then the poll's error", sum, err)
	}
}

// TestCopyChunkKeepsView: the read-ahead's copy of a chunk keeps its
// dictionary views (stream.Dict) true of the copy, in storage of its own
// (the source reuses the chunk's once emit returns), through a recycled
// copy too; the literal source column has a view of its one value.
func TestCopyChunkKeepsView(t *testing.T) {
	st := &srcState{name: "s3_backfill"}
	mk := func(vals []string, idx []int32) *stream.Batch {
		rows := make([]string, len(idx))
		for i, k := range idx {
			rows[i] = vals[k]
		}
		c := stream.Column{Name: "miner", Type: stream.String, Strings: rows}
		c.Dict = stream.NewDict(rows, idx, vals)
		return st.withSourceColumn(&stream.Batch{Len: len(idx), Columns: []stream.Column{c}})
	}
	var dst *stream.Batch
	for round := range 3 {
		vals := []string{fmt.Sprint("0xa", round), fmt.Sprint("0xb", round), fmt.Sprint("0xc", round)}
		src := mk(vals, []int32{2, 0, 0, 1, 2, int32(round % 3)})
		if err := src.Validate(); err != nil {
			t.Fatal(err)
		}
		if src.Column(stream.ColSource).DictView() == nil {
			t.Fatal("the source column has no view")
		}
		dst = copyChunk(dst, src)
		// The source's storage is rewritten once emit returns.
		c := src.Column("miner")
		for j := range c.Dict.Index {
			c.Dict.Index[j] = 1
		}
		c.Dict.Values[0] = "rewritten"
		c.Strings[0] = "rewritten"
		if err := dst.Validate(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for i := range dst.Columns {
			if dst.Columns[i].DictView() == nil {
				t.Fatalf("round %d: the copy of %s has no view", round, dst.Columns[i].Name)
			}
		}
	}
}
