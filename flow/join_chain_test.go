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

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/flow"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/join"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// sparkTS is a timestamp as Spark's tests write it (UTC here), in µs.
func sparkTS(t *testing.T, s string) int64 {
	t.Helper()
	v, err := time.Parse("2006-01-02 15:04:05", s)
	if err != nil {
		t.Fatal(err)
	}
	return v.UnixMicro()
}

// appendRows appends b to src, failing t if the source refuses it.
func appendRows(t *testing.T, src *streamtest.Source, b *stream.Batch) {
	t.Helper()
	if err := src.Append(b); err != nil {
		t.Fatal(err)
	}
}

// eventRows is a batch of (eventTime, id, <third>) rows.
func eventRows(t *testing.T, third string, rows ...[3]string) *stream.Batch {
	b := &stream.Batch{Len: len(rows), Columns: []stream.Column{
		{Name: "eventTime", Type: stream.Timestamp}, {Name: "id", Type: stream.String}, {Name: third, Type: stream.String}}}
	for _, r := range rows {
		b.Columns[0].Int64s = append(b.Columns[0].Int64s, sparkTS(t, r[0]))
		b.Columns[1].Strings = append(b.Columns[1].Strings, r[1])
		b.Columns[2].Strings = append(b.Columns[2].Strings, r[2])
	}
	return b
}

// windowCounts renders the windows an appending aggregation emitted in the
// sink's batches from the from-th on: "start end count", times in UTC.
func windowCounts(s *streamtest.Sink, from int, count string) []string {
	var out []string
	for _, ap := range s.Applied()[from:] {
		b := ap.Rows
		for i := 0; i < b.Len; i++ {
			f := func(c string) string {
				return time.UnixMicro(b.Column(c).Int64s[i]).UTC().Format("2006-01-02 15:04:05")
			}
			out = append(out, f(agg.ColWindowStart)+" "+f(agg.ColWindowEnd)+" "+streamtest.Value(b.Column(count), i))
		}
	}
	slices.Sort(out)
	return out
}

