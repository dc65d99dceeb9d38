package agg

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/stream"
)

var long = flag.Bool("long", false, "run the property tests with many more seeds and rows")

// oracle is the brute-force model: it keeps every accepted (row, window)
// pair per key and recomputes aggregates from scratch.
type oracle struct {
	p       *plan
	rows    map[string][]testRow
	end     map[string]int64
	keyVals map[string][]any // the key as the state reader decodes it
	evicted map[string]bool
}

func newOracle(t testing.TB, spec Spec) *oracle {
	p, err := newPlan(spec)
	if err != nil {
		t.Fatal(err)
	}
	return &oracle{p: p, rows: map[string][]testRow{}, end: map[string]int64{},
		keyVals: map[string][]any{}, evicted: map[string]bool{}}
}

func groupVal(r testRow, col string) any {
	switch col {
	case stream.ColSource:
		return r.source
	case ethblock.ColMiner:
		return r.miner
	case "shard":
		return r.shard
	}
	panic(col)
}

// apply runs one batch at watermark wmMs and returns the window instances
// dropped as late and the keys the batch touched.
func (o *oracle) apply(rows []testRow, wmMs int64) (dropped int64, touched map[string]bool) {
	touched = map[string]bool{}
	for _, r := range rows {
		var wins [][2]int64
		if o.p.window {
			if r.tsNull {
				continue
			}
			wins = naiveWindows(r.ts, o.p.sizeUs, o.p.slideUs)
		} else {
			wins = [][2]int64{{0, 0}}
		}
		for _, w := range wins {
			if o.p.evicts && w[1] <= wmMs*1000 {
				dropped++
				continue
			}
			var parts []string
			var kv []any
			if o.p.window {
				parts = append(parts, fmt.Sprint(w[0]), fmt.Sprint(w[1]))
				kv = append(kv, w[1], w[0])
			}
			for _, g := range o.p.spec.GroupBy {
				parts = append(parts, fmt.Sprint(groupVal(r, g)))
				kv = append(kv, groupVal(r, g))
			}
			k := strings.Join(parts, "|")
			if o.evicted[k] {
				panic(fmt.Sprintf("oracle: row accepted into evicted key %s", k))
			}
			o.rows[k] = append(o.rows[k], r)
			o.end[k] = w[1]
			o.keyVals[k] = kv
			touched[k] = true
		}
	}
	return dropped, touched
}

// evict marks keys closed by wmMs and returns them.
func (o *oracle) evict(wmMs int64) map[string]bool {
	out := map[string]bool{}
	if !o.p.evicts {
		return out
	}
	for k, e := range o.end {
		if !o.evicted[k] && e <= wmMs*1000 {
			o.evicted[k] = true
			out[k] = true
		}
	}
	return out
}

// aggValue computes aggregate a over rows from scratch: its output string
// and its stored value fields.
func (o *oracle) aggValue(a resolvedAgg, rows []testRow) (string, []any) {
	if a.Kind == ApproxCountDistinct {
		return sketchOf(a, rows)
	}
	if a.Kind == Count {
		var n int64
		for _, r := range rows {
			switch a.Column {
			case "":
				n++
			case ethblock.ColGasUsed:
				if !r.gasNull {
					n++
				}
			case "fee":
				if !r.feeNull {
					n++
				}
			case ethblock.ColBlockTS:
				if !r.tsNull {
					n++
				}
			}
		}
		return fmt.Sprint(n), []any{n}
	}
	if a.in == stream.Float64 {
		var vs []float64
		for _, r := range rows {
			if !r.feeNull {
				vs = append(vs, r.fee)
			}
		}
		if len(vs) == 0 {
			return "null", []any{0.0, int64(0)}
		}
		v := vs[0]
		if a.Kind == Sum || a.Kind == Avg {
			v = 0
		}
		for _, x := range vs {
			switch a.Kind {
			case Sum, Avg:
				v += x
			case Min:
				v = math.Min(v, x)
			case Max:
				v = math.Max(v, x)
			}
		}
		if a.Kind == Avg {
			return fmt.Sprint(v / float64(len(vs))), []any{v, int64(len(vs))}
		}
		return fmt.Sprint(v), []any{v, int64(len(vs))}
	}
	var vs []int64
	for _, r := range rows {
		switch a.Column {
		case ethblock.ColGasUsed:
			if !r.gasNull {
				vs = append(vs, r.gas)
			}
		case ethblock.ColBlockTS:
			if !r.tsNull {
				vs = append(vs, r.ts)
			}
		}
	}
	if len(vs) == 0 {
		if a.Kind == Avg && !a.longSum {
			return "null", []any{0.0, int64(0)}
		}
		return "null", []any{int64(0), int64(0)}
	}
	v := vs[0]
	if a.Kind == Sum || a.Kind == Avg {
		v = 0
	}
	for _, x := range vs {
		switch a.Kind {
		case Sum, Avg:
			v += x
		case Min:
			v = min(v, x)
		case Max:
			v = max(v, x)
		}
	}
	if a.Kind == Avg {
		// Spark's Average: each value cast to a double, summed in a double
		// (state format 2 stores that sum).
		f := 0.0
		for _, x := range vs {
			f += float64(x)
		}
		if a.longSum {
			return fmt.Sprint(float64(v) / float64(len(vs))), []any{v, int64(len(vs))}
		}
		return fmt.Sprint(f / float64(len(vs))), []any{f, int64(len(vs))}
	}
	return fmt.Sprint(v), []any{v, int64(len(vs))}
}

