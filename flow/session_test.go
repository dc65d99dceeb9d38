package flow_test

import (
	"bytes"
	"cmp"
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
	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/flow"
	"github.com/ethstream/ethstream/session"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

const (
	sessionGap   = 30 * time.Second
	sessionDelay = time.Minute
)

// sessionSink keeps every row of every batch once (a re-run batch is
// skipped), rendered; with failNext set it fails the next AddBatch.
type sessionSink struct {
	rows     []string
	applied  int64
	failNext bool
	failed   bool
}

func (s *sessionSink) Open(context.Context, stream.SinkEnv) error { return nil }
func (s *sessionSink) Description() string                        { return "sessions" }
func (s *sessionSink) Close() error                               { return nil }

func (s *sessionSink) AddBatch(_ context.Context, id int64, out *stream.Batch) (stream.SinkProgress, error) {
	if s.failNext {
		s.failNext, s.failed = false, true
		return stream.SinkProgress{}, fmt.Errorf("connection lost")
	}
	if id <= s.applied {
		return stream.SinkProgress{}, nil
	}
	s.applied = id
	var rows []string
	for r := 0; r < out.Len; r++ {
		rows = append(rows, fmt.Sprintf("%s [%s, %s) trades=%d high=%g", out.Column("pair").Strings[r],
			time.UnixMicro(out.Column(session.ColStart).Int64s[r]).UTC().Format("15:04:05"),
			time.UnixMicro(out.Column(session.ColEnd).Int64s[r]).UTC().Format("15:04:05"),
			out.Column("trades").Int64s[r], out.Column("high").Float64s[r]))
	}
	slices.Sort(rows)
	s.rows = append(s.rows, rows...)
	return stream.SinkProgress{NumOutputRows: int64(out.Len)}, nil
}

// sessionOracle recounts the sessions of the pairs from the trades
// themselves: the rows not yet emitted, per pair, sorted by time and cut
// where a trade comes more than the gap after the running end; a session
// is emitted (and its trades forgotten) once the watermark reaches its
// end. A trade whose own session [t, t+gap) ends at or before the
// previous batch's watermark (lateUs, Spark 3.4+) is late.
func sessionOracle() func(batch []Trade, lateUs, wmUs int64) (out []string, late int64) {
	open := map[string][]Trade{}
	gap := sessionGap.Microseconds()
	return func(batch []Trade, lateUs, wmUs int64) (out []string, late int64) {
		for _, t := range batch {
			if t.At.UnixMicro()+gap <= lateUs {
				late++
				continue
			}
			open[t.Pair] = append(open[t.Pair], t)
		}
		for pair, ts := range open {
			slices.SortStableFunc(ts, func(a, b Trade) int { return cmp.Compare(a.At.UnixMicro(), b.At.UnixMicro()) })
			var keep []Trade
			for i := 0; i < len(ts); {
				start, end := ts[i].At.UnixMicro(), ts[i].At.UnixMicro()+gap
				high := ts[i].Price
				j := i + 1
				for ; j < len(ts) && ts[j].At.UnixMicro() <= end; j++ {
					end = max(end, ts[j].At.UnixMicro()+gap)
					high = max(high, ts[j].Price)
				}
				if end <= wmUs {
					out = append(out, fmt.Sprintf("%s [%s, %s) trades=%d high=%g", pair,
						time.UnixMicro(start).UTC().Format("15:04:05"), time.UnixMicro(end).UTC().Format("15:04:05"), j-i, high))
				} else {
					keep = append(keep, ts[i:j]...)
				}
				i = j
			}
			open[pair] = keep
		}
		slices.Sort(out)
		return out, late
	}
}

func sessionQuery(feed *Feed, sink stream.Sink, parts string) *flow.Query {
	return flow.New("bursts").Read("feed", feed).WithWatermark("at", sessionDelay).
		AggregateSessions(flow.SessionAggregation{Column: "at", Gap: sessionGap, GroupBy: []string{"pair"},
			Aggregates: []agg.Aggregate{{Kind: agg.Count, As: "trades"}, {Kind: agg.Max, Column: "price", As: "high"}}, Mode: agg.Append}).
		WriteTo(sink).Trigger(engine.Trigger{Kind: engine.AvailableNow}).
		Conf("spark.sql.streaming.queryEvolution.enableSourceEvolution", "true").
		Conf("spark.sql.streaming.noDataMicroBatches.enabled", "false").
		Conf("spark.sql.streaming.stateStore.partitions", parts)
}

// genTrades is a round of trades on a 10-second grid moving forward, out
// of order by up to 3 minutes (some late for the 1-minute delay, some
// bridging two open sessions), over three pairs.
func genTrades(rng *rand.Rand, now *time.Time) []Trade {
	var batch []Trade
	for range 5 + rng.IntN(30) {
		*now = now.Add(time.Duration(rng.IntN(5)) * 10 * time.Second)
		ts := now.Add(-time.Duration(rng.IntN(18)) * 10 * time.Second)
		if rng.IntN(12) == 0 {
			// Far behind: late by the previous batch's watermark, the one
			// input is dropped by (Spark 3.4+), in most rounds.
			ts = now.Add(-time.Duration(24+rng.IntN(24)) * 10 * time.Second)
		}
		batch = append(batch, Trade{ts.UTC(), []string{"ETH", "BTC", "SOL"}[rng.IntN(3)], float64(1 + rng.IntN(9))})
	}
	return batch
}

// TestSessionsAgainstOracle runs the session window over a random feed in
// rounds, each a restart on the same checkpoint, with another state
// partition count in some (an online repartition), an offline repartition
// between two (every stored session kept: the state dump is the same
// multiset), and a sink failing midway (the batch re-runs): the sessions
// emitted and the late count equal the oracle's, and equal those of the
// same rounds run on a checkpoint never repartitioned.
func TestSessionsAgainstOracle(t *testing.T) {
	var allLate int64
	defer func() {
		if allLate == 0 && !t.Failed() {
			t.Error("no late row in any run: the test proves little")
		}
	}()
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			ctx := t.Context()
			rng := rand.New(rand.NewPCG(seed, 41))
			dir := t.TempDir()
			opts := engine.Options{CheckpointDir: filepath.Join(dir, "checkpoint"), LocalDir: filepath.Join(dir, "local")}
			plain := engine.Options{CheckpointDir: filepath.Join(dir, "plain"), LocalDir: filepath.Join(dir, "local-plain")}
			var late int64
			var name string
			opts.Listeners = []engine.Listener{engine.ListenerFunc(func(p *stream.Progress) {
				for _, op := range p.StateOperators {
					name = op.OperatorName
					late += op.NumRowsDroppedByWatermark
				}
			})}
			feed, sink, plainSink := &Feed{}, &sessionSink{applied: -1}, &sessionSink{applied: -1}
			oracle := sessionOracle()
			var want []string
			var wantLate, maxUs, lateUs int64
			now := at("00:00")
			for round, parts := range []string{"2", "3", "3", "1", "4", "2", "2"} {
				batch := genTrades(rng, &now)
				wmUs := max(0, maxUs-sessionDelay.Microseconds())
				for _, tr := range batch {
					maxUs = max(maxUs, tr.At.UnixMicro())
				}
				// No no-data batch runs (disabled): the previous batch is
				// the previous round's.
				out, l := oracle(batch, lateUs, wmUs)
				lateUs = wmUs
				want, wantLate = append(want, out...), wantLate+l
				feed.Publish(batch...)
				if round == 2 {
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
				q := sessionQuery(feed, sink, parts)
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
				if _, err := sessionQuery(feed, plainSink, "3").Run(ctx, plain); err != nil {
					t.Fatalf("round %d, never repartitioned: %v", round, err)
				}
			}
			if len(want) < 5 {
				t.Fatalf("the oracle emitted %d sessions: the test proves little", len(want))
			}
			allLate += wantLate
			if !slices.Equal(sink.rows, want) {
				t.Errorf("emitted %d sessions, the oracle %d:\n%q\n%q", len(sink.rows), len(want), sink.rows, want)
			}
			if !slices.Equal(plainSink.rows, sink.rows) {
				t.Errorf("the checkpoint never repartitioned emitted\n%q\nthe repartitioned one\n%q", plainSink.rows, sink.rows)
			}
			if late != wantLate {
				t.Errorf("progress: %d late rows, the oracle %d", late, wantLate)
			}
			if name != session.OperatorName {
				t.Errorf("operatorName %q", name)
			}
		})
	}
}

