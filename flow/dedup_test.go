package flow_test

import (
	"bytes"
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
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/ethstream/ethstream/dedup"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/flow"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// tradeSink keeps every row of every batch once (a re-run batch is
// skipped), in order; with failNext set it fails the next AddBatch.
type tradeSink struct {
	rows     []Trade
	applied  int64
	failNext bool
	failed   bool
}

func (s *tradeSink) Open(context.Context, stream.SinkEnv) error { return nil }
func (s *tradeSink) Description() string                        { return "trades" }
func (s *tradeSink) Close() error                               { return nil }

func (s *tradeSink) AddBatch(_ context.Context, id int64, out *stream.Batch) (stream.SinkProgress, error) {
	if s.failNext {
		s.failNext, s.failed = false, true
		return stream.SinkProgress{}, fmt.Errorf("connection lost")
	}
	if id <= s.applied {
		return stream.SinkProgress{}, nil
	}
	s.applied = id
	at, pair, price := out.Column("at"), out.Column("pair"), out.Column("price")
	for r := 0; r < out.Len; r++ {
		s.rows = append(s.rows, Trade{time.UnixMicro(at.Int64s[r]).UTC(), pair.Strings[r], price.Float64s[r]})
	}
	return stream.SinkProgress{NumOutputRows: int64(out.Len)}, nil
}

// dedupCase is one deduplication query and its oracle.
type dedupCase struct {
	name  string
	build func(q *flow.Query) *flow.Query
	// oracle returns the rows a round's batch emits, and its late and
	// duplicate counts, given the watermark it runs with (wmUs, by which
	// it evicts) and the previous batch's (lateUs, by which it drops late
	// input, Spark 3.4+).
	oracle func() func(batch []Trade, lateUs, wmUs int64) (out []Trade, late, dups int64)
}

const dedupDelay = time.Minute

// firstSeen is the oracle of dropDuplicates: a row not late (its time after
// the watermark) whose key no earlier kept row has is emitted. Eviction
// never changes the answer: a key holding the event time is late once
// evicted.
func firstSeen(key func(Trade) string, watermark bool) func() func([]Trade, int64, int64) ([]Trade, int64, int64) {
	return func() func([]Trade, int64, int64) ([]Trade, int64, int64) {
		seen := map[string]bool{}
		return func(batch []Trade, lateUs, _ int64) (out []Trade, late, dups int64) {
			for _, t := range batch {
				switch k := key(t); {
				case watermark && t.At.UnixMicro() <= lateUs:
					late++
				case seen[k]:
					dups++
				default:
					seen[k] = true
					out = append(out, t)
				}
			}
			return out, late, dups
		}
	}
}

// withinWatermark is the oracle of dropDuplicatesWithinWatermark on the
// pair and price: a kept row holds its key until the end of the first batch whose
// watermark reaches its time plus the delay.
func withinWatermark() func([]Trade, int64, int64) ([]Trade, int64, int64) {
	expires := map[string]int64{}
	return func(batch []Trade, lateUs, wmUs int64) (out []Trade, late, dups int64) {
		for _, t := range batch {
			us := t.At.UnixMicro()
			if us <= lateUs {
				late++
				continue
			}
			k := fmt.Sprint(t.Pair, t.Price)
			if _, ok := expires[k]; ok {
				dups++
				continue
			}
			expires[k] = us + dedupDelay.Microseconds()
			out = append(out, t)
		}
		for k, e := range expires {
			if e <= wmUs {
				delete(expires, k)
			}
		}
		return out, late, dups
	}
}

var dedupCases = []dedupCase{
	{"dropDuplicates(pair,price)", func(q *flow.Query) *flow.Query { return q.DropDuplicates("pair", "price") },
		firstSeen(func(t Trade) string { return fmt.Sprint(t.Pair, t.Price) }, false)},
	{"withWatermark.dropDuplicates(pair,at)", func(q *flow.Query) *flow.Query {
		return q.WithWatermark("at", dedupDelay).DropDuplicates("pair", "at")
	}, firstSeen(func(t Trade) string { return fmt.Sprint(t.Pair, t.At.UnixMicro()) }, true)},
	{"withWatermark.dropDuplicatesWithinWatermark(pair,price)", func(q *flow.Query) *flow.Query {
		return q.WithWatermark("at", dedupDelay).DropDuplicatesWithinWatermark("pair", "price")
	}, withinWatermark},
}

// TestDedupAgainstOracle runs each deduplication over a random feed in
// rounds, each a restart on the same checkpoint, with another state
// partition count in some (an online repartition), an offline repartition
// between two (every stored row kept), and a sink failing midway (the batch
// re-runs): the rows emitted, the late and duplicate counts equal an
// independent recount of first occurrences.
func TestDedupAgainstOracle(t *testing.T) {
	for _, c := range dedupCases {
		for seed := uint64(1); seed <= 2; seed++ {
			t.Run(c.name+"/"+strconv.FormatUint(seed, 10), func(t *testing.T) { dedupRounds(t, c, seed) })
		}
	}
}

func dedupRounds(t *testing.T, c dedupCase, seed uint64) {
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(seed, 41))
	dir := t.TempDir()
	opts := engine.Options{CheckpointDir: filepath.Join(dir, "checkpoint"), LocalDir: filepath.Join(dir, "local")}
	var late, dups int64
	var name string
	opts.Listeners = []engine.Listener{engine.ListenerFunc(func(p *stream.Progress) {
		for _, op := range p.StateOperators {
			name = op.OperatorName
			late += op.NumRowsDroppedByWatermark
			dups += op.CustomMetrics[dedup.MetricDroppedDuplicates]
		}
	})}
	feed, sink := &Feed{}, &tradeSink{applied: -1}
	oracle := c.oracle()
	var want []Trade
	var wantLate, wantDups, maxUs, lateUs int64
	now := at("00:00")
	partitions := []string{"2", "3", "3", "1", "4", "2"}
	for round, parts := range partitions {
		// Trades on a 10-second grid (so rows fall exactly on the watermark
		// and expiries on it), out of order by up to 3 minutes (some late
		// for the 1-minute delay), with few distinct pairs and prices.
		var batch []Trade
		for range 10 + rng.IntN(40) {
			now = now.Add(time.Duration(rng.IntN(4)) * 10 * time.Second)
			ts := now.Add(-time.Duration(rng.IntN(18)) * 10 * time.Second)
			batch = append(batch, Trade{ts.UTC(), []string{"ETH", "BTC", "SOL"}[rng.IntN(3)], float64(1 + rng.IntN(6))})
		}
		wmUs := max(0, maxUs-dedupDelay.Microseconds())
		for _, tr := range batch {
			maxUs = max(maxUs, tr.At.UnixMicro())
		}
		// No no-data batch runs (disabled): the previous batch is the
		// previous round's.
		out, l, d := oracle(batch, lateUs, wmUs)
		lateUs = wmUs
		want, wantLate, wantDups = append(want, out...), wantLate+l, wantDups+d
		feed.Publish(batch...)

		if round == 2 {
			// Offline, as `checkpoint repartition`: every stored row kept.
			before := dedupState(t, opts.CheckpointDir)
			if len(before) == 0 {
				t.Fatal("no state to repartition: the test proves little")
			}
			if _, err := engine.RepartitionOffline(ctx, opts, state.Recorded{}, 5); err != nil {
				t.Fatal(err)
			}
			if after := dedupState(t, opts.CheckpointDir); !slices.Equal(after, before) {
				t.Fatalf("offline repartition: state %q after, %q before", after, before)
			}
			parts = "5"
		}
		sink.failNext = round == 3
		q := c.build(flow.New("dedup").Read("feed", feed)).WriteTo(sink).
			Trigger(engine.Trigger{Kind: engine.AvailableNow}).
			Conf("spark.sql.streaming.queryEvolution.enableSourceEvolution", "true").
			Conf("spark.sql.streaming.noDataMicroBatches.enabled", "false").
			Conf("spark.sql.streaming.stateStore.partitions", parts)
		_, err := q.Run(ctx, opts)
		if round == 3 {
			if err == nil || !sink.failed {
				t.Fatalf("round %d: the sink's failure did not fail the run: %v", round, err)
			}
			_, err = q.Run(ctx, opts)
		}
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	if wantDups == 0 || len(want) == 0 {
		t.Fatalf("the oracle kept %d rows and dropped %d duplicates: the test proves little", len(want), wantDups)
	}
	if !slices.Equal(sink.rows, want) {
		t.Errorf("emitted %d rows, the oracle %d:\n%v\n%v", len(sink.rows), len(want), sink.rows, want)
	}
	if late != wantLate || dups != wantDups {
		t.Errorf("progress: %d late and %d duplicate rows, the oracle %d and %d", late, dups, wantLate, wantDups)
	}
	if wantName := dedup.OperatorName; strings.Contains(c.name, "Within") && name != dedup.OperatorNameWithinWatermark || !strings.Contains(c.name, "Within") && name != wantName {
		t.Errorf("operatorName %q", name)
	}
}

// dedupState is operator 0's state rows at the last batch, partition aside.
func dedupState(t *testing.T, ckpt string) []string {
	t.Helper()
	var b bytes.Buffer
	if _, err := state.Dump(context.Background(), state.DumpOptions{FS: vfs.Default, Checkpoint: ckpt, Operator: 0, Batch: -1}, &b); err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n")[1:] {
		rows = append(rows, line[:strings.LastIndexByte(line, ',')])
	}
	slices.Sort(rows)
	return rows
}

