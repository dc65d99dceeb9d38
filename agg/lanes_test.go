package agg

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestLanesMatchOneTable folds random streams in random chunk sizes (above
// and below parallelMinRows, so lanes run both concurrently and in turn)
// into the lanes and into one table, and requires the merged lanes to hold
// exactly the one table's entries with bit-for-bit equal accumulators: the
// fees are inexact in binary, so a double sum folded in another order would
// differ.
func TestLanesMatchOneTable(t *testing.T) {
	for name, spec := range propertySpecs {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("%s/seed=%d", name, seed), func(t *testing.T) {
				p, err := newPlan(spec)
				if err != nil {
					t.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(seed, 11))
				rows := genStream(rng, 30000, 20*time.Minute, 1_000_000, 30)
				for i := range rows {
					rows[i].fee = rng.NormFloat64() * 1e3
				}
				wmUs := int64(math.MinInt64)
				if seed == 2 && p.evicts {
					wmUs = rows[len(rows)/2].ts // some rows late
				}
				one := newPartial(p)
				lr := newLaneRunner(p)
				defer lr.stop()
				for len(rows) > 0 {
					n := min(len(rows), 1+rng.IntN(3*parallelMinRows))
					b := makeBatch(rows[:n])
					rows = rows[n:]
					st1, err1 := one.add(b, wmUs)
					st2, err2 := lr.add(b, wmUs)
					if fmt.Sprint(err1) != fmt.Sprint(err2) || st1 != st2 {
						t.Fatalf("chunk of %d: one table %+v %v, lanes %+v %v", n, st1, err1, st2, err2)
					}
				}
				for _, l := range lr.ls {
					if l.len() == 0 && one.len() > 100 {
						t.Errorf("a lane holds no entry of %d", one.len())
					}
				}
				mergeLanes(lr.ls)
				got := lr.ls[0]
				if got.len() != one.len() {
					t.Fatalf("lanes hold %d entries, one table %d", got.len(), one.len())
				}
				byKey := map[string]int{}
				for e := range one.len() {
					byKey[string(one.stateKey(nil, e))] = e
				}
				for e := range got.len() {
					k := string(got.stateKey(nil, e))
					w, ok := byKey[k]
					if !ok {
						t.Fatalf("lanes entry %d (key %x) is not in the one table, or twice in the lanes", e, k)
					}
					delete(byKey, k)
					for a := range one.acc {
						x, y := &one.acc[a], &got.acc[a]
						if len(x.ints) > 0 && x.ints[w] != y.ints[e] {
							t.Fatalf("aggregate %d of key %x: %d, want %d", a, k, y.ints[e], x.ints[w])
						}
						if len(x.floats) > 0 && math.Float64bits(x.floats[w]) != math.Float64bits(y.floats[e]) {
							t.Fatalf("aggregate %d of key %x: %v, want %v (bit for bit)", a, k, y.floats[e], x.floats[w])
						}
						if len(x.nn) > 0 && x.nn[w] != y.nn[e] {
							t.Fatalf("aggregate %d of key %x: %d non-null, want %d", a, k, y.nn[e], x.nn[w])
						}
						if x.overflow != y.overflow {
							t.Fatalf("aggregate %d: overflow %v, want %v", a, y.overflow, x.overflow)
						}
					}
				}
			})
		}
	}
}

// TestLanesBalance: on the reference workload (random 20-byte miner
// addresses, 5-minute windows) each lane takes a fair share of the keys,
// or one core would do most of the work.
func TestLanesBalance(t *testing.T) {
	p, err := newPlan(refSpec())
	if err != nil {
		t.Fatal(err)
	}
	lr := newLaneRunner(p)
	defer lr.stop()
	rows := benchRows(200_000, 0)
	for lo := 0; lo < len(rows); lo += 4096 {
		if _, err := lr.add(makeBatch(rows[lo:min(lo+4096, len(rows))]), math.MinInt64); err != nil {
			t.Fatal(err)
		}
	}
	n0, n1 := lr.ls[0].len(), lr.ls[1].len()
	if share := float64(n0) / float64(n0+n1); share < 0.4 || share > 0.6 {
		t.Fatalf("lane 0 holds %d keys, lane 1 %d: share %.2f", n0, n1, share)
	}
}
