package flow_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/flow"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/join"
	"github.com/ethstream/ethstream/stream"
)

// jSideQuery is the inner join of jQuery with a deduplication on the
// sides dedup names ("a", "b"), by k and ts.
func jSideQuery(l, r stream.Source, sink stream.Sink, within bool, dedup ...string) *flow.Query {
	a := flow.From("a").Read("left", l).WithWatermark("ts", jLeftDelay)
	b := flow.From("b").Read("right", r).WithWatermark("ts", jRightDelay)
	for _, s := range []*flow.Side{a, b} {
		if !slices.Contains(dedup, map[*flow.Side]string{a: "a", b: "b"}[s]) {
			continue
		}
		if within {
			s.DropDuplicatesWithinWatermark("k")
		} else {
			s.DropDuplicates("k", "ts")
		}
	}
	return flow.New("join").
		Join(a, b, flow.JoinOn{Type: join.Inner, LeftKeys: []string{"k"}, RightKeys: []string{"k"}, Range: flow.Between("ts", "ts", jLo, jHi)}).
		WriteTo(sink).
		Trigger(engine.Trigger{Kind: engine.AvailableNow}).
		Conf("spark.sql.streaming.queryEvolution.enableSourceEvolution", "true").
		Conf("spark.sql.shuffle.partitions", "3")
}

// TestJoinSideDedup: a deduplication on the left side of an inner join,
// Spark's a.withWatermark(...).dropDuplicates("k", "ts").join(b, ...). The
// left side reads each row twice (once in the same batch, once in the
// next): each joined row is emitted once. The ids are Spark's pre-order
// ones (the join 0, the deduplication 1: state/0 and state/1, and
// stateOperators[] in that order with Spark's names), the shape record is
// v6 with the deduplication's side, and removing the deduplication is
// refused without changing the checkpoint.
func TestJoinSideDedup(t *testing.T) {
	dir := t.TempDir()
	var last *stream.Progress
	opts := engine.Options{CheckpointDir: filepath.Join(dir, "ckpt"), LocalDir: filepath.Join(dir, "local"),
		Listeners: []engine.Listener{engine.ListenerFunc(func(p *stream.Progress) {
			if p.NumInputRows > 0 {
				last = p
			}
		})}}
	l, r, sink := jSource("left"), jSource("right"), streamtest.NewSink()
	t0 := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC).UnixMicro()
	min := time.Minute.Microseconds()
	left := []jrow{{k: "a", ts: t0, id: 1}, {k: "a", ts: t0, id: 2}, {k: "b", ts: t0 + min, id: 3}, {k: "", ts: t0, id: 4}, {k: "", ts: t0, id: 5}}
	right := []jrow{{k: "a", ts: t0, id: 10}, {k: "b", ts: t0, id: 11}}
	for i := range left {
		left[i].src = "left"
	}
	for i := range right {
		right[i].src = "right"
	}
	_ = l.Append(jBatch(left))
	_ = r.Append(jBatch(right))
	if _, err := jSideQuery(l, r, sink, false, "a").Run(t.Context(), opts); err != nil {
		t.Fatal(err)
	}
	// The next batch reads the first left row again: a duplicate of the
	// stored key, dropped before the join.
	again := []jrow{{k: "a", ts: t0, id: 6, src: "left"}}
	_ = l.Append(jBatch(again))
	if _, err := jSideQuery(l, r, sink, false, "a").Run(t.Context(), opts); err != nil {
		t.Fatal(err)
	}
	got := jSinkRows(t, sink, false)
	want := []string{
		jRender(&left[0], &right[0]),
		jRender(&left[2], &right[1]),
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("joined rows %q, want each left key once: %q", got, want)
	}
	if last == nil || len(last.StateOperators) != 2 || last.StateOperators[0].OperatorName != join.OperatorName || last.StateOperators[1].OperatorName != "dedupe" {
		t.Fatalf("stateOperators of the last data batch: %+v, want the join (0) then the deduplication (1)", last)
	}
	if d := last.StateOperators[1]; d.CustomMetrics["numDroppedDuplicateRows"] != 1 || d.NumRowsTotal != 3 {
		t.Fatalf("the deduplication's progress %+v: want 1 duplicate dropped, 3 keys stored (a, b, and the two null-key rows as one: a null is a value to a deduplication)", d)
	}
	for _, id := range []string{"0", "1"} {
		if _, err := os.Stat(filepath.Join(opts.CheckpointDir, "state", id)); err != nil {
			t.Fatalf("state/%s: %v", id, err)
		}
	}
	rec, err := os.ReadFile(filepath.Join(opts.CheckpointDir, "shape", "0"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(rec), "v6\n") || !strings.Contains(string(rec), `"side":"left"`) || !strings.Contains(string(rec), `"numbering":"preOrder"`) {
		t.Fatalf("shape record: want v6, Spark's numbering and the deduplication's side:\n%s", rec)
	}
	before := treeOf(t, opts.CheckpointDir)
	for name, changed := range map[string]*flow.Query{
		"removed":              jSideQuery(l, r, sink, false, ""),
		"moved to the right":   jSideQuery(l, r, sink, false, "b"),
		"added on the right":   jSideQuery(l, r, sink, false, "a", "b"),
		"within the watermark": jSideQuery(l, r, sink, true, "a"),
	} {
		_, err := changed.Run(t.Context(), opts)
		if errcode.Code(err) != errcode.StateSchemaMismatch {
			t.Fatalf("deduplication %s: got %v, want STATE_SCHEMA_MISMATCH", name, err)
		}
		if after := treeOf(t, opts.CheckpointDir); after != before {
			t.Fatalf("deduplication %s: a refused start changed the checkpoint", name)
		}
	}
}