func (o *oracle) value(k string) (out []string, stored []any) {
	for _, a := range o.p.aggs {
		s, st := o.aggValue(a, o.rows[k])
		out = append(out, s)
		stored = append(stored, st...)
	}
	return out, stored
}

// liveState renders the keys Spark's state holds, as harness.stateRows does.
func (o *oracle) liveState() []string { return o.storedState(math.MinInt64) }

// storedState renders the keys of liveState whose window ends after
// closeUs: what a version stores when the next watermark, closeUs, is known
// (doc.go, Closed at commit).
func (o *oracle) storedState(closeUs int64) []string {
	var rows []string
	for k := range o.rows {
		if o.evicted[k] || o.p.window && o.end[k] <= closeUs {
			continue
		}
		_, st := o.value(k)
		rows = append(rows, fmt.Sprint(o.keyVals[k])+" -> "+fmt.Sprint(st))
	}
	sort.Strings(rows)
	return rows
}

// genStream produces a block-like stream: time advances by 0-30 s per row (whole seconds, 10% jittered);
// a quarter of the rows are out of order within the delay, 5% are late by
// more than the delay; the archive source feeds the first third, both feed
// the middle, the live source the rest (the archive is "removed").
func genStream(rng *rand.Rand, n int, delay time.Duration, step, maxSteps int64) []testRow {
	const t0 = int64(1_793_491_200_000_000) // 2026-11-01T00:00:00Z
	delayUs := int64(delay / time.Microsecond)
	miners := []string{"0xaa", "0xbb", "0xcc", "0xdd", "0xee", "0xff"}
	now := t0
	rows := make([]testRow, n)
	for i := range rows {
		now += rng.Int64N(maxSteps+1) * step
		r := testRow{ts: now}
		switch x := rng.IntN(100); {
		case x < 25:
			r.ts = now - rng.Int64N(delayUs/step)*step
		case x < 30:
			r.ts = now - delayUs - rng.Int64N(3*delayUs/step)*step
		}
		if rng.IntN(10) == 0 {
			r.ts += rng.Int64N(1_000_000)
		}
		switch {
		case i < n/3:
			r.source = "s3_backfill"
		case i < 2*n/3 && rng.IntN(2) == 0:
			r.source = "s3_backfill"
		default:
			r.source = "eth_live"
		}
		r.miner = miners[rng.IntN(len(miners))]
		if rng.IntN(50) == 0 {
			r.miner = fmt.Sprintf("0xrare%d", rng.IntN(1000))
		}
		r.tsNull = rng.IntN(100) == 0
		r.gas = rng.Int64N(2_000_001) - 1000
		r.gasNull = rng.IntN(20) == 0
		r.shard = rng.Int64N(3) - 1
		r.fee = float64(rng.IntN(400)-50) / 4 // exact in binary: sums do not depend on order
		r.feeNull = rng.IntN(20) == 0
		rows[i] = r
	}
	return rows
}

