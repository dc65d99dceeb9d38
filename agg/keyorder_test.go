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

// TestKeyOrderMatchesSort checks keyOrder (a counting sort on the window,
// then each window's groups, strings by their ranks) against a plain sort
// of the entries, on shuffled streams (the parallel decoding interleaves
// days) for every spec, with and without windows, tumbling and sliding,
// halfway through a stream and at its end; and the state keys of the
// names' encodings against those built from the strings.
func TestKeyOrderMatchesSort(t *testing.T) {
	ranked := false // some partial's strings were ordered by their ranks
	defer func() {
		if !ranked && !t.Failed() {
			t.Error("no partial ranked its names: the streams do not test the ranks")
		}
	}()
	for name, spec := range propertySpecs {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("%s/seed=%d", name, seed), func(t *testing.T) {
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
				pt := newPartial(p)
				// Ordered halfway and at the end: names interned after the
				// first order must not be ordered by its ranks.
				check := func() {
					t.Helper()
					got, _ := pt.keyOrder(nil, nil)
					if pt.ranked {
						ranked = true
					}
					want := make([]int32, pt.len())
					for e := range want {
						want[e] = int32(e)
					}
					slices.SortFunc(want, func(a, b int32) int {
						if c := cmp.Compare(pt.start[a], pt.start[b]); c != 0 {
							return c
						}
						for k, ty := range p.groupType {
							var c int
							if ty == stream.String {
								c = strings.Compare(pt.keyStr(k, int(a)), pt.keyStr(k, int(b)))
							} else {
								c = cmp.Compare(pt.gInt[k][a], pt.gInt[k][b])
							}
							if c != 0 {
								return c
							}
						}
						return 0
					})
					if !slices.Equal(got, want) {
						t.Fatalf("keyOrder of %d entries differs from a sort", pt.len())
					}
					// The names' encodings (rankNames) are those stateKey
					// builds from the strings.
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
				for lo := 0; lo < len(rows); lo += 500 {
					if _, err := pt.add(makeBatch(rows[lo:min(lo+500, len(rows))]), math.MinInt64); err != nil {
						t.Fatal(err)
					}
					if lo == 1500 {
						check()
					}
				}
				check()
				if p.window && pt.len() < 100 {
					t.Fatalf("only %d entries: the stream does not test the sort", pt.len())
				}
			})
		}
	}
}
