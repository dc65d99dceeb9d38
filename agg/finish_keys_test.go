package agg

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// setKeyed sets keyedMinEntries and keyedRunLen and returns the function
// restoring them.
func setKeyed(minEntries, runLen int) func() {
	oldMin, oldLen := keyedMinEntries, keyedRunLen
	keyedMinEntries, keyedRunLen = minEntries, runLen
	return func() { keyedMinEntries, keyedRunLen = oldMin, oldLen }
}

// TestKeyedFinishMatchesSerial runs the same stream through two operators
// of each update-mode spec, with one, two and three partials: one builds
// its state keys in Finish's loop, the other on another goroutine in runs
// of a few entries (finish_keys.go). Every batch's output (row for row),
// figures and committed state must be the same; the oracle tests check the
// answers. It fails if the keyed path never ran over several runs.
func TestKeyedFinishMatchesSerial(t *testing.T) {
	defer setShardMinRows(0)()
	defer setKeyed(keyedMinEntries, keyedRunLen)()
	names := make([]string, 0, len(propertySpecs))
	for name, spec := range propertySpecs {
		if spec.Mode == Update {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	multiRun := 0
	for _, name := range names {
		spec := propertySpecs[name]
		for seed := range uint64(2) {
			for _, shards := range []int{1, 2, 3} {
				if shards > 1 && spec.Window == nil {
					continue
				}
				t.Run(fmt.Sprintf("%s/seed=%d/shards=%d", name, seed, shards), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(seed, 45))
					delay := spec.WatermarkDelay
					if delay == 0 {
						delay = 20 * time.Minute
					}
					rows := genStream(rng, 1500, delay, 1_000_000, 30)
					serial := newHarness(t, spec, vfs.NewMem(), 3)
					keyed := newHarness(t, spec, vfs.NewMem(), 3)
					for _, h := range []*harness{serial, keyed} {
						h.lookahead, h.shards = seed == 1, shards
						h.restart(false)
					}
					for id := int64(0); len(rows) > 0; id++ {
						b := rows[:min(len(rows), rng.IntN(400))]
						rows = rows[len(b):]
						var chunks [][]testRow
						for len(b) > 0 {
							c := min(len(b), 1+rng.IntN(150))
							chunks, b = append(chunks, b[:c]), b[c:]
						}
						serial.process(id, chunks)
						keyed.process(id, chunks)
						keyedMinEntries = 1 << 30
						o1, p1 := serial.finishCommit(id, chunks)
						keyedMinEntries, keyedRunLen = 0, 7
						entries := 0
						for _, pt := range keyed.op.pts {
							entries += pt.len()
						}
						if entries > 2*keyedRunLen {
							multiRun++
						}
						o2, p2 := keyed.finishCommit(id, chunks)
						r1, r2 := decodeOutput(t, serial.op.p, o1), decodeOutput(t, keyed.op.p, o2)
						if fmt.Sprint(r1) != fmt.Sprint(r2) {
							t.Fatalf("batch %d: output with keys built apart\n%v\nin the loop\n%v", id, r2, r1)
						}
						if f1, f2 := progressCounts(p1), progressCounts(p2); f1 != f2 {
							t.Fatalf("batch %d: figures with keys built apart %s, in the loop %s", id, f2, f1)
						}
						if s1, s2 := serial.stateRows(), keyed.stateRows(); fmt.Sprint(s1) != fmt.Sprint(s2) {
							t.Fatalf("batch %d: state with keys built apart\n%v\nin the loop\n%v", id, s2, s1)
						}
					}
				})
			}
		}
	}
	if multiRun == 0 {
		t.Fatal("no batch had entries for several runs: the keyed path was not tested")
	}
}

// TestKeyedMergeStopsProducer: a merge that fails part way (a cancelled
// Finish, a state read error) returns its error only once the key builder
// has returned, so the partials may be reset at once (the race detector
// flags a builder still reading them), and a later call walks every entry
// in order with the ring intact.
func TestKeyedMergeStopsProducer(t *testing.T) {
	defer setShardMinRows(0)()
	defer setKeyed(0, 3)()
	var names []string
	for name, s := range propertySpecs {
		if s.Mode == Update && s.Window != nil {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	spec := propertySpecs[names[0]]
	rng := rand.New(rand.NewPCG(1, 46))
	rows := genStream(rng, 600, 20*time.Minute, 1_000_000, 30)
	h := newHarness(t, spec, vfs.NewMem(), 3)
	h.shards = 2
	h.restart(false)
	h.process(0, [][]testRow{rows})
	o := h.op
	o.keyOrders()
	var want []string
	o.eachInOrder(func(s int, e int32) bool {
		want = append(want, string(o.pts[s].stateKey(nil, int(e))))
		return true
	})
	if len(want) < 4*keyedRunLen {
		t.Fatalf("%d entries, want several runs", len(want))
	}
	errStop := fmt.Errorf("stop")
	for _, at := range []int{0, 1, keyedRunLen, len(want) / 2} {
		n := 0
		err := o.mergeKeyed(func(pt *partial, e int, key []byte) error {
			if n == at {
				return errStop
			}
			n++
			return nil
		})
		if err != errStop || n != at {
			t.Fatalf("stop at %d: err %v after %d entries", at, err, n)
		}
	}
	var got []string
	if err := o.mergeKeyed(func(pt *partial, e int, key []byte) error {
		got = append(got, string(key))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("keys after stopped merges:\n%q\nwant\n%q", got, want)
	}
	for _, pt := range o.pts {
		pt.reset()
	}
}