// splitBatches cuts rows into batches (some empty: no-data batches) and each
// batch into chunks.
func splitBatches(rng *rand.Rand, rows []testRow) [][][]testRow {
	var batches [][][]testRow
	for len(rows) > 0 {
		n := min(len(rows), rng.IntN(40))
		b := rows[:n]
		rows = rows[n:]
		var chunks [][]testRow
		for len(b) > 0 {
			c := min(len(b), 1+rng.IntN(15))
			chunks = append(chunks, b[:c])
			b = b[c:]
		}
		batches = append(batches, chunks)
	}
	return batches
}

func flatten(chunks [][]testRow) []testRow {
	var out []testRow
	for _, c := range chunks {
		out = append(out, c...)
	}
	return out
}

var propertySpecs = map[string]Spec{
	"reference": {Window: &Window{Column: ethblock.ColBlockTS, Size: 5 * time.Minute},
		GroupBy: []string{stream.ColSource, ethblock.ColMiner}, Aggregates: []Aggregate{{Kind: Count, As: "count"}},
		Mode: Update, WatermarkDelay: 20 * time.Minute, ColumnTypes: testColumnTypes},
	"sliding-all-aggs": {Window: &Window{Column: ethblock.ColBlockTS, Size: 10 * time.Minute, Slide: 5 * time.Minute},
		GroupBy: []string{ethblock.ColMiner, "shard"}, Aggregates: []Aggregate{
			{Kind: Count}, {Kind: Count, Column: ethblock.ColGasUsed, As: "n_gas"},
			{Kind: Sum, Column: ethblock.ColGasUsed}, {Kind: Min, Column: ethblock.ColGasUsed}, {Kind: Max, Column: ethblock.ColGasUsed},
			{Kind: Sum, Column: "fee"}, {Kind: Min, Column: "fee"}, {Kind: Max, Column: "fee"},
			{Kind: Max, Column: ethblock.ColBlockTS, As: "last_ts"},
			{Kind: Avg, Column: ethblock.ColGasUsed}, {Kind: Avg, Column: "fee"}},
		Mode: Update, WatermarkDelay: 15 * time.Minute, ColumnTypes: testColumnTypes},
	"append-uneven-slide": {Window: &Window{Column: ethblock.ColBlockTS, Size: 7 * time.Minute, Slide: 3 * time.Minute},
		GroupBy: []string{stream.ColSource}, Aggregates: []Aggregate{{Kind: Count}, {Kind: Min, Column: "fee"}},
		Mode: Append, WatermarkDelay: 10 * time.Minute, ColumnTypes: testColumnTypes},
	"complete-tumbling": {Window: &Window{Column: ethblock.ColBlockTS, Size: 15 * time.Minute},
		GroupBy: []string{ethblock.ColMiner}, Aggregates: []Aggregate{{Kind: Count}, {Kind: Sum, Column: ethblock.ColGasUsed}},
		Mode: Complete, WatermarkDelay: 30 * time.Minute, ColumnTypes: testColumnTypes},
	// Windows of a second: a stream of a few hours spans thousands of
	// windows, so the group index spreads its keys over several parts (one
	// per 128 windows) and the late rows switch back and forth between them.
	"one-second-windows": {Window: &Window{Column: ethblock.ColBlockTS, Size: time.Second},
		GroupBy: []string{stream.ColSource, ethblock.ColMiner}, Aggregates: []Aggregate{{Kind: Count}, {Kind: Sum, Column: ethblock.ColGasUsed}},
		Mode: Update, WatermarkDelay: 20 * time.Minute, ColumnTypes: testColumnTypes},
	"sliding-seconds-append": {Window: &Window{Column: ethblock.ColBlockTS, Size: 3 * time.Second, Slide: time.Second},
		GroupBy: []string{ethblock.ColMiner}, Aggregates: []Aggregate{{Kind: Count}, {Kind: Max, Column: "fee"}},
		Mode: Append, WatermarkDelay: 20 * time.Minute, ColumnTypes: testColumnTypes},
	"no-window-update": {GroupBy: []string{stream.ColSource, "shard"},
		Aggregates: []Aggregate{{Kind: Count}, {Kind: Max, Column: "fee"}}, Mode: Update, ColumnTypes: testColumnTypes},
	"no-window-complete": {GroupBy: []string{ethblock.ColMiner},
		Aggregates: []Aggregate{{Kind: Sum, Column: ethblock.ColGasUsed}}, Mode: Complete, ColumnTypes: testColumnTypes},
	// approx_count_distinct of four types: its estimate is the one of
	// every group's rows folded at once, however batches, chunks, shards
	// and restarts split them.
	"approx-distinct-sliding": {Window: &Window{Column: ethblock.ColBlockTS, Size: 10 * time.Minute, Slide: 5 * time.Minute},
		GroupBy: []string{stream.ColSource}, Aggregates: []Aggregate{
			{Kind: Count}, {Kind: ApproxCountDistinct, Column: ethblock.ColMiner, As: "miners"},
			{Kind: ApproxCountDistinct, Column: ethblock.ColGasUsed, As: "gas_values", RelativeSD: 0.01},
			{Kind: ApproxCountDistinct, Column: "fee", As: "fees", RelativeSD: 0.3},
			{Kind: ApproxCountDistinct, Column: ethblock.ColBlockTS, As: "times"}},
		Mode: Update, WatermarkDelay: 15 * time.Minute, ColumnTypes: testColumnTypes},
	"approx-distinct-append": {Window: &Window{Column: ethblock.ColBlockTS, Size: 7 * time.Minute},
		GroupBy: []string{ethblock.ColMiner}, Aggregates: []Aggregate{{Kind: ApproxCountDistinct, Column: "shard"}},
		Mode: Append, WatermarkDelay: 10 * time.Minute, ColumnTypes: testColumnTypes},
	"approx-distinct-complete": {GroupBy: []string{"shard"},
		Aggregates: []Aggregate{{Kind: ApproxCountDistinct, Column: ethblock.ColMiner}}, Mode: Complete, ColumnTypes: testColumnTypes},
	"reference-no-watermark": {Window: &Window{Column: ethblock.ColBlockTS, Size: 5 * time.Minute},
		GroupBy: []string{stream.ColSource, ethblock.ColMiner}, Aggregates: []Aggregate{{Kind: Count, As: "count"}},
		Mode: Update, ColumnTypes: testColumnTypes},
}

