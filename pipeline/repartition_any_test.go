package pipeline

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// anyQuery is one generated aggregation: the SQL, its withWatermark ("" for
// none) and the state partition counts before and after.
type anyQuery struct {
	sql, watermark string
	from, to       int
}

// genQuery draws aggregation i the compiler accepts: zero to two group
// columns (a string, a BIGINT, a nullable BIGINT), no window or a tumbling
// or sliding one, one to three aggregates, with or without a watermark.
func genQuery(r *rand.Rand, i int) anyQuery {
	windows := []string{"", "window(block_ts, '1 hour')", "window(block_ts, '10 minutes')", "window(block_ts, '3 hours', '1 hour')"}
	keys := []string{"miner", "transaction_count", "base_fee_per_gas", "gas_limit"}
	aggs := []string{"count(*)", "sum(gas_used)", "min(transaction_count)", "max(size)", "avg(gas_used)", "count(base_fee_per_gas)", "sum(difficulty)"}
	w := windows[i%len(windows)] // each kind of window in turn
	r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	groups := keys[:r.IntN(3)]
	r.Shuffle(len(aggs), func(i, j int) { aggs[i], aggs[j] = aggs[j], aggs[i] })
	var sel, by []string
	if w != "" {
		sel, by = append(sel, "window"), append(by, w)
	}
	sel, by = append(sel, groups...), append(by, groups...)
	for i, a := range aggs[:1+r.IntN(3)] {
		sel = append(sel, fmt.Sprintf("%s AS a%d", a, i))
	}
	q := anyQuery{sql: "SELECT " + strings.Join(sel, ", ") + " FROM blocks", from: 1 + r.IntN(5)}
	if len(by) > 0 {
		q.sql += " GROUP BY " + strings.Join(by, ", ")
	}
	if w != "" && r.IntN(2) == 0 {
		// Short enough that the second day's batch closes windows of the first.
		q.watermark = "block_ts, 1 hour"
	}
	for q.to = 1 + r.IntN(7); q.to == q.from; q.to = 1 + r.IntN(7) {
	}
	return q
}

// TestRepartitionAnyQuery runs generated aggregations and repartitions
// their state, offline (engine.RepartitionOffline with state.Recorded, what
// `ethstream checkpoint repartition` runs: no query definition) and online
// (a restart with spark.sql.streaming.stateStore.partitions). Every stored
// row is kept: the state dump after the control batch is the dump before
// as a multiset (rows as text, partition column set aside), each row in a
// partition below the new count; and the query then continues to the state
// a run that never repartitioned ends with.
func TestRepartitionAnyQuery(t *testing.T) {
	archive, err := faultArchive()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(38, 4))
	for i := range 8 {
		q := genQuery(r, i)
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Logf("%s (watermark %q), %d -> %d partitions", q.sql, q.watermark, q.from, q.to)
			ctx := t.Context()
			fs := vfs.NewMem()
			cfg := func(ck string, maxBatches int, conf ...string) Config {
				c := Config{
					Checkpoint: ck, Table: ck + "-table", LocalDir: filepath.Join(t.TempDir(), "local"), FS: fs,
					Sources: []SourceSpec{{Name: "arch", Format: "s3archive", URI: "file://" + filepath.ToSlash(archive) + "/v1.0/eth/blocks?maxFilesPerTrigger=1"}},
					Conf: map[string]string{"spark.sql.shuffle.partitions": strconv.Itoa(q.from),
						"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
					Query: q.sql, WithWatermark: q.watermark, MaxBatches: maxBatches,
					Trigger: engine.Trigger{Kind: engine.AvailableNow},
					Logger:  slog.New(slog.DiscardHandler), Clock: stream.SystemClock{},
				}
				for i := 0; i+1 < len(conf); i += 2 {
					c.Conf[conf[i]] = conf[i+1]
				}
				return c
			}
			run := func(c Config) {
				t.Helper()
				qq, opts, err := Build(c)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := engine.Run(ctx, qq, opts); err != nil {
					t.Fatal(err)
				}
			}
			// The run that never repartitions.
			run(cfg("/whole", 0))
			whole := dumpRows(t, fs, "/whole", -1, q.from)

			// Offline: one batch, the control batch, the rest.
			first := cfg("/offline", 1)
			run(first)
			before := dumpRows(t, fs, "/offline", -1, q.from)
			if len(before) == 0 {
				t.Fatal("the first batch stored no row: the test would prove nothing")
			}
			_, opts, err := Build(first)
			if err != nil {
				t.Fatal(err)
			}
			res, err := engine.RepartitionOffline(ctx, opts, state.Recorded{}, q.to)
			if err != nil {
				t.Fatal(err)
			}
			if res.Operators != 1 || res.Stats.KeysBefore != int64(len(before)) || res.Stats.KeysAfter != int64(len(before)) {
				t.Fatalf("repartition: %+v, want 1 operator and %d keys", res, len(before))
			}
			sameRows(t, "offline control batch", before, dumpRows(t, fs, "/offline", -1, q.to))
			run(cfg("/offline", 0))
			sameRows(t, "offline, then the rest", whole, dumpRows(t, fs, "/offline", -1, q.to))

			// Online: one batch, then a start asking for q.to partitions
			// (batch 1 is the control batch).
			run(cfg("/online", 1))
			before = dumpRows(t, fs, "/online", -1, q.from)
			run(cfg("/online", 0, "spark.sql.streaming.stateStore.partitions", strconv.Itoa(q.to)))
			sameRows(t, "online control batch", before, dumpRows(t, fs, "/online", 1, q.to))
			sameRows(t, "online, then the rest", whole, dumpRows(t, fs, "/online", -1, q.to))
		})
	}
}

