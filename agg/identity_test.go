package agg

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestIdentityMatchesContent runs the same stream through three operators
// whose input differs only in where the strings live: shared (equal strings
// share their memory, as a Parquet dictionary's do: assign finds keys by
// identity and skips the scan of recent keys), owned (every row's strings
// are copies of their own: identity never finds a key, and the scan stays
// on) and alternating between the two chunk by chunk. Every batch's output,
// figures and committed state must be the same; the oracle tests check the
// answers themselves. It fails if the shared run never skipped the scan,
// or if the owned one skipped it as often in most specs (the paths it
// compares were not taken: only where no row repeats a key, as in
// one-second windows, is the scan useless with owned strings too).
func TestIdentityMatchesContent(t *testing.T) {
	defer setShardMinRows(0)()
	names := make([]string, 0, len(propertySpecs))
	for name := range propertySpecs {
		names = append(names, name)
	}
	sort.Strings(names)
	own := func(c []testRow) []testRow {
		out := make([]testRow, len(c))
		for i, r := range c {
			r.source, r.miner = strings.Clone(r.source), strings.Clone(r.miner)
			out[i] = r
		}
		return out
	}
	cases, differed := 0, 0
	for _, name := range names {
		spec := propertySpecs[name]
		for seed := range uint64(2) {
			t.Run(fmt.Sprintf("%s/seed=%d", name, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 44))
				delay := spec.WatermarkDelay
				if delay == 0 {
					delay = 20 * time.Minute
				}
				rows := genStream(rng, 4000, delay, 1_000_000, 30)
				kinds := []string{"shared", "owned", "alternating"}
				hs := make([]*harness, len(kinds))
				skipped := make([]int, len(kinds))
				for k := range hs {
					hs[k] = newHarness(t, spec, vfs.NewMem(), 3)
					hs[k].lookahead = seed == 1
				}
				for id := int64(0); len(rows) > 0; id++ {
					b := rows[:min(len(rows), 200+rng.IntN(800))]
					rows = rows[len(b):]
					var chunks [][]testRow
					for len(b) > 0 {
						c := min(len(b), 50+rng.IntN(250))
						chunks, b = append(chunks, b[:c]), b[c:]
					}
					var outs, figs, states []string
					for k, h := range hs {
						for j, c := range chunks {
							if kinds[k] == "owned" || kinds[k] == "alternating" && j%2 == 1 {
								c = own(c)
							}
							h.process(id, [][]testRow{c})
							if h.op.pts[0].skipRecent {
								skipped[k]++
							}
						}
						o, p := h.finishCommit(id, chunks)
						outs = append(outs, fmt.Sprint(decodeOutput(t, h.op.p, o)))
						figs = append(figs, progressCounts(p))
						states = append(states, fmt.Sprint(h.stateRows()))
					}
					for k := 1; k < len(hs); k++ {
						if outs[k] != outs[0] {
							t.Fatalf("batch %d: output with %s strings\n%s\nwith shared\n%s", id, kinds[k], outs[k], outs[0])
						}
						if figs[k] != figs[0] {
							t.Fatalf("batch %d: figures with %s strings %s, with shared %s", id, kinds[k], figs[k], figs[0])
						}
						if states[k] != states[0] {
							t.Fatalf("batch %d: state with %s strings\n%s\nwith shared\n%s", id, kinds[k], states[k], states[0])
						}
					}
				}
				if skipped[0] == 0 || skipped[1] > skipped[0] {
					t.Fatalf("chunks that skipped the scan of recent keys: shared %d (want some), owned %d (want no more)", skipped[0], skipped[1])
				}
				cases++
				if skipped[1] < skipped[0] {
					differed++
				}
			})
		}
	}
	if 2*differed < cases {
		t.Fatalf("owned strings skipped the scan as often as shared ones in %d of %d cases", cases-differed, cases)
	}
}

