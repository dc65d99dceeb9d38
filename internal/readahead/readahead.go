// Package readahead is an ordered parallel map: items 0..n-1 are produced on
// worker goroutines, a bounded number ahead of their consumer, and consumed
// in index order on the calling goroutine. Readers of many files (the demo's
// recount of the archive, a Delta table scan) use it to decode on every core
// while delivering in file order with bounded memory.
package readahead

import (
	"context"
	"sync"
)

// Map produces items 0..n-1 with produce functions made by newWorker (one
// per worker goroutine, so a worker may keep state across items), at most
// ahead items handed out and not yet used (the one being used included),
// and calls use for each item in index order on the calling goroutine. The
// first error (produce's, use's or ctx's) stops it: the context produce is
// given is cancelled, so reads in flight stop too. Map returns once every
// goroutine it started has ended.
func Map[T any](ctx context.Context, n, workers, ahead int, newWorker func() func(ctx context.Context, i int) (T, error), use func(i int, v T) error) error {
	if n == 0 {
		return ctx.Err()
	}
	workers = max(1, min(workers, n))
	ahead = max(ahead, workers)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	done := make([]chan result, n)
	for i := range done {
		done[i] = make(chan result, 1)
	}
	// tokens holds one token per item handed out and not yet used.
	tokens := make(chan struct{}, ahead)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		produce := newWorker()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				v, err := produce(ctx, i)
				done[i] <- result{v, err}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(next)
		for i := range n {
			select {
			case tokens <- struct{}{}:
			case <-ctx.Done():
				return
			}
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	var err error
	for i := range n {
		if err = ctx.Err(); err != nil {
			break // a cancel between two items uses nothing more
		}
		var r result
		select {
		case r = <-done[i]:
		case <-ctx.Done():
			r.err = ctx.Err()
		}
		if err = r.err; err != nil {
			break
		}
		err = use(i, r.v)
		<-tokens
		if err != nil {
			break
		}
	}
	cancel()
	wg.Wait()
	return err
}