// TestJoinThenAggregateSpark is Spark's MultiStatefulOperatorsSuite
// "stream-stream time interval left outer join -> aggregation, append
// mode": a left outer join (left watermark 2 minutes, right 4, left.eventTime
// BETWEEN right.eventTime - 40 s AND right.eventTime + 30 s) followed by a
// count per 30-second window of left.eventTime. The join's outer row for
// the left row with no partner is emitted when the left state watermark
// (the origin watermark minus 40 s) passes it, and the aggregation closes
// its windows by the join's output watermark: each run's new rows are the
// suite's CheckNewAnswer, its progress names both operators as Spark does.
func TestJoinThenAggregateSpark(t *testing.T) {
	l, r := streamtest.NewSource("input1"), streamtest.NewSource("input2")
	l.Fields = []stream.Field{{Name: "eventTime", Type: stream.Timestamp}, {Name: "id", Type: stream.String}, {Name: "comment", Type: stream.String}}
	r.Fields = []stream.Field{{Name: "eventTime", Type: stream.Timestamp}, {Name: "id", Type: stream.String}, {Name: "name", Type: stream.String}}
	sink := streamtest.NewSink()
	dir := t.TempDir()
	opts := engine.Options{CheckpointDir: filepath.Join(dir, "ckpt"), LocalDir: filepath.Join(dir, "local")}
	var events []*stream.Progress
	opts.Listeners = []engine.Listener{engine.ListenerFunc(func(p *stream.Progress) { events = append(events, p) })}
	run := func() {
		t.Helper()
		q := flow.New("joinagg").
			Join(flow.From("left").Read("input1", l).WithWatermark("eventTime", 2*time.Minute),
				flow.From("right").Read("input2", r).WithWatermark("eventTime", 4*time.Minute),
				flow.JoinOn{Type: join.LeftOuter, LeftKeys: []string{"id"}, RightKeys: []string{"id"},
					Range: flow.Between("eventTime", "eventTime", -40*time.Second, 30*time.Second)}).
			Aggregate(flow.Aggregation{Window: &agg.Window{Column: "left_eventTime", Size: 30 * time.Second},
				Aggregates: []agg.Aggregate{{Kind: agg.Count, As: "cnt"}}, Mode: agg.Append}).
			WriteTo(sink).Trigger(engine.Trigger{Kind: engine.AvailableNow}).
			Conf("spark.sql.streaming.queryEvolution.enableSourceEvolution", "true")
		if _, err := q.Run(context.Background(), opts); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Append(eventRows(t, "comment",
		[3]string{"2020-01-01 00:00:00", "abc", "has no join partner"},
		[3]string{"2020-01-02 00:00:00", "abc", "joined with A"},
		[3]string{"2020-01-02 01:00:00", "abc", "joined with B"})); err != nil {
		t.Fatal(err)
	}
	if err := r.Append(eventRows(t, "name",
		[3]string{"2020-01-02 00:00:10", "abc", "A"},
		[3]string{"2020-01-02 00:59:59", "abc", "B"},
		[3]string{"2020-01-02 02:00:00", "abc", "C"})); err != nil {
		t.Fatal(err)
	}
	run()
	want := []string{"2020-01-01 00:00:00 2020-01-01 00:00:30 1", "2020-01-02 00:00:00 2020-01-02 00:00:30 1"}
	if got := windowCounts(sink, 0, "cnt"); !slices.Equal(got, want) {
		t.Fatalf("first run: got %q, want %q", got, want)
	}
	seen := len(sink.Applied())
	appendRows(t, l, eventRows(t, "comment", [3]string{"2020-01-05 00:00:00", "abc", "joined with D"}))
	appendRows(t, r, eventRows(t, "name", [3]string{"2020-01-05 00:00:10", "abc", "D"}))
	run()
	want = []string{"2020-01-02 01:00:00 2020-01-02 01:00:30 1"}
	if got := windowCounts(sink, seen, "cnt"); !slices.Equal(got, want) {
		t.Fatalf("second run: got %q, want %q", got, want)
	}
	last := events[len(events)-1]
	var names []string
	for _, so := range last.StateOperators {
		names = append(names, so.OperatorName)
	}
	// Spark's ids: IncrementalExecution's pre-order walk from the sink
	// meets the aggregation first (operator 0), then the join (1), and
	// stateOperators[] lists them by id.
	if !slices.Equal(names, []string{"stateStoreSave", "symmetricHashJoin"}) {
		t.Errorf("stateOperators: %q, want Spark's names in Spark's id order", names)
	}
	// The aggregation keeps the window of 2020-01-05 00:00 (Spark's
	// assertion: state rows of the join, then one of the aggregation).
	if got := last.StateOperators[0].NumRowsTotal; got != 1 {
		t.Errorf("aggregation state rows after the second run: %d, want 1", got)
	}
}

// jWindow is the 5-minute window (start, µs) of ts.
func jWindow(ts int64) int64 {
	size := (5 * time.Minute).Microseconds()
	return ts - ((ts%size)+size)%size
}

// TestJoinThenAggregateOracle: every join type but full outer, then a count
// per 5-minute window of one side's event time (left's; right outer:
// right's), in append mode, over generated rounds of rows (late, out of
// order, null keys), each round a restart on another state partition count.
// The answer equals the join oracle's rows (jOracle, written without
// package join) counted per window: no row the join emits late (an outer
// row, a match within the range) is lost by the aggregation, which reads
// them with the join's output watermark.
func TestJoinThenAggregateOracle(t *testing.T) {
	for _, typ := range []join.Type{join.Inner, join.LeftOuter, join.RightOuter, join.LeftSemi} {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", typ, seed), func(t *testing.T) {
				left, right := jRounds(seed, 6)
				l, r, sink := jSource("left"), jSource("right"), streamtest.NewSink()
				dir := t.TempDir()
				rng := rand.New(rand.NewPCG(seed, 43))
				col, side := "a_ts", 0
				switch typ {
				case join.RightOuter:
					col, side = "b_ts", 1
				case join.LeftSemi:
					col = "ts"
				}
				for round := range left {
					appendRows(t, l, jBatch(left[round]))
					appendRows(t, r, jBatch(right[round]))
					parts := []int{1, 3, 7}[rng.IntN(3)]
					q := jQuery(typ, l, r, sink, parts).
						Aggregate(flow.Aggregation{Window: &agg.Window{Column: col, Size: 5 * time.Minute},
							Aggregates: []agg.Aggregate{{Kind: agg.Count, As: "n"}}, Mode: agg.Append})
					if _, err := q.Run(context.Background(), engine.Options{CheckpointDir: filepath.Join(dir, "ckpt"), LocalDir: filepath.Join(dir, "local")}); err != nil {
						t.Fatalf("round %d: %v", round, err)
					}
				}
				want := map[int64]int{}
				for _, row := range jOracle(typ, left, right) {
					f := strings.Split(strings.Split(row, "|")[side], ",")
					ts, err := strconv.ParseInt(f[1], 10, 64)
					if err != nil {
						t.Fatalf("oracle row %q: %v", row, err)
					}
					want[jWindow(ts)]++
				}
				got := map[int64]int{}
				for _, ap := range sink.Applied() {
					b := ap.Rows
					for i := 0; i < b.Len; i++ {
						w := b.Column(agg.ColWindowStart).Int64s[i]
						if _, dup := got[w]; dup {
							t.Fatalf("window %d emitted twice", w)
						}
						got[w] = int(b.Column("n").Int64s[i])
					}
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("windows differ from the oracle's\n got %v\nwant %v", got, want)
				}
				if len(want) < 3 {
					t.Fatalf("the oracle expects %d windows: the case checks little", len(want))
				}
			})
		}
	}
}

