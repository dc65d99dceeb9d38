package state

// Work spread over a few goroutines: sorting a commit's partitions
// (changes.go) and writing and flushing them (applier.go).

import (
	"errors"
	"sync"
	"sync/atomic"
)

// inParallel calls f(0..n-1) on up to workers goroutines (one: in order,
// on this one), stopping at the first error, and returns the errors.
func inParallel(n, workers int, f func(i int) error) error {
	workers = min(workers, n)
	if workers < 2 {
		for i := range n {
			if err := f(i); err != nil {
				return err
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	var cursor atomic.Int64
	var failed atomic.Bool
	errs := make([]error, n)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				i := int(cursor.Add(1) - 1)
				if i >= n {
					return
				}
				if errs[i] = f(i); errs[i] != nil {
					failed.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
