package state

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
)

// TestInParallel: every index is called exactly once without an error;
// with one, the error is returned, no index is called twice, and in order
// (one worker) none after the failing one.
func TestInParallel(t *testing.T) {
	for n := range 20 {
		for workers := 1; workers <= 5; workers++ {
			for bad := -1; bad < n; bad++ {
				calls := make([]atomic.Int32, n)
				errBad := fmt.Errorf("index %d", bad)
				err := inParallel(n, workers, func(i int) error {
					calls[i].Add(1)
					if i == bad {
						return errBad
					}
					return nil
				})
				if (bad >= 0) != errors.Is(err, errBad) || (bad < 0 && err != nil) {
					t.Fatalf("n %d, workers %d, failing %d: error %v", n, workers, bad, err)
				}
				for i := range calls {
					c := calls[i].Load()
					if c > 1 || (bad < 0 && c != 1) || (workers == 1 && bad >= 0 && i > bad && c != 0) || (i == bad && c != 1) {
						t.Fatalf("n %d, workers %d, failing %d: index %d called %d times", n, workers, bad, i, c)
					}
				}
			}
		}
	}
}
