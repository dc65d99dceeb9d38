package engine

import (
	"context"
	"testing"
	"time"

	"github.com/ethstream/ethstream/stream"
)

// notifyingSource is a memSource that can notify (stream.DataNotifier).
type notifyingSource struct {
	memSource
	ready chan struct{}
}

func (s *notifyingSource) DataReady() <-chan struct{} { return s.ready }

// TestRealTimeWakesOnNotification: an idle realTime query waits for the
// source's notification, not the fallback poll (an hour here), and a
// notification sent while no wait is in progress ends the next wait at once.
func TestRealTimeWakesOnNotification(t *testing.T) {
	src := &notifyingSource{ready: make(chan struct{}, 1)}
	r := &run{q: Query{Sources: []NamedSource{{Name: "a", Source: src}}, Trigger: Trigger{Kind: RealTime, Interval: time.Hour}},
		d: &driver{o: Options{Clock: stream.SystemClock{}}}}
	done := make(chan error, 1)
	go func() { done <- r.waitForData(context.Background(), time.Hour) }()
	select {
	case err := <-done:
		t.Fatalf("returned before the notification: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	src.ready <- struct{}{}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the notification did not end the wait")
	}
	src.ready <- struct{}{} // arrives between waits
	if err := r.waitForData(context.Background(), time.Hour); err != nil {
		t.Fatal(err)
	}
	// A cancelled context ends the wait with its error.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.waitForData(ctx, time.Hour); err != context.Canceled {
		t.Fatalf("cancelled wait returned %v", err)
	}
}

func TestRealTimeWait(t *testing.T) {
	for _, c := range []struct {
		t    Trigger
		ran  bool
		want time.Duration
	}{
		{Trigger{Kind: RealTime}, true, 0},
		{Trigger{Kind: RealTime}, false, DefaultRealTimePoll},
		{Trigger{Kind: RealTime, Interval: time.Second}, false, time.Second},
	} {
		if stop, got := afterTrigger(c.t, c.ran, time.Time{}, time.Now); stop || got != c.want {
			t.Errorf("afterTrigger(%+v, ran=%v) = %v, %v; want false, %v", c.t, c.ran, stop, got, c.want)
		}
	}
}