// TestJoinThenAggregateLifecycle: a left outer join followed by a count
// per 5-minute window (operators 0 and 1) through the lifecycle: its two
// operators' state repartitioned offline 200 -> 8 with every row kept
// (state dump before = after, partition aside), then a source added to the
// right side (source evolution: it starts at its configured start), and
// the windows equal the oracle's over every row read.
func TestJoinThenAggregateLifecycle(t *testing.T) {
	ctx := context.Background()
	left, right := jRounds(11, 4)
	extra := jSource("right2")
	dir := t.TempDir()
	opts := engine.Options{CheckpointDir: filepath.Join(dir, "ckpt"), LocalDir: filepath.Join(dir, "local")}
	l, r, sink := jSource("left"), jSource("right"), streamtest.NewSink()
	query := func(parts int, evolved bool) *flow.Query {
		rs := flow.From("b").Read("right", r)
		if evolved {
			rs = rs.Read("right2", extra)
		}
		return flow.New("join").
			Join(flow.From("a").Read("left", l).WithWatermark("ts", jLeftDelay), rs.WithWatermark("ts", jRightDelay),
				flow.JoinOn{Type: join.LeftOuter, LeftKeys: []string{"k"}, RightKeys: []string{"k"}, Range: flow.Between("ts", "ts", jLo, jHi)}).
			Aggregate(flow.Aggregation{Window: &agg.Window{Column: "a_ts", Size: 5 * time.Minute},
				Aggregates: []agg.Aggregate{{Kind: agg.Count, As: "n"}}, Mode: agg.Append}).
			WriteTo(sink).Trigger(engine.Trigger{Kind: engine.AvailableNow}).
			Conf("spark.sql.streaming.queryEvolution.enableSourceEvolution", "true").
			Conf("spark.sql.shuffle.partitions", "4").
			Conf("spark.sql.streaming.stateStore.partitions", strconv.Itoa(parts))
	}
	dump := func(op int) []string {
		var b strings.Builder
		if _, err := state.Dump(ctx, state.DumpOptions{FS: vfs.Default, Checkpoint: opts.CheckpointDir, Operator: op, Batch: -1}, &b); err != nil {
			t.Fatal(err)
		}
		var rows []string
		for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n")[1:] {
			rows = append(rows, line[:strings.LastIndexByte(line, ',')])
		}
		slices.Sort(rows)
		return rows
	}
	for round := range left {
		appendRows(t, l, jBatch(left[round]))
		evolved := round >= 2
		if !evolved {
			appendRows(t, r, jBatch(right[round]))
		} else {
			// From round 2 the right side's rows come from a second source.
			for i := range right[round] {
				right[round][i].src = "right2"
			}
			appendRows(t, extra, jBatch(right[round]))
		}
		parts := 8
		if round == 0 {
			parts = 200
		}
		if _, err := query(parts, evolved).Run(ctx, opts); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if round != 0 {
			continue
		}
		// Spark's ids: the aggregation is operator 0, the join 1.
		before := [2][]string{dump(0), dump(1)}
		if len(before[1]) < 10 || len(before[0]) < 1 {
			t.Fatalf("state rows of the join %d and of the aggregation %d: too few for the test to mean anything", len(before[1]), len(before[0]))
		}
		res, err := engine.RepartitionOffline(ctx, opts, state.Recorded{}, 8)
		if err != nil {
			t.Fatal(err)
		}
		if n := int64(len(before[0]) + len(before[1])); res.Stats.From != 200 || res.Stats.To != 8 || res.Stats.KeysBefore != n || res.Stats.KeysAfter != n {
			t.Fatalf("repartition %+v, want 200 -> 8 with %d keys", res.Stats, n)
		}
		for op := range 2 {
			if after := dump(op); !slices.Equal(after, before[op]) {
				t.Fatalf("operator %d's state after the repartition differs:\n%s\nbefore:\n%s", op, strings.Join(after, "\n"), strings.Join(before[op], "\n"))
			}
		}
	}
	want := map[int64]int{}
	for _, row := range jOracle(join.LeftOuter, left, right) {
		ts, _ := strconv.ParseInt(strings.Split(strings.Split(row, "|")[0], ",")[1], 10, 64)
		want[jWindow(ts)]++
	}
	got := map[int64]int{}
	for _, ap := range sink.Applied() {
		for i := 0; i < ap.Rows.Len; i++ {
			got[ap.Rows.Column(agg.ColWindowStart).Int64s[i]] += int(ap.Rows.Column("n").Int64s[i])
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(want) < 3 {
		t.Fatalf("windows differ from the oracle's\n got %v\nwant %v", got, want)
	}
}
