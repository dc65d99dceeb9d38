package agg

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/stream"
)

// TestKeyOrderMatchesSort checks the key order Finish merges in (keyRuns'
// counting sort on the window, each window's groups sorted by sortRun as
// eachInOrder reaches them, strings by their ranks, the partials' orders
// merged) against a plain sort of the entries, on shuffled streams (the
// parallel decoding interleaves days) for every spec, with and without
// windows, tumbling and sliding, with one to three partials, halfway
// through a stream and at its end, and after a walk that stopped part way
// (its runs left sorted, the others not); and the state keys of the names'
// encodings against those built from the strings.
func TestKeyOrderMatchesSort(t *testing.T) {
	ranked := false // some partial's strings were ordered by their ranks
	defer func() {
		if !ranked && !t.Failed() {
			t.Error("no partial ranked its names: the streams do not test the ranks")
		}
	}()
	for name, spec := range propertySpecs {
		for seed := range uint64(4) {
			for _, shards := range []int{1, 2, 3} {
				if shards > 1 && spec.Window == nil {
					continue
				}
				t.Run(fmt.Sprintf("%s/seed=%d/shards=%d", name, seed, shards), func(t *testing.T) {
					p, err := newPlan(spec)
					if err != nil {
						t.Fatal(err)
					}
					rng := rand.New(rand.NewPCG(seed, 7))
					rows := genStream(rng, 3000, 20*time.Minute, 1_000_000, 30)
					if seed%2 == 1 {
						rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
					}
					for i := range rows {
						if i%97 == 0 {
							rows[i].miner = "0x\x00ee" // escaped in a state key
						}
					}
					o := &Operator{p: p}
					o.setPlan(p, shards)
					// Ordered halfway and at the end: names interned after the
					// first order must not be ordered by its ranks.
					check := func() {
						t.Helper()
						o.keyOrders()
						walk := func(stopAt int) (got [][2]int32) {
							o.eachInOrder(func(s int, e int32) bool {
								got = append(got, [2]int32{int32(s), e})
								return len(got) != stopAt
							})
							return got
						}
						walk(len(rows) / 7)
						got := walk(-1)
						var want [][2]int32
						for s, pt := range o.pts {
							if pt.ranked {
								ranked = true
							}
							for e := range pt.len() {
								want = append(want, [2]int32{int32(s), int32(e)})
							}
						}
						slices.SortFunc(want, func(x, y [2]int32) int {
							pa, a, pb, b := o.pts[x[0]], int(x[1]), o.pts[y[0]], int(y[1])
							if c := cmp.Compare(pa.start[a], pb.start[b]); c != 0 {
								return c
							}
							for k, ty := range p.groupType {
								var c int
								if ty == stream.String {
									c = strings.Compare(pa.keyStr(k, a), pb.keyStr(k, b))
								} else {
									c = cmp.Compare(pa.gInt[k][a], pb.gInt[k][b])
								}
								if c != 0 {
									return c
								}
							}
							return 0
						})
						if !slices.Equal(got, want) {
							t.Fatalf("the key order of %d entries differs from a sort", len(want))
						}
						// The names' encodings (rankNames) are those stateKey
						// builds from the strings.
						for _, pt := range o.pts {
							for e := range pt.len() {
								key := pt.stateKey(nil, e)
								r := pt.ranked
								pt.ranked = false
								want := pt.stateKey(nil, e)
								pt.ranked = r
								if !bytes.Equal(key, want) {
									t.Fatalf("entry %d: state key %x, from its strings %x", e, key, want)
								}
							}
						}
					}
					for lo := 0; lo < len(rows); lo += 500 {
						b := makeBatch(rows[lo:min(lo+500, len(rows))])
						for _, pt := range o.pts {
							if _, err := pt.add(b, math.MinInt64); err != nil {
								t.Fatal(err)
							}
						}
						if lo == 1500 {
							check()
						}
					}
					check()
					n := 0
					for _, pt := range o.pts {
						n += pt.len()
					}
					if p.window && n < 100 {
						t.Fatalf("only %d entries: the stream does not test the sort", n)
					}
				})
			}
		}
	}
}
