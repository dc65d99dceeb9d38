package demo

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/pipeline"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/parquet-go/parquet-go"
)

// archiveBlock is what the recount reads from the archive's files directly.
type archiveBlock struct {
	Timestamp        time.Time `parquet:"timestamp,timestamp(microsecond)"`
	Number           int64     `parquet:"number"`
	Miner            string    `parquet:"miner"`
	GasUsed          int64     `parquet:"gas_used"`
	TransactionCount int64     `parquet:"transaction_count"`
}

func readArchive(t *testing.T, env *Env) []archiveBlock {
	t.Helper()
	var all []archiveBlock
	for _, f := range env.Manifest.Files {
		rows, err := parquet.ReadFile[archiveBlock](filepath.Join(env.ArchiveRoot, f.Key))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, rows...)
	}
	return all
}

// windowsOf lists the [start, end) windows of size/slide holding ts.
func windowsOf(ts time.Time, size, slide time.Duration) [][2]time.Time {
	var out [][2]time.Time
	us, sz, sl := ts.UnixMicro(), size.Microseconds(), slide.Microseconds()
	last := us - ((us%sl)+sl)%sl
	for s := last; s > us-sz; s -= sl {
		out = append(out, [2]time.Time{time.UnixMicro(s).UTC(), time.UnixMicro(s + sz).UTC()})
	}
	return out
}

func fmtVal(v any) string {
	switch x := v.(type) {
	case time.Time:
		return x.UTC().Format(time.RFC3339)
	case float64:
		return fmt.Sprintf("%.6g", x)
	case nil:
		return "null"
	}
	return fmt.Sprint(v)
}

