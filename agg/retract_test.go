package agg

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/stream"
)

// signedChunk is one input chunk: rows with their signs.
type signedChunk struct {
	rows  []testRow
	signs []int8 // nil: all insertions
}

func (c signedChunk) batch() *stream.Batch {
	b := makeBatch(c.rows)
	b.Signs = c.signs
	return b
}

// retract removes one row equal to r from the oracle's key k; false if none.
func (o *oracle) retractRow(k string, r testRow) bool {
	rows := o.rows[k]
	for i := range rows {
		if rows[i] == r {
			o.rows[k] = append(rows[:i:i], rows[i+1:]...)
			return true
		}
	}
	return false
}

// applyRetractions takes rows back at watermark wmMs, as the operator must:
// per window instance, a late one is dropped and counted, the others remove
// one identical row from their key. It returns the dropped instances and
// the keys touched.
func (o *oracle) applyRetractions(t *testing.T, rows []testRow, wmMs int64, touched map[string]bool) (dropped int64) {
	for _, r := range rows {
		if o.p.window && r.tsNull {
			continue
		}
		wins := [][2]int64{{0, 0}}
		if o.p.window {
			wins = naiveWindows(r.ts, o.p.sizeUs, o.p.slideUs)
		}
		for _, w := range wins {
			if o.p.evicts && w[1] <= wmMs*1000 {
				dropped++
				continue
			}
			var parts []string
			if o.p.window {
				parts = append(parts, fmt.Sprint(w[0]), fmt.Sprint(w[1]))
			}
			for _, g := range o.p.spec.GroupBy {
				parts = append(parts, fmt.Sprint(groupVal(r, g)))
			}
			k := strings.Join(parts, "|")
			if !o.retractRow(k, r) {
				t.Fatalf("oracle: retraction of a row key %s does not hold", k)
			}
			touched[k] = true
		}
	}
	return dropped
}

// emptied returns the keys without rows (deleted) and forgets them.
func (o *oracle) emptied() map[string]bool {
	out := map[string]bool{}
	for k, rows := range o.rows {
		if len(rows) == 0 && !o.evicted[k] {
			out[k] = true
			delete(o.rows, k)
			delete(o.end, k)
			delete(o.keyVals, k)
		}
	}
	return out
}

var retractSpecs = map[string]Spec{
	"reference": {Window: &Window{Column: ethblock.ColBlockTS, Size: 5 * time.Minute},
		GroupBy: []string{stream.ColSource, ethblock.ColMiner}, Aggregates: []Aggregate{{Kind: Count, As: "count"}},
		Mode: Update, WatermarkDelay: 20 * time.Minute, ColumnTypes: testColumnTypes, Retractions: true},
	"sliding-count-sums": {Window: &Window{Column: ethblock.ColBlockTS, Size: 10 * time.Minute, Slide: 5 * time.Minute},
		GroupBy: []string{ethblock.ColMiner, "shard"}, Aggregates: []Aggregate{
			{Kind: Count}, {Kind: Count, Column: ethblock.ColGasUsed, As: "n_gas"},
			{Kind: Sum, Column: ethblock.ColGasUsed}, {Kind: Sum, Column: "fee"}},
		Mode: Update, WatermarkDelay: 15 * time.Minute, ColumnTypes: testColumnTypes},
	// No count(*): the declared Retractions add the hidden row count.
	"sum-only-hidden-rows": {Window: &Window{Column: ethblock.ColBlockTS, Size: 5 * time.Minute},
		GroupBy: []string{ethblock.ColMiner}, Aggregates: []Aggregate{{Kind: Sum, Column: ethblock.ColGasUsed}},
		Mode: Update, WatermarkDelay: 10 * time.Minute, ColumnTypes: testColumnTypes, Retractions: true},
	"no-window": {GroupBy: []string{stream.ColSource, "shard"},
		Aggregates: []Aggregate{{Kind: Count}, {Kind: Sum, Column: "fee"}}, Mode: Update, ColumnTypes: testColumnTypes,
		Retractions: true},
}

