package storage

import (
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/ethstream/ethstream/stream"
)

// Clock is what retries wait on: the engine's clock (stream.Clock), so a
// query's object-store retries sleep on the engine's (in tests, a manual) clock.
type Clock = stream.Clock

// SystemClock is the wall clock.
type SystemClock = stream.SystemClock

// Retry is the backoff policy of object-store requests: a request that
// fails transiently (Class.Retryable) is sent again after a full-jitter
// exponential backoff, at most Attempts times in all. The budget is bounded:
// with DefaultRetry the waits add up to between 5.7 s and 11.4 s, enough to
// ride out a server restart or a burst of throttling, short enough that a
// dead endpoint is reported (STORAGE_UNAVAILABLE) rather than waited on.
type Retry struct {
	Attempts int           // tries of one request, the first included; at least 1
	Base     time.Duration // the first wait's upper bound
	Limit    time.Duration // no wait is longer
}

// DefaultRetry is the policy of every S3 location unless a test sets another.
var DefaultRetry = Retry{Attempts: 10, Base: 25 * time.Millisecond, Limit: 5 * time.Second}

// backoff is the wait after the attempt-th failure (1-based): uniform in
// [d/2, d] with d = min(Limit, Base·2^(attempt-1)).
func (r Retry) backoff(attempt int) time.Duration {
	d := r.Limit
	if attempt-1 < 30 {
		d = min(r.Limit, r.Base<<(attempt-1))
	}
	return d/2 + rand.N(d/2+1)
}

// Counters, when set, receive the store's request figures (the archive
// source reports them as its metrics). Any field may be nil.
type Counters struct {
	Requests  *atomic.Int64 // attempts sent, retries included
	Retries   *atomic.Int64
	Throttles *atomic.Int64 // attempts answered 503 SlowDown / 429
}

func add(c *atomic.Int64) {
	if c != nil {
		c.Add(1)
	}
}