// tableLines renders every table row as "col=v ..." lines, sorted.
func tableLines(t *testing.T, dir string) []string {
	t.Helper()
	ctx := context.Background()
	tb, err := delta.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := tb.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	err = s.Rows(ctx, func(row map[string]any) error {
		var parts []string
		for _, f := range s.Schema.Fields {
			if w, ok := row[f.Name].(map[string]any); ok {
				parts = append(parts, "start="+fmtVal(w["start"]), "end="+fmtVal(w["end"]))
				continue
			}
			parts = append(parts, f.Name+"="+fmtVal(row[f.Name]))
		}
		out = append(out, strings.Join(parts, " "))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// TestQueriesAgainstRecount runs three non-reference queries end to end
// (archive on an S3 endpoint -> query -> Delta) and compares each table with
// a brute-force recount over the archive's files: a filtered hourly sum per
// miner from one named source, sliding windows with avg/max/min over the
// union, and append mode, which holds exactly the windows the final
// watermark closed.
func TestQueriesAgainstRecount(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	ctx := context.Background()
	dir := t.TempDir()
	o := Options{WorkDir: filepath.Join(dir, "work"), ResultsDir: filepath.Join(dir, "results"), Preset: chain.LastDaysPreset(2)}
	o.defaults()
	env, err := Setup(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	blocks := readArchive(t, env)
	if len(blocks) == 0 {
		t.Fatal("empty archive")
	}
	var maxTs time.Time
	for _, b := range blocks {
		if b.Timestamp.After(maxTs) {
			maxTs = b.Timestamp
		}
	}
	excluded := strings.ToLower(blocks[0].Miner)

	type agg struct {
		n, gas, txMax, numMin int64
	}
	for _, tc := range []struct {
		name, query, watermark, mode string
		size, slide                  time.Duration
		keep                         func(b archiveBlock) bool
		byMiner                      bool
		closedBy                     time.Duration // append: only windows with end <= maxTs - closedBy
		line                         func(w [2]time.Time, key string, a agg) string
	}{
		{name: "filtered hourly gas per miner",
			query: "SELECT window(block_ts, '1 hour') AS window, miner, sum(gas_used) AS gas, count(*) AS blocks FROM s3_backfill " +
				"WHERE transaction_count > 100 AND miner NOT IN ('" + excluded + "') GROUP BY window(block_ts, '1 hour'), miner",
			size: time.Hour, slide: time.Hour, byMiner: true,
			keep: func(b archiveBlock) bool { return b.TransactionCount > 100 && strings.ToLower(b.Miner) != excluded },
			line: func(w [2]time.Time, key string, a agg) string {
				return fmt.Sprintf("start=%s end=%s miner=%s gas=%d blocks=%d", fmtVal(w[0]), fmtVal(w[1]), key, a.gas, a.n)
			}},
		{name: "sliding windows",
			query: "SELECT window(block_ts, '10 minutes', '5 minutes'), source, avg(gas_used) AS avg_gas, max(transaction_count), min(number) " +
				"FROM blocks GROUP BY window(block_ts, '10 minutes', '5 minutes'), source",
			watermark: "block_ts, 1 hour", size: 10 * time.Minute, slide: 5 * time.Minute,
			keep: func(archiveBlock) bool { return true },
			line: func(w [2]time.Time, _ string, a agg) string {
				return fmt.Sprintf("start=%s end=%s source=%s avg_gas=%s max_transaction_count=%d min_number=%d",
					fmtVal(w[0]), fmtVal(w[1]), ArchiveSource, fmtVal(float64(a.gas)/float64(a.n)), a.txMax, a.numMin)
			}},
		{name: "append mode",
			query:     "SELECT window(block_ts, '15 minutes') AS window, miner, count(*) FROM blocks GROUP BY window(block_ts, '15 minutes'), miner",
			watermark: "block_ts, 30 minutes", mode: "append", size: 15 * time.Minute, slide: 15 * time.Minute, byMiner: true, closedBy: 30 * time.Minute,
			keep: func(archiveBlock) bool { return true },
			line: func(w [2]time.Time, key string, a agg) string {
				return fmt.Sprintf("start=%s end=%s miner=%s count=%d", fmtVal(w[0]), fmtVal(w[1]), key, a.n)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			cfg := pipeline.Config{Checkpoint: filepath.Join(sub, "checkpoint"), Table: filepath.Join(sub, "table"), LocalDir: filepath.Join(sub, "cache"),
				Sources: []pipeline.SourceSpec{env.ArchiveSource(1)}, Conf: EvolutionConf(4), Trigger: engine.Trigger{Kind: engine.AvailableNow},
				Query: tc.query, WithWatermark: tc.watermark, OutputMode: tc.mode}
			if _, err := pipeline.Run(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			got := tableLines(t, cfg.Table)
			// The recount.
			type key struct {
				w [2]time.Time
				k string
			}
			m := map[key]*agg{}
			kept := 0
			for _, b := range blocks {
				if !tc.keep(b) {
					continue
				}
				kept++
				k := ""
				if tc.byMiner {
					k = strings.ToLower(b.Miner)
				}
				for _, w := range windowsOf(b.Timestamp, tc.size, tc.slide) {
					a := m[key{w, k}]
					if a == nil {
						a = &agg{numMin: math.MaxInt64}
						m[key{w, k}] = a
					}
					a.n++
					a.gas += b.GasUsed
					a.txMax = max(a.txMax, b.TransactionCount)
					a.numMin = min(a.numMin, b.Number)
				}
			}
			if tc.name == "filtered hourly gas per miner" && (kept == 0 || kept == len(blocks)) {
				t.Fatalf("the filter keeps %d of %d blocks: the test would not test it", kept, len(blocks))
			}
			var want []string
			for k, a := range m {
				if tc.closedBy > 0 && k.w[1].After(maxTs.Add(-tc.closedBy)) {
					continue
				}
				want = append(want, tc.line(k.w, k.k, *a))
			}
			sort.Strings(want)
			if len(got) != len(want) {
				t.Fatalf("table has %d rows, recount %d", len(got), len(want))
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("row %d:\n table   %s\n recount %s", i, got[i], want[i])
				}
			}
			t.Logf("%s: %d rows equal to the recount", tc.name, len(got))
		})
	}
}
