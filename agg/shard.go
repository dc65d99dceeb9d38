package agg

import (
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

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
// Close), so that no goroutine outlives a batch. Not safe for concurrent
// use.
//
// The caller does not wait for a worker's fold of a chunk: it goes on to
// its own fold and returns, and the worker folds up to shardDepth chunks
// behind it. Waiting per chunk made the two folds alternate on one core
// (the woken worker queued on the caller's processor until the caller
// blocked: issue 43's trace, 6,663 of 7,986 chunks). A chunk is the
// caller's during Process only (stream.Batch: the source's column pool,
// the engine's read-ahead and read path re-use its slices once the call
// returns), so a worker folds a copy of the columns its partial reads,
// made into one of its shardDepth slots; a worker hands a slot back once
// folded. Handing a chunk over allocates nothing once the slots have
// grown (TestProcessAllocations).
type shards struct {
	pts  []*partial
	sts  []chunkStats
	errs []error
	ws   []*shardWorker // per partial (index 0 nil); nil when stopped
	// slots are each worker's, kept from batch to batch (index 0 nil).
	slots [][shardDepth]*shardSlot
	p     *plan
	cols  []string // the columns a partial reads (copied for a worker)
	// viewOnly[i]: column cols[i] is a group column the partials read by
	// its dictionary view alone in this chunk (viewsSuffice).
	viewOnly []bool
	seq      int64 // chunks handed to the workers this batch
	wg       sync.WaitGroup
}

// shardDepth is how many chunks a worker may be behind the caller: enough
// to ride out the caller's longer chunks (a file's first, whose keys are
// new); each slot holds a copy of a chunk's read columns (~100 KB in a
// seed backfill).
const shardDepth = 4

// shardWorker is a worker goroutine's queue and results.
type shardWorker struct {
	jobs chan *shardSlot // chunks to fold, in order
	free chan *shardSlot // slots folded (or not yet used)
	// st sums the figures of the chunks the worker folded this batch;
	// err is the first error, of chunk errSeq, after which it folds no
	// more. The worker writes them before handing a slot back (free),
	// the caller reads them once it holds every slot (drain) or the
	// worker returned (stop). failed tells the caller early.
	st     chunkStats
	err    error
	errSeq int64
	failed atomic.Bool
}

// shardSlot is one chunk handed to a worker: a copy of the columns its
// partial reads, in storage re-used from chunk to chunk.
type shardSlot struct {
	b     stream.Batch
	dicts []stream.Dict // the columns' dictionary views (b.Columns[i].Dict)
	arena []byte        // the bytes of the strings
	rows  [][]string    // per column: its Strings' storage
	blank []string      // "" only: a viewOnly column's Strings
	signs []int8        // b.Signs' storage
	wmUs  int64
	seq   int64
}

// shardWorkerHook, when set (tests), runs on the worker before it folds a
// chunk.
var shardWorkerHook func()

func newShardSet(p *plan, pts []*partial) *shards {
	s := &shards{p: p, pts: pts, sts: make([]chunkStats, len(pts)), errs: make([]error, len(pts))}
	s.cols = append(s.cols, p.spec.GroupBy...)
	if p.window {
		s.cols = append(s.cols, p.spec.Window.Column)
	}
	for a := range p.aggs {
		if c := p.aggs[a].Column; c != "" {
			s.cols = append(s.cols, c)
		}
	}
	s.viewOnly = make([]bool, len(s.cols))
	return s
}

// add folds in into every partial and returns the figures of the chunks
// folded by now: in's by partial 0 (the rows without event time, which
// every partial skips, and the dropped instances of its windows), and,
// when the chunk is folded on the caller's goroutine, every partial's.
// stop returns the workers' figures. Each row is counted once, as if
// each chunk were folded at once. The first error of the earliest chunk
// wins, partial 0's first within a chunk; a worker's is returned by the
// next add or by stop.
func (s *shards) add(in *stream.Batch, wmUs int64) (chunkStats, error) {
	pts := s.pts
	if len(pts) == 1 {
		return pts[0].add(in, wmUs)
	}
	if in.Len < shardMinRows || !s.handOver(in, wmUs) {
		// The partials are folded here, each after its worker's chunks.
		if err := s.drain(); err != nil {
			return chunkStats{}, err
		}
		for i, pt := range pts {
			s.sts[i], s.errs[i] = pt.add(in, wmUs)
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
	seq := s.seq - 1
	st, err := pts[0].add(in, wmUs)
	if err != nil {
		// A worker's error of an earlier chunk came first.
		if werr := s.drain(); werr != nil && s.errSeq() < seq {
			return chunkStats{}, werr
		}
		return st, err
	}
	if s.anyFailed() {
		return st, s.drain()
	}
	return st, nil
}

// handOver queues a copy of in for every worker (starting them on the
// batch's first), or returns false when in lacks a column a partial
// reads or has one of another length: the partials' own resolve then
// reports it.
func (s *shards) handOver(in *stream.Batch, wmUs int64) bool {
	for _, name := range s.cols {
		c := in.Column(name)
		if c == nil || c.Len() != in.Len || (c.Valid != nil && len(c.Valid) != in.Len) ||
			(in.Signs != nil && len(in.Signs) != in.Len) {
			return false
		}
	}
	s.viewsSuffice(in)
	if s.ws == nil {
		s.start()
	}
	for _, w := range s.ws[1:] {
		sl := <-w.free
		sl.copyOf(in, s.cols, s.viewOnly)
		sl.wmUs, sl.seq = wmUs, s.seq
		w.jobs <- sl
	}
	s.seq++
	return true
}

// viewsSuffice sets viewOnly: true for every group column when the
// partials find each row's key of in by the group columns' dictionary
// views alone (dict.go: resolveDicts sets dictAll, and assignDict takes
// every row, so no group column's Strings is read), else false for all.
// The copy for a worker then leaves those Strings out: gathering every
// row's string was most of the copy's cost (0.28 of 0.29 CPU-s in a
// seed backfill).
func (s *shards) viewsSuffice(in *stream.Batch) {
	clear(s.viewOnly)
	p, g := s.p, len(s.p.spec.GroupBy)
	codes := 1
	for j, name := range p.spec.GroupBy {
		c := in.Column(name)
		if !p.strKey(j) || c.Type != p.groupType[j] || c.Type.Kind() == stream.Decimal {
			return
		}
		v := c.DictView()
		if v == nil {
			return
		}
		if codes *= len(v.Values) + 1; codes > maxDictKeys {
			return
		}
		n := int32(len(v.Values))
		if c.Valid == nil { // no null: every index in [0, n)
			for _, d := range v.Index {
				if uint32(d) >= uint32(n) {
					return
				}
			}
			continue
		}
		for i, d := range v.Index { // -1 exactly for a null
			if d < -1 || d >= n || (d == -1) == c.Valid[i] {
				return
			}
		}
	}
	for j := range g {
		// A column also read otherwise (the window's, an aggregate's, a
		// group column named twice) keeps its strings.
		if !slices.Contains(s.cols[g:], s.cols[j]) && !slices.Contains(s.cols[:j], s.cols[j]) {
			s.viewOnly[j] = true
		}
	}
}

// copyOf makes sl's batch a copy of in's columns cols (their dictionary
// views included) and of its signs, in sl's storage. A string's bytes are
// copied too (into sl.arena): a source may rewrite them once the chunk
// is consumed (TestIdentityBufferReused). A column viewOnly marks gets
// its view's values and indexes but no row's string (each row's Strings
// entry is ""): the copy is the worker's alone, and its partial reads that
// column by the view (viewsSuffice).
func (sl *shardSlot) copyOf(in *stream.Batch, cols []string, viewOnly []bool) {
	b, n := &sl.b, in.Len
	if cap(b.Columns) < len(cols) {
		b.Columns = make([]stream.Column, len(cols))
		sl.dicts = make([]stream.Dict, len(cols))
		sl.rows = make([][]string, len(cols))
	}
	b.Columns = b.Columns[:len(cols)]
	need := 0
	for k, name := range cols {
		src := in.Column(name)
		if src.Type.Storage() != stream.String {
			continue
		}
		if v := src.DictView(); v != nil {
			for _, s := range v.Values {
				need += len(s)
			}
			continue
		}
		if viewOnly[k] {
			continue
		}
		for _, s := range src.Strings {
			need += len(s)
		}
	}
	if cap(sl.arena) < need {
		sl.arena = make([]byte, 0, need+need/4)
	}
	sl.arena = sl.arena[:0]
	for i, name := range cols {
		src, c := in.Column(name), &b.Columns[i]
		old := *c
		*c = stream.Column{Name: src.Name, Type: src.Type}
		switch src.Type.Storage() {
		case stream.String:
			sl.copyStrings(i, c, src, n, viewOnly[i])
		case stream.Float64:
			c.Float64s = append(old.Float64s[:0], src.Float64s...)
		case stream.Decimal:
			c.Decimals = append(old.Decimals[:0], src.Decimals...)
		case stream.Array: // no aggregate reads one today: new storage
			c.AppendRange(src, 0, n)
		default:
			c.Int64s = append(old.Int64s[:0], src.Int64s...)
		}
		if src.Valid != nil {
			c.Valid = append(old.Valid[:0], src.Valid...)
		}
	}
	b.Signs = nil
	if in.Signs != nil {
		b.Signs = append(sl.signs[:0], in.Signs...)
		sl.signs = b.Signs
	}
	b.Len = n
}

// copyStrings sets column i's c to a copy of src's n strings, their bytes
// in sl.arena, with a copy of src's dictionary view, if it has one (each
// value's bytes copied once, not each row's). With viewOnly every row's
// string is "" (sl.blank, never written).
func (sl *shardSlot) copyStrings(i int, c, src *stream.Column, n int, viewOnly bool) {
	var rows []string
	if viewOnly {
		if len(sl.blank) < n {
			sl.blank = make([]string, n)
		}
		rows = sl.blank[:n]
	} else {
		if rows = sl.rows[i]; cap(rows) < n {
			rows = make([]string, n)
		}
		rows = rows[:n]
		sl.rows[i] = rows
	}
	c.Strings = rows
	v := src.DictView()
	if v == nil {
		for r, s := range src.Strings {
			rows[r] = sl.keep(s)
		}
		return
	}
	d := &sl.dicts[i]
	values := d.Values[:0]
	for _, s := range v.Values {
		values = append(values, sl.keep(s))
	}
	if !viewOnly {
		for r, k := range v.Index {
			switch {
			case k >= 0 && int(k) < len(values):
				rows[r] = values[k]
			case k < 0:
				rows[r] = "" // null
			default: // out of range: the partial does not trust it either
				rows[r] = strings.Clone(src.Strings[r])
			}
		}
	}
	*d = *stream.NewDict(rows, append(d.Index[:0], v.Index...), values)
	c.Dict = d
}

// keep returns a copy of s in sl.arena, which has room for it.
func (sl *shardSlot) keep(s string) string {
	if s == "" {
		return ""
	}
	off := len(sl.arena)
	sl.arena = append(sl.arena, s...)
	return unsafe.String(&sl.arena[off], len(s))
}

// start starts a worker per partial but the first.
func (s *shards) start() {
	s.ws = make([]*shardWorker, len(s.pts))
	if s.slots == nil {
		s.slots = make([][shardDepth]*shardSlot, len(s.pts))
		for i := 1; i < len(s.pts); i++ {
			for k := range shardDepth {
				s.slots[i][k] = &shardSlot{}
			}
		}
	}
	for i := 1; i < len(s.pts); i++ {
		w := &shardWorker{jobs: make(chan *shardSlot, shardDepth), free: make(chan *shardSlot, shardDepth)}
		for _, sl := range s.slots[i] {
			w.free <- sl
		}
		s.ws[i] = w
		pt := s.pts[i]
		s.wg.Go(func() {
			for sl := range w.jobs {
				if w.err == nil {
					if shardWorkerHook != nil {
						shardWorkerHook()
					}
					st, err := pt.add(&sl.b, sl.wmUs)
					w.st.dropped += st.dropped
					w.st.lateRetractions += st.lateRetractions
					if err != nil {
						w.err, w.errSeq = err, sl.seq
						w.failed.Store(true)
					}
				}
				w.free <- sl
			}
		})
	}
}

// anyFailed reports whether a worker met an error (without waiting).
func (s *shards) anyFailed() bool {
	for _, w := range s.ws[1:] {
		if w.failed.Load() {
			return true
		}
	}
	return false
}

// drain waits until every worker folded the chunks handed to it and
// returns the first error of the earliest chunk (the workers keep
// running).
func (s *shards) drain() error {
	if s.ws == nil {
		return nil
	}
	var first error
	var firstSeq int64
	for _, w := range s.ws[1:] {
		slots := [shardDepth]*shardSlot{}
		for k := range slots {
			slots[k] = <-w.free
		}
		for _, sl := range slots {
			w.free <- sl
		}
		if w.err != nil && (first == nil || w.errSeq < firstSeq) {
			first, firstSeq = w.err, w.errSeq
		}
	}
	return first
}

// errSeq is the chunk of the workers' first error, once drained.
func (s *shards) errSeq() int64 {
	seq := int64(-1)
	for _, w := range s.ws[1:] {
		if w.err != nil && (seq < 0 || w.errSeq < seq) {
			seq = w.errSeq
		}
	}
	return seq
}

// stop ends the workers (if running), waits for them and returns the
// figures of the chunks they folded since start and their first error
// (drain's).
func (s *shards) stop() (chunkStats, error) {
	if s.ws == nil {
		return chunkStats{}, nil
	}
	err := s.drain()
	var st chunkStats
	for _, w := range s.ws[1:] {
		close(w.jobs)
	}
	s.wg.Wait()
	for _, w := range s.ws[1:] {
		st.dropped += w.st.dropped
		st.lateRetractions += w.st.lateRetractions
		for range shardDepth {
			<-w.free
		}
	}
	s.ws, s.seq = nil, 0
	return st, err
}