// TestDedupEvictionBoundary: a key leaves state at the batch whose
// watermark equals its event time (dropDuplicates with the event time
// among the keys) or its expiry (WithinWatermark: event time + delay), as
// Spark's evictions by "<= watermark"; a row of the key after that, not
// late, is emitted again.
func TestDedupEvictionBoundary(t *testing.T) {
	for _, within := range []bool{false, true} {
		t.Run(strconv.FormatBool(within), func(t *testing.T) {
			dir := t.TempDir()
			opts := engine.Options{CheckpointDir: filepath.Join(dir, "checkpoint"), LocalDir: filepath.Join(dir, "local")}
			feed, sink := &Feed{}, &tradeSink{applied: -1}
			run := func(trades ...Trade) {
				t.Helper()
				feed.Publish(trades...)
				q := flow.New("dedup").Read("feed", feed).WithWatermark("at", dedupDelay)
				if within {
					q = q.DropDuplicatesWithinWatermark("pair")
				} else {
					q = q.DropDuplicates("pair", "at")
				}
				q = q.WriteTo(sink).Trigger(engine.Trigger{Kind: engine.AvailableNow}).
					Conf("spark.sql.streaming.queryEvolution.enableSourceEvolution", "true").
					Conf("spark.sql.streaming.noDataMicroBatches.enabled", "false")
				if _, err := q.Run(t.Context(), opts); err != nil {
					t.Fatal(err)
				}
			}
			first := at("00:01")
			if within {
				first = at("00:00") // expires at 00:01
			}
			run(Trade{first, "ETH", 1}, Trade{at("00:02"), "BTC", 1})
			run(Trade{at("00:03"), "SOL", 1}) // watermark 00:01: ETH leaves
			if got := dedupState(t, opts.CheckpointDir); len(got) != 2 {
				t.Fatalf("state after the batch at watermark 00:01: %q, want BTC and SOL", got)
			}
			// Watermark 00:02: not late, and no longer a duplicate for
			// WithinWatermark (dropDuplicates keys it by its new time).
			run(Trade{at("00:03").Add(-30 * time.Second), "ETH", 2})
			if n := len(sink.rows); n != 4 {
				t.Fatalf("emitted %v, want every row", sink.rows)
			}
		})
	}
}

