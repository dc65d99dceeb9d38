package demo

import (
	"fmt"
	"sort"
	"strings"

	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/stream"
)

// liveBreakdown is where a live run's data batches spend their time: the
// median, over the batches, of each batch duration and of the sink write,
// its MERGE and the state commit inside addBatch (ms, as the progress events
// round them). bench prints it to its log, after the live runs, so a slow
// trigger-to-commit median names its phase.
func liveBreakdown(what string, events []*stream.Progress) string {
	keys := []string{stream.DurTriggerExecution, stream.DurLatestOffset, stream.DurWalCommit, stream.DurGetBatch,
		stream.DurAddBatch, stream.DurCommitOffsets, "sinkWrite", "merge", "stateCommit"}
	vals := map[string][]float64{}
	for _, p := range events {
		if p.Kind() != stream.KindData {
			continue
		}
		for _, k := range keys[:6] {
			vals[k] = append(vals[k], float64(p.DurationMs[k]))
		}
		vals["sinkWrite"] = append(vals["sinkWrite"], float64(metricMs(p.Sink.Metrics, delta.MetricWriteTime)))
		vals["merge"] = append(vals["merge"], float64(metricMs(p.Sink.Metrics, "executionTimeMs")))
		var commit int64
		for _, op := range p.StateOperators {
			commit += op.CommitTimeMs
		}
		vals["stateCommit"] = append(vals["stateCommit"], float64(commit))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s, %d data batches, medians (ms):", what, len(vals[stream.DurTriggerExecution]))
	for _, k := range keys {
		xs := vals[k]
		sort.Float64s(xs)
		fmt.Fprintf(&b, " %s %.0f", k, median(xs))
	}
	return b.String() + "\n"
}