// TestOracle runs random streams through the operator with random batch
// splits, restarts (sometimes with an empty local cache) and crashes (abort
// mid-batch or after Finish, process death before Commit), and after every
// batch compares the output, the committed state and the metrics with the
// brute-force oracle.
func TestOracle(t *testing.T) {
	seeds, rows := 3, 500
	if *long {
		seeds, rows = 12, 2000
	}
	names := make([]string, 0, len(propertySpecs))
	for name := range propertySpecs {
		names = append(names, name)
	}
	sort.Strings(names)
	carriedKeys, reloadedCarries, fileCarries = 0, 0, 0
	defer func() {
		// Guard against vacuity: the streams must merge rows into windows
		// closed at the commit before, read back after a restart, from the
		// record and from a file.
		if !t.Failed() && (carriedKeys == 0 || reloadedCarries == 0 || fileCarries == 0) {
			t.Errorf("merged from the carry %d keys, %d after a restart, %d from a file: the streams do not test it",
				carriedKeys, reloadedCarries, fileCarries)
		}
	}()
	for _, name := range names {
		spec := propertySpecs[name]
		for seed := range uint64(seeds) {
			t.Run(fmt.Sprintf("%s/seed=%d", name, seed), func(t *testing.T) {
				var fs vfs.FS = vfs.NewMem()
				if seed == 0 {
					fs = vfs.Default // once per spec on the real file system
				}
				runOracle(t, spec, seed, rows, fs, false, 0)
			})
			t.Run(fmt.Sprintf("%s/seed=%d/lookahead", name, seed), func(t *testing.T) {
				if seed%2 == 1 {
					// Every carry in a file of its own (carryfile.go).
					defer setCarryInlineMax(0)()
				}
				runOracle(t, spec, seed, rows, vfs.NewMem(), true, 0)
			})
			if spec.Window != nil && spec.Mode != Append {
				// Three shards (one per window index modulo 3), every
				// chunk folded on goroutines of its own.
				t.Run(fmt.Sprintf("%s/seed=%d/shards=3", name, seed), func(t *testing.T) {
					defer setShardMinRows(0)()
					runOracle(t, spec, seed, rows, vfs.NewMem(), seed%2 == 0, 3)
				})
			}
		}
	}
}

// carriedKeys, reloadedCarries and fileCarries add up runOracle's carried,
// reloaded and fromFile over a TestOracle run.
var carriedKeys, reloadedCarries, fileCarries int64