// TestDedupCrashLoop crashes dropDuplicatesWithinWatermark at every write
// of its checkpoint (keeping none of the unsynced data) during a run over
// half the feed, then restarts it on the whole feed, every other time with
// another partition count: the rows emitted equal the oracle's for the
// batches the checkpoint's offset log holds, for every crash point.
func TestDedupCrashLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("a run per write")
	}
	var trades []Trade
	rng := rand.New(rand.NewPCG(41, 41))
	now := at("00:00")
	for range 60 {
		now = now.Add(time.Duration(rng.IntN(4)) * 10 * time.Second)
		ts := now.Add(-time.Duration(rng.IntN(18)) * 10 * time.Second)
		trades = append(trades, Trade{ts.UTC(), []string{"ETH", "BTC"}[rng.IntN(2)], float64(1 + rng.IntN(4))})
	}
	half := len(trades) / 2
	query := func(feed *Feed, sink *tradeSink, parts string) *flow.Query {
		return flow.New("dedup").Read("feed", feed).WithWatermark("at", dedupDelay).DropDuplicatesWithinWatermark("pair", "price").
			WriteTo(sink).Trigger(engine.Trigger{Kind: engine.AvailableNow}).
			Conf("spark.sql.streaming.queryEvolution.enableSourceEvolution", "true").
			Conf("spark.sql.streaming.noDataMicroBatches.enabled", "false").
			Conf("spark.sql.streaming.stateStore.partitions", parts)
	}
	expect := func(splits ...[]Trade) []Trade {
		oracle := withinWatermark()
		var want []Trade
		var maxUs, lateUs int64
		for _, b := range splits {
			wmUs := max(0, maxUs-dedupDelay.Microseconds())
			out, _, _ := oracle(b, lateUs, wmUs)
			lateUs = wmUs
			want = append(want, out...)
			for _, tr := range b {
				maxUs = max(maxUs, tr.At.UnixMicro())
			}
		}
		return want
	}
	crashes := 0
	for i := 0; ; i++ {
		mem := vfs.NewCrashableMem()
		inj := &faultAt{i: i}
		feed, sink := &Feed{}, &tradeSink{applied: -1}
		feed.Publish(trades[:half]...)
		opts := engine.Options{CheckpointDir: "/checkpoint", LocalDir: t.TempDir(), FS: errorfs.Wrap(mem, inj)}
		_, err := query(feed, sink, "2").Run(t.Context(), opts)
		if !inj.hit {
			if err != nil {
				t.Fatalf("write %d: no crash, the run failed: %v", i, err)
			}
			break
		}
		crashes++
		opts.FS = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		// Batch 0 read half the feed if its offsets survived the crash;
		// otherwise the restart's batch 0 reads it all.
		want := expect(trades)
		if _, err := opts.FS.Stat("/checkpoint/offsets/0"); err == nil {
			want = expect(trades[:half], trades[half:])
		}
		feed.Publish(trades[half:]...)
		if _, err := query(feed, sink, []string{"2", "3"}[i%2]).Run(t.Context(), opts); err != nil {
			t.Fatalf("crash at write %d (%s): the restart failed: %v", i, inj.hitOp, err)
		}
		if !slices.Equal(sink.rows, want) {
			t.Fatalf("crash at write %d (%s): emitted %v, the oracle %v", i, inj.hitOp, sink.rows, want)
		}
	}
	if crashes < 20 {
		t.Fatalf("only %d crash points: the loop proves little", crashes)
	}
	t.Logf("%d crash points", crashes)
}

