package flow_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
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
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// jRounds generates n rounds of rows for both sides (jGen), then the
// sentinel round that moves the watermark past them all.
func jRounds(seed uint64, n int) (left, right [][]jrow) {
	rng := rand.New(rand.NewPCG(seed, 7))
	now, id := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC).UnixMicro(), int64(0)
	for range n {
		left = append(left, jGen(rng, now, 8, id))
		right = append(right, jGen(rng, now, 8, id+100))
		id += 200
		now += int64(2 * time.Minute / time.Microsecond)
	}
	far := now + int64(time.Hour/time.Microsecond)
	left = append(left, []jrow{{k: jSentinel, ts: far, id: -1}})
	right = append(right, []jrow{{k: jSentinel + "-r", ts: far, id: -2}})
	for _, rounds := range [][][]jrow{left, right} {
		src := "left"
		if &rounds[0] == &right[0] {
			src = "right"
		}
		for _, rows := range rounds {
			for i := range rows {
				rows[i].src = src
			}
		}
	}
	return left, right
}

// jDump is operator 0's state rows, partition aside, sorted.
func jDump(t *testing.T, fs vfs.FS, ckpt string) []string {
	t.Helper()
	var b bytes.Buffer
	if _, err := state.Dump(context.Background(), state.DumpOptions{FS: fs, Checkpoint: ckpt, Operator: 0, Batch: -1}, &b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	var rows []string
	for _, line := range lines[1:] {
		rows = append(rows, line[:strings.LastIndexByte(line, ',')])
	}
	slices.Sort(rows)
	return append([]string{lines[0]}, rows...)
}

// TestJoinOfflineRepartition: a full outer join's state on 200 partitions
// (Spark's default) repartitioned offline to 8 (`checkpoint repartition`:
// engine.RepartitionOffline with state.Recorded, no query definition)
// keeps every row (the state dump before = after, partition aside, as a
// multiset), shows each row's side and store, and the query resumes on it
// with the oracle's answer.
func TestJoinOfflineRepartition(t *testing.T) {
	ctx := context.Background()
	left, right := jRounds(5, 2)
	dir := t.TempDir()
	opts := engine.Options{CheckpointDir: filepath.Join(dir, "ckpt"), LocalDir: filepath.Join(dir, "local")}
	l, r, sink := jSource("left"), jSource("right"), streamtest.NewSink()
	run := func(round int, parts int) {
		t.Helper()
		if err := l.Append(jBatch(left[round])); err != nil {
			t.Fatal(err)
		}
		if err := r.Append(jBatch(right[round])); err != nil {
			t.Fatal(err)
		}
		if _, err := jQuery(join.FullOuter, l, r, sink, parts).Run(ctx, opts); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	run(0, 200)
	// The sides' watermarks combine by the policy the offsets log records.
	if b, err := os.ReadFile(filepath.Join(opts.CheckpointDir, "offsets", "0")); err != nil || !strings.Contains(string(b), `"spark.sql.streaming.multipleWatermarkPolicy":"min"`) {
		t.Fatalf("offsets/0 %s: the watermark policy is not recorded (%v)", b, err)
	}
	before := jDump(t, vfs.Default, opts.CheckpointDir)
	if len(before) < 10 {
		t.Fatalf("state %q: too few rows for the test to mean anything", before)
	}
	if h := before[0]; !strings.HasPrefix(h, "side,store,k,index,value") {
		t.Fatalf("state dump header %q: want the side and store first", h)
	}
	for _, want := range []string{"left,keyToNumValues,", "left,keyWithIndexToValue,", "right,keyToNumValues,", "right,keyWithIndexToValue,"} {
		if !slices.ContainsFunc(before, func(s string) bool { return strings.HasPrefix(s, want) }) {
			t.Fatalf("state dump has no row of %s: %q", want, before)
		}
	}
	res, err := engine.RepartitionOffline(ctx, opts, state.Recorded{}, 8)
	if err != nil {
		t.Fatal(err)
	}
	if n := int64(len(before) - 1); res.Stats.From != 200 || res.Stats.To != 8 || res.Stats.KeysBefore != n || res.Stats.KeysAfter != n {
		t.Fatalf("repartition %+v, want 200 -> 8 with %d keys", res.Stats, n)
	}
	if after := jDump(t, vfs.Default, opts.CheckpointDir); !slices.Equal(after, before) {
		t.Fatalf("state after the repartition:\n%s\nbefore:\n%s", strings.Join(after, "\n"), strings.Join(before, "\n"))
	}
	run(1, 8)
	run(2, 8)
	if got, want := jSinkRows(t, sink, false), jOracle(join.FullOuter, left, right); !slices.Equal(got, want) {
		t.Fatalf("after the repartition: missing %q, extra %q", multisetMinus(want, got), multisetMinus(got, want))
	}
}

// TestJoinCrashLoop crashes a left outer join at every write of its
// checkpoint (offsets, state versions, commits; pebble's errorfs over a
// crashable memory FS, then CrashClone keeping only synced data), restarts
// it on the clone with another partition count, and checks the answer
// against the oracle: no joined row lost or emitted twice.
func TestJoinCrashLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("a run per write")
	}
	left, right := jRounds(9, 2)
	// The crashed run reads round 0; the restart reads round 1 and the
	// sentinels.
	crashes := 0
	for i := 0; ; i++ {
		mem := vfs.NewCrashableMem()
		inj := &faultAt{i: i}
		l, r, sink := jSource("left"), jSource("right"), streamtest.NewSink()
		_ = l.Append(jBatch(left[0]))
		_ = r.Append(jBatch(right[0]))
		opts := engine.Options{CheckpointDir: "/checkpoint", LocalDir: t.TempDir(), FS: errorfs.Wrap(mem, inj)}
		_, err := jQuery(join.LeftOuter, l, r, sink, 2).Run(t.Context(), opts)
		if !inj.hit {
			if err != nil {
				t.Fatalf("write %d: no crash, the run failed: %v", i, err)
			}
			break
		}
		crashes++
		opts.FS = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		// Batch 0 read round 0 alone if its offsets survived; the restart
		// then reads the rest in batch 1 (or later), in a new run if batch
		// 0 committed before the crash.
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
		// A no-data batch the crashed run logged (offsets/1, with round 0
		// committed) runs before round 1: round 1 then drops late input by
		// its own watermark, otherwise by batch 0's.
		_, noData := opts.FS.Stat("/checkpoint/offsets/1")
		want := jOracleRuns(join.LeftOuter, lr, rr, func(round int) bool { return round == 0 || committed == nil },
			func(int) bool { return noData == nil })
		_ = l.Append(jBatch(slices.Concat(left[1], left[2])))
		_ = r.Append(jBatch(slices.Concat(right[1], right[2])))
		if _, err := jQuery(join.LeftOuter, l, r, sink, []int{2, 3}[i%2]).Run(t.Context(), opts); err != nil {
			t.Fatalf("crash at write %d (%s): the restart failed: %v", i, inj.hitOp, err)
		}
		if got := jSinkRows(t, sink, false); !slices.Equal(got, want) {
			t.Fatalf("crash at write %d (%s): missing %q, extra %q", i, inj.hitOp, multisetMinus(want, got), multisetMinus(got, want))
		}
	}
	if crashes < 20 {
		t.Fatalf("only %d crash points: the loop proves little", crashes)
	}
	t.Logf("%d crash points", crashes)
}

