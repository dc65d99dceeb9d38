package flow_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/flow"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/join"
	"github.com/ethstream/ethstream/stream"
)

// The join's oracle: written from the join's definition alone, with no
// code of package join, as Spark 3.4+ runs it. A row is late when its
// event time is at or before the watermark of the batch before the one
// that reads it (getInputWatermarkForLateEvents); the watermark is
// recomputed here from the rows (each side's max event time minus its
// delay, 0 for a side with no row yet, the min of the two, never moving
// back). Each round is one data batch: its left rows join the right rows
// stored before, then its right rows the left rows stored (the round's
// included); a pair with equal, non-null keys and event times in range is
// emitted and marks both rows matched; a row is stored unless its side's
// state watermark at the batch's watermark W already removes it (left:
// W + jLo - 1 ms, right: W - jHi - 1 ms, the BETWEEN's bounds being
// non-strict); a null key is stored only on an outer side; a left semi
// join emits a left row on its first match and stores no matched left row.
// At the end of each batch (and of a no-data batch) the stored rows at or
// below their side's state watermark leave, an outer side's unmatched ones
// emitted with nulls.

// jrow is one generated input row.
type jrow struct {
	k   string // "" is a null key
	ts  int64  // µs
	id  int64
	src string
}

const (
	jLeftDelay  = time.Minute
	jRightDelay = 2 * time.Minute
	jLo, jHi    = -2 * time.Minute, 3 * time.Minute // a.ts BETWEEN b.ts - 2m AND b.ts + 3m
	jSentinel   = "zz-sentinel"
)

// jBatch is the rows of one side as a batch (k nullable).
func jBatch(rows []jrow) *stream.Batch {
	b := &stream.Batch{Len: len(rows), Columns: []stream.Column{
		{Name: "k", Type: stream.String, Valid: make([]bool, 0, len(rows))}, {Name: "ts", Type: stream.Timestamp}, {Name: "id", Type: stream.Int64}}}
	for _, r := range rows {
		b.Columns[0].Strings = append(b.Columns[0].Strings, r.k)
		b.Columns[0].Valid = append(b.Columns[0].Valid, r.k != "")
		b.Columns[1].Int64s = append(b.Columns[1].Int64s, r.ts)
		b.Columns[2].Int64s = append(b.Columns[2].Int64s, r.id)
	}
	return b
}

// jGen makes a round of rows around now (µs): out of order within a few
// minutes, some late by far more than the delays, some with a null key.
func jGen(rng *rand.Rand, now int64, n int, firstID int64) []jrow {
	var rows []jrow
	for i := 0; i < n; i++ {
		r := jrow{k: "k" + strconv.Itoa(rng.IntN(4)), id: firstID + int64(i)}
		r.ts = now + int64(rng.IntN(int(6*time.Minute/time.Microsecond))) - int64(3*time.Minute/time.Microsecond)
		switch rng.IntN(10) {
		case 0:
			r.ts -= int64(20 * time.Minute / time.Microsecond) // late
		case 1:
			r.k = ""
		}
		rows = append(rows, r)
	}
	return rows
}

// jOracle is the expected output (rows rendered as jRender does), given
// each round's left and right rows, each round a run of its own.
func jOracle(typ join.Type, left, right [][]jrow) []string {
	return jOracleRuns(typ, left, right, func(int) bool { return true }, func(int) bool { return true })
}

