package ethnode

import (
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethstream/ethstream/chain"
)

// recentBodies is how many regenerated bodies the node keeps. A table
// reader asks for a block's transactions and then its receipts, in one
// batch request: each regenerated the body (~1 ms for 150 transactions,
// the keccak of every transaction and the logs bloom), a third of the
// node's CPU in the transactions freshness bench (issue 43). A few bodies
// (~100 KB each) cover the blocks a batch request reads.
const recentBodies = 8

// servedBody is b's body for an RPC answer, regenerated at most once while
// it stays among the recentBodies last served, also when requests for it
// arrive at once (a client asking for a block's transactions and its
// receipts in two concurrent requests): the first regenerates it, the
// others wait for it. The body is shared: a caller only reads it.
func (n *Node) servedBody(b *nodeBlock) *chain.Body {
	n.bmu.Lock()
	for _, e := range n.bodies {
		if e.hash == b.hash {
			n.bmu.Unlock()
			<-e.ready
			return e.v.body
		}
	}
	e := cachedBody{hash: b.hash, ready: make(chan struct{}), v: &servedValue{}}
	if len(n.bodies) == recentBodies {
		n.bodies = append(n.bodies[:0], n.bodies[1:]...)
	}
	n.bodies = append(n.bodies, e)
	n.bmu.Unlock()
	defer close(e.ready)
	e.v.body = n.body(b)
	return e.v.body
}

// cachedBody is a body of the recent-bodies cache: v.body is set before
// ready is closed.
type cachedBody struct {
	hash  common.Hash
	ready chan struct{}
	v     *servedValue
}

// servedValue holds a cached body, shared by the entry's copies.
type servedValue struct{ body *chain.Body }
