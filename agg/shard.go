package agg

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/ethstream/ethstream/stream"
)

// Sharded Process: a windowed aggregation folds each chunk into two
// partials at once, one per core, each keeping the window instances of its
// own parity of window index (partial.assign). A key holds its window, so
// the two partials' keys are disjoint and no two entries merge: Finish
// orders each partial's entries by key on a core of its own and merges the
// two orders (in update mode, so the output is the same row for row; in
// complete mode it emits the state, not the entries). Append mode keeps one
// partial: it emits windows closed at merge in entry order, which two
// partials would change.
//
// Each partial still scans every row of the chunk (the cheap part: its
// window index); only the rows of its windows reach the group index and
// the accumulators, where a seed backfill spent most of Process (the
// profile of issue 43: 46% of the backfill on one goroutine).

// shardMinRows is the smallest chunk folded on two goroutines: below it the
// handoff costs more than it saves (a live batch's chunks are a few rows),
// and the shards fold it one after the other on the caller's goroutine.
var shardMinRows = 2048

// shardsFor is how many partials a plan folds chunks into: two for a
// windowed plan outside append mode when the process may run two
// goroutines at once, else one.
func shardsFor(p *plan) int {
	if !p.window || p.spec.Mode == Append || runtime.GOMAXPROCS(0) < 2 {
		return 1
	}
	return 2
}

// newShards returns n partials of plan p, partial i keeping shard i.
func newShards(p *plan, n int) []*partial {
	pts := make([]*partial, n)
	for i := range pts {
		pts[i] = newPartial(p)
		pts[i].shard, pts[i].nShards = int64(i), int64(n)
	}
	return pts
}

// shards folds chunks into its partials: pts[0] on the caller's goroutine,
// each other one on a worker goroutine of its own, started by the batch's
// first chunk of shardMinRows rows and stopped by stop (Finish, Abort,
// Close), so that no goroutine outlives a batch.
//
// A chunk its producer lends (stream.Lend) is retained for each worker and
// queued, up to shardQueue chunks a worker, and add returns once the
// caller's partial has it: the worker folds it behind, on whichever core
// is free, and releases it. Waiting for the worker at every chunk left the
// two folds on one core in most chunks of a seed backfill (a woken
// goroutine is queued on its waker's P, and another P takes it only once
// it is awake; README, "Where the second core idles"). A chunk not lent
// (or with a worker failed) is folded as before: the caller waits for the
// worker's fold, behind the chunks queued before it. The figures of the
// chunks folded behind are the worker's until stop, which returns them,
// and its first error fails the next add or stop, the chunks after it left
// unfolded: the batch fails with the error of the earliest chunk (of the
// first partial in a chunk), as if every chunk were folded in turn. Handing
// a chunk over allocates nothing (TestProcessAllocations). Not safe for
// concurrent use.
type shards struct {
	pts     []*partial
	sts     []chunkStats
	errs    []error
	seq     int64          // the chunks added in the batch
	workers []*shardWorker // per worker (index 0 unused); nil when stopped
	wg      sync.WaitGroup
}

// shardQueue is how many chunks a worker may hold to fold behind the
// caller: enough to ride out a chunk that takes the worker longer (or the
// caller shorter) than usual, few enough to keep little of the producer's
// storage retained.
const shardQueue = 4

// shardWorker is a worker's queue and what it reports back. The driver
// reads st, err and errSeq only after an ack or once the worker ended.
type shardWorker struct {
	jobs   chan shardJob
	acks   chan struct{} // a job with ack folded (or skipped)
	failed atomic.Bool   // err is set
	st     chunkStats    // the figures of the lent chunks folded
	err    error         // the first error
	errSeq int64         // its chunk
}

// shardJob is one chunk for a worker (nil in: only an ack).
type shardJob struct {
	in   *stream.Batch
	wmUs int64
	seq  int64
	lent bool // retained for the worker: released once folded
	ack  bool // the caller waits: the figures go in sts and errs
}

func newShardSet(pts []*partial) *shards {
	return &shards{pts: pts, sts: make([]chunkStats, len(pts)), errs: make([]error, len(pts))}
}

