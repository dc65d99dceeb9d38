package join

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestKeyTableRemoveKeepsRunsReachable: keys whose hashes crowd a few
// homes (long probe runs that wrap around the table's end) are inserted
// and removed in random order; after each step every key held is found
// and every key removed is not, as with a Go map.
func TestKeyTableRemoveKeepsRunsReachable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tab keyTable
	want := map[string]*keyRows{}
	var held []*keyRows
	check := func(step int) {
		t.Helper()
		n := 0
		for k := range tab.all {
			n++
			if want[k.key] != k {
				t.Fatalf("step %d: the table holds %q, removed or never added", step, k.key)
			}
		}
		if n != len(want) || tab.n != len(want) {
			t.Fatalf("step %d: the table holds %d keys (counts %d), want %d", step, n, tab.n, len(want))
		}
		for key, k := range want {
			if got, _ := tab.find([]byte(key), k.mh); got != k {
				t.Fatalf("step %d: key %q not found from its home", step, key)
			}
		}
	}
	for step := range 3000 {
		if len(held) > 0 && rng.IntN(5) < 2 {
			i := rng.IntN(len(held))
			k := held[i]
			held[i] = held[len(held)-1]
			held = held[:len(held)-1]
			delete(want, k.key)
			tab.remove(k)
		} else {
			key := fmt.Sprintf("k%d", step)
			// Few distinct homes, some near the end of the table so that
			// their runs wrap to its start.
			h := uint64(rng.IntN(4)) * 21
			if rng.IntN(2) == 0 {
				h = ^uint64(rng.IntN(3))
			}
			if got, _ := tab.find([]byte(key), h); got != nil {
				t.Fatalf("step %d: new key %q found", step, key)
			}
			k := &keyRows{key: key, mh: h}
			_, slot := tab.find([]byte(key), h)
			tab.insert(k, slot)
			want[key] = k
			held = append(held, k)
		}
		if step%97 == 0 || step > 2900 {
			check(step)
		}
	}
	check(3000)
}

// TestKeyTableReserve: after reserve(n), n more keys go in without the
// table growing again, and the keys it held before stay reachable.
func TestKeyTableReserve(t *testing.T) {
	var tab keyTable
	var held []*keyRows
	add := func(n int) {
		for range n {
			key := fmt.Sprintf("k%d", len(held))
			k := &keyRows{key: key, mh: keyHashString(key)}
			_, slot := tab.find([]byte(key), k.mh)
			tab.insert(k, slot)
			held = append(held, k)
		}
	}
	add(100)
	for _, n := range []int{5000, 20_000} {
		tab.reserve(n)
		size := len(tab.slots)
		add(n)
		if len(tab.slots) != size {
			t.Fatalf("reserve(%d) left %d slots, grown to %d by as many keys", n, size, len(tab.slots))
		}
	}
	for _, k := range held {
		if got, _ := tab.find([]byte(k.key), k.mh); got != k {
			t.Fatalf("key %q not found after reserve", k.key)
		}
	}
}
