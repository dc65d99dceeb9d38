package agg

import (
	"runtime"
	"sync"

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
// Close), so that no goroutine outlives a batch. Handing a chunk over
// allocates nothing (TestProcessAllocations). Not safe for concurrent use.
type shards struct {
	pts  []*partial
	sts  []chunkStats
	errs []error
	jobs []chan shardJob // per worker (index 0 unused)
	done chan struct{}
	wg   sync.WaitGroup
}

// shardJob is one chunk for a worker.
type shardJob struct {
	in   *stream.Batch
	wmUs int64
}

func newShardSet(pts []*partial) *shards {
	return &shards{pts: pts, sts: make([]chunkStats, len(pts)), errs: make([]error, len(pts))}
}

// add folds in into every partial and returns the chunk's figures, each
// row counted once: the rows without event time by partial 0 (every one
// skips them), the dropped instances by the partial whose window they are.
// The first partial's error wins.
func (s *shards) add(in *stream.Batch, wmUs int64) (chunkStats, error) {
	pts := s.pts
	if len(pts) == 1 {
		return pts[0].add(in, wmUs)
	}
	if in.Len < shardMinRows {
		for i, pt := range pts {
			s.sts[i], s.errs[i] = pt.add(in, wmUs)
		}
	} else {
		if s.jobs == nil {
			s.start()
		}
		for i := 1; i < len(pts); i++ {
			s.jobs[i] <- shardJob{in, wmUs}
		}
		s.sts[0], s.errs[0] = pts[0].add(in, wmUs)
		for i := 1; i < len(pts); i++ {
			<-s.done
		}
	}
	st := chunkStats{nullTS: s.sts[0].nullTS}
	for i := range pts {
		if s.errs[i] != nil {
			return st, s.errs[i]
		}
		st.dropped += s.sts[i].dropped
		st.lateRetractions += s.sts[i].lateRetractions
	}
	return st, nil
}

// start starts a worker per partial but the first.
func (s *shards) start() {
	s.jobs = make([]chan shardJob, len(s.pts))
	s.done = make(chan struct{}, len(s.pts))
	for i := 1; i < len(s.pts); i++ {
		s.jobs[i] = make(chan shardJob)
		s.wg.Go(func() {
			for j := range s.jobs[i] {
				s.sts[i], s.errs[i] = s.pts[i].add(j.in, j.wmUs)
				s.done <- struct{}{}
			}
		})
	}
}

// stop ends the workers (if running) and waits for them.
func (s *shards) stop() {
	if s.jobs == nil {
		return
	}
	for _, c := range s.jobs[1:] {
		close(c)
	}
	s.wg.Wait()
	s.jobs, s.done = nil, nil
}