// TestSessionRepartitionKeepsRows: a session window's state repartitions
// 200 -> 8 online (spark.sql.streaming.stateStore.partitions) and offline
// (checkpoint repartition) with the same sessions in the new partitions:
// the dump of the REPARTITION version equals the dump of the version
// before, as a multiset; both then resume.
func TestSessionRepartitionKeepsRows(t *testing.T) {
	for _, online := range []bool{true, false} {
		t.Run(map[bool]string{true: "online", false: "offline"}[online], func(t *testing.T) {
			dir := t.TempDir()
			opts := engine.Options{CheckpointDir: filepath.Join(dir, "checkpoint"), LocalDir: filepath.Join(dir, "local")}
			feed, sink := &Feed{}, &sessionSink{applied: -1}
			now := at("00:00")
			rng := rand.New(rand.NewPCG(7, 41))
			feed.Publish(genTrades(rng, &now)...)
			feed.Publish(genTrades(rng, &now)...)
			if _, err := sessionQuery(feed, sink, "200").Run(t.Context(), opts); err != nil {
				t.Fatal(err)
			}
			before := stateAt(t, opts.CheckpointDir, 0)
			if len(before) < 3 {
				t.Fatalf("state %q: too little to prove anything", before)
			}
			if online {
				if _, err := sessionQuery(feed, sink, "8").Run(t.Context(), opts); err != nil {
					t.Fatal(err)
				}
			} else if _, err := engine.RepartitionOffline(t.Context(), opts, state.Recorded{}, 8); err != nil {
				t.Fatal(err)
			}
			// Batch 1 is the REPARTITION control batch (no new data:
			// nothing else ran).
			if after := stateAt(t, opts.CheckpointDir, 1); !slices.Equal(after, before) {
				t.Fatalf("repartition 200 -> 8: state %q after, %q before", after, before)
			}
			feed.Publish(genTrades(rng, &now)...)
			if _, err := sessionQuery(feed, sink, "8").Run(t.Context(), opts); err != nil {
				t.Fatalf("resume after the repartition: %v", err)
			}
		})
	}
}

