package agg

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestClosedCarry checks the carry against a map: keys added in key order
// or not, each found with its value (the first get sorts), absent keys
// not found.
func TestClosedCarry(t *testing.T) {
	for _, sorted := range []bool{true, false} {
		rng := rand.New(rand.NewPCG(1, 2))
		c := newClosedCarry(7, 0)
		want := map[string]string{}
		for i := range 500 {
			k := fmt.Sprintf("k%05d", i*2)
			if !sorted {
				k = fmt.Sprintf("k%05d", rng.IntN(1000)*2)
			}
			if _, dup := want[k]; dup {
				continue
			}
			v := fmt.Sprint(rng.Int64())
			want[k] = v
			c.add([]byte(k), []byte(v))
		}
		if c.sorted != sorted {
			t.Fatalf("sorted input %v: carry sorted %v", sorted, c.sorted)
		}
		if c.len() != len(want) || c.bytes() <= 0 {
			t.Fatalf("carry holds %d keys in %d bytes, want %d keys", c.len(), c.bytes(), len(want))
		}
		for k, v := range want {
			if got, ok := c.get([]byte(k)); !ok || string(got) != v {
				t.Fatalf("get %s = %q, %v; want %q", k, got, ok, v)
			}
		}
		for _, k := range []string{"k00001", "k", "", "l", "k99999"} {
			if _, ok := c.get([]byte(k)); ok {
				t.Fatalf("get %q found a key never added", k)
			}
		}
	}
	var none *closedCarry
	if none.bytes() != 0 {
		t.Fatal("a nil carry has bytes")
	}
}

// setCarryInlineMax sets carryInlineMax for a test and returns the undo.
func setCarryInlineMax(n int) func() {
	old := carryInlineMax
	carryInlineMax = n
	return func() { carryInlineMax = old }
}
