package session

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/stream"
)

// The oracle: a brute-force evaluator of session windows written apart
// from the operator. It keeps the rows themselves (never a running
// aggregate), and every batch recomputes each key's sessions from scratch
// by sorting the key's rows by time and cutting where a row starts after
// the running end.

type oRow struct {
	ts, gap int64 // µs; gap 0: none (null or malformed)
	nullTS  bool
	k       *string
	n       *int64
	v       int64
}

type oracle struct {
	// watermark says the query has one, whose delay is delayUs (0 is a
	// watermark too: the max event time seen).
	watermark bool
	delayUs   int64
	mode      agg.OutputMode
	open      map[string][]oRow // key text -> rows not yet emitted (append)
	maxTS     int64
	wmUs      int64
	// prevUs is the previous batch's watermark, by which input is late
	// (Spark 3.4+: watermarkPredicateForDataForLateEvents at
	// getInputWatermarkForLateEvents); wmUs, the batch's, evicts.
	prevUs int64
}

func keyText(k *string, n *int64) string {
	s := "k=null"
	if k != nil {
		s = "k=" + *k
	}
	if n == nil {
		return s + " n=null"
	}
	return fmt.Sprintf("%s n=%d", s, *n)
}

// batch feeds one batch's rows at the current watermark and returns the
// rows the query emits, rendered and sorted.
func (o *oracle) batch(rows []oRow) []string {
	for _, r := range rows {
		if r.nullTS || r.gap <= 0 {
			continue
		}
		if o.watermark && r.ts+r.gap <= o.prevUs {
			continue // late
		}
		k := keyText(r.k, r.n)
		o.open[k] = append(o.open[k], r)
	}
	var out []string
	for k, rs := range o.open {
		slices.SortStableFunc(rs, func(a, b oRow) int { return cmp.Compare(a.ts, b.ts) })
		var keep []oRow
		for i := 0; i < len(rs); {
			start, end := rs[i].ts, rs[i].ts+rs[i].gap
			j := i + 1
			for j < len(rs) && rs[j].ts <= end {
				end = max(end, rs[j].ts+rs[j].gap)
				j++
			}
			closed := o.mode == agg.Append && end <= o.wmUs
			if o.mode == agg.Complete || closed {
				var sum, mn, mx int64
				for x, r := range rs[i:j] {
					sum += r.v
					if x == 0 || r.v < mn {
						mn = r.v
					}
					if x == 0 || r.v > mx {
						mx = r.v
					}
				}
				cnt := int64(j - i)
				out = append(out, fmt.Sprintf("[%d,%d) %s count=%d sum=%d min=%d max=%d avg=%g",
					start, end, k, cnt, sum, mn, mx, float64(sum)/float64(cnt)))
			}
			if !closed {
				keep = append(keep, rs[i:j]...)
			}
			i = j
		}
		if len(keep) == 0 {
			delete(o.open, k)
		} else {
			o.open[k] = keep
		}
	}
	// The engine's watermark for the next batch.
	for _, r := range rows {
		if !r.nullTS {
			o.maxTS = max(o.maxTS, r.ts)
		}
	}
	o.prevUs = o.wmUs
	if o.watermark {
		o.wmUs = max(o.wmUs, o.maxTS-o.delayUs)
	}
	slices.Sort(out)
	return out
}

var testAggs = []agg.Aggregate{
	{Kind: agg.Count}, {Kind: agg.Sum, Column: "v", As: "sum"}, {Kind: agg.Min, Column: "v", As: "min"},
	{Kind: agg.Max, Column: "v", As: "max"}, {Kind: agg.Avg, Column: "v", As: "avg"},
}

var testTypes = map[string]stream.Type{"ts": stream.Timestamp, "k": stream.String, "n": stream.Int64, "v": stream.Int64, "gap": stream.String}