// stateAt is operator 0's state rows as of batch, partition aside, sorted.
func stateAt(t *testing.T, ckpt string, batch int64) []string {
	t.Helper()
	var b bytes.Buffer
	if _, err := state.Dump(context.Background(), state.DumpOptions{FS: vfs.Default, Checkpoint: ckpt, Operator: 0, Batch: batch}, &b); err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n")[1:] {
		rows = append(rows, line[:strings.LastIndexByte(line, ',')])
	}
	slices.Sort(rows)
	return rows
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

// TestSessionCrashLoop crashes the session window at every write of its
// checkpoint (keeping none of the unsynced data) during a run over half
// the feed, then restarts it on the whole feed, every other time with
// another partition count: the sessions emitted equal the oracle's for the
// batches the checkpoint's offset log holds, for every crash point.
func TestSessionCrashLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("a run per write")
	}
	rng := rand.New(rand.NewPCG(41, 41))
	now := at("00:00")
	var trades []Trade
	for len(trades) < 60 {
		trades = append(trades, genTrades(rng, &now)...)
	}
	half := len(trades) / 2
	expect := func(splits ...[]Trade) []string {
		oracle := sessionOracle()
		var want []string
		var maxUs, lateUs int64
		for _, b := range splits {
			wmUs := max(0, maxUs-sessionDelay.Microseconds())
			out, _ := oracle(b, lateUs, wmUs)
			lateUs = wmUs
			want = append(want, out...)
			for _, tr := range b {
				maxUs = max(maxUs, tr.At.UnixMicro())
			}
		}
		// The last run's rows after its batch: a final no-data batch is
		// off, so what the watermark after the feed closes stays in state.
		return want
	}
	crashes := 0
	for i := 0; ; i++ {
		mem := vfs.NewCrashableMem()
		inj := &faultAt{i: i}
		feed, sink := &Feed{}, &sessionSink{applied: -1}
		feed.Publish(trades[:half]...)
		opts := engine.Options{CheckpointDir: "/checkpoint", LocalDir: t.TempDir(), FS: errorfs.Wrap(mem, inj)}
		_, err := sessionQuery(feed, sink, "2").Run(t.Context(), opts)
		if !inj.hit {
			if err != nil {
				t.Fatalf("write %d: no crash, the run failed: %v", i, err)
			}
			break
		}
		crashes++
		opts.FS = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		want := expect(trades)
		if _, err := opts.FS.Stat("/checkpoint/offsets/0"); err == nil {
			want = expect(trades[:half], trades[half:])
		}
		feed.Publish(trades[half:]...)
		if _, err := sessionQuery(feed, sink, []string{"2", "3"}[i%2]).Run(t.Context(), opts); err != nil {
			t.Fatalf("crash at write %d (%s): the restart failed: %v", i, inj.hitOp, err)
		}
		if !slices.Equal(sink.rows, want) {
			t.Fatalf("crash at write %d (%s): emitted %q, the oracle %q", i, inj.hitOp, sink.rows, want)
		}
	}
	if crashes < 20 {
		t.Fatalf("only %d crash points: the loop proves little", crashes)
	}
	t.Logf("%d crash points", crashes)
}

