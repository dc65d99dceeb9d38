package stream

import (
	"sync"
	"testing"
)

// TestLend: a batch nobody lent cannot be retained; a lent one goes back
// to its producer exactly once, on the last of its releases (the
// producer's and each Retain's, from any goroutine), to a wrapper sharing
// its lending too; lending it again allocates nothing; and a producer
// lending it again while it is retained panics.
func TestLend(t *testing.T) {
	plain := &Batch{Len: 1}
	if plain.Retain() || plain.Lent() {
		t.Fatal("a batch nobody lent is retained")
	}
	plain.Release() // a no-op

	b := &Batch{Len: 3}
	var backs []*Batch
	back := func(x *Batch) { backs = append(backs, x) }
	Lend(b, back)
	w := &Batch{Len: 3}
	ShareLending(w, b)
	if !b.Retain() || !w.Retain() {
		t.Fatal("a lent batch (or its wrapper) is not retained")
	}
	b.Release() // the producer's
	w.Release()
	if len(backs) != 0 || !b.Lent() {
		t.Fatalf("back after %d of 3 releases", 2)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Lend of a retained batch did not panic")
			}
		}()
		Lend(b, back)
	}()
	b.Release()
	if len(backs) != 1 || backs[0] != b || b.Lent() {
		t.Fatalf("back %v after the last release, want the batch once", backs)
	}

	// Many goroutines retain and release: back runs once, after all.
	Lend(b, back)
	var wg sync.WaitGroup
	for range 8 {
		if !b.Retain() {
			t.Fatal("not retained")
		}
		wg.Go(func() {
			for range 100 {
				if b.Retain() {
					b.Release()
				}
			}
			b.Release()
		})
	}
	b.Release()
	wg.Wait()
	if len(backs) != 2 {
		t.Fatalf("back ran %d times in all, want 2", len(backs))
	}

	backs = nil
	count := 0
	counted := func(*Batch) { count++ }
	if n := testing.AllocsPerRun(10, func() {
		Lend(b, counted)
		b.Retain()
		b.Release()
		b.Release()
	}); n != 0 {
		t.Errorf("lending a batch again allocates %v times", n)
	}
	if count != 11 {
		t.Errorf("back ran %d times in 11 lendings", count)
	}
}
