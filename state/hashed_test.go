package state

import (
	"bytes"
	"testing"
)

// TestHashedAccess: KeyHash is the hash the store files a key by (its
// partition is PartitionOf's), a key put through PutKnownHashed or
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
			if err := s.PutKnownHashed(k, testVal(int64(i)), false, h); err != nil {
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
}