// jDedupIDQuery is jQuery with a deduplication by id on each side (the
// right one within the watermark): every id is read once, so the answer is
// the join's alone, unless a crash leaves a deduplication's state ahead of
// the join's (a re-run batch's rows would then be dropped as duplicates).
func jDedupIDQuery(typ join.Type, l, r stream.Source, sink stream.Sink, parts int) *flow.Query {
	return flow.New("join").
		Join(flow.From("a").Read("left", l).WithWatermark("ts", jLeftDelay).DropDuplicates("id"),
			flow.From("b").Read("right", r).WithWatermark("ts", jRightDelay).DropDuplicatesWithinWatermark("id"),
			flow.JoinOn{Type: typ, LeftKeys: []string{"k"}, RightKeys: []string{"k"}, Range: flow.Between("ts", "ts", jLo, jHi)}).
		WriteTo(sink).
		Trigger(engine.Trigger{Kind: engine.AvailableNow}).
		Conf("spark.sql.streaming.queryEvolution.enableSourceEvolution", "true").
		Conf("spark.sql.shuffle.partitions", "4").
		Conf("spark.sql.streaming.stateStore.partitions", strconv.Itoa(parts))
}

// TestJoinSideDedupCrashLoop crashes a left outer join with a deduplication
// on each side at every write of its checkpoint (the three operators'
// state versions among them; errorfs over a crashable memory FS, then
// CrashClone keeping only synced data), restarts it on the clone with
// another partition count, and checks the answer against the join's
// oracle: every id is unique, so a row lost to a deduplication whose state
// committed a batch the join's did not would show.
func TestJoinSideDedupCrashLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("a run per write")
	}
	left, right := jRounds(11, 2)
	crashes := 0
	for i := 0; ; i++ {
		mem := vfs.NewCrashableMem()
		inj := &faultAt{i: i}
		l, r, sink := jSource("left"), jSource("right"), streamtest.NewSink()
		_ = l.Append(jBatch(left[0]))
		_ = r.Append(jBatch(right[0]))
		opts := engine.Options{CheckpointDir: "/checkpoint", LocalDir: t.TempDir(), FS: errorfs.Wrap(mem, inj)}
		_, err := jDedupIDQuery(join.LeftOuter, l, r, sink, 2).Run(t.Context(), opts)
		if !inj.hit {
			if err != nil {
				t.Fatalf("write %d: no crash, the run failed: %v", i, err)
			}
			break
		}
		crashes++
		opts.FS = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		var lr, rr [][]jrow
		_, lost := opts.FS.Stat("/checkpoint/offsets/0")
		_, committed := opts.FS.Stat("/checkpoint/commits/0")
		if lost != nil {
			lr = [][]jrow{slices.Concat(left[0], left[1], left[2])}
			rr = [][]jrow{slices.Concat(right[0], right[1], right[2])}
		} else {
			lr = [][]jrow{left[0], slices.Concat(left[1], left[2])}
			rr = [][]jrow{right[0], slices.Concat(right[1], right[2])}
		}
		_, noData := opts.FS.Stat("/checkpoint/offsets/1")
		want := jOracleRuns(join.LeftOuter, lr, rr, func(round int) bool { return round == 0 || committed == nil },
			func(int) bool { return noData == nil })
		_ = l.Append(jBatch(slices.Concat(left[1], left[2])))
		_ = r.Append(jBatch(slices.Concat(right[1], right[2])))
		if _, err := jDedupIDQuery(join.LeftOuter, l, r, sink, []int{2, 3}[i%2]).Run(t.Context(), opts); err != nil {
			t.Fatalf("crash at write %d (%s): the restart failed: %v", i, inj.hitOp, err)
		}
		if got := jSinkRows(t, sink, false); !slices.Equal(got, want) {
			t.Fatalf("crash at write %d (%s): missing %q, extra %q", i, inj.hitOp, multisetMinus(want, got), multisetMinus(got, want))
		}
	}
	if crashes < 30 {
		t.Fatalf("only %d crash points: the loop proves little", crashes)
	}
	t.Logf("%d crash points", crashes)
}

