package agg

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/stream"
)

// withViews gives b's source and miner columns dictionary views, as a
// Parquet decoder hands them over: each distinct value once in Values (in
// order of first sight), every row's string that value's.
func withViews(b *stream.Batch) *stream.Batch {
	for _, name := range []string{stream.ColSource, ethblock.ColMiner} {
		c := b.Column(name)
		index, values := make([]int32, b.Len), []string(nil)
		seen := map[string]int32{}
		for i, s := range c.Strings {
			if c.IsNull(i) {
				index[i] = -1
				continue
			}
			k, ok := seen[s]
			if !ok {
				k = int32(len(values))
				seen[s] = k
				values = append(values, strings.Clone(s))
			}
			index[i], c.Strings[i] = k, values[k]
		}
		c.Dict = stream.NewDict(c.Strings, index, values)
	}
	return b
}

// nullMiners makes the miner of rows null (the plain batch's and the
// view's alike).
func nullMiners(b *stream.Batch, null []bool) {
	c := b.Column(ethblock.ColMiner)
	for i, n := range null {
		if n {
			if c.Valid == nil {
				c.Valid = make([]bool, b.Len)
				for j := range c.Valid {
					c.Valid[j] = true
				}
			}
			c.Valid[i], c.Strings[i] = false, ""
		}
	}
}

// TestDictViewMatchesStrings: the aggregation of chunks whose source and
// miner come with dictionary views (stream.Dict) equals, batch by batch
// (output, figures, committed state), that of the same rows with strings
// of their own, over every property spec, whatever the engine did to the
// rows on the way: filtered (Filter), gathered in another order with
// repeats (Take), sliced (Slice), null miners, and views a step kept on
// replaced strings (ignored) or replaced validity (the rows whose index
// disagrees take the strings' path).
// It fails if no chunk of a spec grouping by strings only took the codes'
// path (dictAll).
func TestDictViewMatchesStrings(t *testing.T) {
	defer setShardMinRows(0)()
	names := make([]string, 0, len(propertySpecs))
	for name := range propertySpecs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		spec := propertySpecs[name]
		for seed := range uint64(2) {
			t.Run(fmt.Sprintf("%s/seed=%d", name, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 46))
				delay := spec.WatermarkDelay
				if delay == 0 {
					delay = 20 * time.Minute
				}
				rows := genStream(rng, 3000, delay, 1_000_000, 30)
				plain := newHarness(t, spec, vfs.NewMem(), 3)
				view := newHarness(t, spec, vfs.NewMem(), 3)
				plain.lookahead, view.lookahead = seed == 1, seed == 1
				codes := 0
				for id := int64(0); len(rows) > 0; id++ {
					b := rows[:min(len(rows), 200+rng.IntN(800))]
					rows = rows[len(b):]
					var done [][]testRow
					for len(b) > 0 {
						n := min(len(b), 20+rng.IntN(250))
						c := b[:n]
						b = b[n:]
						pb, vb, sel := dictCase(rng, c)
						for _, h := range []*harness{plain, view} {
							in := pb
							if h == view {
								in = vb
							}
							if err := h.op.Process(context.Background(), id, h.prevWmMs, in); err != nil {
								t.Fatalf("batch %d: %v", id, err)
							}
						}
						if view.op.pts[0].dictAll {
							codes++
						}
						done = append(done, sel)
					}
					var outs, figs, states [2]string
					for k, h := range []*harness{plain, view} {
						o, p := h.finishCommit(id, done)
						outs[k] = fmt.Sprint(decodeOutput(t, h.op.p, o))
						figs[k] = progressCounts(p)
						states[k] = fmt.Sprint(h.stateRows())
					}
					if outs[0] != outs[1] || figs[0] != figs[1] || states[0] != states[1] {
						t.Fatalf("batch %d: with views\n%s %s\n%s\nwith strings\n%s %s\n%s", id, outs[1], figs[1], states[1], outs[0], figs[0], states[0])
					}
				}
				stringsOnly := true
				for _, g := range spec.GroupBy {
					stringsOnly = stringsOnly && g != "shard"
				}
				if stringsOnly && codes == 0 {
					t.Fatal("no chunk took the dictionary codes' path")
				}
			})
		}
	}
}

// dictCase turns rows c into a chunk as two batches of the same rows: pb
// with strings of their own, vb with dictionary views carried through a
// random kernel (or a stale view); sel is the rows both hold.
func dictCase(rng *rand.Rand, c []testRow) (pb, vb *stream.Batch, sel []testRow) {
	null := make([]bool, len(c))
	for i := range null {
		null[i] = rng.IntN(30) == 0
	}
	vb = makeBatch(c)
	nullMiners(vb, null)
	withViews(vb)
	var idx []int
	switch rng.IntN(4) {
	case 0: // as read
		for i := range c {
			idx = append(idx, i)
		}
	case 1: // filtered
		mask := make([]bool, len(c))
		for i := range mask {
			if mask[i] = rng.IntN(3) > 0; mask[i] {
				idx = append(idx, i)
			}
		}
		vb = vb.Filter(mask)
	case 2: // gathered: another order, rows repeated
		for range len(c) {
			idx = append(idx, rng.IntN(len(c)))
		}
		vb = vb.Take(idx)
	case 3: // sliced
		from := rng.IntN(len(c))
		to := from + rng.IntN(len(c)-from+1)
		for i := from; i < to; i++ {
			idx = append(idx, i)
		}
		out := &stream.Batch{Len: to - from}
		for k := range vb.Columns {
			out.Columns = append(out.Columns, vb.Columns[k].Slice(from, to))
		}
		vb = out
	}
	own := make([]testRow, len(idx))
	nulls := make([]bool, len(idx))
	for k, i := range idx {
		r := c[i]
		r.source, r.miner = strings.Clone(r.source), strings.Clone(r.miner)
		own[k], nulls[k] = r, null[i]
	}
	pb = makeBatch(own)
	nullMiners(pb, nulls)
	vm, pm := vb.Column(ethblock.ColMiner), pb.Column(ethblock.ColMiner)
	if len(idx) > 1 && rng.IntN(3) == 0 {
		// A step copied the column and replaced its strings, keeping the
		// view (which DictView then ignores): swapped, the same value
		// copied elsewhere, a value of no row.
		vm.Strings = slices.Clone(vm.Strings)
		for range 1 + rng.IntN(len(idx)) {
			i, j := rng.IntN(len(idx)), rng.IntN(len(idx))
			switch rng.IntN(3) {
			case 0:
				vm.Strings[i], vm.Strings[j] = vm.Strings[j], vm.Strings[i]
				pm.Strings[i], pm.Strings[j] = pm.Strings[j], pm.Strings[i]
			case 1:
				vm.Strings[i] = strings.Clone(vm.Strings[j])
				pm.Strings[i] = pm.Strings[j]
			case 2:
				v := fmt.Sprint("0xnew", rng.IntN(3))
				vm.Strings[i], pm.Strings[i] = v, strings.Clone(v)
			}
		}
	}
	if len(idx) > 0 && rng.IntN(3) == 0 {
		// A step replaced the validity, keeping the strings and the view:
		// a row's index then disagrees with it (null with an index, valid
		// with -1), and the row takes the strings' path.
		valid := make([]bool, len(idx))
		for i := range valid {
			valid[i] = !vm.IsNull(i)
			if rng.IntN(4) == 0 {
				valid[i] = !valid[i]
			}
		}
		vm.Valid, pm.Valid = valid, slices.Clone(valid)
	}
	return pb, vb, own
}
