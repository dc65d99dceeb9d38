package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/internal/sparkref"
	"github.com/ethstream/ethstream/sink/delta"
)

// TestJoinPrunedRestart: a SQL join stores only the columns its query
// reads above the join; a restart that adds a WHERE over a column it does
// not store is STATE_SCHEMA_MISMATCH before anything is written (the
// checkpoint and the table byte-identical), naming the column; a restart
// whose WHERE reads stored columns only, and one that reads fewer
// columns, run on the same state with the rows the unpruned join gives.
// Those two restarts also need their sources to read the columns the
// state stores beyond the query's (the engine widens a side's projection
// by the open join's InputColumns).
func TestJoinPrunedRestart(t *testing.T) {
	root := t.TempDir()
	const t0 = int64(1_767_225_600_000_000) // 2026-01-01, µs
	spec := func(rel string) SourceSpec {
		return SourceSpec{Name: rel, Format: "parquet", URI: "file://" + filepath.ToSlash(filepath.Join(root, rel)) + "?schema=" +
			url.QueryEscape("k STRING, ts TIMESTAMP, id BIGINT")}
	}
	const from = " FROM lhs WATERMARK ts DELAY OF INTERVAL 1 HOUR AS a JOIN rhs WATERMARK ts DELAY OF INTERVAL 1 HOUR AS b " +
		"ON a.k = b.k AND a.ts BETWEEN b.ts - INTERVAL 10 MINUTES AND b.ts + INTERVAL 10 MINUTES"
	ckpt, table := filepath.Join(root, "ckpt"), filepath.Join(root, "table")
	run := func(query string) error {
		t.Helper()
		cfg := Config{Checkpoint: ckpt, Table: table, LocalDir: filepath.Join(root, "local"),
			Sources: []SourceSpec{spec("lhs"), spec("rhs")}, Trigger: engine.Trigger{Kind: engine.AvailableNow}, Logger: slog.New(slog.DiscardHandler),
			OutputMode: "append", Query: query, Conf: map[string]string{"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true", "spark.sql.shuffle.partitions": "2"}}
		_, err := Run(context.Background(), cfg)
		return err
	}
	// Round 0: the left rows 3 and 7 under key x are stored, and the right
	// row 2; the query reads a.id and b.id, so neither side stores its
	// column source.
	writeJoinFiles(t, root, 0, 0, []sparkref.JoinRow{{K: "x", TS: t0, ID: 3}, {K: "x", TS: t0, ID: 7}}, []sparkref.JoinRow{{K: "x", TS: t0, ID: 2}})
	if err := run("SELECT a.id AS lid" + from + " WHERE b.id > 0"); err != nil {
		t.Fatal(err)
	}
	writeJoinFiles(t, root, 1, 0, []sparkref.JoinRow{{K: "x", TS: t0 + 1, ID: 9}}, []sparkref.JoinRow{{K: "x", TS: t0, ID: 10}})
	before := treeHash(t, ckpt, table)
	for _, q := range []string{
		"SELECT a.id AS lid" + from + " WHERE a.source = 'lhs'",
		"SELECT a.id AS lid" + from + " WHERE b.id > 0 AND b.source <> a.source",
	} {
		err := run(q)
		if !errcode.Is(err, errcode.StateSchemaMismatch) || !strings.Contains(err.Error(), "reads a.source") || !strings.Contains(err.Error(), "To fix:") {
			t.Fatalf("%s\non a state without a.source: %v, want STATE_SCHEMA_MISMATCH naming a.source with a remedy", q, err)
		}
		if after := treeHash(t, ckpt, table); after != before {
			t.Fatalf("%s: the refused start changed the checkpoint or table:\n%s\nbefore:\n%s", q, after, before)
		}
	}
	// Round 1 with a WHERE over a stored column: the new right row 10
	// joins the stored 7 (not 3), the new left row 9 the stored 2 and 10.
	if err := run("SELECT a.id AS lid" + from + " WHERE a.id > 5"); err != nil {
		t.Fatal(err)
	}
	// Round 2 reads fewer columns than the state stores (not b.id): the
	// state keeps it; the new right row 11 joins 3, 7 and 9.
	writeJoinFiles(t, root, 2, 0, nil, []sparkref.JoinRow{{K: "x", TS: t0, ID: 11}})
	if err := run("SELECT a.id AS lid" + from); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tbl, err := delta.OpenFS(ctx, vfs.Default, table)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := snap.Rows(ctx, func(r map[string]any) error {
		got = append(got, fmt.Sprint(r["lid"]))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{"3", "3", "7", "7", "7", "9", "9", "9"}; !slices.Equal(got, want) {
		t.Fatalf("joined rows %v, want %v", got, want)
	}
}