// add folds in into every partial and returns the chunk's figures (those
// of the partials folded by now), each row counted once: the rows without
// event time by partial 0 (every one skips them), the dropped instances by
// the partial whose window they are. The first partial's error wins.
func (s *shards) add(in *stream.Batch, wmUs int64) (chunkStats, error) {
	pts := s.pts
	if len(pts) == 1 {
		return pts[0].add(in, wmUs)
	}
	s.seq++
	if s.workers == nil && in.Len < shardMinRows {
		for i, pt := range pts {
			s.sts[i], s.errs[i] = pt.add(in, wmUs)
		}
		return s.sum()
	}
	if s.workers == nil {
		s.start()
	}
	if s.failed() {
		s.sync()
		return chunkStats{}, s.firstErr(nil)
	}
	// A small chunk also goes to the workers: their partials are theirs
	// while chunks are queued. A lent one goes without a wait.
	lent := in.Len >= shardMinRows
	for _, w := range s.workers[1:] {
		if lent && !in.Retain() {
			lent = false
		}
		w.jobs <- shardJob{in: in, wmUs: wmUs, seq: s.seq, lent: lent, ack: !lent}
	}
	s.sts[0], s.errs[0] = pts[0].add(in, wmUs)
	if !lent {
		for _, w := range s.workers[1:] {
			<-w.acks
		}
	} else {
		for i := 1; i < len(pts); i++ {
			s.sts[i], s.errs[i] = chunkStats{}, nil
		}
	}
	if s.errs[0] != nil || s.failed() {
		if lent {
			s.sync() // the workers' errors are read after an ack
		}
		return chunkStats{}, s.firstErr(s.errs[0])
	}
	return s.sum()
}

// sum is the chunk's figures from sts, or the first partial's error.
func (s *shards) sum() (chunkStats, error) {
	st := chunkStats{nullTS: s.sts[0].nullTS}
	for i := range s.pts {
		if s.errs[i] != nil {
			return st, s.errs[i]
		}
		st.dropped += s.sts[i].dropped
		st.lateRetractions += s.sts[i].lateRetractions
	}
	return st, nil
}

// failed reports whether a worker failed.
func (s *shards) failed() bool {
	for _, w := range s.workers[1:] {
		if w.failed.Load() {
			return true
		}
	}
	return false
}

// sync waits until the workers folded every chunk queued.
func (s *shards) sync() {
	for _, w := range s.workers[1:] {
		w.jobs <- shardJob{ack: true}
	}
	for _, w := range s.workers[1:] {
		<-w.acks
	}
}

// firstErr is the error of the earliest chunk, of the first partial in a
// chunk: a worker's (after an ack or once it ended) or err0, the first
// partial's in the chunk added last.
func (s *shards) firstErr(err0 error) error {
	err, seq := err0, s.seq
	if err0 == nil {
		seq++
	}
	for _, w := range s.workers[1:] {
		if w.err != nil && w.errSeq < seq {
			err, seq = w.err, w.errSeq
		}
	}
	return err
}

// start starts a worker per partial but the first.
func (s *shards) start() {
	s.workers = make([]*shardWorker, len(s.pts))
	for i := 1; i < len(s.pts); i++ {
		w := &shardWorker{jobs: make(chan shardJob, shardQueue), acks: make(chan struct{}, 1)}
		s.workers[i] = w
		s.wg.Go(func() {
			for j := range w.jobs {
				if j.in != nil && w.err == nil {
					st, err := s.pts[i].add(j.in, j.wmUs)
					switch {
					case err != nil:
						w.err, w.errSeq = err, j.seq
						w.failed.Store(true)
					case j.ack:
						s.sts[i] = st
					default:
						w.st.dropped += st.dropped
						w.st.lateRetractions += st.lateRetractions
					}
				}
				if j.ack {
					s.errs[i] = nil // a failure is the worker's err: firstErr orders it
					w.acks <- struct{}{}
				}
				if j.lent {
					j.in.Release()
				}
			}
		})
	}
}

// stop ends the workers (if running), waits for them and returns the
// figures of the chunks they folded behind the caller since start, or
// their first error (the earliest chunk's).
func (s *shards) stop() (chunkStats, error) {
	if s.workers == nil {
		s.seq = 0
		return chunkStats{}, nil
	}
	for _, w := range s.workers[1:] {
		close(w.jobs)
	}
	s.wg.Wait()
	var st chunkStats
	for _, w := range s.workers[1:] {
		st.dropped += w.st.dropped
		st.lateRetractions += w.st.lateRetractions
	}
	err := s.firstErr(nil)
	s.workers, s.seq = nil, 0
	return st, err
}
