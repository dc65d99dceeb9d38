package join

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// TestFormat3Counts: format 3 stores a key's keyToNumValues only when the
// key holds two values or more, and drops it when the key falls back to
// one or none; a state written in format 2 (a count for every key)
// resumes: the join reads its counts, emits what the run from scratch
// emits batch by batch, and rewrites or deletes a count once the key's
// rows change. Each join type runs with its rows in memory and read from
// the state (memRowsCap 0), the format-2 state made from the first two
// batches' state by adding the count of every key of one value.
func TestFormat3Counts(t *testing.T) {
	for _, typ := range []Type{Inner, LeftOuter, RightOuter, FullOuter, LeftSemi} {
		for _, rowsCap := range []int{1 << 20, 0} {
			t.Run(fmt.Sprintf("%s/cap%d", typ, rowsCap), func(t *testing.T) {
				defer func(c int) { memRowsCap = c }(memRowsCap)
				memRowsCap = rowsCap
				batches := memTestInput(rand.New(rand.NewPCG(uint64(typ), 23)), 30) // 30 keys: a key holds one value as often as several
				var kinds [3]int
				want := runFormatTest(t, typ, batches, -1, &kinds)
				if kinds[1] == 0 || kinds[2] == 0 {
					t.Fatalf("keys of one value %d, of several %d: the input tests nothing", kinds[1], kinds[2])
				}
				if !strings.Contains(strings.Join(want, ""), "out ") {
					t.Fatal("no joined rows: the input tests nothing")
				}
				got := runFormatTest(t, typ, batches, 1, &kinds)
				if !slices.Equal(got, want) {
					t.Fatalf("resumed on format 2:\n%s\nfrom scratch:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			})
		}
	}
}

// runFormatTest runs batches at batch ids 0, 2, 4... and returns each
// batch's sorted output. After each commit it checks the state's counts:
// every count equals its key's values; a key of two values or more has
// one; in format 3 (before a conversion, and for every key once the
// conversion's keys of one value are gone) no key of one value has one.
// With convertAfter >= 0 the state committed by that batch is rewritten
// as format 2 at the odd version after it (every key of one value
// counted, the spec recorded as join/v2) and the rest resumes on it in a
// new operator. kinds counts the keys seen by their values (1, 2+).
func runFormatTest(t *testing.T, typ Type, batches [][2][]memTestRow, convertAfter int, kinds *[3]int) []string {
	t.Helper()
	ctx := context.Background()
	spec, env := memTestSpec(typ), memTestEnv(t)
	open := func() *Operator {
		o, err := New(spec)
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Open(ctx, env); err != nil {
			t.Fatal(err)
		}
		return o
	}
	o := open()
	defer func() { o.Close() }()
	var outs []string
	maxTs, wmMs := int64(0), int64(0)
	// format2 are the keys the conversion counted with one value: until
	// their rows change they keep their count.
	format2 := map[string]bool{}
	for i, b := range batches {
		id := int64(2 * i)
		o.EvictionWatermark(id, wmMs)
		for s := range 2 {
			if err := o.ProcessSide(ctx, id, wmMs, s, memTestBatch(b[s])); err != nil {
				t.Fatal(err)
			}
		}
		res, _, err := o.Finish(ctx, id, wmMs)
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Commit(ctx, id); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, fmt.Sprintf("batch %d:\n%s", i, strings.Join(memTestRows(res), "\n")))
		for s := range 2 {
			for _, r := range b[s] {
				maxTs = max(maxTs, r.ts)
			}
		}
		wmMs = maxTs/1000 - 60_000

		values, counts := stateCounts(t, env.StateDir, id)
		for k, n := range values {
			kinds[min(n, 2)]++
			c, ok := counts[k]
			switch {
			case n >= 2 && (!ok || c != n):
				t.Fatalf("batch %d: key %s holds %d values, counted %d (%v)", i, k, n, c, ok)
			case n == 1 && ok && (c != 1 || !format2[k]):
				t.Fatalf("batch %d: key %s of one value is counted %d", i, k, c)
			}
		}
		for k, c := range counts {
			if _, ok := values[k]; !ok {
				t.Fatalf("batch %d: key %s without values is counted %d", i, k, c)
			}
		}
		// A format-2 key whose rows changed lost its count or has two values
		// now; its one value, written again or not, is format 3's.
		for k := range format2 {
			if _, ok := counts[k]; !ok || values[k] != 1 {
				delete(format2, k)
			}
		}
		if i != convertAfter {
			continue
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
		env.Version = id + 1
		convertToFormat2(t, env, o.Schema(), id, values, counts, format2)
		o = open()
	}
	return outs
}

// stateCounts reads state version v: each (side, join key)'s number of
// values and its keyToNumValues, if any, by "side/encoded key".
func stateCounts(t *testing.T, dir string, v int64) (values, counts map[string]int) {
	t.Helper()
	values, counts = map[string]int{}, map[string]int{}
	_, _, err := state.ReadAllRaw(context.Background(), vfs.Default, dir, v, func(_ int, key, val []byte) error {
		side, store, jk, err := splitStateKey(key)
		if err != nil {
			return err
		}
		k := fmt.Sprintf("%d/%x", side, jk)
		switch store {
		case StoreKeyWithIndexToValue:
			values[k]++
		case StoreKeyToNumValues:
			n, err := decodeCount(val)
			if err != nil {
				return err
			}
			counts[k] = int(n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return values, counts
}

// splitStateKey splits an encoded state key into its side, its store and
// its encoded join key.
func splitStateKey(key []byte) (side int, store string, jk []byte, err error) {
	for side := range 2 {
		for i, store := range []string{StoreKeyToNumValues, StoreKeyWithIndexToValue} {
			if p := keyPrefixes[side][i]; bytes.HasPrefix(key, p) {
				end := len(key) - 1 // the null index
				if store == StoreKeyWithIndexToValue {
					end = len(key) - 9
				}
				return side, store, key[len(p):end], nil
			}
		}
	}
	return 0, "", nil, fmt.Errorf("state key %x of no join store", key)
}

// convertToFormat2 commits version env.Version: the state of version v
// with a count for every key of one value, recorded under the format-2
// spec, as main wrote it before format 3. format2 gets the keys counted.
func convertToFormat2(t *testing.T, env stream.OperatorEnv, schema state.Schema, v int64, values, counts map[string]int, format2 map[string]bool) {
	t.Helper()
	ctx := context.Background()
	v3 := schema.Spec
	rest, ok := strings.CutPrefix(v3, specFormat3+" ")
	if !ok {
		t.Fatalf("spec %q is not format 3", v3)
	}
	schema.Spec = specFormat2 + " " + rest
	s, err := state.Open(ctx, state.Options{Dir: env.StateDir, FS: env.FS, LocalDir: env.LocalDir, Partitions: env.Partitions,
		Schema: schema, SpecCompatible: func(r string) bool { return r == v3 }}, v)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, _, err = state.ReadAllRaw(ctx, vfs.Default, env.StateDir, v, func(_ int, key, _ []byte) error {
		side, store, jk, err := splitStateKey(key)
		if err != nil {
			return err
		}
		k := fmt.Sprintf("%d/%x", side, jk)
		if store != StoreKeyWithIndexToValue || values[k] != 1 {
			return nil
		}
		if _, ok := counts[k]; ok {
			return fmt.Errorf("key %s of one value counted", k)
		}
		if err := s.Put(stateKey(nil, side, StoreKeyToNumValues, jk, 0, false), encodeCount(1)); err != nil {
			return err
		}
		format2[k] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(format2) == 0 {
		t.Fatal("no key of one value to count: the conversion tests nothing")
	}
	if _, err := s.Commit(ctx, env.Version); err != nil {
		t.Fatal(err)
	}
	if got := s.Schema().Spec; !strings.HasPrefix(got, specFormat2+" ") {
		t.Fatalf("the converted state records %q", got)
	}
}