// TestRetractOracle: random streams where each batch first retracts some
// rows of earlier committed batches (identical values, as a reorganised
// source does) and then inserts new ones, with crashes, restarts and late
// retractions; after every batch the output (deletions included), the table
// it MERGEs into, the state and the metrics equal the brute-force recount of
// the rows not retracted.
func TestRetractOracle(t *testing.T) {
	seeds, rows := 3, 400
	if *long {
		seeds, rows = 12, 2000
	}
	names := make([]string, 0, len(retractSpecs))
	for n := range retractSpecs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		for seed := range uint64(seeds) {
			t.Run(fmt.Sprintf("%s/seed=%d", name, seed), func(t *testing.T) {
				runRetractOracle(t, retractSpecs[name], seed, rows)
			})
		}
	}
}

func runRetractOracle(t *testing.T, spec Spec, seed uint64, nRows int) {
	rng := rand.New(rand.NewPCG(seed, 17))
	delay := spec.WatermarkDelay
	if delay == 0 {
		delay = 20 * time.Minute
	}
	all := genStream(rng, nRows, delay, 1_000_000, 30)
	h := newHarness(t, spec, vfs.NewMem(), 1+rng.IntN(4))
	or := newOracle(t, spec)
	merged := map[string][]string{}
	var emitted []testRow // rows of committed batches, not retracted, newest last
	ctx := context.Background()
	var sawLate, sawDelete bool
	for id := int64(0); len(all) > 0; id++ {
		// Retract up to 12 of the newest emitted rows (a reorg's depth),
		// then insert the next rows.
		var retr []testRow
		if len(emitted) > 0 && rng.IntN(3) == 0 {
			n := min(len(emitted), 1+rng.IntN(12))
			retr = append(retr, emitted[len(emitted)-n:]...)
			emitted = emitted[:len(emitted)-n]
			// Now and then an older row too: it may be late.
			if rng.IntN(4) == 0 && len(emitted) > 0 {
				j := rng.IntN(len(emitted))
				retr = append(retr, emitted[j])
				emitted = append(emitted[:j:j], emitted[j+1:]...)
			}
		}
		n := min(len(all), rng.IntN(30))
		ins := all[:n]
		all = all[n:]
		var chunks []signedChunk
		if len(retr) > 0 {
			// Retractions come first; a chunk may mix them with insertions.
			rows := append(append([]testRow(nil), retr...), ins[:min(len(ins), rng.IntN(4))]...)
			signs := make([]int8, len(rows))
			for i := range signs {
				signs[i] = 1
				if i < len(retr) {
					signs[i] = -1
				}
			}
			chunks = append(chunks, signedChunk{rows: rows, signs: signs})
			ins = ins[len(rows)-len(retr):]
		}
		for len(ins) > 0 {
			c := min(len(ins), 1+rng.IntN(10))
			chunks = append(chunks, signedChunk{rows: ins[:c]})
			ins = ins[c:]
		}
		process := func(cs []signedChunk) {
			for _, c := range cs {
				if err := h.op.Process(ctx, id, h.wmMs, c.batch()); err != nil {
					t.Fatalf("batch %d: process: %v", id, err)
				}
			}
		}
		switch rng.IntN(8) { // a crash at some step of the retracting batch
		case 0:
			process(chunks[:rng.IntN(len(chunks)+1)])
			h.op.Abort()
		case 1:
			process(chunks)
			if _, _, err := h.op.Finish(ctx, id, h.wmMs); err != nil {
				t.Fatal(err)
			}
			h.op.Abort()
		case 2:
			process(chunks[:rng.IntN(len(chunks)+1)])
			h.restart(rng.IntN(2) == 0)
		}
		wm := h.wmMs
		process(chunks)
		var flat []testRow
		for _, c := range chunks {
			flat = append(flat, c.rows...)
		}
		out, prog := h.finishCommit(id, [][]testRow{flat})

		touched := map[string]bool{}
		lateRetr := or.applyRetractions(t, retr, wm, touched)
		var inserted []testRow
		for _, c := range chunks {
			if c.signs == nil {
				inserted = append(inserted, c.rows...)
			} else {
				inserted = append(inserted, c.rows[len(retr):]...)
			}
		}
		dropped, insTouched := or.apply(inserted, wm)
		for k := range insTouched {
			touched[k] = true
		}
		deleted := or.emptied()
		evicted := or.evict(wm)
		emitted = append(emitted, inserted...)

		if prog.NumRowsDroppedByWatermark != dropped+lateRetr {
			t.Fatalf("batch %d: numRowsDroppedByWatermark = %d, want %d", id, prog.NumRowsDroppedByWatermark, dropped+lateRetr)
		}
		if spec.Retractions || len(retr) > 0 {
			if m := prog.CustomMetrics; m["numRetractedRows"] != int64(len(retr)) || m["numLateRetractions"] != lateRetr {
				t.Fatalf("batch %d: custom metrics %v, want %d retractions, %d late", id, m, len(retr), lateRetr)
			}
		}
		sawLate = sawLate || lateRetr > 0
		if prog.NumRowsRemoved != int64(len(evicted)+len(deleted)) {
			t.Fatalf("batch %d: numRowsRemoved = %d, want %d evicted + %d deleted", id, prog.NumRowsRemoved, len(evicted), len(deleted))
		}
		if prog.NumRowsUpdated != int64(len(touched)) {
			t.Fatalf("batch %d: numRowsUpdated = %d, want %d", id, prog.NumRowsUpdated, len(touched))
		}
		got := decodeOutput(t, visiblePlan(or.p), out)
		if len(got) != len(touched) {
			t.Fatalf("batch %d: output has %d keys, batch touched %d", id, len(got), len(touched))
		}
		for i, r := range got {
			if !touched[r.key] {
				t.Fatalf("batch %d: output key %s the batch did not touch", id, r.key)
			}
			if out.Sign(i) < 0 {
				if !deleted[r.key] {
					t.Fatalf("batch %d: key %s deleted but the oracle holds rows %v", id, r.key, or.rows[r.key])
				}
				sawDelete = true
				delete(merged, r.key)
				continue
			}
			if deleted[r.key] {
				t.Fatalf("batch %d: key %s emptied but output as %v", id, r.key, r.vals)
			}
			want, _ := or.value(r.key)
			if fmt.Sprint(r.vals) != fmt.Sprint(visible(or.p, want)) {
				t.Fatalf("batch %d: key %s output %v, oracle %v", id, r.key, r.vals, want)
			}
			merged[r.key] = r.vals
		}
		// The table the outputs MERGE into is the recount of what is left.
		if len(merged) != len(or.rows) {
			t.Fatalf("batch %d: merged table has %d keys, oracle %d", id, len(merged), len(or.rows))
		}
		for k := range or.rows {
			want, _ := or.value(k)
			if fmt.Sprint(merged[k]) != fmt.Sprint(visible(or.p, want)) {
				t.Fatalf("batch %d: merged %s = %v, oracle %v", id, k, merged[k], want)
			}
		}
		if st, live := h.stateRows(), or.liveState(); fmt.Sprint(st) != fmt.Sprint(live) {
			t.Fatalf("batch %d: state\n%s\nwant\n%s", id, strings.Join(st, "\n"), strings.Join(live, "\n"))
		}
		if rng.IntN(8) == 0 {
			h.restart(rng.IntN(2) == 0)
		}
	}
	// Without a window the few groups never empty, and nothing is late.
	if !sawDelete && spec.Window != nil {
		t.Errorf("no group was emptied by retractions: the test lost its point")
	}
	if !sawLate && seed == 0 && or.p.evicts {
		t.Errorf("no retraction was late: the test lost its point")
	}
	if err := h.op.Close(); err != nil {
		t.Fatal(err)
	}
}