// dumpRows is `ethstream state dump` of operator 0 as of batch (-1: the
// last committed) as CSV rows without the partition column, which it
// checks names a partition below parts.
func dumpRows(t *testing.T, fs vfs.FS, ck string, batch int64, parts int) []string {
	t.Helper()
	var b bytes.Buffer
	if _, err := state.Dump(context.Background(), state.DumpOptions{FS: fs, Checkpoint: ck, Batch: batch}, &b); err != nil {
		t.Fatal(err)
	}
	return csvRows(t, &b, parts)
}

// csvRows reads a state dump's CSV as rows without the partition column,
// which it checks names a partition below parts, sorted.
func csvRows(t *testing.T, b *bytes.Buffer, parts int) []string {
	t.Helper()
	recs, err := csv.NewReader(b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	pcol := slices.Index(recs[0], "partition")
	if pcol < 0 {
		t.Fatalf("dump header %v has no partition column", recs[0])
	}
	var rows []string
	for _, rec := range recs[1:] {
		if p, err := strconv.Atoi(rec[pcol]); err != nil || p < 0 || p >= parts {
			t.Fatalf("row %v: partition %q, want one below %d", rec, rec[pcol], parts)
		}
		rows = append(rows, strings.Join(slices.Delete(rec, pcol, pcol+1), "|"))
	}
	slices.Sort(rows)
	return rows
}

// sameRows fails unless got and want (sorted) are the same multiset.
func sameRows(t *testing.T, what string, want, got []string) {
	t.Helper()
	if slices.Equal(want, got) {
		return
	}
	missing, extra := multisetDiff(want, got), multisetDiff(got, want)
	t.Fatalf("%s: %d rows, want %d; missing %d (first %v), extra %d (first %v)", what, len(got), len(want),
		len(missing), head(missing), len(extra), head(extra))
}

// multisetDiff is a minus b, counting duplicates.
func multisetDiff(a, b []string) []string {
	n := map[string]int{}
	for _, s := range b {
		n[s]++
	}
	var d []string
	for _, s := range a {
		if n[s] > 0 {
			n[s]--
			continue
		}
		d = append(d, s)
	}
	return d
}

func head(s []string) []string { return s[:min(len(s), 3)] }

// TestRepartitionEveryOperator: the offline repartition moves the state of
// every operator directory under state/, not operator 0's alone. Operator
// 1 here is a copy of operator 0's files (as a query of two stateful
// operators keeps two directories).
func TestRepartitionEveryOperator(t *testing.T) {
	archive, err := faultArchive()
	if err != nil {
		t.Fatal(err)
	}
	fs := vfs.NewMem()
	cfg := Config{
		Checkpoint: "/ck", Table: "/table", LocalDir: filepath.Join(t.TempDir(), "local"), FS: fs,
		Sources: []SourceSpec{{Name: "arch", Format: "s3archive", URI: "file://" + filepath.ToSlash(archive) + "/v1.0/eth/blocks?maxFilesPerTrigger=1"}},
		Conf:    map[string]string{"spark.sql.shuffle.partitions": "3", "spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"},
		Query:   "SELECT window, miner, count(*) AS n FROM blocks GROUP BY window(block_ts, '1 hour'), miner",
		Trigger: engine.Trigger{Kind: engine.AvailableNow}, Logger: slog.New(slog.DiscardHandler), Clock: stream.SystemClock{},
	}
	q, opts, err := Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Run(t.Context(), q, opts); err != nil {
		t.Fatal(err)
	}
	if err := fs.MkdirAll("/ck/state/1", 0o755); err != nil {
		t.Fatal(err)
	}
	names, err := fs.List("/ck/state/0")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := vfs.Copy(fs, "/ck/state/0/"+n, "/ck/state/1/"+n); err != nil {
			t.Fatal(err)
		}
	}
	before := [2][]string{dumpOp(t, fs, 0, 3), dumpOp(t, fs, 1, 3)}
	res, err := engine.RepartitionOffline(t.Context(), opts, state.Recorded{}, 5)
	if err != nil {
		t.Fatal(err)
	}
	if n := int64(len(before[0]) + len(before[1])); res.Operators != 2 || res.Stats.KeysBefore != n || res.Stats.KeysAfter != n {
		t.Fatalf("repartition: %+v, want 2 operators and %d keys", res, n)
	}
	for op := range 2 {
		sameRows(t, "operator "+strconv.Itoa(op), before[op], dumpOp(t, fs, op, 5))
	}
}

// dumpOp is dumpRows of operator op of /ck, as of its last committed batch.
func dumpOp(t *testing.T, fs vfs.FS, op, parts int) []string {
	t.Helper()
	var b bytes.Buffer
	if _, err := state.Dump(context.Background(), state.DumpOptions{FS: fs, Checkpoint: "/ck", Operator: op, Batch: -1}, &b); err != nil {
		t.Fatal(err)
	}
	return csvRows(t, &b, parts)
}
