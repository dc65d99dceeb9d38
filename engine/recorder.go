package engine

import (
	"time"

	"github.com/ethstream/ethstream/stream"
)

// The progress recorder, beside the driver as Spark's ProgressReporter is
// beside MicroBatchExecution: the driver performs a plan's steps, the
// recorder keeps the books. It times the phases the steps name (Spark's
// reportTimeTaken: a phase's time is taken apart from the actions in it),
// accumulates what the steps saw, and hands batch_progress.go what the
// event is built from. Each value is computed once per batch: rows and
// event times as the rows stream past, the commit watermark from them once
// the input is read (the driver's finish step), the event at the report
// step, and its JSON once for the progress log and every listener (emit).
// Not safe for concurrent use: the driver's goroutine owns it.

// recorder is one batch's books.
type recorder struct {
	clk     stream.Clock
	p       *batchPlan
	trigger time.Time
	dur     map[string]int64
	// phase is the phase in progress; began is when it began (set only if
	// the phase is timed).
	phase phase
	began time.Time
	// spent is each timed phase's time so far: a phase may come in parts
	// (the WAL's, when offsets/N is written alongside the reads), and its
	// duration is the sum of its parts.
	spent map[phase]time.Duration
	// getBatch is the time inside the sources' ReadBatch, less the time
	// their emit callbacks spent in the operator; taken is the part of it
	// already subtracted from addBatch.
	getBatch, taken time.Duration
	in              inputStats
	seen            reports
	// observe, if set (tests), receives each phase boundary.
	observe func(event string)
}

// inputStats are the batch's input as its reads saw it.
type inputStats struct {
	rows  []int64 // per range of the plan
	total int64
	ev    eventStats
	// sides are each side's event times in a two-input query (ev is
	// then both sides' together, for the progress event).
	sides []eventStats
}

// eventStats accumulates the watermark column's min/max/sum in µs, over
// the rows the pushed-down filter keeps (add's keep; nil: every row).
type eventStats struct {
	n        int64
	min, max int64
	sumMs    float64 // float: an int64 sum of ms timestamps overflows past ~5M rows
}

// merge adds o's rows to s.
func (s *eventStats) merge(o eventStats) {
	if o.n == 0 {
		return
	}
	if s.n == 0 || o.min < s.min {
		s.min = o.min
	}
	if s.n == 0 || o.max > s.max {
		s.max = o.max
	}
	s.sumMs += o.sumMs
	s.n += o.n
}

func (s *eventStats) add(c *stream.Column, keep []bool) {
	for i, v := range c.Int64s {
		if c.IsNull(i) || keep != nil && !keep[i] {
			continue
		}
		if s.n == 0 || v < s.min {
			s.min = v
		}
		if s.n == 0 || v > s.max {
			s.max = v
		}
		s.sumMs += float64(v / 1000)
		s.n++
	}
}

// reports are what the operator, the sink and the sources said about the
// batch, as the steps that asked them received it.
type reports struct {
	ops     []stream.OperatorProgress // one per operator, in id order
	sink    stream.SinkProgress
	sources []stream.SourceProgress
}

// preDurations are the trigger's durations before the batch started:
// latestOffset and queryPlanning, reported by every data and no-data batch
// (0 for a re-run, which polls and plans nothing).
type preDurations struct{ latest, planning time.Duration }

func newRecorder(clk stream.Clock, p *batchPlan, trigger time.Time, pre preDurations, observe func(string)) *recorder {
	r := &recorder{clk: clk, p: p, trigger: trigger, dur: map[string]int64{}, spent: map[phase]time.Duration{}, observe: observe}
	if p.Kind != stream.KindRepartition {
		r.dur[stream.DurLatestOffset] = pre.latest.Milliseconds()
		r.dur[stream.DurQueryPlanning] = pre.planning.Milliseconds()
		r.in.rows = make([]int64, len(p.Ranges))
	}
	return r
}

// phaseKey is the durationMs key of a timed phase, "" for one that only
// triggerExecution covers.
func phaseKey(ph phase) string {
	switch ph {
	case phaseWAL:
		return stream.DurWalCommit
	case phaseAddBatch:
		return stream.DurAddBatch
	case phaseRepartition:
		return stream.DurRepartition
	case phaseCommit:
		return stream.DurCommitOffsets
	}
	return ""
}

// timed reports whether the batch's progress reports phase ph: a phase
// with a key, except the WAL of a control batch that re-uses its entry
// (batchPlan.reportsWAL).
func (r *recorder) timed(ph phase) bool {
	return phaseKey(ph) != "" && (ph != phaseWAL || r.p.reportsWAL())
}

// begin starts phase ph.
func (r *recorder) begin(ph phase) {
	r.phase = ph
	if r.timed(ph) {
		r.began = r.clk.Now()
	}
	r.note("begin " + ph.String())
}

// end closes the phase in progress and records its time.
func (r *recorder) end() {
	ph := r.phase
	if r.timed(ph) {
		d := r.clk.Now().Sub(r.began)
		if ph == phaseAddBatch {
			// Reading streams into the operator, so the two overlap in
			// time: addBatch is the phase's wall time (read, process, sink,
			// state commit) minus getBatch, the time inside the sources,
			// and the phases sum to at most triggerExecution, as Spark's do.
			d -= r.getBatch - r.taken
			r.taken = r.getBatch
			r.dur[stream.DurGetBatch] = r.getBatch.Milliseconds()
		}
		r.spent[ph] += d
		r.dur[phaseKey(ph)] = r.spent[ph].Milliseconds()
	}
	r.phase = phaseNone
	r.note("end " + ph.String())
}

// durations closes the books at end, the report step's instant:
// triggerExecution, the whole trigger, joins the phases' times.
func (r *recorder) durations(end time.Time) map[string]int64 {
	r.dur[stream.DurTriggerExecution] = end.Sub(r.trigger).Milliseconds()
	return r.dur
}

func (r *recorder) note(event string) {
	if r.observe != nil {
		r.observe(event)
	}
}

// readClock separates one ReadBatch's own time (its part of getBatch) from
// the time its emit callbacks spend in the operator.
type readClock struct {
	clk    stream.Clock
	start  time.Time
	inEmit time.Duration
}

// startRead starts timing one source's ReadBatch.
func (r *recorder) startRead() readClock {
	return readClock{clk: r.clk, start: r.clk.Now()}
}

// emitted adds the time since t0, when an emit callback began.
func (rc *readClock) emitted(t0 time.Time) { rc.inEmit += rc.clk.Now().Sub(t0) }

// endRead closes a ReadBatch of source key that delivered rows.
func (r *recorder) endRead(rc *readClock, key string, rows int64) {
	r.getBatch += r.clk.Now().Sub(rc.start) - rc.inEmit
	for i, rg := range r.p.Ranges {
		if rg.Key == key {
			r.in.rows[i] += rows
		}
	}
	r.in.total += rows
}
