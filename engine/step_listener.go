package engine

// StepListener is a Listener that also hears each step of a batch begin
// and end, on the driver's goroutine, in the order the driver runs them:
// what a listener measures between the two calls (the bench measures the
// process's CPU time) is the step's. It must return quickly.
type StepListener interface {
	Listener
	// OnStep is called with begin true before step (one of the Step*
	// names) of batch batchID runs, and with begin false once it returned,
	// whether it failed or not.
	OnStep(batchID int64, step string, begin bool)
}

// The step names of StepListener.OnStep.
const (
	StepWAL          = "wal"         // offsets/N written (or awaited, re-used), the purge
	StepRead         = "read"        // the sources' rows into the operators
	StepFinish       = "finish"      // the operators' Finish
	StepSinkWrite    = "sinkWrite"   // the sink's write, the state commit alongside it when overlapped
	StepStateCommit  = "stateCommit" // the state commit after the sink
	StepRepartition  = "repartition" // the state repartitioned
	StepCommit       = "commit"      // commits/N (its write started alongside the sink, then its publish) and the sources' commits
	StepEmitProgress = "progress"    // the progress event
)

// stepName is op's StepListener name.
func stepName(op stepOp) string {
	switch op {
	case opWriteOffsets, opAwaitOffsets, opReuseOffsets, opPurge:
		return StepWAL
	case opRead:
		return StepRead
	case opFinish:
		return StepFinish
	case opWriteSink:
		return StepSinkWrite
	case opCommitState:
		return StepStateCommit
	case opRepartitionState:
		return StepRepartition
	case opWriteCommit, opAwaitCommit, opCommitSources:
		return StepCommit
	}
	return StepEmitProgress
}

// stepListeners returns the listeners of o that hear steps.
func stepListeners(ls []Listener) []StepListener {
	var out []StepListener
	for _, l := range ls {
		if sl, ok := l.(StepListener); ok {
			out = append(out, sl)
		}
	}
	return out
}