// jOracleRuns is jOracle where restart(round) says whether a new run
// starts with round (the sides' watermarks start afresh then), and
// noData(round) whether a no-data batch ran between the round's batch and
// the one before (then at the watermark the round's batch runs with, so
// it drops late input by its own watermark; otherwise by the previous
// batch's). A run's last batch is followed by a no-data batch when the
// watermark moved (the join has state watermark predicates).
func jOracleRuns(typ join.Type, left, right [][]jrow, restart, noData func(round int) bool) []string {
	type stored struct {
		r       jrow
		matched bool
	}
	var st [2][]stored
	var out []string
	semi := typ == join.LeftSemi
	preserves := func(side int) bool {
		return typ == join.FullOuter || side == 0 && typ == join.LeftOuter || side == 1 && typ == join.RightOuter
	}
	inRange := func(a, b jrow) bool {
		return a.k != "" && a.k == b.k && a.ts >= b.ts+jLo.Microseconds() && a.ts <= b.ts+jHi.Microseconds()
	}
	limUs := func(side int, wmMs int64) int64 {
		if side == 0 {
			return (wmMs + jLo.Milliseconds() - 1) * 1000
		}
		return (wmMs - jHi.Milliseconds() - 1) * 1000
	}
	evict := func(wmMs int64) {
		for side := range st {
			var keep []stored
			for _, x := range st[side] {
				switch {
				case x.r.ts > limUs(side, wmMs):
					keep = append(keep, x)
				case !x.matched && preserves(side) && side == 0:
					out = append(out, jRender(&x.r, nil))
				case !x.matched && preserves(side):
					out = append(out, jRender(nil, &x.r))
				}
			}
			st[side] = keep
		}
	}
	wm, prev := int64(0), int64(0) // ms: the batch's watermark, the previous batch's
	var lm, rm *int64
	for round := range left {
		// A new run's sides' watermarks start afresh, as Spark's
		// WatermarkTracker after a restart (only the global one is in the
		// checkpoint).
		if restart(round) {
			lm, rm = nil, nil
		}
		late := prev
		if round > 0 && noData(round) {
			evict(wm) // the no-data batch (the last run's final one)
			late = wm
		}
		for _, a := range left[round] {
			if a.ts <= late*1000 {
				continue
			}
			matched := false
			for j := range st[1] {
				if inRange(a, st[1][j].r) {
					matched, st[1][j].matched = true, true
					if !semi {
						out = append(out, jRender(&a, &st[1][j].r))
					}
				}
			}
			if semi && matched {
				out = append(out, jRender(&a, nil))
				continue
			}
			if (a.k != "" || preserves(0)) && a.ts > limUs(0, wm) {
				st[0] = append(st[0], stored{a, matched})
			}
		}
		for _, b := range right[round] {
			if b.ts <= late*1000 {
				continue
			}
			matched := false
			for i := range st[0] {
				if !inRange(st[0][i].r, b) || semi && st[0][i].matched {
					continue
				}
				matched, st[0][i].matched = true, true
				if semi {
					out = append(out, jRender(&st[0][i].r, nil))
				} else {
					out = append(out, jRender(&st[0][i].r, &b))
				}
			}
			if (b.k != "" || preserves(1)) && b.ts > limUs(1, wm) {
				st[1] = append(st[1], stored{b, matched})
			}
		}
		evict(wm)
		prev = wm
		// The watermark after the round's batch: every row read counts; a
		// side with no row yet counts as 0.
		side := func(rows []jrow, d time.Duration, m **int64) int64 {
			for _, r := range rows {
				w := r.ts/1000 - d.Milliseconds()
				if *m == nil || w > **m {
					*m = &w
				}
			}
			if *m == nil {
				return 0
			}
			return **m
		}
		wm = max(wm, min(side(left[round], jLeftDelay, &lm), side(right[round], jRightDelay, &rm)))
	}
	if wm > prev {
		evict(wm) // the final no-data batch
	}
	slices.Sort(out)
	return out
}

func jRender(a, b *jrow) string {
	f := func(r *jrow) string {
		if r == nil {
			return "null,null,null,null"
		}
		k := r.k
		if k == "" {
			k = "null"
		}
		return fmt.Sprintf("%s,%d,%d,%s", k, r.ts, r.id, r.src)
	}
	if b == nil && a != nil {
		return f(a) + "|" + f(nil)
	}
	return f(a) + "|" + f(b)
}