// render renders the operator's output rows as the oracle does.
func render(t *testing.T, b *stream.Batch) []string {
	t.Helper()
	var out []string
	if b == nil {
		return nil
	}
	for i := 0; i < b.Len; i++ {
		var k *string
		var n *int64
		if c := b.Column("k"); !c.IsNull(i) {
			k = &c.Strings[i]
		}
		if c := b.Column("n"); !c.IsNull(i) {
			n = &c.Int64s[i]
		}
		out = append(out, fmt.Sprintf("[%d,%d) %s count=%d sum=%d min=%d max=%d avg=%g",
			b.Column(ColStart).Int64s[i], b.Column(ColEnd).Int64s[i], keyText(k, n), b.Column("count").Int64s[i],
			b.Column("sum").Int64s[i], b.Column("min").Int64s[i], b.Column("max").Int64s[i], b.Column("avg").Float64s[i]))
	}
	slices.Sort(out)
	return out
}

// toBatch builds the input batch of rows (gap column as interval text).
func toBatch(rows []oRow) *stream.Batch {
	b := &stream.Batch{Len: len(rows), Columns: []stream.Column{
		{Name: "ts", Type: stream.Timestamp, Valid: make([]bool, len(rows))},
		{Name: "k", Type: stream.String, Valid: make([]bool, len(rows))},
		{Name: "n", Type: stream.Int64, Valid: make([]bool, len(rows))},
		{Name: "v", Type: stream.Int64},
		{Name: "gap", Type: stream.String, Valid: make([]bool, len(rows))},
	}}
	c := b.Columns
	for i, r := range rows {
		c[0].Int64s = append(c[0].Int64s, r.ts)
		c[0].Valid[i] = !r.nullTS
		s := ""
		if r.k != nil {
			s = *r.k
		}
		c[1].Strings = append(c[1].Strings, s)
		c[1].Valid[i] = r.k != nil
		var n int64
		if r.n != nil {
			n = *r.n
		}
		c[2].Int64s = append(c[2].Int64s, n)
		c[2].Valid[i] = r.n != nil
		c[3].Int64s = append(c[3].Int64s, r.v)
		switch {
		case r.gap > 0:
			c[4].Strings = append(c[4].Strings, fmt.Sprintf("%d seconds", r.gap/1e6))
			c[4].Valid[i] = true
		case i%2 == 0:
			c[4].Strings = append(c[4].Strings, "soon") // malformed: no session
			c[4].Valid[i] = true
		default:
			c[4].Strings = append(c[4].Strings, "")
		}
	}
	return b
}

// genBatches generates batches of rows moving forward in time with late and
// out-of-order rows, null keys, null event times and (dynamic) bad gaps.
func genBatches(r *rand.Rand, dynamic bool) [][]oRow {
	keys := []string{"a", "b", "c"}
	var batches [][]oRow
	now := int64(1_000_000_000)
	for range 2 + r.IntN(8) {
		var rows []oRow
		for range r.IntN(12) {
			row := oRow{v: r.Int64N(200) - 50, gap: 10e6}
			// Mostly near now, some far behind (late or bridging).
			row.ts = now + (r.Int64N(40)-10)*1e6
			if r.IntN(5) == 0 {
				row.ts = now - r.Int64N(120)*1e6
			}
			if dynamic {
				row.gap = int64(1+r.IntN(20)) * 1e6
				if r.IntN(10) == 0 {
					row.gap = 0
				}
			}
			row.nullTS = r.IntN(20) == 0
			if x := r.IntN(4); x < len(keys) {
				row.k = &keys[x]
			}
			if r.IntN(3) > 0 {
				n := r.Int64N(2)
				row.n = &n
			}
			rows = append(rows, row)
		}
		batches = append(batches, rows)
		now += r.Int64N(30) * 1e6
	}
	return batches
}

// indexedSessions is the number of sessions op's index holds.
func indexedSessions(op *Operator) int64 {
	var n int64
	for _, ss := range op.idx {
		n += int64(len(ss))
	}
	return n
}

