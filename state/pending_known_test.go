package state

import (
	"context"
	"maps"
	"math/rand/v2"
	"testing"
)

// TestPutKnown: writes that tell the store whether each key is in the
// committed version (PutKnown, DeleteKnown) leave the same rows and the
// same counts (NumKeys, the metadata a read checks) as Put and Delete,
// which look the keys up, over random batches of new, rewritten and
// deleted keys.
func TestPutKnown(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 43))
	known, looked := newEnv(t, nil), newEnv(t, nil)
	a, b := known.open(4, -1), looked.open(4, -1)
	committed := map[int]int64{} // the model: key -> value
	for v := range int64(12) {
		next := maps.Clone(committed)
		for range 300 {
			i := rng.IntN(400)
			k := testKey(i)
			_, existed := committed[i]
			if rng.IntN(3) == 0 {
				if err := a.DeleteKnown(k, existed); err != nil {
					t.Fatal(err)
				}
				if err := b.Delete(k); err != nil {
					t.Fatal(err)
				}
				delete(next, i)
				continue
			}
			c := rng.Int64N(1000)
			if err := a.PutKnown(k, testVal(c), existed); err != nil {
				t.Fatal(err)
			}
			if err := b.Put(k, testVal(c)); err != nil {
				t.Fatal(err)
			}
			next[i] = c
		}
		if a.NumKeys() != b.NumKeys() || a.NumKeys() != int64(len(next)) {
			t.Fatalf("version %d: NumKeys %d with PutKnown, %d with Put, the model holds %d", v, a.NumKeys(), b.NumKeys(), len(next))
		}
		for _, s := range []*Store{a, b} {
			if _, err := s.Commit(ctx, v); err != nil {
				t.Fatal(err)
			}
		}
		committed = next
		if got, want := storeContents(t, a), storeContents(t, b); !maps.Equal(got, want) {
			t.Fatalf("version %d: %d rows with PutKnown, %d with Put", v, len(got), len(want))
		}
	}
	for _, s := range []*Store{a, b} {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Reopened, each version's rows agree with its metadata's counts.
	a = known.open(4, 11)
	if a.NumKeys() != int64(len(committed)) {
		t.Fatalf("reopened: NumKeys %d, the model holds %d", a.NumKeys(), len(committed))
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}
