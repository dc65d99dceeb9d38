package engine

import (
	"context"
	"time"

	"github.com/ethstream/ethstream/stream"
)

// DefaultRealTimePoll is trigger realTime's fallback poll: how long an idle
// query waits for a source's notification before asking its sources
// anyway. It bounds the delay a lost notification, or a source that cannot
// notify (an http endpoint), adds to a batch.
const DefaultRealTimePoll = 100 * time.Millisecond

// realTimeWait is how long trigger realTime waits after a trigger: not at
// all after a batch (more data may be readable already), else up to the
// fallback poll, cut short by a notification (waitForData).
func realTimeWait(t Trigger, ran bool) time.Duration {
	if ran {
		return 0
	}
	if t.Interval > 0 {
		return t.Interval
	}
	return DefaultRealTimePoll
}

// waitForData waits until a source that implements stream.DataNotifier
// signals, or max passes on the engine's clock; the error is the context's.
// A signal is consumed by the wait it ends: one that arrived during the
// previous trigger ends this wait at once, so none is lost between waits.
func (r *run) waitForData(ctx context.Context, max time.Duration) error {
	var chans []<-chan struct{}
	for _, ns := range r.q.Sources {
		if n, ok := ns.Source.(stream.DataNotifier); ok {
			if ch := n.DataReady(); ch != nil {
				chans = append(chans, ch)
			}
		}
	}
	if len(chans) == 0 {
		return r.d.o.Clock.Sleep(ctx, max)
	}
	// One signal ends the clock's sleep; ctx, not the sleep, decides the error.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, ch := range chans {
		go func() {
			select {
			case <-ch:
				cancel()
			case <-wctx.Done():
			}
		}()
	}
	_ = r.d.o.Clock.Sleep(wctx, max)
	return ctx.Err()
}
