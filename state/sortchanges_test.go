package state

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ethstream/ethstream/internal/cputime"
)

// TestSortChangesMatchesNaive checks the grouped, parallel sort
// against a plain sort by whole keys on inputs above and below its size
// threshold, with keys of several shapes: sharing 8-byte prefixes, a
// join's (long shared prefixes of several lengths, then random bytes),
// and short keys of few distinct bytes (ends within a word, zero bytes,
// keys that are prefixes of others, the empty key).
func TestSortChangesMatchesNaive(t *testing.T) {
	shapes := map[string]func(r *rand.Rand) string{
		"pfx8":     func(r *rand.Rand) string { return fmt.Sprintf("%08d|%d", r.IntN(50), r.IntN(1000000)) },
		"join":     func(r *rand.Rand) string { return joinLikeKey(r, false) },
		"join-pad": func(r *rand.Rand) string { return joinLikeKey(r, true) },
		"short": func(r *rand.Rand) string {
			b := make([]byte, r.IntN(20))
			for i := range b {
				b[i] = "\x00\x01a"[r.IntN(3)]
			}
			return string(b)
		},
	}
	for name, gen := range shapes {
		for _, n := range []int{0, 1, 100, 1 << 14, 50000, 70000} {
			for _, parts := range []int{1, 7, 200} {
				if n > 1<<16 && parts > 1 {
					continue // a group of more than 65,536 keys: 5 key bytes a word
				}
				r := rand.New(rand.NewPCG(uint64(n), uint64(parts)))
				seen := map[string]bool{}
				cs := make([]change, 0, n)
				for range n {
					// A pending batch holds each key once.
					if k := gen(r); !seen[k] {
						seen[k] = true
						cs = append(cs, newChange(&pendingEntry{key: k, part: int32(keyHash([]byte(k)) % uint64(parts))}))
					}
				}
				want := slices.Clone(cs)
				slices.SortFunc(want, cmpChange)
				sortChanges(cs)
				for i := range cs {
					if cs[i].part != want[i].part || cs[i].key != want[i].key {
						t.Fatalf("%s n=%d parts=%d: at %d got (%d,%q), want (%d,%q)", name, n, parts, i, cs[i].part, cs[i].key, want[i].part, want[i].key)
					}
				}
			}
		}
	}
}

// joinLikeKey is a key of the join's state layout: a side and a store
// name, the encoded join key (a block hash) and, for keyWithIndexToValue,
// the index. With pad, the hashes are small numbers zero-padded, so keys
// share prefixes of many lengths.
func joinLikeKey(r *rand.Rand, pad bool) string {
	side := []string{"left", "right"}[r.IntN(2)]
	hash := fmt.Sprintf("0x%016x%016x%016x%016x", r.Uint64(), r.Uint64(), r.Uint64(), r.Uint64())
	if pad {
		hash = fmt.Sprintf("0x%064x", r.Uint64()>>r.IntN(64))
	}
	if r.IntN(2) == 0 {
		k := AppendStringKey(AppendStringKey(AppendStringKey(nil, side), "keyToNumValues"), hash)
		return string(AppendNullableInt64Key(k, 0, true))
	}
	k := AppendStringKey(AppendStringKey(AppendStringKey(nil, side), "keyWithIndexToValue"), hash)
	return string(AppendNullableInt64Key(k, int64(r.IntN(3)), false))
}

// BenchmarkSortChanges sorts a join batch's pending changes (the bench's
// join shape at 7 days: 143,000 keys over 200 partitions), the commit's
// sort.
func BenchmarkSortChanges(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	var cs []change
	seen := map[string]bool{}
	for len(cs) < 143_000 {
		k := joinLikeKey(r, false)
		if !seen[k] {
			seen[k] = true
			cs = append(cs, newChange(&pendingEntry{key: k, part: int32(keyHash([]byte(k)) % 200)}))
		}
	}
	work := make([]change, len(cs))
	var cpu time.Duration // of the process: a loaded machine's wall time measures its load
	for b.Loop() {
		b.StopTimer()
		copy(work, cs)
		b.StartTimer()
		c0 := cputime.Self()
		sortChanges(work)
		cpu += cputime.Self() - c0
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/op")
}

// TestWordAt: sortKeys' word is the key's 8 bytes from off, big-endian,
// with the bytes past the key's end as zeros, on both of its paths.
func TestWordAt(t *testing.T) {
	key := "\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a"
	for off, want := range []uint64{0x0102030405060708, 0x0203040506070809, 0x030405060708090a, 0x0405060708090a00, 0x05060708090a0000} {
		if got := wordAt(key, off); got != want {
			t.Errorf("wordAt(key, %d) = %#x, want %#x", off, got, want)
		}
	}
	if got := wordAt(key, len(key)); got != 0 {
		t.Errorf("wordAt at the key's end = %#x, want 0", got)
	}
}

// sortChanges sorts cs by (partition, key) as a commit sorts its pending
// entries' changes (sortedChanges, over the entries of cs in their order).
func sortChanges(cs []change) {
	sorted, _ := sortedChanges(func(yield func(*pendingEntry) bool) {
		for _, c := range cs {
			if !yield(c.e) {
				return
			}
		}
	})
	copy(cs, sorted)
}
