package demo

import (
	"fmt"
	"io"
	"strconv"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/stream"
)

// BenchPhases is where a run's time went, summed over its progress events
// (milliseconds). The figures come from the events alone: Spark's durationMs
// keys, the aggregation's stateOperators entry and custom metrics, the Delta
// sink's metrics and the archive source's counters. They are wall times on
// the driver's goroutine except where noted, so on a loaded machine they
// include waiting for a core.
type BenchPhases struct {
	Batches int `json:"batches"`
	// TriggerMs sums triggerExecution; the run's wall beyond it is opening
	// and closing the query (validation, state load, the sink's table).
	TriggerMs int64 `json:"triggerMs"`
	// ListMs: latestOffset + queryPlanning (listing the archive each trigger).
	ListMs int64 `json:"listMs"`
	// ReadMs: getBatch, the driver waiting on its sources' reads and
	// decoding; DecodeWorkerMs is the archive source's decodeMs (the wall
	// time of its decode workers, which run ahead of the driver, summed:
	// time waiting for a core included, so not CPU), as last reported.
	ReadMs         int64 `json:"readMs"`
	DecodeWorkerMs int64 `json:"decodeWorkerMs"`
	// ProcessMs: the operator's Process (custom metric processTimeMs).
	ProcessMs int64 `json:"processMs"`
	// FinishMs: the merge into state and the eviction (allUpdatesTimeMs +
	// allRemovalsTimeMs).
	FinishMs int64 `json:"finishMs"`
	// SinkMs: the sink write, Delta commit included (writeTimeMs); MergeMs
	// is its MERGE part (executionTimeMs).
	SinkMs  int64 `json:"sinkMs"`
	MergeMs int64 `json:"mergeMs"`
	// StateCommitMs: commitTimeMs, all of it run alongside the sink write
	// (prepare, then publish); StatePreparedMs its preparing part
	// (commitPrepareTimeMs). Per batch the driver waits for the longer of
	// the sink write and the state commit: StateWaitMs sums that wait
	// beyond the sink write, and StateHiddenMs the commit time the sink
	// write covered.
	StateCommitMs   int64 `json:"stateCommitMs"`
	StatePreparedMs int64 `json:"statePreparedMs"`
	StateWaitMs     int64 `json:"stateWaitMs"`
	StateHiddenMs   int64 `json:"stateHiddenMs"`
	// CheckpointMs: walCommit + commitOffsets (offsets, purge, commits, the
	// sources' commits).
	CheckpointMs int64 `json:"checkpointMs"`
	// OtherMs is triggerExecution minus the phases the driver waits for
	// (list, read, process, finish, sink, the state commit beyond the sink
	// write, checkpoint): the operator's output and the rest of addBatch.
	OtherMs int64 `json:"otherMs"`
}

// benchPhases sums events into a BenchPhases.
func benchPhases(events []*stream.Progress) BenchPhases {
	var ph BenchPhases
	for _, p := range events {
		ph.Batches++
		d := p.DurationMs
		ph.TriggerMs += d[stream.DurTriggerExecution]
		ph.ListMs += d[stream.DurLatestOffset] + d[stream.DurQueryPlanning]
		ph.ReadMs += d[stream.DurGetBatch]
		ph.CheckpointMs += d[stream.DurWalCommit] + d[stream.DurCommitOffsets]
		write := metricMs(p.Sink.Metrics, delta.MetricWriteTime)
		ph.SinkMs += write
		ph.MergeMs += metricMs(p.Sink.Metrics, "executionTimeMs")
		for _, op := range p.StateOperators {
			prep := op.CustomMetrics[agg.MetricCommitPrepareTime]
			ph.ProcessMs += op.CustomMetrics[agg.MetricProcessTime]
			ph.FinishMs += op.AllUpdatesTimeMs + op.AllRemovalsTimeMs
			ph.StateCommitMs += op.CommitTimeMs
			ph.StatePreparedMs += prep
			ph.StateWaitMs += max(op.CommitTimeMs-write, 0)
			ph.StateHiddenMs += min(op.CommitTimeMs, write)
		}
		for _, s := range p.Sources {
			if v := metricMs(s.Metrics, "decodeMs"); v > 0 {
				ph.DecodeWorkerMs = v
			}
		}
	}
	exposed := ph.ListMs + ph.ReadMs + ph.ProcessMs + ph.FinishMs + ph.SinkMs + ph.StateWaitMs + ph.CheckpointMs
	ph.OtherMs = ph.TriggerMs - exposed
	return ph
}

func metricMs(m map[string]string, key string) int64 {
	v, _ := strconv.ParseInt(m[key], 10, 64)
	return v
}

// printPhases prints the breakdown as a table, each phase also as a share
// of wallMs (the run's wall time).
func printPhases(w io.Writer, what string, ph BenchPhases, wallMs int64) {
	pct := func(ms int64) string { return fmt.Sprintf("%.0f%%", 100*float64(ms)/float64(max(wallMs, 1))) }
	row := func(name string, ms int64, note string) {
		fmt.Fprintf(w, "| %s | %d | %s | %s |\n", name, ms, pct(ms), note)
	}
	fmt.Fprintf(w, "\n| %s: phase (%d batches, %.1f s wall) | ms | of wall | from |\n|---|---|---|---|\n",
		what, ph.Batches, float64(wallMs)/1000)
	row("list the archive (latestOffset, queryPlanning)", ph.ListMs, "durationMs")
	row("read/decode: waiting on the source", ph.ReadMs,
		fmt.Sprintf("durationMs.getBatch; decode workers' summed wall %d ms (decodeMs)", ph.DecodeWorkerMs))
	row("process (into partial aggregates)", ph.ProcessMs, "customMetrics.processTimeMs")
	row("finish/evict (merge into state, evict)", ph.FinishMs, "allUpdatesTimeMs + allRemovalsTimeMs")
	row("sink write (Delta MERGE + commit)", ph.SinkMs, fmt.Sprintf("sink writeTimeMs; MERGE %d ms (executionTimeMs)", ph.MergeMs))
	row("state commit, beyond the sink write", ph.StateWaitMs,
		fmt.Sprintf("commitTimeMs %d ms alongside the sink (%d ms of it preparing), %d ms of it hidden by the sink write",
			ph.StateCommitMs, ph.StatePreparedMs, ph.StateHiddenMs))
	row("checkpoint I/O (walCommit, commitOffsets)", ph.CheckpointMs, "durationMs")
	row("other (output, addBatch rest)", ph.OtherMs, "triggerExecution - the above")
	row("outside batches (open, close)", wallMs-ph.TriggerMs, "wall - triggerExecution")
}
