package readahead

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestMapOrderAndBound: every item is used once, in order, whatever order
// the workers finish in, and never more than ahead items are produced
// beyond the one being used.
func TestMapOrderAndBound(t *testing.T) {
	for _, c := range []struct{ n, workers, ahead int }{{0, 2, 4}, {1, 4, 1}, {50, 3, 5}, {200, 8, 8}} {
		var produced, used atomic.Int64
		var got []int
		err := Map(context.Background(), c.n, c.workers, c.ahead, func() func(context.Context, int) (int, error) {
			return func(_ context.Context, i int) (int, error) {
				produced.Add(1)
				if i%7 == 0 {
					time.Sleep(time.Millisecond) // finish out of order
				}
				if p, u := produced.Load(), used.Load(); p-u > int64(max(c.ahead, min(c.workers, c.n)))+1 {
					t.Errorf("n=%d: %d produced, %d used: more than ahead=%d in flight", c.n, p, u, c.ahead)
				}
				return i * i, nil
			}
		}, func(i, v int) error {
			if v != i*i {
				t.Errorf("item %d carries %d", i, v)
			}
			got = append(got, i)
			used.Add(1)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != c.n {
			t.Fatalf("n=%d: %d items used", c.n, len(got))
		}
		for i, g := range got {
			if g != i {
				t.Fatalf("n=%d: item %d used at position %d", c.n, g, i)
			}
		}
	}
}

// TestMapStops: an error from produce, from use, or a cancelled context
// stops the map with that error, uses nothing past it, and leaves no
// goroutine behind.
func TestMapStops(t *testing.T) {
	boom := errors.New("boom")
	before := runtime.NumGoroutine()
	for _, c := range []struct {
		name           string
		produceErr, at int
		useErr         bool
		cancel         bool
	}{{"produce", 1, 13, false, false}, {"use", 0, 9, true, false}, {"cancel", 0, 5, false, true}} {
		ctx, cancel := context.WithCancel(context.Background())
		var last int
		err := Map(ctx, 100, 4, 6, func() func(context.Context, int) (int, error) {
			return func(_ context.Context, i int) (int, error) {
				if c.produceErr == 1 && i == c.at {
					return 0, boom
				}
				return i, nil
			}
		}, func(i, _ int) error {
			last = i
			if c.useErr && i == c.at {
				return boom
			}
			if c.cancel && i == c.at {
				cancel()
			}
			return nil
		})
		cancel()
		want := boom
		if c.cancel {
			want = context.Canceled
		}
		if !errors.Is(err, want) {
			t.Fatalf("%s: err = %v, want %v", c.name, err, want)
		}
		if wantLast := c.at - c.produceErr; last != wantLast {
			t.Fatalf("%s: last item used %d, want %d", c.name, last, wantLast)
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines left behind (%d before)", n-before, before)
	}
}

// TestMapCancelsReadsInFlight: when use fails, a produce still waiting
// (here: forever, but for its context) is cancelled, so Map returns.
func TestMapCancelsReadsInFlight(t *testing.T) {
	boom := errors.New("boom")
	done := make(chan error, 1)
	go func() {
		done <- Map(context.Background(), 10, 2, 4, func() func(context.Context, int) (int, error) {
			return func(ctx context.Context, i int) (int, error) {
				if i == 3 {
					<-ctx.Done()
					return 0, ctx.Err()
				}
				return i, nil
			}
		}, func(i, _ int) error {
			if i == 1 {
				return boom
			}
			return nil
		})
	}()
	select {
	case err := <-done:
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v, want boom", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Map did not return: the read in flight was not cancelled")
	}
}
