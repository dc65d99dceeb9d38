package state

import (
	"context"
	"maps"
	"math/rand/v2"
	"testing"
)

// TestPutFirst: writes appended without a lookup (PutFirstHashed,
// DeleteFirstHashed, each key at most once a batch) leave the same rows
// and counts as Put and Delete, over random batches; a Get of such a key
// in the batch sees its write, and a Put or Delete after it changes that
// entry rather than adding a second one.
func TestPutFirst(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 71))
	first, looked := newEnv(t, nil), newEnv(t, nil)
	a, b := first.open(4, -1), looked.open(4, -1)
	committed := map[int]int64{} // the model: key -> value
	for v := range int64(10) {
		next := maps.Clone(committed)
		written := map[int]bool{}
		for range 300 {
			i := rng.IntN(400)
			k := testKey(i)
			_, existed := committed[i]
			c := rng.Int64N(1000)
			del := rng.IntN(3) == 0
			switch {
			case written[i] && del:
				// A second write of the key: through a lookup.
				if err := a.Delete(k); err != nil {
					t.Fatal(err)
				}
			case written[i]:
				if err := a.Put(k, testVal(c)); err != nil {
					t.Fatal(err)
				}
			case del:
				if err := a.DeleteFirstHashed(k, existed, KeyHash(k)); err != nil {
					t.Fatal(err)
				}
			default:
				if err := a.PutFirstHashed(k, testVal(c), existed, KeyHash(k)); err != nil {
					t.Fatal(err)
				}
			}
			written[i] = true
			if del {
				if err := b.Delete(k); err != nil {
					t.Fatal(err)
				}
				delete(next, i)
			} else {
				if err := b.Put(k, testVal(c)); err != nil {
					t.Fatal(err)
				}
				next[i] = c
			}
			if rng.IntN(10) == 0 {
				j := rng.IntN(400)
				got, ok, err := a.Get(testKey(j))
				want, wok := next[j]
				if err != nil || ok != wok || ok && string(got) != string(testVal(want)) {
					t.Fatalf("version %d: Get of key %d: %x %v %v, want %x %v", v, j, got, ok, err, testVal(want), wok)
				}
			}
		}
		if a.NumKeys() != b.NumKeys() || a.NumKeys() != int64(len(next)) {
			t.Fatalf("version %d: NumKeys %d with PutFirstHashed, %d with Put, the model holds %d", v, a.NumKeys(), b.NumKeys(), len(next))
		}
		for _, s := range []*Store{a, b} {
			if _, err := s.Commit(ctx, v); err != nil {
				t.Fatal(err)
			}
		}
		committed = next
		if got, want := storeContents(t, a), storeContents(t, b); !maps.Equal(got, want) {
			t.Fatalf("version %d: %d rows with PutFirstHashed, %d with Put", v, len(got), len(want))
		}
	}
	for _, s := range []*Store{a, b} {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPutFirstTwiceRefused: a key written twice through PutFirstHashed
// (a broken promise: two entries of one key) fails the commit instead of
// writing both, in a small batch and in one large enough for the grouped
// sort; the batch can then be aborted.
func TestPutFirstTwiceRefused(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{10, 20_000} {
		e := newEnv(t, nil)
		s := e.open(4, -1)
		for i := range n {
			k := testKey(i)
			if err := s.PutFirstHashed(k, testVal(1), false, KeyHash(k)); err != nil {
				t.Fatal(err)
			}
		}
		k := testKey(n / 2)
		if err := s.PutFirstHashed(k, testVal(2), false, KeyHash(k)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Commit(ctx, 0); err == nil {
			t.Fatalf("%d keys: a key written twice through PutFirstHashed committed", n)
		}
		s.Abort()
		if _, err := s.Commit(ctx, 0); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
