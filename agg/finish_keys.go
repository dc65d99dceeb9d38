package agg

// Keyed Finish: in update mode, a large batch's state keys are built on a
// goroutine of its own, in the order Finish merges the entries (each
// partial's window runs sorted as the walk reaches them and the partials
// merged, eachInOrder), while Finish's loop reads, merges and writes state
// and appends the output rows on the caller's: a seed backfill batch of a
// million entries spent 1.3 of its serial 3.1 CPU-s building the keys
// (stateKey) in that loop. The producer only reads the partials, which
// nothing writes until Finish resets them, and sorts the runs of their
// orders, which nothing else reads meanwhile; it hands the keys over in
// runs (keyedRun) through a small ring, so memory stays a few runs however
// large the batch. No goroutine outlives mergeKeyed.

// keyedMinEntries is the smallest batch (in partial entries) whose keys are
// built on another goroutine: below it the handoff costs more than it saves
// (a live batch has a few entries). A variable for the tests.
var keyedMinEntries = 8192

// keyedRunLen is the number of entries of a run; keyedRuns runs make the
// ring (one being built, one being merged, one waiting). keyedRunLen is a
// variable for the tests.
var keyedRunLen = 1024

const keyedRuns = 3

// keyedRun is a run of entries in merge order with their state keys: entry
// ents[j] of partial pts[j], whose key is keys[ends[j-1]:ends[j]].
type keyedRun struct {
	pts  []int32
	ents []int32
	ends []int32
	keys []byte
}

func (r *keyedRun) reset() {
	r.pts, r.ents, r.ends, r.keys = r.pts[:0], r.ents[:0], r.ends[:0], r.keys[:0]
}

// mergeKeyed calls merge with every entry in key order and its state key,
// the keys built on another goroutine, until merge fails. keyOrders must
// have run.
func (o *Operator) mergeKeyed(merge func(pt *partial, e int, key []byte) error) error {
	stop := make(chan struct{})
	runs := make(chan *keyedRun, keyedRuns)
	free := make(chan *keyedRun, keyedRuns)
	for i := range o.runs {
		free <- &o.runs[i]
	}
	go o.produceKeyed(free, runs, stop)
	defer func() {
		close(stop)
		for range runs { // until the producer has returned
		}
	}()
	for r := range runs {
		lo := int32(0)
		for j, e := range r.ents {
			if err := merge(o.pts[r.pts[j]], int(e), r.keys[lo:r.ends[j]]); err != nil {
				return err
			}
			lo = r.ends[j]
		}
		free <- r
	}
	return nil
}

// produceKeyed fills runs taken from free with the entries in key order and
// their state keys and sends them on runs, which it closes when done or
// when stop is closed.
func (o *Operator) produceKeyed(free <-chan *keyedRun, runs chan<- *keyedRun, stop <-chan struct{}) {
	defer close(runs)
	var r *keyedRun
	take := func() bool {
		select {
		case r = <-free:
			r.reset()
			return true
		case <-stop:
			return false
		}
	}
	send := func() bool {
		select {
		case runs <- r:
			return true
		case <-stop:
			return false
		}
	}
	if !take() {
		return
	}
	all := o.eachInOrder(func(s int, e int32) bool {
		r.keys = o.pts[s].stateKey(r.keys, int(e))
		r.pts, r.ents, r.ends = append(r.pts, int32(s)), append(r.ents, e), append(r.ends, int32(len(r.keys)))
		if len(r.ents) < keyedRunLen {
			return true
		}
		return send() && take()
	})
	if all && len(r.ents) > 0 {
		send()
	}
}
