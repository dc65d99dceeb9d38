package engine

import (
	"errors"
	"fmt"

	"github.com/ethstream/ethstream/checkpoint"
)

// commits/N written alongside the sink and the state (planner.go, dataPlan).
// Its content, the commit watermark, is known once Finish returned; the
// write and fsync of its temp file then overlap the sink write and the state
// commit, and the publish (the link to commits/N and the directory fsync)
// waits at a gate that only opAwaitCommit opens, after both returned and
// after the crash point after-state-commit: so commits/N never exists
// before the sink's batch N and state version N are durable, and a crash
// at any point leaves at most its temp file, which the next start removes
// (checkpoint.Writer.Prepare). Measured on the live batch: the commit phase
// falls from two fsyncs to one (the link's directory fsync).

// errCommitAbandoned is the gate's answer when the batch failed before
// commits/N's publish: the write removes its temp file and publishes
// nothing.
var errCommitAbandoned = errors.New("batch failed before its commit was published")

// commitAhead is commits/N being written: gate receives once (nil
// publishes, an error abandons), done receives the write's result. It is
// owned by one batchRun.
type commitAhead struct {
	gate chan error
	done chan error
}

// startCommit starts writing commits/id with the commit watermark next; it
// is published once awaitCommit opens the gate.
func (d *driver) startCommit(id, next int64) *commitAhead {
	c := &commitAhead{gate: make(chan error, 1), done: make(chan error, 1)}
	e := &checkpoint.CommitEntry{NextBatchWatermarkMs: next}
	go func() {
		c.done <- d.w.WriteCommitAfter(id, e, func() error { return <-c.gate })
	}()
	return c
}

// awaitCommit publishes commits/N, written alongside: the sink's batch N
// and state version N are durable by now (the steps before it returned).
func (d *driver) awaitCommit(b *batchRun, s step) error {
	c := b.commit
	if c == nil {
		return fmt.Errorf("batch %d: publish commits/%d that no step writes", s.Batch, s.Batch)
	}
	b.commit = nil
	c.gate <- nil
	if err := <-c.done; err != nil {
		return fmt.Errorf("write commit for batch %d: %w", s.Batch, err)
	}
	return nil
}

// abandon drops commits/N of a batch that failed before its publish and
// waits for the write to end, so that no writer of the checkpoint outlives
// the batch.
func (c *commitAhead) abandon() {
	c.gate <- errCommitAbandoned
	<-c.done
}