// visiblePlan is p without its hidden aggregates, as the output shows it.
func visiblePlan(p *plan) *plan {
	q := *p
	q.aggs = nil
	for _, a := range p.aggs {
		if !a.hidden {
			q.aggs = append(q.aggs, a)
		}
	}
	return &q
}

func visible(p *plan, vals []string) []string {
	var out []string
	for i, a := range p.aggs {
		if !a.hidden {
			out = append(out, vals[i])
		}
	}
	return out
}

// TestRetractionRefused: min and max cannot be undone, so a query that
// declares retractions is refused at New, and one that did not is refused
// at the first retraction; neither leaves partial state behind.
func TestRetractionRefused(t *testing.T) {
	spec := Spec{Window: &Window{Column: ethblock.ColBlockTS, Size: 5 * time.Minute}, GroupBy: []string{ethblock.ColMiner},
		Aggregates: []Aggregate{{Kind: Count}, {Kind: Max, Column: ethblock.ColGasUsed}}, ColumnTypes: testColumnTypes}
	decl := spec
	decl.Retractions = true
	if _, err := New(decl); !errcode.Is(err, CodeRetractionUnsupported) || !strings.Contains(err.Error(), "max(gas_used)") {
		t.Fatalf("New with min/max and Retractions: %v", err)
	}
	h := newHarness(t, spec, vfs.NewMem(), 1)
	row := testRow{source: "a", miner: "0xaa", ts: 1_793_491_200_000_000, gas: 5}
	if err := h.op.Process(context.Background(), 0, 0, signedChunk{rows: []testRow{row}}.batch()); err != nil {
		t.Fatal(err)
	}
	h.finishCommit(0, [][]testRow{{row}})
	err := h.op.Process(context.Background(), 1, 0, signedChunk{rows: []testRow{row}, signs: []int8{-1}}.batch())
	if !errcode.Is(err, CodeRetractionUnsupported) {
		t.Fatalf("retraction into max: %v", err)
	}
	// Without count(*) and without the declaration there is no row count.
	sumOnly := Spec{GroupBy: []string{ethblock.ColMiner}, Aggregates: []Aggregate{{Kind: Sum, Column: ethblock.ColGasUsed}}, ColumnTypes: testColumnTypes}
	h2 := newHarness(t, sumOnly, vfs.NewMem(), 1)
	err = h2.op.Process(context.Background(), 0, 0, signedChunk{rows: []testRow{row}, signs: []int8{-1}}.batch())
	if !errcode.Is(err, CodeRetractionUnsupported) || !strings.Contains(err.Error(), "count(*)") {
		t.Fatalf("retraction into sum without a row count: %v", err)
	}
	// A retraction of a row never inserted is a source bug, reported.
	ref := retractSpecs["reference"]
	h3 := newHarness(t, ref, vfs.NewMem(), 1)
	if err := h3.op.Process(context.Background(), 0, 0, signedChunk{rows: []testRow{row}, signs: []int8{-1}}.batch()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h3.op.Finish(context.Background(), 0, 0); !errcode.Is(err, CodeRetractionUnmatched) {
		t.Fatalf("unmatched retraction: %v", err)
	}
}

// TestRetractionsKeepStateSchema: declaring retractions on a query with
// count(*) leaves the state schema (and so old checkpoints) unchanged; only
// a query without count(*) gains the hidden row count.
func TestRetractionsKeepStateSchema(t *testing.T) {
	ref := propertySpecs["reference"]
	decl := ref
	decl.Retractions = true
	a, _ := New(ref)
	b, _ := New(decl)
	if !a.Schema().Equal(b.Schema()) || !a.OutputSchema().Equal(b.OutputSchema()) {
		t.Fatalf("schemas differ:\n%+v\n%+v", a.Schema(), b.Schema())
	}
	s := retractSpecs["sum-only-hidden-rows"]
	op, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	v, out := op.Schema().Value, op.OutputSchema()
	if v[len(v)-1].Name != rowsField || out.Field(rowsField) != nil {
		t.Fatalf("hidden row count: state %v output %v", v, op.OutputSchema())
	}
}
