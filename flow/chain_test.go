package flow_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/flow"
	"github.com/ethstream/ethstream/shape"
	"github.com/ethstream/ethstream/stream"
)

// hourRow is one row of the hourly operator's output.
type hourRow struct {
	volume       float64
	trades, wins int64
}

// hourKey is an hour (its start, µs) and a pair.
type hourKey struct {
	hour int64
	pair string
}

// collectSink keeps the rows of an append-mode query, refusing a row
// emitted twice; it applies a batch once (a re-run is skipped) and, with
// failNext set, fails the next AddBatch, as a sink that loses its
// connection.
type collectSink struct {
	rows     map[hourKey]hourRow
	applied  int64
	failNext bool
	failedAt int64
	dup      error
}

func (s *collectSink) Open(context.Context, stream.SinkEnv) error { return nil }
func (s *collectSink) Description() string                        { return "collect" }
func (s *collectSink) Close() error                               { return nil }

func (s *collectSink) AddBatch(_ context.Context, id int64, out *stream.Batch) (stream.SinkProgress, error) {
	if s.failNext {
		s.failNext, s.failedAt = false, id
		return stream.SinkProgress{}, errors.New("connection lost")
	}
	if id <= s.applied {
		return stream.SinkProgress{}, nil
	}
	s.applied = id
	for r := 0; r < out.Len; r++ {
		k := hourKey{out.Column("window_start").Int64s[r], out.Column("pair").Strings[r]}
		if _, ok := s.rows[k]; ok && s.dup == nil {
			s.dup = fmt.Errorf("batch %d emits %v again", id, k)
		}
		s.rows[k] = hourRow{out.Column("volume").Float64s[r], out.Column("trades").Int64s[r], out.Column("windows").Int64s[r]}
	}
	return stream.SinkProgress{NumOutputRows: int64(out.Len)}, nil
}

// recount is the hourly query computed directly from the trades: per
// 5-minute window and pair the volume and trade count, then per hour the
// sums of the windows whose time (end - 1µs) falls in it, for the hours
// the final watermark has closed.
func recount(trades []Trade, watermarkUs int64) map[hourKey]hourRow {
	five, hour := (5 * time.Minute).Microseconds(), time.Hour.Microseconds()
	type winKey struct {
		start int64
		pair  string
	}
	wins := map[winKey]*hourRow{}
	for _, t := range trades {
		us := t.At.UnixMicro()
		k := winKey{us - us%five, t.Pair}
		if wins[k] == nil {
			wins[k] = &hourRow{}
		}
		wins[k].volume += t.Price
		wins[k].trades++
	}
	out := map[hourKey]hourRow{}
	for k, w := range wins {
		end := k.start + five
		if end > watermarkUs {
			continue // the window is still open: the hourly operator never saw it
		}
		wt := end - 1
		h := hourKey{wt - wt%hour, k.pair}
		if h.hour+hour > watermarkUs {
			continue
		}
		r := out[h]
		r.volume += w.volume
		r.trades += w.trades
		r.wins++
		out[h] = r
	}
	return out
}

// TestChainedAggregationsAgainstRecount runs the hourly-over-5-minute plan
// over a random feed in rounds, each a restart of the query on the same
// checkpoint with another state partition count (a repartition of both
// operators), one of them failing in its sink midway (both operators
// abort and the batch re-runs): the hours emitted equal a recount from the
// trades, each emitted once, and each operator's state lives in its own
// directory with the partition count of the last round.
func TestChainedAggregationsAgainstRecount(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) { chainedRounds(t, seed) })
	}
}

