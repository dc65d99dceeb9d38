package ethnode

import (
	"sync"
	"testing"

	"github.com/ethstream/ethstream/chain"
)

// TestServedBodyOnceForConcurrentRequests: requests for a block's body
// that arrive at once (a table reader's transactions and receipts) share
// one regenerated body rather than each regenerating it.
func TestServedBodyOnceForConcurrentRequests(t *testing.T) {
	n := startTestNode(t, Options{Seed: 11, Manual: true, InitialBlocks: 3})
	for num := n.Head() - 2; num <= n.Head(); num++ {
		n.mu.RLock()
		b := n.blockLocked(num)
		n.mu.RUnlock()
		const k = 8
		got := make([]*chain.Body, k)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				got[i] = n.servedBody(b)
			}()
		}
		close(start)
		wg.Wait()
		for i, body := range got {
			if body == nil || body != got[0] || len(body.Receipts) != b.txCount {
				t.Fatalf("block %d: request %d got another body (or none) than request 0", num, i)
			}
		}
	}
}