// jSinkRows renders the rows a memory sink received, as jRender does.
func jSinkRows(t *testing.T, s *streamtest.Sink, semi bool) []string {
	var out []string
	for _, ap := range s.Applied() {
		b := ap.Rows
		get := func(name string, i int) string {
			c := b.Column(name)
			if c == nil {
				t.Fatalf("sink rows have no column %q: %v", name, b.Columns)
			}
			return streamtest.Value(c, i)
		}
		for i := 0; i < b.Len; i++ {
			side := func(p string) string {
				return strings.Join([]string{get(p+"k", i), get(p+"ts", i), get(p+"id", i), get(p+"source", i)}, ",")
			}
			if semi {
				out = append(out, side("")+"|null,null,null,null")
				continue
			}
			out = append(out, side("a_")+"|"+side("b_"))
		}
	}
	slices.Sort(out)
	return out
}

// jSource is an empty source of the sides' schema.
func jSource(name string) *streamtest.Source {
	s := streamtest.NewSource(name)
	s.Fields = []stream.Field{{Name: "k", Type: stream.String, Nullable: true}, {Name: "ts", Type: stream.Timestamp}, {Name: "id", Type: stream.Int64}}
	return s
}

// jQuery builds the join of the two sources.
func jQuery(typ join.Type, l, r stream.Source, sink stream.Sink, parts int) *flow.Query {
	return flow.New("join").
		Join(flow.From("a").Read("left", l).WithWatermark("ts", jLeftDelay),
			flow.From("b").Read("right", r).WithWatermark("ts", jRightDelay),
			flow.JoinOn{Type: typ, LeftKeys: []string{"k"}, RightKeys: []string{"k"}, Range: flow.Between("ts", "ts", jLo, jHi)}).
		WriteTo(sink).
		Trigger(engine.Trigger{Kind: engine.AvailableNow}).
		Conf("spark.sql.streaming.queryEvolution.enableSourceEvolution", "true").
		Conf("spark.sql.shuffle.partitions", "4").
		Conf("spark.sql.streaming.stateStore.partitions", strconv.Itoa(parts))
}

// TestJoinOracle runs every join type over generated rounds of rows (late,
// out of order, null keys), restarting each round with another state
// partition count (an online repartition), and compares the sink's rows
// with the oracle's once the watermark passed every row.
func TestJoinOracle(t *testing.T) {
	for _, typ := range []join.Type{join.Inner, join.LeftOuter, join.RightOuter, join.FullOuter, join.LeftSemi} {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", typ, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 41))
				dir := t.TempDir()
				l, r := jSource("left"), jSource("right")
				sink := streamtest.NewSink()
				var left, right [][]jrow
				now, id := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC).UnixMicro(), int64(0)
				rounds := 5
				for round := 0; round <= rounds; round++ {
					var lr, rr []jrow
					if round < rounds {
						lr, rr = jGen(rng, now, 6+rng.IntN(6), id), jGen(rng, now, 6+rng.IntN(6), id+100)
						id += 200
						now += int64(rng.IntN(4)) * int64(time.Minute/time.Microsecond)
					} else {
						// Sentinels past every row: the watermark passes them all.
						far := now + int64(time.Hour/time.Microsecond)
						lr = []jrow{{k: jSentinel, ts: far, id: -1}}
						rr = []jrow{{k: jSentinel + "-r", ts: far, id: -2}}
					}
					for i := range lr {
						lr[i].src = "left"
					}
					for i := range rr {
						rr[i].src = "right"
					}
					left, right = append(left, lr), append(right, rr)
					if err := l.Append(jBatch(lr)); err != nil {
						t.Fatal(err)
					}
					if err := r.Append(jBatch(rr)); err != nil {
						t.Fatal(err)
					}
					parts := []int{1, 3, 7}[rng.IntN(3)]
					_, err := jQuery(typ, l, r, sink, parts).Run(context.Background(),
						engine.Options{CheckpointDir: filepath.Join(dir, "ckpt"), LocalDir: filepath.Join(dir, "local")})
					if err != nil {
						t.Fatalf("round %d: %v", round, err)
					}
				}
				got, want := jSinkRows(t, sink, typ == join.LeftSemi), jOracle(typ, left, right)
				if !slices.Equal(got, want) {
					t.Fatalf("join output differs from the oracle (%d rows, want %d)\nmissing: %s\nextra: %s", len(got), len(want),
						strings.Join(multisetMinus(want, got), "\n  "), strings.Join(multisetMinus(got, want), "\n  "))
				}
				if len(want) == 0 {
					t.Fatal("the oracle expects no row: the case checks nothing")
				}
			})
		}
	}
}