// TestJoinChangeRefused: a restart with another join type or other
// equi-join columns fails the state schema check (STATE_SCHEMA_MISMATCH,
// the restart rule Spark states: not allowed) before anything is written;
// the same query then resumes.
func TestJoinChangeRefused(t *testing.T) {
	dir := t.TempDir()
	opts := engine.Options{CheckpointDir: filepath.Join(dir, "ckpt"), LocalDir: filepath.Join(dir, "local")}
	l, r, sink := jSource("left"), jSource("right"), streamtest.NewSink()
	left, right := jRounds(3, 1)
	_ = l.Append(jBatch(left[0]))
	_ = r.Append(jBatch(right[0]))
	q := func(typ join.Type, keys ...string) *flow.Query {
		return flow.New("join").
			Join(flow.From("a").Read("left", l).WithWatermark("ts", jLeftDelay),
				flow.From("b").Read("right", r).WithWatermark("ts", jRightDelay),
				flow.JoinOn{Type: typ, LeftKeys: keys, RightKeys: keys, Range: flow.Between("ts", "ts", jLo, jHi)}).
			WriteTo(sink).Trigger(engine.Trigger{Kind: engine.AvailableNow}).
			Conf("spark.sql.streaming.queryEvolution.enableSourceEvolution", "true").
			Conf("spark.sql.shuffle.partitions", "3")
	}
	if _, err := q(join.LeftOuter, "k").Run(t.Context(), opts); err != nil {
		t.Fatal(err)
	}
	_ = l.Append(jBatch(left[1]))
	for name, changed := range map[string]*flow.Query{
		"join type":         q(join.Inner, "k"),
		"equi-join columns": q(join.LeftOuter, "k", "id"),
	} {
		before := treeOf(t, opts.CheckpointDir)
		_, err := changed.Run(t.Context(), opts)
		if errcode.Code(err) != errcode.StateSchemaMismatch || !strings.Contains(err.Error(), name) {
			t.Fatalf("%s changed: got %v, want STATE_SCHEMA_MISMATCH naming it", name, err)
		}
		// Each schema names each side's columns once, as text: the
		// spec's JSON copy of them (for state dump) is left out.
		const cols = "values=k string,ts timestamp,id int64,source string)"
		if msg := err.Error(); strings.Count(msg, cols) != 4 || strings.Contains(msg, `"name"`) ||
			!strings.Contains(msg, "spec(join/v3 stateFormatVersion=2 type=LeftOuter left(keys=k; "+cols+" right(keys=k") {
			t.Fatalf("%s changed: the message should name each side's columns once per schema: %v", name, err)
		}
		if after := treeOf(t, opts.CheckpointDir); after != before {
			t.Fatalf("%s changed: a refused start changed the checkpoint", name)
		}
	}
	if _, err := q(join.LeftOuter, "k").Run(t.Context(), opts); err != nil {
		t.Fatalf("the same query resumes: %v", err)
	}
}

