package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"sync"

	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/ethstream/ethstream/errcode"
)

// nodeReorgs is `node`'s reorganisation schedule (--reorg-rate, --reorg-depth,
// --reorg-seed): before it answers a request for the head block, the node
// replaces its last 1..depth blocks with probability rate. The moves happen at
// the client's head polls, as the demo's node makes them, so a query
// following the head at confirmations=0 meets reorganisations of blocks it has
// read (phase 6 of the README by hand); the draws come from a generator seeded
// with seed, in request order.
type nodeReorgs struct {
	rate  float64
	depth int

	mu  sync.Mutex // the node calls the hook one request at a time; the log line is written under it too
	rng *rand.Rand
	out io.Writer
	n   *ethnode.Node
}

// validate refuses a schedule the flags cannot mean.
func (r *nodeReorgs) validate() error {
	if r.rate < 0 || r.rate > 1 {
		return errcode.New(errcode.InvalidArgument, "", "pass --reorg-rate between 0 (never) and 1 (at every head request)", "invalid --reorg-rate %v", r.rate)
	}
	if r.depth < 1 {
		return errcode.New(errcode.InvalidArgument, "", "pass --reorg-depth of at least 1 (the deepest reorganisation, in blocks)", "invalid --reorg-depth %d", r.depth)
	}
	return nil
}

// install makes n reorganise on r's schedule and print one line per
// reorganisation to out; a zero rate installs nothing.
func (r *nodeReorgs) install(n *ethnode.Node, seed int64, out io.Writer) {
	if r.rate == 0 {
		return
	}
	r.n, r.out = n, out
	r.rng = rand.New(rand.NewPCG(uint64(seed), 0x72656f7267))
	n.OnHeadRequest(r.headRequested)
}

func (r *nodeReorgs) headRequested() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rng.Float64() >= r.rate {
		return
	}
	depth := 1 + r.rng.IntN(r.depth)
	head := r.n.Head()
	old := r.n.Header(head)
	r.n.Reorg(depth)
	nw := r.n.Header(head)
	if old == nil || nw == nil || old.Hash() == nw.Hash() {
		return // nothing mined yet: the archive's blocks stay
	}
	fmt.Fprintf(r.out, "reorg depth %d at head %d: %s -> %s\n", min(uint64(depth), head), head, old.Hash().Hex(), nw.Hash().Hex())
}