// TestIdentityBufferReused: a source may reuse its buffers once a chunk is
// consumed, so the next chunk's strings can sit at the same addresses with
// other bytes. The identity caches are per chunk (newChunk): a batch whose
// chunks all read one rewritten buffer must give the same output and state
// as the same rows with strings of their own.
func TestIdentityBufferReused(t *testing.T) {
	defer setShardMinRows(0)()
	names := make([]string, 0, len(propertySpecs))
	for name := range propertySpecs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		spec := propertySpecs[name]
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 47))
			rows := genStream(rng, 600, 20*time.Minute, 1_000_000, 30)
			reused := newHarness(t, spec, vfs.NewMem(), 3)
			owned := newHarness(t, spec, vfs.NewMem(), 3)
			var src, miner [8]byte
			for id := int64(0); len(rows) > 0; id++ {
				b := rows[:min(len(rows), 200)]
				rows = rows[len(b):]
				var chunks [][]testRow
				for _, r := range b { // a chunk per row: every chunk rewrites the buffers
					copy(src[:], r.source+"........")
					copy(miner[:], r.miner+"........")
					c := r
					c.source = unsafe.String(&src[0], min(len(r.source), len(src)))
					c.miner = unsafe.String(&miner[0], min(len(r.miner), len(miner)))
					reused.process(id, [][]testRow{{c}})
					c.source, c.miner = strings.Clone(c.source), strings.Clone(c.miner)
					owned.process(id, [][]testRow{{c}})
					chunks = append(chunks, []testRow{c})
				}
				o1, _ := owned.finishCommit(id, chunks)
				o2, _ := reused.finishCommit(id, chunks)
				if a, b := fmt.Sprint(decodeOutput(t, owned.op.p, o1)), fmt.Sprint(decodeOutput(t, reused.op.p, o2)); a != b {
					t.Fatalf("batch %d: output from a reused buffer\n%s\nfrom owned strings\n%s", id, b, a)
				}
				if a, b := fmt.Sprint(owned.stateRows()), fmt.Sprint(reused.stateRows()); a != b {
					t.Fatalf("batch %d: state from a reused buffer\n%s\nfrom owned strings\n%s", id, b, a)
				}
			}
		})
	}
}

// TestInternHashByContent: internOf gives equal strings one private
// copy and one hash, whichever path answers (the chunk's identity cache,
// the content cache, the map), across chunks, a content-cache slot taken
// by another string, and the empty string (whose content slot is the
// empty slot's). rowHash builds on it: two rows of one key must hash
// alike, or the table holds the key twice.
func TestInternHashByContent(t *testing.T) {
	p, err := newPlan(refSpec())
	if err != nil {
		t.Fatal(err)
	}
	pt := newPartial(p)
	// slotOf is internContent's content-cache slot of s.
	slotOf := func(s string) uint64 {
		var x uint64
		for i := max(len(s)-8, 0); i < len(s); i++ {
			x = x<<8 | uint64(s[i])
		}
		return ((x ^ uint64(len(s))) * 0x9E3779B97F4A7C15) >> (64 - internCacheBits)
	}
	// rival takes the empty string's content slot (slot 0).
	var rival string
	for i := 0; rival == ""; i++ {
		if s := fmt.Sprintf("0x%040x", i); slotOf(s) == slotOf("") {
			rival = s
		}
	}
	type copyHash struct {
		v string
		h uint64
	}
	want := map[string]copyHash{}
	check := func(s string) {
		t.Helper()
		in := pt.internOf(strings.Clone(s))
		v, h := pt.names[in.id], in.h
		if v != s {
			t.Fatalf("interned %q as %q", s, v)
		}
		if w, ok := want[s]; !ok {
			want[s] = copyHash{v: v, h: h}
		} else if w.h != h || unsafe.StringData(w.v) != unsafe.StringData(v) {
			t.Fatalf("%q: hash %x, copy %p; before: %x, %p", s, h, unsafe.StringData(v), w.h, unsafe.StringData(w.v))
		}
	}
	// Strings of one length and one slot (their last 8 bytes), held in the
	// slot (up to its 44 bytes) or compared with the interned copy (longer).
	tail := "0123456789abcdef0123456789abcdef01234567"
	short1, short2 := "0x"+tail, "0y"+tail
	long1, long2 := "0x"+tail+tail, "0y"+tail+tail
	if slotOf(short1) != slotOf(short2) || slotOf(long1) != slotOf(long2) || len(long1) <= len(internSlot{}.b) {
		t.Fatal("the strings do not share their slots")
	}
	// A string and a prefix of it in one slot, the string held in the slot
	// (up to 44 bytes) or longer: the slot's bytes start with the prefix,
	// so only the lengths tell them apart.
	prefixed := func(width int) (whole, prefix string) {
		for i := 0; ; i++ {
			s := fmt.Sprintf("0x%0*x", width, i)
			for k := 1; k < min(len(s), len(internSlot{}.b)+1); k++ {
				if slotOf(s[:k]) == slotOf(s) {
					return s, s[:k]
				}
			}
		}
	}
	held, heldPrefix := prefixed(40)
	longer, longerPrefix := prefixed(60)
	for round := range 3 {
		for _, s := range []string{"", "0xaa", rival, "", "0xaa", rival, "", short1, short2, short1, long1, long2, long1, short2,
			held, heldPrefix, held, longer, longerPrefix, longer, longerPrefix} {
			check(s)
		}
		pt.newChunk()
		if round == 1 {
			clear(pt.internCache[:])
		}
	}
}

