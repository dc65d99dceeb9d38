package agg

import (
	"runtime"

	"github.com/ethstream/ethstream/stream"
)

// A batch's partial aggregation runs in numLanes lanes, one partial table
// each: every group key belongs to exactly one lane (laneOf, a fixed
// function of the key's values), and every lane reads every chunk and folds
// only its own keys' rows. A group's rows are therefore folded by one lane,
// in input order, as a single table would fold them: each entry's
// accumulators (double sums and overflow included) are bit for bit the same
// whatever the split, and the batch's output, state and errors do not
// depend on it. Large chunks run their lanes on two goroutines: the hash
// lookups of a backfill (one per row, the table far beyond the caches) were
// the one serial stage of its read phase, half its wall time on the seed
// archive with the other core mostly idle. Finish appends the other lanes'
// entries to lane 0's columns (mergeLanes) and works on lane 0 alone.
const numLanes = 2

// parallelMinRows is the smallest chunk whose lanes run concurrently: a
// goroutine hand-off costs a few microseconds, a live batch's 20-row chunk
// folds in less.
const parallelMinRows = 1024

// newLanes returns the partial tables of a batch, one per lane.
func newLanes(p *plan) []*partial {
	ls := make([]*partial, numLanes)
	for i := range ls {
		ls[i] = newPartial(p)
		ls[i].lane, ls[i].lanes = uint64(i), numLanes
	}
	return ls
}

// laneRunner folds chunks into the lanes: lanes 1.. of a large chunk on
// goroutines of their own, started on the first such chunk and ended by
// stop (Operator.Close and a change of plan), so that a chunk costs no
// allocation. Not safe for concurrent use.
type laneRunner struct {
	ls    []*partial
	in    *stream.Batch // the chunk being folded
	wmUs  int64
	stats []chunkStats
	errs  []error
	work  []chan struct{} // lane i+1's worker waits on work[i]
	done  chan struct{}
}

func newLaneRunner(p *plan) *laneRunner {
	ls := newLanes(p)
	return &laneRunner{ls: ls, stats: make([]chunkStats, len(ls)), errs: make([]error, len(ls))}
}

// add folds one chunk into every lane and returns the chunk's figures
// (counted by lane 0: every lane sees every row) and the error a single
// table would return: a column error (the same in every lane) first, else
// the lowest overflowing aggregate of any lane.
func (r *laneRunner) add(in *stream.Batch, wmUs int64) (chunkStats, error) {
	parallel := in.Len >= parallelMinRows && runtime.GOMAXPROCS(0) > 1
	r.in, r.wmUs = in, wmUs
	if parallel {
		if r.work == nil {
			r.start()
		}
		for _, w := range r.work {
			w <- struct{}{}
		}
	}
	for i, l := range r.ls {
		if i == 0 || !parallel {
			r.stats[i], r.errs[i] = l.add(in, wmUs)
		}
	}
	if parallel {
		for range r.work {
			<-r.done
		}
	}
	r.in = nil // the source may reuse the chunk's buffers
	var over *overflowError
	for _, err := range r.errs {
		if err == nil {
			continue
		}
		oe, ok := err.(*overflowError)
		if !ok {
			return r.stats[0], err
		}
		if over == nil || oe.agg < over.agg {
			over = oe
		}
	}
	if over != nil {
		return r.stats[0], over
	}
	return r.stats[0], nil
}

func (r *laneRunner) start() {
	r.done = make(chan struct{}, len(r.ls)-1)
	for i := 1; i < len(r.ls); i++ {
		w := make(chan struct{})
		r.work = append(r.work, w)
		go func() {
			for range w {
				r.stats[i], r.errs[i] = r.ls[i].add(r.in, r.wmUs)
				r.done <- struct{}{}
			}
		}()
	}
}

// stop ends the lane goroutines; a later large chunk starts them again.
func (r *laneRunner) stop() {
	for _, w := range r.work {
		close(w)
	}
	r.work = nil
}

// mergeLanes appends every other lane's entries to lane 0's columns and
// empties those lanes. Lane 0's hash table then no longer covers its
// entries: only Finish, which reads entries by index, may follow (the
// operator refuses a Process after a Finish of the same batch).
func mergeLanes(ls []*partial) {
	a := ls[0]
	for _, b := range ls[1:] {
		if b.len() == 0 {
			continue
		}
		a.start = append(a.start, b.start...)
		for k := range a.gInt {
			a.gInt[k] = append(a.gInt[k], b.gInt[k]...)
			a.gStr[k] = append(a.gStr[k], b.gStr[k]...)
			a.gNull[k] = append(a.gNull[k], b.gNull[k]...)
		}
		for x := range a.acc {
			a.acc[x].ints = append(a.acc[x].ints, b.acc[x].ints...)
			a.acc[x].floats = append(a.acc[x].floats, b.acc[x].floats...)
			a.acc[x].nn = append(a.acc[x].nn, b.acc[x].nn...)
			a.acc[x].overflow = a.acc[x].overflow || b.acc[x].overflow
		}
		b.reset()
	}
}

// laneOf returns the lane of row i's group in window start: a fixed mix of
// the window start and the group values (a string's length and up to its
// last 8 bytes: hex addresses and hashes differ there), so that equal keys,
// by sameGroup's equality, always share a lane. Only the balance between
// lanes depends on the mix, never a result.
func (pt *partial) laneOf(start int64, i int) uint64 {
	h := mix(0x2545F4914F6CDD1D, uint64(start))
	for k, c := range pt.cols.strs {
		if v := pt.cols.strValid[k]; v != nil && !v[i] {
			h = mix(h, 0xA0761D6478BD642F) // null
			continue
		}
		h = mix(h, tailBits(c[i]))
	}
	for k, c := range pt.cols.ints {
		if v := pt.cols.intValid[k]; v != nil && !v[i] {
			h = mix(h, 0xA0761D6478BD642F) // null: its slot's value is arbitrary
			continue
		}
		h = mix(h, uint64(c[i]))
	}
	return (h * 0x9E3779B97F4A7C15 >> 32) % pt.lanes
}

func mix(h, x uint64) uint64 {
	h ^= x
	h *= 0xBF58476D1CE4E5B9
	return h ^ h>>31
}

// tailBits packs a string's length and its last 8 bytes (fewer if shorter).
func tailBits(s string) uint64 {
	x := uint64(len(s))
	from := max(0, len(s)-8)
	for j := from; j < len(s); j++ {
		x = x<<8 | uint64(s[j])
	}
	return x ^ uint64(len(s))<<56
}
