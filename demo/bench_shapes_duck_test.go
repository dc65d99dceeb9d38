package demo

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/ethtables"
	"github.com/ethstream/ethstream/internal/duckref"
	"github.com/ethstream/ethstream/pipeline"
	"github.com/ethstream/ethstream/sink/delta"
)

// TestShapesEqualDuckDB runs the join, session, burned-fees and transactions shapes of
// `ethstream bench --shape` through the engine over a small archive and
// DuckDB's batch job for each (the very SQL the bench times, through
// duckref copysql) over the same files, and compares the answers: the join's
// rows, the sessions the watermark closed (DuckDB's less those still open at
// the input's end: ending after the final watermark, the latest block less
// the delay), and the transactions' groups (fees to 1e-9 relative: sums of
// doubles in another order). Skipped without -duckref (or DUCKREF), failed
// under CI=true.
func TestShapesEqualDuckDB(t *testing.T) {
	bin := duckref.Binary(t)
	dir := t.TempDir()
	arch := filepath.Join(dir, "arch")
	if _, err := archivegen.Generate(t.Context(), archivegen.Options{Out: arch, Preset: chain.LastBlocksPreset(600), Seed: 9,
		Tables: []string{ethtables.Transactions}}); err != nil {
		t.Fatal(err)
	}
	tableDir := func(table string) string {
		return filepath.Join(arch, filepath.FromSlash(archivegen.TablePrefix(table)))
	}
	blocks, txs := tableDir(archivegen.TableBlocks), tableDir(ethtables.Transactions)
	run := func(name string) (table, duckOut string) {
		t.Helper()
		i := slices.IndexFunc(benchShapes, func(s BenchShape) bool { return s.Name == name })
		s := benchShapes[i]
		src, glob := pipeline.SourceSpec{Name: ArchiveSource, Format: "s3archive", URI: "file://" + filepath.ToSlash(blocks) + "?maxFilesPerTrigger=1"},
			filepath.Join(blocks, "*", "*.parquet")
		if s.Input == shapeTransactions {
			src.URI, glob = "file://"+filepath.ToSlash(txs), filepath.Join(txs, "*", "*.parquet")
		}
		sd := filepath.Join(dir, name)
		cfg := pipeline.Config{Checkpoint: filepath.Join(sd, "ck"), Table: filepath.Join(sd, "table"), LocalDir: filepath.Join(sd, "cache"),
			Sources: []pipeline.SourceSpec{src}, Conf: EvolutionConf(4), Trigger: engine.Trigger{Kind: engine.AvailableNow},
			Logger: slog.New(slog.DiscardHandler)}
		s.Config(&cfg, src, dir)
		if _, err := pipeline.Run(t.Context(), cfg); err != nil {
			t.Fatalf("shape %s: %v", name, err)
		}
		q := strings.NewReplacer("{blocks}", duckParquet(glob), "{transactions}", fmt.Sprintf("read_parquet('%s')", glob)).Replace(s.DuckDB)
		duckOut = filepath.Join(sd, "duckdb.parquet")
		if out, err := exec.CommandContext(t.Context(), bin, "copysql", duckOut, q).CombinedOutput(); err != nil {
			t.Fatalf("duckref copysql, shape %s: %v\n%s", name, err, out)
		}
		return cfg.Table, duckOut
	}

	t.Run("join", func(t *testing.T) {
		table, out := run("join")
		got := deltaRowsCSV(t, table, "number", "miner", "parent_number", "parent_miner")
		want := duckref.Lines(t, bin, out, "SELECT number, miner, parent_number, parent_miner FROM t")
		sameRows(t, got, want, 500)
	})
	t.Run("session", func(t *testing.T) {
		table, out := run("session")
		got := deltaRowsCSV(t, table, "session_start", "session_end", "miner", "blocks", "gas_used")
		// The final watermark is the latest block less the delay: the
		// latest session's end less the gap and the delay.
		want := duckref.Lines(t, bin, out, `SELECT epoch_us(session_start), epoch_us(session_end), miner, blocks, CAST(gas_used AS BIGINT) FROM t
			WHERE session_end <= (SELECT max(session_end) FROM t) - INTERVAL 20 MINUTE`)
		sameRows(t, got, want, 20)
	})
	t.Run("burned-fees", func(t *testing.T) {
		table, out := run("burned-fees")
		got := map[string]float64{}
		for _, r := range deltaRowsCSV(t, table, "hour", "blocks", "burned_eth") {
			k, v, _ := strings.Cut(r[strings.IndexByte(r, ',')+1:], ",")
			f, _ := strconv.ParseFloat(v, 64)
			got[r[:strings.IndexByte(r, ',')]+","+k] = f
		}
		want := duckref.Lines(t, bin, out, "SELECT epoch_us(hour) AS h, blocks, burned_eth FROM t")
		for _, r := range want {
			f := strings.Split(r, ",")
			w, _ := strconv.ParseFloat(f[2], 64)
			g, ok := got[f[0]+","+f[1]]
			if !ok || math.Abs(g-w) > 1e-9*math.Abs(w) || w == 0 {
				t.Fatalf("hour %s, %s blocks: engine %v (present %v), DuckDB %v", f[0], f[1], g, ok, w)
			}
		}
		if len(got) != len(want) || len(want) < 2 {
			t.Fatalf("engine %d hours, DuckDB %d", len(got), len(want))
		}
	})
	t.Run("transactions", func(t *testing.T) {
		table, out := run("transactions")
		got, err := txTable(t.Context(), table)
		if err != nil {
			t.Fatal(err)
		}
		want := duckref.Lines(t, bin, out, "SELECT epoch_us(window_start), transaction_type, txs, fees_gwei FROM t")
		var n int64
		for _, r := range want {
			f := strings.Split(r, ",")
			w, _ := strconv.ParseInt(f[0], 10, 64)
			typ, _ := strconv.ParseInt(f[1], 10, 64)
			c, _ := strconv.ParseInt(f[2], 10, 64)
			fees, _ := strconv.ParseFloat(f[3], 64)
			a, ok := got[txGroup{w, typ}]
			if !ok || a.txs != c || math.Abs(a.fees-fees) > 1e-9*math.Abs(fees) {
				t.Fatalf("group (%d, type %d): engine %+v (present %v), DuckDB %d txs %v gwei", w, typ, a, ok, c, fees)
			}
			n += c
		}
		if len(got) != len(want) || n < 10_000 {
			t.Fatalf("engine %d groups, DuckDB %d (%d transactions)", len(got), len(want), n)
		}
	})
}

// deltaRowsCSV reads cols of a Delta table's rows as sorted CSV lines
// (timestamps as epoch microseconds).
func deltaRowsCSV(t *testing.T, table string, cols ...string) []string {
	t.Helper()
	ctx := context.Background()
	tb, err := delta.Open(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tb.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	if err := snap.Rows(ctx, func(row map[string]any) error {
		f := make([]string, len(cols))
		for i, c := range cols {
			switch v := row[c].(type) {
			case time.Time:
				f[i] = strconv.FormatInt(v.UnixMicro(), 10)
			default:
				f[i] = fmt.Sprint(v)
			}
		}
		rows = append(rows, strings.Join(f, ","))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(rows)
	return rows
}

// sameRows fails unless got and want hold the same rows, at least least.
func sameRows(t *testing.T, got, want []string, least int) {
	t.Helper()
	if !slices.Equal(got, want) || len(want) < least {
		n := min(len(got), len(want), 10)
		t.Fatalf("engine %d rows, DuckDB %d (want at least %d); first rows\nengine %q\nDuckDB %q", len(got), len(want), least, got[:n], want[:n])
	}
}