// TestJoinRefusals: Spark's checker rules and the output mode.
func TestJoinRefusals(t *testing.T) {
	l, r := streamtest.NewSource("left"), streamtest.NewSource("right")
	_ = l.Append(jBatch([]jrow{{k: "a", ts: 1, id: 1}}))
	_ = r.Append(jBatch([]jrow{{k: "a", ts: 1, id: 1}}))
	cases := []struct {
		typ        join.Type
		lwm, rwm   bool
		rng        []join.Bound
		want       string
		keyOnEvent bool
	}{
		{join.Inner, false, false, nil, "", false},
		{join.LeftOuter, true, true, nil, "Stream-stream LeftOuter join between two streaming DataFrame/Datasets is not supported without a watermark in the join keys, or a watermark on the nullable side and an appropriate range condition", false},
		{join.LeftOuter, true, false, flow.Between("ts", "ts", jLo, jHi), "LeftOuter join", false},
		{join.LeftOuter, false, true, flow.Between("ts", "ts", jLo, jHi), "", false},
		{join.RightOuter, false, true, flow.Between("ts", "ts", jLo, jHi), "RightOuter join", false},
		{join.RightOuter, true, false, flow.Between("ts", "ts", jLo, jHi), "", false},
		{join.FullOuter, false, false, flow.Between("ts", "ts", jLo, jHi), "FullOuter join", false},
		{join.FullOuter, true, false, flow.Between("ts", "ts", jLo, jHi), "", false},
		{join.LeftSemi, true, false, []join.Bound{{LeftColumn: "ts", Op: join.LE, RightColumn: "ts"}}, "LeftSemi join", false},
		{join.LeftSemi, true, true, nil, "", true},
	}
	for _, c := range cases {
		ls, rs := flow.From("a").Read("left", l), flow.From("b").Read("right", r)
		if c.lwm {
			ls = ls.WithWatermark("ts", time.Minute)
		}
		if c.rwm {
			rs = rs.WithWatermark("ts", time.Minute)
		}
		on := flow.JoinOn{Type: c.typ, LeftKeys: []string{"k"}, RightKeys: []string{"k"}, Range: c.rng}
		if c.keyOnEvent {
			on.LeftKeys, on.RightKeys = []string{"k", "ts"}, []string{"k", "ts"}
		}
		_, err := flow.New("j").Join(ls, rs, on).WriteTo(streamtest.NewSink()).Build()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), join.CodeUnsupported)):
			t.Errorf("%+v: got %v, want %s", c, err, c.want)
		}
	}
	_, err := flow.New("j").Join(flow.From("a").Read("left", l).WithWatermark("ts", time.Minute), flow.From("b").Read("right", r).WithWatermark("ts", time.Minute),
		flow.JoinOn{Type: join.Inner, LeftKeys: []string{"k"}, RightKeys: []string{"k"}}).DropDuplicates("a_k").WriteTo(streamtest.NewSink()).Build()
	// Both sides' event-time columns reach the deduplication: Spark's
	// findEventTimeColumn refuses that.
	if err == nil || !strings.Contains(err.Error(), flow.CodeMultipleEventTimeColumns) || !strings.Contains(err.Error(), "event time columns: (a_ts,b_ts)") {
		t.Errorf("a deduplication after a join: %v", err)
	}
	if err := join.CheckOutputMode("update"); err == nil || !strings.Contains(err.Error(), "Join between two streaming DataFrames/Datasets is not supported in Update output mode, only in Append output mode") {
		t.Errorf("update mode: %v", err)
	}
}

// multisetMinus is a less b, as multisets.
func multisetMinus(a, b []string) []string {
	n := map[string]int{}
	for _, x := range b {
		n[x]++
	}
	var out []string
	for _, x := range a {
		if n[x] > 0 {
			n[x]--
			continue
		}
		out = append(out, x)
	}
	return out
}