// TestJoinSideDedupWhereAbove: a WHERE conjunct on a deduplicated side
// runs after the deduplication (Spark pushes no filter through a
// Deduplicate): the left side reads (a, id 1) then (a, id 2), deduplicated
// by k, under WHERE a_id = 2. The deduplication keeps id 1, which the
// WHERE then drops: no row, as in Spark. Pushed below the deduplication,
// the WHERE would let id 2 through and join it.
func TestJoinSideDedupWhereAbove(t *testing.T) {
	dir := t.TempDir()
	opts := engine.Options{CheckpointDir: filepath.Join(dir, "ckpt"), LocalDir: filepath.Join(dir, "local")}
	l, r, sink := jSource("left"), jSource("right"), streamtest.NewSink()
	t0 := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC).UnixMicro()
	_ = l.Append(jBatch([]jrow{{k: "a", ts: t0, id: 1}, {k: "a", ts: t0, id: 2}, {k: "b", ts: t0, id: 3}}))
	_ = r.Append(jBatch([]jrow{{k: "a", ts: t0, id: 10}, {k: "b", ts: t0, id: 11}}))
	q := flow.New("join").
		Join(flow.From("a").Read("left", l).WithWatermark("ts", jLeftDelay).DropDuplicates("k"),
			flow.From("b").Read("right", r).WithWatermark("ts", jRightDelay),
			flow.JoinOn{Type: join.Inner, LeftKeys: []string{"k"}, RightKeys: []string{"k"}, Range: flow.Between("ts", "ts", jLo, jHi),
				Where: flow.Col("a_id").Eq(int64(2))}).
		WriteTo(sink).Trigger(engine.Trigger{Kind: engine.AvailableNow}).
		Conf("spark.sql.streaming.queryEvolution.enableSourceEvolution", "true").
		Conf("spark.sql.shuffle.partitions", "2")
	if _, err := q.Run(t.Context(), opts); err != nil {
		t.Fatal(err)
	}
	if got := jSinkRows(t, sink, false); len(got) != 0 {
		t.Fatalf("joined rows %q, want none: the WHERE ran below the deduplication", got)
	}
}

// TestJoinSideDedupRefusesRetractions: a deduplication on a side whose
// source retracts rows is refused when the plan is built, naming the
// deduplication (RETRACTION_UNSUPPORTED), as on a one-input query.
func TestJoinSideDedupRefusesRetractions(t *testing.T) {
	l, r := jSource("left"), jSource("right")
	r.Retracting = true
	_, err := jSideQuery(l, r, streamtest.NewSink(), false, "b").Build()
	if errcode.Code(err) != "RETRACTION_UNSUPPORTED" || !strings.Contains(err.Error(), `source "right"`) {
		t.Fatalf("got %v, want RETRACTION_UNSUPPORTED naming the right side's source", err)
	}
}