// TestDedupColumnsChangedRefused: a restart with other deduplication
// columns fails the state schema check, as Spark's, before anything is
// written; WithinWatermark on the same columns is another state layout.
func TestDedupColumnsChangedRefused(t *testing.T) {
	dir := t.TempDir()
	opts := engine.Options{CheckpointDir: filepath.Join(dir, "checkpoint"), LocalDir: filepath.Join(dir, "local")}
	feed, sink := &Feed{}, &tradeSink{applied: -1}
	feed.Publish(Trade{at("12:01"), "ETH", 10}, Trade{at("12:02"), "ETH", 10})
	q := func() *flow.Query {
		return flow.New("dedup").Read("feed", feed).WithWatermark("at", dedupDelay).WriteTo(sink).
			Trigger(engine.Trigger{Kind: engine.AvailableNow}).
			Conf("spark.sql.streaming.queryEvolution.enableSourceEvolution", "true")
	}
	if _, err := q().DropDuplicates("pair").Run(t.Context(), opts); err != nil {
		t.Fatal(err)
	}
	feed.Publish(Trade{at("12:03"), "BTC", 1})
	for name, changed := range map[string]*flow.Query{
		"columns":         q().DropDuplicates("pair", "price"),
		"withinWatermark": q().DropDuplicatesWithinWatermark("pair"),
	} {
		before := treeOf(t, opts.CheckpointDir)
		_, err := changed.Run(t.Context(), opts)
		if errcode.Code(err) != errcode.StateSchemaMismatch {
			t.Fatalf("%s changed: got %v, want STATE_SCHEMA_MISMATCH", name, err)
		}
		if after := treeOf(t, opts.CheckpointDir); after != before {
			t.Fatalf("%s changed: a refused start changed the checkpoint", name)
		}
	}
	if _, err := q().DropDuplicates("pair").Run(t.Context(), opts); err != nil || len(sink.rows) != 2 {
		t.Fatalf("the same query resumes: %v, rows %v", err, sink.rows)
	}
}
