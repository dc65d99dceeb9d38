package pipeline

import (
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/shape"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/storage/s3serve"
	"github.com/ethstream/ethstream/stream"
)

// format1Query is the query of testdata/format1 (its README says how that
// checkpoint was written): an avg of a BIGINT, which state format 1 keeps
// as a long sum and format 2 as a double.
const format1Query = "SELECT window(block_ts, '1 hour') AS window, miner, count(*) AS n, avg(gas_used) AS gas, " +
	"min(transaction_count) AS min_txs FROM blocks GROUP BY window(block_ts, '1 hour'), miner"

// TestFormat1CheckpointResumes restarts a checkpoint and table that an
// earlier ethstream wrote (agg state format 1, one batch over the first of
// two archive days), moved to another directory and served from another
// endpoint: the query keeps its id, its batch ids continue, the state stays
// in format 1, and the table equals a recount of both days from the raw
// Parquet files (the avg exact: a long sum over a count).
func TestFormat1CheckpointResumes(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	root := filepath.Join(dir, "s3")
	archive := filepath.Join(root, "aws-public-blockchain")
	from := time.Date(2021, 8, 5, 0, 0, 0, 0, time.UTC)
	if _, err := archivegen.Generate(ctx, archivegen.Options{Out: archive, Preset: chain.RangePreset(from, 2), Seed: 1}); err != nil {
		t.Fatal(err)
	}
	srv, err := s3serve.Start(ctx, s3serve.Options{Root: root, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ckpt, table := filepath.Join(dir, "checkpoint"), filepath.Join(dir, "table")
	copyTree(t, "testdata/format1/checkpoint", ckpt)
	copyTree(t, "testdata/format1/table", table)
	before, err := shape.ReadLatest(vfs.Default, ckpt)
	if err != nil || before == nil || !strings.Contains(before.Shape.StateSchema, " gas int64,") {
		t.Fatalf("the fixture's shape is not state format 1 (%v): %+v", err, before)
	}

	cfg := Config{
		Checkpoint: ckpt, Table: table, LocalDir: filepath.Join(dir, "local"),
		Sources: []SourceSpec{{Name: "arch", Format: "s3archive", URI: "s3://aws-public-blockchain/v1.0/eth/blocks?endpoint=" +
			url.QueryEscape(srv.URL()) + "&region=us-east-2&anonymous=true&maxFilesPerTrigger=1"}},
		Conf: map[string]string{"spark.sql.shuffle.partitions": "2",
			"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true",
			"spark.sql.streaming.offsetLog.formatVersion":              "2"},
		Query:   format1Query,
		Trigger: engine.Trigger{Kind: engine.AvailableNow},
		Logger:  slog.New(slog.DiscardHandler),
		Clock:   stream.SystemClock{},
	}
	sum, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if sum.NewCheckpoint || sum.QueryID != "9bfae845-b287-49ae-b63b-39b9e15cffbe" || sum.FirstBatchID != 1 || sum.DataBatches != 1 {
		t.Fatalf("resume: %+v, want the fixture's query id and data batch 1", sum)
	}
	after, err := shape.ReadLatest(vfs.Default, ckpt)
	if err != nil || !strings.Contains(after.Shape.StateSchema, " gas int64,") {
		t.Fatalf("the state left format 1 (%v): %+v", err, after)
	}
	want := format1Recount(t, archive)
	got := format1Table(t, table)
	if len(got) != len(want) {
		t.Fatalf("table has %d keys, the recount %d", len(got), len(want))
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Fatalf("%v: table %+v, recount %+v", k, g, w)
		}
	}
}

type format1Key struct {
	hour  int64 // window start, µs
	miner string
}

type format1Row struct {
	n, minTxs int64
	gas       float64
}

// format1Recount computes the query's rows from the archive's Parquet files.
func format1Recount(t *testing.T, archive string) map[format1Key]format1Row {
	t.Helper()
	type blockRow struct {
		Timestamp        int64  `parquet:"timestamp"`
		Miner            string `parquet:"miner"`
		GasUsed          int64  `parquet:"gas_used"`
		TransactionCount int64  `parquet:"transaction_count"`
	}
	type acc struct{ n, gas, minTxs int64 }
	accs := map[format1Key]*acc{}
	archiveRows(t, archive, func(b blockRow) {
		k := format1Key{b.Timestamp - b.Timestamp%time.Hour.Microseconds(), b.Miner}
		a := accs[k]
		if a == nil {
			a = &acc{minTxs: math.MaxInt64}
			accs[k] = a
		}
		a.n++
		a.gas += b.GasUsed
		a.minTxs = min(a.minTxs, b.TransactionCount)
	})
	want := make(map[format1Key]format1Row, len(accs))
	for k, a := range accs {
		want[k] = format1Row{n: a.n, minTxs: a.minTxs, gas: float64(a.gas) / float64(a.n)}
	}
	return want
}

// format1Table reads the query's Delta table, failing on a duplicate key.
func format1Table(t *testing.T, path string) map[format1Key]format1Row {
	t.Helper()
	ctx := t.Context()
	tbl, err := delta.OpenFS(ctx, vfs.Default, path)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	got := map[format1Key]format1Row{}
	err = snap.Rows(ctx, func(r map[string]any) error {
		w := r["window"].(map[string]any)
		k := format1Key{w["start"].(time.Time).UnixMicro(), r["miner"].(string)}
		if _, dup := got[k]; dup {
			return fmt.Errorf("duplicate row %v", k)
		}
		got[k] = format1Row{n: r["n"].(int64), minTxs: r["min_txs"].(int64), gas: r["gas"].(float64)}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}