// TestJoinSourceEvolution: a side's sources evolve as a one-input query's
// do: a source added to the right side starts from its beginning, a
// source removed from the left side is tombstoned, and the answer is the
// oracle's over every row the sides read.
func TestJoinSourceEvolution(t *testing.T) {
	dir := t.TempDir()
	opts := engine.Options{CheckpointDir: filepath.Join(dir, "ckpt"), LocalDir: filepath.Join(dir, "local")}
	left, right := jRounds(11, 3)
	l1, l2, r1, r2 := jSource("l1"), jSource("l2"), jSource("r1"), jSource("r2")
	sink := streamtest.NewSink()
	tag := func(rows []jrow, src string) []jrow {
		out := slices.Clone(rows)
		for i := range out {
			out[i].src = src
		}
		return out
	}
	run := func(ls, rs []string, srcs map[string]stream.Source) {
		t.Helper()
		lside, rside := flow.From("a"), flow.From("b")
		for _, n := range ls {
			lside = lside.Read(n, srcs[n])
		}
		for _, n := range rs {
			rside = rside.Read(n, srcs[n])
		}
		_, err := flow.New("join").
			Join(lside.WithWatermark("ts", jLeftDelay), rside.WithWatermark("ts", jRightDelay),
				flow.JoinOn{Type: join.FullOuter, LeftKeys: []string{"k"}, RightKeys: []string{"k"}, Range: flow.Between("ts", "ts", jLo, jHi)}).
			WriteTo(sink).Trigger(engine.Trigger{Kind: engine.AvailableNow}).
			Conf("spark.sql.streaming.queryEvolution.enableSourceEvolution", "true").
			Conf("spark.sql.shuffle.partitions", "3").
			Run(t.Context(), opts)
		if err != nil {
			t.Fatal(err)
		}
	}
	srcs := map[string]stream.Source{"l1": l1, "l2": l2, "r1": r1, "r2": r2}
	// Run 0: l1 and l2 on the left, r1 on the right.
	lr := [][]jrow{tag(left[0], "l1")}
	rr := [][]jrow{tag(right[0], "r1")}
	_ = l1.Append(jBatch(lr[0]))
	_ = r1.Append(jBatch(rr[0]))
	run([]string{"l1", "l2"}, []string{"r1"}, srcs)
	// Run 1: r2 added on the right, with rows of its own.
	a, b := tag(left[1], "l2"), tag(right[1], "r2")
	_ = l2.Append(jBatch(a))
	_ = r2.Append(jBatch(b))
	lr, rr = append(lr, a), append(rr, b)
	run([]string{"l1", "l2"}, []string{"r1", "r2"}, srcs)
	// Run 2: l1 removed (tombstoned): its new rows are not read.
	_ = l1.Append(jBatch(tag(left[2], "l1")))
	a, b = tag(left[3], "l2"), tag(right[3], "r1")
	_ = l2.Append(jBatch(a))
	_ = r1.Append(jBatch(b))
	lr, rr = append(lr, a), append(rr, b)
	run([]string{"l2"}, []string{"r1", "r2"}, srcs)
	if got, want := jSinkRows(t, sink, false), jOracle(join.FullOuter, lr, rr); !slices.Equal(got, want) {
		t.Fatalf("missing %q, extra %q", multisetMinus(want, got), multisetMinus(got, want))
	}
}
