package streamtest

import (
	"context"
	"sync"
	"time"
)

// Epoch is the time a new Clock starts at: a fixed instant, so that batch
// timestamps in scripts do not depend on when the test runs.
var Epoch = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// Clock is a manual stream.Clock. Now advances by a fixed step per call (0 by
// default: time stands still), Sleep advances time by d at once and records
// it, so trigger intervals and retries run without real waiting. It is safe
// for concurrent use (sources may retry from reader goroutines).
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	step   time.Duration
	sleeps []time.Duration
	stopAt int // len(sleeps) at which Sleep cancels; 0 = never
}

// NewClock returns a clock at start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// SetStep makes every Now advance the clock by d first, so consecutive
// timestamps differ as on a real machine.
func (c *Clock) SetStep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.step = d
}

// StopAfter makes the n-th Sleep from now and every later one return
// context.Canceled without advancing: the way a test stops a
// processing-time run after n trigger intervals. 0 never stops.
func (c *Clock) StopAfter(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopAt = 0
	if n > 0 {
		c.stopAt = len(c.sleeps) + n
	}
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Now returns the clock's time, after advancing it by the step.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.step)
	return c.now
}

// Sleep records d and advances the clock by it. It returns ctx.Err(), or
// context.Canceled once StopAfter's count is reached.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	if c.stopAt > 0 && len(c.sleeps) >= c.stopAt {
		return context.Canceled
	}
	if d > 0 {
		c.now = c.now.Add(d)
	}
	return ctx.Err()
}

// Sleeps returns the durations of every Sleep so far, in call order.
func (c *Clock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}
