package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/chain/ethnode"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/sources/ethrpc"
	"github.com/ethstream/ethstream/sources/s3archive"
	"github.com/ethstream/ethstream/stream"
)

// TestArchiveAndLiveRowsAgree: a block read from the archive and the same
// block read from the JSON-RPC node are identical in every block column,
// nulls included. The node's mined blocks are exported as archive files
// (ethnode.Node.ExportArchive, the archive writer's own rows), read back by
// the file source, and compared with what the live source parses from
// eth_getBlockByNumber. The node continues the archive's total difficulty.
func TestArchiveAndLiveRowsAgree(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	m, err := archivegen.Generate(ctx, archivegen.Options{Out: filepath.Join(dir, "arch"), Preset: chain.LastDaysPreset(1), Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	node, err := ethnode.Start(ctx, ethnode.Options{Manifest: m, Seed: 3, Addr: "127.0.0.1:0", Manual: true, InitialBlocks: 120})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	first, last := m.LastBlock+1, m.LastBlock+120
	files, err := node.ExportArchive(filepath.Join(dir, "exported"), first, last)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0].Rows != 120 || files[0].FirstBlock != first {
		t.Fatalf("export wrote %v", files)
	}
	archive := readAll(t, archiveSource(t, filepath.Join(dir, "exported")))
	liveSrc, err := ethrpc.New(ethrpc.Options{Endpoints: []string{node.URL()}, StartBlock: first, MaxBlocksPerTrigger: 50, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer liveSrc.Close()
	live := readAll(t, liveSrc)
	if len(archive) != 120 || len(live) != 120 {
		t.Fatalf("%d archive rows, %d live rows, want 120", len(archive), len(live))
	}
	for i := range live {
		if archive[i] != live[i] {
			t.Fatalf("block %d:\narchive %s\nlive    %s", first+uint64(i), archive[i], live[i])
		}
	}
	if strings.Contains(live[0], "=null") || !strings.Contains(live[0], " withdrawals_root=0x") {
		t.Fatalf("a post-Shanghai live row with a null: %s", live[0])
	}
	// The node continues the archive's total difficulty.
	arch := readAll(t, archiveSource(t, filepath.Join(dir, "arch")))
	td := func(row string) string {
		_, v, _ := strings.Cut(row, " total_difficulty=")
		v, _, _ = strings.Cut(v, " ")
		return v
	}
	if td(arch[len(arch)-1]) != td(live[0]) {
		t.Fatalf("archive ends with total_difficulty %s, the node reports %s", td(arch[len(arch)-1]), td(live[0]))
	}
}

func archiveSource(t *testing.T, root string) stream.Source {
	t.Helper()
	s, err := s3archive.New(s3archive.Options{URI: "file://" + filepath.ToSlash(root) + "/v1.0/eth/blocks", Columns: BlockArchiveColumns()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// readAll opens src with every block column and reads it to its latest
// offset, one rendered row per block (streamtest.Row, columns in
// ethblock.Columns order).
func readAll(t *testing.T, src stream.Source) []string {
	t.Helper()
	rows, _ := readRows(t, src)
	return rows
}

// readRows is readAll, also returning each row as column -> value (int64,
// float64 or string; nil for a null).
func readRows(t *testing.T, src stream.Source) ([]string, []map[string]any) {
	t.Helper()
	return readRowsOf(t, src, ethblock.Columns)
}

// readRowsOf is readRows with the projection cols.
func readRowsOf(t *testing.T, src stream.Source, cols []string) ([]string, []map[string]any) {
	t.Helper()
	var vals []map[string]any
	ctx := context.Background()
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/meta", 0o755); err != nil {
		t.Fatal(err)
	}
	env := stream.SourceEnv{Name: "s", MetadataDir: "/meta", FS: fs, Columns: cols, Clock: stream.SystemClock{},
		Logger: slog.New(slog.DiscardHandler)}
	if err := src.Open(ctx, env); err != nil {
		t.Fatal(err)
	}
	var rows []string
	var start stream.Offset
	for {
		end, err := src.LatestOffset(ctx, start)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(end, start) {
			return rows, vals
		}
		err = src.ReadBatch(ctx, start, end, func(b *stream.Batch) error {
			if err := b.Validate(); err != nil {
				return err
			}
			for i := range b.Len {
				rows = append(rows, streamtest.Row(b, i))
				vals = append(vals, streamtest.Values(b, i))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		start = end
	}
}

// TestQueryOverAnyColumnAcrossHandover: a query over columns that are not
// among the seven of the reference query (base_fee_per_gas, gas_limit,
// difficulty, size) runs over the archive, then over the archive and the
// live node, and its table equals a recount of the blocks both sources
// decode, per hourly window.
func TestQueryOverAnyColumnAcrossHandover(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	m, err := archivegen.Generate(ctx, archivegen.Options{Out: filepath.Join(dir, "arch"), Preset: chain.LastDaysPreset(1), Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	node, err := ethnode.Start(ctx, ethnode.Options{Manifest: m, Seed: 2, Addr: "127.0.0.1:0", Manual: true, InitialBlocks: 60})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	const query = "SELECT window(block_ts, '1 hour') AS window, avg(base_fee_per_gas) AS fee, max(gas_limit) AS gas_limit, " +
		"sum(size) AS bytes, count(*) AS blocks FROM blocks WHERE difficulty = 0 GROUP BY window(block_ts, '1 hour')"
	cfg := Config{
		Checkpoint: filepath.Join(dir, "ck"), Table: filepath.Join(dir, "tbl"), LocalDir: filepath.Join(dir, "cache"),
		Conf: map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true", "spark.sql.shuffle.partitions": "2"},
		Sources: []SourceSpec{{Name: "s3_backfill", Format: "s3archive",
			URI: "file://" + filepath.ToSlash(filepath.Join(dir, "arch")) + "/v1.0/eth/blocks"}},
		Query:   query,
		Trigger: engine.Trigger{Kind: engine.AvailableNow},
		Logger:  slog.New(slog.DiscardHandler),
	}
	if _, err := Run(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Sources = append(cfg.Sources, SourceSpec{Name: "eth_live", Format: "ethrpc", URI: fmt.Sprintf(
		"%s?maxBlocksPerTrigger=20&start_block=%d&confirmations=0&start_parent_hash=%s", node.URL(), m.LastBlock+1, m.LastHash)})
	cfg.Trigger = engine.Trigger{Kind: engine.ProcessingTime, Interval: time.Millisecond}
	cfg.MaxBatches = 3
	if _, err := Run(ctx, cfg); err != nil {
		t.Fatal(err)
	}

	_, arch := readRows(t, archiveSource(t, filepath.Join(dir, "arch")))
	liveSrc, err := ethrpc.New(ethrpc.Options{Endpoints: []string{node.URL()}, StartBlock: m.LastBlock + 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer liveSrc.Close()
	_, live := readRows(t, liveSrc)
	if len(live) != 60 {
		t.Fatalf("%d live rows", len(live))
	}
	type agg struct {
		feeSum, feeN, maxLimit, bytes, blocks int64
	}
	want := map[int64]*agg{}
	for _, r := range append(arch, live...) {
		if r[ethblock.ColDifficulty].(float64) != 0 {
			continue
		}
		w := r[ethblock.ColBlockTS].(int64) / 3_600_000_000 * 3_600_000_000
		a := want[w]
		if a == nil {
			a = &agg{}
			want[w] = a
		}
		if fee, ok := r[ethblock.ColBaseFeePerGas].(int64); ok {
			a.feeSum += fee
			a.feeN++
		}
		a.maxLimit = max(a.maxLimit, r[ethblock.ColGasLimit].(int64))
		a.bytes += r[ethblock.ColSize].(int64)
		a.blocks++
	}
	tbl, err := delta.OpenFS(ctx, vfs.Default, cfg.Table)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	err = snap.Rows(ctx, func(r map[string]any) error {
		got++
		w := r["window"].(map[string]any)["start"].(time.Time).UnixMicro()
		a := want[w]
		if a == nil {
			return fmt.Errorf("table window %d not in the recount", w)
		}
		fee := float64(a.feeSum) / float64(a.feeN)
		if f := r["fee"].(float64); math.Abs(f-fee) > 1e-9*fee || r["gas_limit"] != a.maxLimit || r["bytes"] != a.bytes || r["blocks"] != a.blocks {
			return fmt.Errorf("window %d: table %v, recount fee %v %+v", w, r, fee, *a)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got != len(want) {
		t.Fatalf("table has %d windows, recount %d", got, len(want))
	}
}