// runOracle checks the operator against the oracle over a random stream;
// with lookahead the harness tells it each next watermark before Finish, as
// the engine does, and only the stored state may differ (closed rows).
// Input is late by the previous batch's watermark (Spark 3.4+), after a
// restart too: the carry of the rows the committed version closed at
// commit is part of it (doc.go, Closed at commit).
func runOracle(t *testing.T, spec Spec, seed uint64, nRows int, fs vfs.FS, lookahead bool, shards int) {
	rng := rand.New(rand.NewPCG(seed, uint64(len(spec.GroupBy))))
	delay := spec.WatermarkDelay
	if delay == 0 {
		delay = 20 * time.Minute
	}
	// Steps of whole seconds, or of a minute every other seed so that the
	// watermark often lands exactly on a window boundary (the off-by-one
	// cases of dropping and eviction).
	step, maxSteps := int64(1_000_000), int64(30)
	if seed%2 == 1 {
		step, maxSteps = 60_000_000, 1
	}
	batches := splitBatches(rng, genStream(rng, nRows, delay, step, maxSteps))
	h := newHarness(t, spec, fs, 1+rng.IntN(5))
	h.lookahead, h.shards = lookahead, shards
	if shards > 0 {
		h.restart(false)
	}
	or := newOracle(t, spec)
	closes := lookahead && spec.Mode == Update && or.p.evicts
	// carried counts the keys a batch merged into a window the version
	// before closed at commit (the carry, doc.go), reloaded those of them
	// merged after a restart, fromFile those of them read from a file.
	var closedSeen, lastClosed, carried, reloaded, fromFile int64
	lastPrev := ""                  // the carry file of the version before the last committed
	merged := map[string][]string{} // the sink's table after MERGEs of every output
	for i, chunks := range batches {
		id := int64(i)
		rows := flatten(chunks)
		wm := h.wmMs

		// The engine asks before planning a batch without input, once
		// the watermark moved: Spark's StateStoreSaveExec runs it in
		// append and update mode whatever it would evict (and ethstream
		// in complete mode when it evicts closed windows).
		wantNoData := spec.Mode != Complete || or.p.evicts
		if got, err := h.op.NeedsNoDataBatch(wm); err != nil || got != wantNoData {
			t.Fatalf("batch %d: NeedsNoDataBatch(%d) = %v, %v; want %v", id, wm, got, err, wantNoData)
		}

		// Crash points: the batch's first attempt fails somewhere; the
		// engine then re-runs it from the last committed version.
		switch rng.IntN(10) {
		case 0: // abort mid-batch
			h.process(id, chunks[:rng.IntN(len(chunks)+1)])
			h.op.Abort()
		case 1: // abort after Finish (the sink failed)
			h.process(id, chunks)
			out, err := h.finish(id, chunks)
			if err != nil {
				t.Fatal(err)
			}
			h.op.Recycle(out) // as the engine does once the sink returned
			h.op.Abort()
		case 2: // the process dies before Commit
			h.process(id, chunks[:rng.IntN(len(chunks)+1)])
			h.restart(rng.IntN(2) == 0)
		}

		late := h.prevWmMs
		prevFile := h.op.committed.CarryFile
		restarted, inFile := h.restarted, prevFile != ""
		h.process(id, chunks)
		out, prog := h.finishCommit(id, chunks)
		lastPrev = prevFile

		before := map[string]int{}
		for k, rs := range or.rows {
			before[k] = len(rs)
		}
		dropped, touched := or.apply(rows, late)
		for k := range touched {
			if closes && before[k] > 0 && or.end[k] <= wm*1000 {
				carried++
				if restarted && lastClosed > 0 {
					reloaded++
				}
				if inFile {
					fromFile++
				}
			}
		}
		evicted := or.evict(wm)
		if prog.NumRowsDroppedByWatermark != dropped {
			t.Fatalf("batch %d: numRowsDroppedByWatermark = %d, want %d", id, prog.NumRowsDroppedByWatermark, dropped)
		}
		if prog.NumRowsRemoved != int64(len(evicted)) {
			t.Fatalf("batch %d: numRowsRemoved = %d, want %d", id, prog.NumRowsRemoved, len(evicted))
		}
		if prog.NumRowsUpdated != int64(len(touched)) {
			t.Fatalf("batch %d: numRowsUpdated = %d, want %d", id, prog.NumRowsUpdated, len(touched))
		}
		live := or.liveState()
		if prog.NumRowsTotal != int64(len(live)) {
			t.Fatalf("batch %d: numRowsTotal = %d, want %d", id, prog.NumRowsTotal, len(live))
		}

		got := decodeOutput(t, or.p, out)
		// The next Finish builds its rows in out's columns (Recycle).
		h.op.Recycle(out)
		seen := map[string]bool{}
		for _, r := range got {
			if seen[r.key] {
				t.Fatalf("batch %d: key %s output twice", id, r.key)
			}
			seen[r.key] = true
			want, _ := or.value(r.key)
			if fmt.Sprint(r.vals) != fmt.Sprint(want) {
				t.Fatalf("batch %d: key %s output %v, oracle %v", id, r.key, r.vals, want)
			}
		}
		switch spec.Mode {
		case Update:
			// Exactly the touched keys, with full values (checked above).
			if len(got) != len(touched) {
				t.Fatalf("batch %d: update output has %d keys, batch touched %d", id, len(got), len(touched))
			}
			for _, r := range got {
				if !touched[r.key] {
					t.Fatalf("batch %d: update output key %s the batch did not touch", id, r.key)
				}
				merged[r.key] = r.vals
			}
			// The merged table equals the oracle for every key ever accepted.
			if len(merged) != len(or.rows) {
				t.Fatalf("batch %d: merged table has %d keys, oracle %d", id, len(merged), len(or.rows))
			}
			for k := range or.rows {
				want, _ := or.value(k)
				if fmt.Sprint(merged[k]) != fmt.Sprint(want) {
					t.Fatalf("batch %d: merged %s = %v, oracle %v", id, k, merged[k], want)
				}
			}
		case Append:
			// Exactly the windows closed now, each once, with final values.
			if len(got) != len(evicted) {
				t.Fatalf("batch %d: append output has %d keys, %d windows closed", id, len(got), len(evicted))
			}
			for _, r := range got {
				if !evicted[r.key] {
					t.Fatalf("batch %d: append output key %s whose window is open", id, r.key)
				}
				if _, dup := merged[r.key]; dup {
					t.Fatalf("batch %d: append output key %s a second time", id, r.key)
				}
				merged[r.key] = r.vals
			}
		case Complete:
			if len(got) != len(live) {
				t.Fatalf("batch %d: complete output has %d keys, state %d", id, len(got), len(live))
			}
		}

		// The committed state holds exactly the keys whose windows are open
		// (at the next watermark, h.wmMs now, if the operator knew it).
		stored := live
		if closes {
			stored = or.storedState(h.wmMs * 1000)
		}
		if st := h.stateRows(); fmt.Sprint(st) != fmt.Sprint(stored) {
			t.Fatalf("batch %d (wm %d): state\n%s\nwant\n%s", id, wm, strings.Join(st, "\n"), strings.Join(stored, "\n"))
		}
		if c := prog.CustomMetrics[MetricClosedUnstored]; c != int64(len(live)-len(stored)) {
			t.Fatalf("batch %d: %s = %d, want %d", id, MetricClosedUnstored, c, len(live)-len(stored))
		}
		closedSeen += int64(len(live) - len(stored))
		lastClosed = int64(len(live) - len(stored))

		if rng.IntN(8) == 0 {
			h.restart(rng.IntN(2) == 0)
		}
	}
	if closes && closedSeen == 0 {
		t.Fatal("no row was closed at commit: the stream does not test lookahead")
	}
	carriedKeys, reloadedCarries, fileCarries = carriedKeys+carried, reloadedCarries+reloaded, fileCarries+fromFile
	t.Logf("closed at commit %d, merged from the carry %d (%d after a restart, %d from a file)", closedSeen, carried, reloaded, fromFile)
	if last := h.op.committed.CarryFile; lastPrev != "" || last != "" {
		// The last commit collected every other carry file.
		for _, n := range carryNames(fs, h.stateDir) {
			if n != lastPrev && n != last {
				t.Fatalf("carry directory holds %s; the last two versions name %q and %q", n, lastPrev, last)
			}
		}
	}
	if err := h.op.Close(); err != nil {
		t.Fatal(err)
	}
}