// run drives the operator over the batches as the engine would (the
// watermark of batch N from the rows before it), splitting each batch into
// chunks, restarting it (sometimes with another partition count, by a
// repartition) and aborting a batch before re-running it, and compares
// every batch's output with the oracle's.
func runAgainstOracle(t *testing.T, r *rand.Rand, spec Spec, batches [][]oRow) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	parts := 1 + r.IntN(4)
	open := func(version int64) *Operator {
		op, err := New(spec)
		if err != nil {
			t.Fatal(err)
		}
		env := stream.OperatorEnv{StateDir: filepath.Join(dir, "state"), FS: vfs.Default, LocalDir: filepath.Join(dir, "local"),
			Partitions: parts, Version: version}
		if err := op.Open(ctx, env); err != nil {
			t.Fatal(err)
		}
		return op
	}
	or := &oracle{watermark: spec.HasWatermark || spec.WatermarkDelay > 0, delayUs: spec.WatermarkDelay.Microseconds(),
		mode: spec.Mode, open: map[string][]oRow{}}
	op := open(-1)
	defer func() { op.Close() }()
	version := int64(999) // versions need not start at 0
	for id, rows := range batches {
		batchID := version + 1
		wmMs, lateMs := or.wmUs/1000, or.prevUs/1000
		in := toBatch(rows)
		feed := func() *stream.Batch {
			for lo := 0; lo < in.Len; {
				hi := min(in.Len, lo+1+r.IntN(5))
				idx := make([]int, 0, hi-lo)
				for i := lo; i < hi; i++ {
					idx = append(idx, i)
				}
				if err := op.Process(ctx, batchID, lateMs, in.Take(idx)); err != nil {
					t.Fatal(err)
				}
				lo = hi
			}
			out, prog, err := op.Finish(ctx, batchID, wmMs)
			if err != nil {
				t.Fatal(err)
			}
			// The store counts its rows from the writes' presence
			// (PutKnown): they must be the sessions the index holds.
			if n := indexedSessions(op); prog.NumRowsTotal != n {
				t.Fatalf("batch %d: numRowsTotal %d, %d sessions indexed", id, prog.NumRowsTotal, n)
			}
			seen.late += prog.NumRowsDroppedByWatermark
			seen.removed += prog.NumRowsRemoved
			seen.out += int64(out.Len)
			return out
		}
		if r.IntN(5) == 0 {
			feed()
			op.Abort()
		}
		got := render(t, feed())
		if err := op.Commit(ctx, batchID); err != nil {
			t.Fatal(err)
		}
		version = batchID
		want := or.batch(rows)
		if !slices.Equal(got, want) {
			t.Fatalf("batch %d (watermark %d µs): operator emitted\n  %s\noracle\n  %s", id, or.wmUs, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		if r.IntN(3) == 0 {
			if err := op.Close(); err != nil {
				t.Fatal(err)
			}
			op = open(version)
			if r.IntN(2) == 0 {
				to := 1 + r.IntN(5)
				version = batchID + 1 // the repartition takes an id of its own
				if _, err := op.Repartition(ctx, batchID, version, to); err != nil {
					t.Fatal(err)
				}
				parts = to
			}
		}
	}
}

// seen sums the figures of every run, so TestOracle can check that its
// inputs exercise late rows, merges and output at all.
var seen struct{ late, removed, out int64 }

// TestOracle compares the operator with the oracle on generated inputs:
// append and complete mode, static and dynamic gaps.
func TestOracle(t *testing.T) {
	for seed := range uint64(60) {
		r := rand.New(rand.NewPCG(seed, 41))
		spec := Spec{Column: "ts", Gap: 10 * time.Second, GroupBy: []string{"k", "n"}, Aggregates: testAggs,
			Mode: agg.Append, WatermarkDelay: time.Duration(5+r.IntN(30)) * time.Second, ColumnTypes: testTypes}
		dynamic := seed%3 == 1
		if dynamic {
			spec.Gap, spec.GapColumn = 0, "gap"
		}
		if seed%4 == 3 {
			spec.Mode = agg.Complete
			if seed%8 == 3 {
				spec.WatermarkDelay = 0 // no watermark
			}
		}
		if seed%5 == 4 {
			// withWatermark(ts, "0 seconds"): a watermark at the max event
			// time seen, which drops late rows and (append) closes sessions.
			spec.WatermarkDelay, spec.HasWatermark = 0, true
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			// Merge each key's new rows among themselves as often as
			// possible in half the runs.
			defer func(n int) { compactFirst = n }(compactFirst)
			if seed%2 == 0 {
				compactFirst = 2
			}
			runAgainstOracle(t, r, spec, genBatches(r, dynamic))
		})
	}
	if seen.late < 20 || seen.removed < 20 || seen.out < 200 {
		t.Fatalf("the inputs are too tame: %+v", seen)
	}
	t.Logf("late rows %d, sessions removed %d, rows emitted %d", seen.late, seen.removed, seen.out)
}
