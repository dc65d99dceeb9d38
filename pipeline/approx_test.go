package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/agg/hllpp"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/state"
	"github.com/ethstream/ethstream/stream"
)

// runSQLParts is runSQL on checkpoint /ck of fs with the given number of
// shuffle partitions (a change of it repartitions the state online).
func runSQLParts(t *testing.T, fs vfs.FS, text, mode, partitions string, src *listSource) *collectSink {
	t.Helper()
	conf := map[string]string{"spark.sql.shuffle.partitions": partitions, "spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"}
	cfg := Config{Table: "t", Query: text, OutputMode: mode, Conf: conf,
		Sources: []SourceSpec{{Name: "s", Format: "s3archive", URI: "file:///unused/s"}}}
	q := engine.Query{Name: "q", Trigger: engine.Trigger{Kind: engine.AvailableNow}, Conf: conf,
		Sources: []engine.NamedSource{{Name: "s", Source: src}}}
	c, err := CompileQuery(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.plan(&q); err != nil {
		t.Fatal(err)
	}
	sink := &collectSink{}
	q.Sink = sink
	opts := engine.Options{CheckpointDir: "/ck", FS: fs, LocalDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)}
	if _, err := engine.Run(context.Background(), q, opts); err != nil {
		t.Fatal(err)
	}
	return sink
}

// TestApproxCountDistinctAcrossRestartsAndRepartitions: the number of
// distinct miners per hour, by approx_count_distinct, of blocks read in
// several batches, a restart, an online repartition (2 -> 3 partitions)
// and an offline one (to 1), equals the HLL++ estimate of each hour's
// miners folded at once (Spark's answer for the same rows: merging
// registers is order-free), and is within Spark's error of the exact
// count.
func TestApproxCountDistinctAcrossRestartsAndRepartitions(t *testing.T) {
	var chunks []*stream.Batch
	exact := map[string]map[string]bool{}
	n := int64(0)
	for c := range 9 {
		var bs []blk
		for i := range 700 {
			h := (c*700 + i) % 3
			m := fmt.Sprintf("0x%04x", (c*7919+i*104729)%(400*(h+1)))
			at := at("00:00").Add(time.Duration(h)*time.Hour + time.Duration(i)*time.Second)
			n++
			bs = append(bs, blk{n, at, m})
			k := at.Format("15:04")[:2]
			if exact[k] == nil {
				exact[k] = map[string]bool{}
			}
			exact[k][m] = true
		}
		chunks = append(chunks, blockBatch(bs))
	}
	fs := vfs.NewMem()
	src := &listSource{}
	q := "SELECT hour(block_ts) AS h, approx_count_distinct(miner) AS miners, approx_count_distinct(number, 0.01) AS blocks FROM blocks GROUP BY hour(block_ts)"
	var last *collectSink
	for step, parts := range []string{"2", "2", "3", "1"} {
		src.chunks = chunks[:min(len(chunks), 3*(step+1))]
		if step == 3 {
			if _, err := engine.RepartitionOffline(context.Background(), engine.Options{CheckpointDir: "/ck", FS: fs, LocalDir: t.TempDir(),
				Logger: slog.New(slog.DiscardHandler)}, state.Recorded{}, 1); err != nil {
				t.Fatal(err)
			}
			src.chunks = append(src.chunks, blockBatch(nil))
		}
		last = runSQLParts(t, fs, q, "complete", parts, src)
	}
	p9, p14 := hllpp.New(9), hllpp.New(14)
	var want []string
	for h := range 3 {
		k := fmt.Sprintf("%02d", h)
		sm, sn := p9.NewSketch(), p14.NewSketch()
		hasher := hllpp.NewHasher(stream.String)
		for _, c := range chunks {
			for i := range c.Len {
				if time.UnixMicro(c.Columns[1].Int64s[i]).UTC().Hour() != h {
					continue
				}
				p9.Add(sm, hasher.Row(&c.Columns[2], i))
				p14.Add(sn, hllpp.HashLong(c.Columns[0].Int64s[i], hllpp.Seed))
			}
		}
		got := p9.Estimate(sm)
		if e := float64(got)/float64(len(exact[k])) - 1; e > 3*p9.TrueRSD() || e < -3*p9.TrueRSD() {
			t.Errorf("hour %s: estimate %d of %d miners", k, got, len(exact[k]))
		}
		// Every block number is distinct: each hour has a third of them.
		blocks := p14.Estimate(sn)
		if e := float64(blocks)/float64(n/3) - 1; e > 3*p14.TrueRSD() || e < -3*p14.TrueRSD() {
			t.Errorf("hour %s: estimate %d of %d blocks", k, blocks, n/3)
		}
		want = append(want, fmt.Sprintf("h=%d miners=%d blocks=%d", h, got, blocks))
	}
	if len(last.batches) == 0 {
		t.Fatal("no output")
	}
	final := last.batches[len(last.batches)-1]
	slices.Sort(final)
	if !slices.Equal(final, want) {
		t.Fatalf("final complete output\n%s\nwant\n%s", strings.Join(final, "\n"), strings.Join(want, "\n"))
	}
}