func chainedRounds(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	dir := t.TempDir()
	opts := engine.Options{CheckpointDir: filepath.Join(dir, "checkpoint"), LocalDir: filepath.Join(dir, "local")}
	feed := &Feed{}
	var all []Trade
	now := at("00:00")
	sink := &collectSink{rows: map[hourKey]hourRow{}, applied: -1, failedAt: -1}
	var ops int // stateful operators seen in a data batch's progress
	opts.Listeners = []engine.Listener{engine.ListenerFunc(func(p *stream.Progress) {
		if p.NumInputRows > 0 {
			ops = len(p.StateOperators)
		}
	})}
	partitions := []string{"2", "3", "1", "4", "2"}
	for round, parts := range partitions {
		// The feed moves on 20 to 60 minutes, trades out of order by up to
		// 50 seconds (within the 1-minute delay: none is late).
		var batch []Trade
		for range 20 + rng.IntN(60) {
			now = now.Add(time.Duration(rng.IntN(90)) * time.Second)
			ts := now.Add(-time.Duration(rng.IntN(50)) * time.Second)
			batch = append(batch, Trade{At: ts, Pair: []string{"ETH-USD", "BTC-USD", "SOL-USD"}[rng.IntN(3)], Price: float64(1 + rng.IntN(100))})
		}
		feed.Publish(batch...)
		all = append(all, batch...)
		sink.failNext = round == 2
		q := hourlyOverFiveMinutes(feed, nil, parts).WriteTo(sink)
		_, err := q.Run(t.Context(), opts)
		if round == 2 {
			if err == nil || sink.failedAt < 0 {
				t.Fatalf("round %d: the sink's failure did not fail the run: %v", round, err)
			}
			_, err = q.Run(t.Context(), opts)
		}
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	if sink.dup != nil {
		t.Fatal(sink.dup)
	}
	if ops != 2 {
		t.Fatalf("data batches report %d state operators, want 2", ops)
	}
	var maxUs int64
	for _, tr := range all {
		maxUs = max(maxUs, tr.At.UnixMicro())
	}
	want := recount(all, maxUs-time.Minute.Microseconds())
	if len(want) < 3 {
		t.Fatalf("the recount closed only %d hours: the test proves little", len(want))
	}
	if len(sink.rows) != len(want) {
		t.Errorf("the query emitted %d hours, the recount %d", len(sink.rows), len(want))
	}
	keys := make([]hourKey, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].hour < keys[j].hour || keys[i].hour == keys[j].hour && keys[i].pair < keys[j].pair
	})
	for _, k := range keys {
		if got, ok := sink.rows[k]; !ok || got != want[k] {
			t.Errorf("hour %s %s: query %+v, recount %+v", time.UnixMicro(k.hour).UTC().Format("15:04"), k.pair, got, want[k])
		}
	}
	for _, op := range []string{"0", "1"} {
		if _, err := os.Stat(filepath.Join(opts.CheckpointDir, "state", op)); err != nil {
			t.Errorf("operator %s has no state directory: %v", op, err)
		}
	}
	rec, err := shape.ReadLatest(vfs.Default, opts.CheckpointDir)
	if err != nil || rec == nil || len(rec.Shape.OperatorList()) != 2 {
		t.Fatalf("recorded shape: %+v %v", rec, err)
	}
}

// TestChainedRestartRules: each operator's restart decision is its own, and
// a plan with an operator more or less than the checkpoint's is refused
// before anything is written.
func TestChainedRestartRules(t *testing.T) {
	dir := t.TempDir()
	opts := engine.Options{CheckpointDir: filepath.Join(dir, "checkpoint"), LocalDir: filepath.Join(dir, "local")}
	feed := &Feed{}
	feed.Publish(Trade{at("12:01"), "ETH-USD", 10}, Trade{at("12:58"), "ETH-USD", 1})
	sink := &collectSink{rows: map[hourKey]hourRow{}, applied: -1, failedAt: -1}
	if _, err := hourlyOverFiveMinutes(feed, nil, "2").WriteTo(sink).Run(t.Context(), opts); err != nil {
		t.Fatal(err)
	}
	five := flow.Aggregation{Window: &agg.Window{Column: "at", Size: 5 * time.Minute}, GroupBy: []string{"pair"},
		Aggregates: []agg.Aggregate{{Kind: agg.Sum, Column: "price", As: "volume"}, {Kind: agg.Count, As: "trades"}}, Mode: agg.Append}
	base := func() *flow.Query {
		return flow.New("hourly_volume").Read("feed", feed).WithWatermark("at", time.Minute).Aggregate(five).
			Conf("spark.sql.streaming.queryEvolution.enableSourceEvolution", "true").
			Trigger(engine.Trigger{Kind: engine.AvailableNow}).WriteTo(sink)
	}
	hourly := func(size time.Duration) flow.Aggregation {
		return flow.Aggregation{Window: &agg.Window{Column: "at", Size: size}, GroupBy: []string{"pair"},
			Aggregates: []agg.Aggregate{{Kind: agg.Sum, Column: "volume", As: "volume"}, {Kind: agg.Sum, Column: "trades", As: "trades"}, {Kind: agg.Count, As: "windows"}},
			Mode:       agg.Append}
	}
	for _, c := range []struct {
		name string
		q    *flow.Query
		want string
	}{
		{"hourly operator removed", base(), "the query has 1 stateful operators, the checkpoint's state was written by 2"},
		// The hourly aggregation, nearest the sink, is operator 0 (Spark's ids).
		{"hourly operator's window changed", base().Select(flow.WindowTime().As("at"), flow.Col("pair"), flow.Col("volume"), flow.Col("trades")).
			Aggregate(hourly(2 * time.Hour)), "the window of operator 0 changed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := treeOf(t, opts.CheckpointDir)
			_, err := c.q.Run(t.Context(), opts)
			if err == nil || !strings.Contains(err.Error(), "STATE_SCHEMA_MISMATCH") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want STATE_SCHEMA_MISMATCH: %s", err, c.want)
			}
			if after := treeOf(t, opts.CheckpointDir); after != before {
				t.Fatalf("a refused start changed the checkpoint:\n%s\nwas\n%s", after, before)
			}
		})
	}
}