// TestSessionGapChangedRefused: a restart with another session gap fails
// the state schema check before anything is written (the stored sessions
// were merged under the old gap); the same query resumes.
func TestSessionGapChangedRefused(t *testing.T) {
	dir := t.TempDir()
	opts := engine.Options{CheckpointDir: filepath.Join(dir, "checkpoint"), LocalDir: filepath.Join(dir, "local")}
	feed, sink := &Feed{}, &sessionSink{applied: -1}
	feed.Publish(Trade{at("12:01"), "ETH", 10}, Trade{at("12:02"), "ETH", 10})
	if _, err := sessionQuery(feed, sink, "2").Run(t.Context(), opts); err != nil {
		t.Fatal(err)
	}
	feed.Publish(Trade{at("12:03"), "BTC", 1})
	changed := flow.New("bursts").Read("feed", feed).WithWatermark("at", sessionDelay).
		AggregateSessions(flow.SessionAggregation{Column: "at", Gap: 2 * sessionGap, GroupBy: []string{"pair"},
			Aggregates: []agg.Aggregate{{Kind: agg.Count, As: "trades"}, {Kind: agg.Max, Column: "price", As: "high"}}, Mode: agg.Append}).
		WriteTo(sink).Trigger(engine.Trigger{Kind: engine.AvailableNow}).
		Conf("spark.sql.streaming.queryEvolution.enableSourceEvolution", "true")
	before := treeOf(t, opts.CheckpointDir)
	_, err := changed.Run(t.Context(), opts)
	if errcode.Code(err) != errcode.StateSchemaMismatch || !containsAll(err.Error(), "session gap", "gap=30s", "gap=1m0s") {
		t.Fatalf("gap changed: got %v, want STATE_SCHEMA_MISMATCH naming the session gap", err)
	}
	if after := treeOf(t, opts.CheckpointDir); after != before {
		t.Fatal("gap changed: a refused start changed the checkpoint")
	}
	if _, err := sessionQuery(feed, sink, "2").Run(t.Context(), opts); err != nil {
		t.Fatalf("the same query resumes: %v", err)
	}
}

// TestSessionUpdateModeRefused: update mode is refused when the plan is
// built, with Spark's message.
func TestSessionUpdateModeRefused(t *testing.T) {
	_, err := flow.New("bursts").Read("feed", &Feed{}).WithWatermark("at", sessionDelay).
		AggregateSessions(flow.SessionAggregation{Column: "at", Gap: sessionGap, GroupBy: []string{"pair"},
			Aggregates: []agg.Aggregate{{Kind: agg.Count}}, Mode: agg.Update}).WriteTo(&sessionSink{}).Build()
	if errcode.Code(err) != agg.CodeUnsupportedOutputMode || !containsAll(err.Error(), "Update output mode not supported for session window") {
		t.Fatalf("got %v", err)
	}
}