// TestInternIDsAcrossReset: an entry's string keys are ids into the
// partial's intern table (names), so each entry must read back its row's
// strings (keyStr) in a batch that interns more than the table keeps
// between batches, and in the next batch, after the table started anew
// (a stale id would read another batch's string or none).
func TestInternIDsAcrossReset(t *testing.T) {
	p, err := newPlan(refSpec())
	if err != nil {
		t.Fatal(err)
	}
	pt := newPartial(p)
	const t0 = int64(1_793_491_200_000_000)
	for batch, miners := range [][]string{manyMiners("0xold", 1<<16+100), manyMiners("0xnew", 300), manyMiners("0xold", 50)} {
		rows := make([]testRow, len(miners))
		want := map[string]bool{}
		for i, m := range miners {
			rows[i] = testRow{source: "s3_backfill", miner: m, ts: t0 + int64(i%7)*int64(time.Minute/time.Microsecond)}
			want[m] = true
		}
		for lo := 0; lo < len(rows); lo += 4096 {
			if _, err := pt.add(makeBatch(rows[lo:min(lo+4096, len(rows))]), math.MinInt64); err != nil {
				t.Fatal(err)
			}
		}
		got := map[string]bool{}
		for e := range pt.len() {
			if s := pt.keyStr(0, e); s != "s3_backfill" {
				t.Fatalf("batch %d: entry %d's source is %q", batch, e, s)
			}
			got[pt.keyStr(1, e)] = true
		}
		if pt.len() != len(miners) || len(got) != len(want) {
			t.Fatalf("batch %d: %d entries of %d miners, want one per miner (%d)", batch, pt.len(), len(got), len(want))
		}
		for m := range want {
			if !got[m] {
				t.Fatalf("batch %d: no entry reads miner %q back", batch, m)
			}
		}
		pt.reset()
		if batch == 0 && len(pt.names) != 1 {
			t.Fatalf("%d names kept after a batch of %d: the table should start anew", len(pt.names), len(miners))
		}
	}
}

// manyMiners returns n distinct miners named prefix and a number.
func manyMiners(prefix string, n int) []string {
	ms := make([]string, n)
	for i := range ms {
		ms[i] = fmt.Sprintf("%s%06d", prefix, i)
	}
	return ms
}

// TestEntriesHoldNoPointer: the memory that grows with a batch's entries
// (their columns, the group tables' slots) and the intern caches hold no
// pointer, so that no collection scans them (a seed backfill's batch
// holds 1-2M entries; its string keys as strings were 32 MB of pointers
// an entry column pair).
func TestEntriesHoldNoPointer(t *testing.T) {
	p, err := newPlan(refSpec())
	if err != nil {
		t.Fatal(err)
	}
	pt := newPartial(p)
	for name, typ := range map[string]reflect.Type{
		"start":            reflect.TypeOf(pt.start).Elem(),
		"gInt":             reflect.TypeOf(pt.gInt).Elem().Elem(),
		"gSid":             reflect.TypeOf(pt.gSid).Elem().Elem(),
		"gNull":            reflect.TypeOf(pt.gNull).Elem().Elem(),
		"accum.ints":       reflect.TypeOf(accum{}.ints).Elem(),
		"accum.floats":     reflect.TypeOf(accum{}.floats).Elem(),
		"accum.decs":       reflect.TypeOf(accum{}.decs).Elem(),
		"accum.nn":         reflect.TypeOf(accum{}.nn).Elem(),
		"groupTable.slots": reflect.TypeOf(groupTable{}.slots).Elem(),
		"internCache":      reflect.TypeOf(pt.internCache).Elem(),
		"dvals":            reflect.TypeOf(pt.dvals).Elem().Elem(),
		"dkeys":            reflect.TypeOf(pt.dkeys).Elem(),
		"rank":             reflect.TypeOf(pt.rank).Elem(),
	} {
		if holdsPointer(typ) {
			t.Errorf("%s: %s holds a pointer", name, typ)
		}
	}
}

// holdsPointer reports whether a value of type t holds a pointer the
// collector scans.
func holdsPointer(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Array:
		return t.Len() > 0 && holdsPointer(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if holdsPointer(t.Field(i).Type) {
				return true
			}
		}
		return false
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.String, reflect.Interface,
		reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return true
	}
	return false
}
