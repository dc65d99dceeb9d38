package state

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestHashedAccess: KeyHash is the hash the store files a key by (its
// partition is PartitionOf's), a key put through PutFirstHashed or
// PutKnownHashedKey is read back by Get and GetHashed, and Prefetch changes
// nothing a read sees.
func TestHashedAccess(t *testing.T) {
	const n = 4
	e := newEnv(t, nil)
	s := e.open(n, -1)
	defer s.Close()
	for i := range 200 {
		k := testKey(i)
		h := KeyHash(k)
		if int(h%n) != PartitionOf(k, n) {
			t.Fatalf("key %d: KeyHash %% %d is %d, PartitionOf %d", i, n, h%n, PartitionOf(k, n))
		}
		s.Prefetch(k, h)
		if _, ok, err := s.GetHashed(k, h); err != nil || ok {
			t.Fatalf("key %d before its put: found %v, err %v", i, ok, err)
		}
		if i%2 == 0 {
			if err := s.PutFirstHashed(k, testVal(int64(i)), false, h); err != nil {
				t.Fatal(err)
			}
		} else {
			// PutKnownHashedKey: the store's copy of the key, which the
			// caller's buffer being overwritten does not change.
			stored, err := s.PutKnownHashedKey(k, testVal(int64(i)), false, h)
			if err != nil {
				t.Fatal(err)
			}
			want := string(k)
			clear(k)
			if stored != want {
				t.Fatalf("key %d: PutKnownHashedKey returned %x, want %x", i, stored, want)
			}
			k = []byte(want)
		}
		s.Prefetch(k, h)
		for _, get := range []func() ([]byte, bool, error){
			func() ([]byte, bool, error) { return s.Get(k) },
			func() ([]byte, bool, error) { return s.GetHashed(k, h) },
		} {
			if v, ok, err := get(); err != nil || !ok || !bytes.Equal(v, testVal(int64(i))) {
				t.Fatalf("key %d after its put: %x, found %v, err %v", i, v, ok, err)
			}
		}
	}
	if _, err := s.Commit(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	if got := storeContents(t, s); len(got) != 200 {
		t.Fatalf("%d keys committed, want 200", len(got))
	}
	// DeleteFirstHashed, the hash continued from a prefix's (KeyHashMore).
	for i := range 200 {
		if i%3 != 0 {
			continue
		}
		k := testKey(i)
		cut := len(k) / 2
		h := KeyHashMore(KeyHash(k[:cut]), k[cut:])
		if h != KeyHash(k) {
			t.Fatalf("key %d: KeyHashMore %x, KeyHash %x", i, h, KeyHash(k))
		}
		if err := s.DeleteFirstHashed(k, true, h); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := s.Get(k); err != nil || ok {
			t.Fatalf("key %d after its delete: found %v, err %v", i, ok, err)
		}
	}
	if _, err := s.Commit(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	if got := storeContents(t, s); len(got) != 133 {
		t.Fatalf("%d keys committed, want 133", len(got))
	}
}

// TestKeyHash4 checks KeyHash4 against KeyHash, and KeyHashMore4 against
// KeyHashMore, on random keys of equal and unequal lengths, empty ones
// included.
func TestKeyHash4(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	key := func() []byte {
		n := r.IntN(80)
		if r.IntN(4) == 0 {
			n = 68 // a dedup hash key's length
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	for i := range 5000 {
		k := [4][]byte{key(), key(), key(), key()}
		var got [4]uint64
		got[0], got[1], got[2], got[3] = KeyHash4(k[0], k[1], k[2], k[3])
		for j := range k {
			if want := KeyHash(k[j]); got[j] != want {
				t.Fatalf("case %d: KeyHash4's hash %d of %x is %x, KeyHash's %x", i, j, k[j], got[j], want)
			}
		}
		pre := KeyHash(key())
		got[0], got[1], got[2], got[3] = KeyHashMore4(pre, k[0], k[1], k[2], k[3])
		for j := range k {
			if want := KeyHashMore(pre, k[j]); got[j] != want {
				t.Fatalf("case %d: KeyHashMore4's hash %d of %x is %x, KeyHashMore's %x", i, j, k[j], got[j], want)
			}
		}
	}
}

// TestPendingTableKeptAcrossBatches: a batch's large index, well used, is
// kept for the next batch (not regrown from the hint), and the next batch
// finds none of the last one's keys pending; a little-used one is dropped.
func TestPendingTableKeptAcrossBatches(t *testing.T) {
	e := newEnv(t, nil)
	s := e.open(4, -1)
	defer s.Close()
	const batch = 40000
	put := func(version int64, from int) {
		t.Helper()
		for i := from; i < from+batch; i++ {
			if err := s.Put(testKey(i), testVal(int64(version))); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(0, 0)
	slots := len(s.ptab.slots)
	if _, err := s.Commit(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	if len(s.ptab.slots) != slots || s.ptab.live != 0 || len(s.ptab.ents) != 0 {
		t.Fatalf("after the commit: %d slots (batch had %d), %d live, %d entries", len(s.ptab.slots), slots, s.ptab.live, len(s.ptab.ents))
	}
	for i := 0; i < batch; i += 97 {
		if e := s.ptab.get(testKey(i), KeyHash(testKey(i))); e != nil {
			t.Fatalf("key %d of the committed batch still pending", i)
		}
	}
	// Half the keys new, half overwritten: reads see the new batch only.
	put(1, batch/2)
	if len(s.ptab.slots) != slots {
		t.Fatalf("the second batch regrew the index: %d slots, kept %d", len(s.ptab.slots), slots)
	}
	for i := 0; i < 3*batch/2; i += 89 {
		v, ok, err := s.Get(testKey(i))
		want := int64(1)
		if i < batch/2 {
			want = 0
		}
		if err != nil || !ok || !bytes.Equal(v, testVal(want)) {
			t.Fatalf("key %d: %x, found %v, err %v; want version %d's value", i, v, ok, err, want)
		}
	}
	if _, err := s.Commit(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	if got := storeContents(t, s); len(got) != 3*batch/2 {
		t.Fatalf("%d keys committed, want %d", len(got), 3*batch/2)
	}
	// A small batch leaves the large arrays little used: dropped.
	if err := s.Put(testKey(0), testVal(2)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	if len(s.ptab.slots) != 0 || s.ptab.hint != 1 {
		t.Fatalf("after a one-key batch: %d slots, hint %d; want the arrays dropped", len(s.ptab.slots), s.ptab.hint)
	}
}