// treeOf lists every file under dir with its size and content hash.
func treeOf(t *testing.T, dir string) string {
	t.Helper()
	var out string
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() {
			out += p + "/\n"
			return nil
		}
		data, err := os.ReadFile(p)
		out += fmt.Sprintf("%s %d %x\n", p, info.Size(), data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// faultAt fails the i-th write of the checkpoint's file system and every
// operation after it: a process that dies there.
type faultAt struct {
	mu    sync.Mutex
	i, n  int
	hit   bool
	hitOp string
}

func (f *faultAt) String() string { return fmt.Sprintf("crash at write %d", f.i) }

func (f *faultAt) MaybeError(op errorfs.Op) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hit {
		return errorfs.ErrInjected
	}
	if op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
		return nil
	}
	f.n++
	if f.n-1 == f.i {
		f.hit, f.hitOp = true, fmt.Sprintf("%v %s", op.Kind, op.Path)
		return errorfs.ErrInjected
	}
	return nil
}

// TestChainedCrashLoop crashes the hourly-over-5-minute plan at every write
// of its checkpoint (keeping none of the unsynced data) during a run of a
// data batch and a no-data batch over half the feed, then restarts it on
// the whole feed, every other time with
// another partition count (both operators recover, then repartition): the
// hours emitted equal the recount, each once, for every crash point.
func TestChainedCrashLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("a run per write")
	}
	var trades []Trade
	rng := rand.New(rand.NewPCG(5, 5))
	now := at("00:00")
	for range 60 {
		now = now.Add(time.Duration(rng.IntN(200)) * time.Second)
		trades = append(trades, Trade{At: now, Pair: []string{"ETH-USD", "BTC-USD"}[rng.IntN(2)], Price: float64(1 + rng.IntN(50))})
	}
	want := recount(trades, now.UnixMicro()-time.Minute.Microseconds())
	if len(want) < 2 {
		t.Fatalf("the recount closed %d hours: the loop proves little", len(want))
	}
	crashes := 0
	for i := 0; ; i++ {
		mem := vfs.NewCrashableMem()
		inj := &faultAt{i: i}
		feed := &Feed{}
		feed.Publish(trades[:len(trades)/2]...)
		sink := &collectSink{rows: map[hourKey]hourRow{}, applied: -1, failedAt: -1}
		opts := engine.Options{CheckpointDir: "/checkpoint", LocalDir: t.TempDir(), FS: errorfs.Wrap(mem, inj)}
		_, err := hourlyOverFiveMinutes(feed, nil, "2").WriteTo(sink).Run(t.Context(), opts)
		if !inj.hit {
			if err != nil {
				t.Fatalf("write %d: no crash, the run failed: %v", i, err)
			}
			break
		}
		crashes++
		opts.FS = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		// The restart reads the rest of the feed: both operators go on
		// from the state the crash left committed.
		feed.Publish(trades[len(trades)/2:]...)
		// Every other restart repartitions both operators first (which
		// rewrites each one's state from its committed version).
		parts := []string{"2", "3"}[i%2]
		if _, err := hourlyOverFiveMinutes(feed, nil, parts).WriteTo(sink).Run(t.Context(), opts); err != nil {
			t.Fatalf("crash at write %d (%s): the restart failed: %v", i, inj.hitOp, err)
		}
		if sink.dup != nil {
			t.Fatalf("crash at write %d (%s): %v", i, inj.hitOp, sink.dup)
		}
		if len(sink.rows) != len(want) {
			t.Fatalf("crash at write %d (%s): %d hours emitted, the recount has %d", i, inj.hitOp, len(sink.rows), len(want))
		}
		for k, w := range want {
			if sink.rows[k] != w {
				t.Fatalf("crash at write %d (%s): hour %v: %+v, recount %+v", i, inj.hitOp, k, sink.rows[k], w)
			}
		}
	}
	if crashes < 20 {
		t.Fatalf("only %d crash points: the loop proves little", crashes)
	}
	t.Logf("%d crash points", crashes)
}
