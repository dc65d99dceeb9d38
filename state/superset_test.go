package state

import "testing"

// checkKeySuperset checks KeySuperset against the oracle: it visits every
// key of the view (the pending batch's state, want) and no key outside the
// committed version (committed) and the view.
func checkKeySuperset(t testing.TB, s *Store, want, committed map[string]string) {
	t.Helper()
	seen := map[string]bool{}
	err := s.KeySuperset(func(k []byte) error {
		_, inView := want[string(k)]
		if _, inCommitted := committed[string(k)]; !inView && !inCommitted {
			t.Fatalf("KeySuperset visits key %x, in neither the view nor the committed version", k)
		}
		seen[string(k)] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for k := range want {
		if !seen[k] {
			t.Fatalf("KeySuperset misses key %x of the view (%d keys, %d seen)", k, len(want), len(seen))
		}
	}
}
