package demo

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/chain/archivegen"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/ethtables"
	"github.com/ethstream/ethstream/internal/duckref"
	"github.com/ethstream/ethstream/pipeline"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/stream"
)

// The logs table's topics (array<string>) in queries: ERC-20 Transfer
// logs per token by their first topic, and every topic's count through
// explode in a subquery.
var (
	// TransfersPerToken counts the ERC-20 Transfer logs of each token:
	// three topics, the first the Transfer event's (size() first, so that
	// topics[0] is read only where it exists: ANSI raises
	// INVALID_ARRAY_INDEX for an empty array).
	TransfersPerToken = "SELECT address, count(*) AS transfers FROM blocks WHERE size(topics) = 3 AND topics[0] = '" +
		ethtables.TransferTopic.Hex() + "' GROUP BY address"
	// TopicCounts counts the logs each topic appears in (explode is a
	// generator: one row per element, aggregated by the outer query).
	TopicCounts = "SELECT topic, count(*) AS logs FROM (SELECT explode(topics) AS topic FROM blocks) GROUP BY topic"
)

// runLogsQuery runs query over the logs table of the archive at arch
// (backfill, available-now) and returns the table's (key, count) rows.
func runLogsQuery(t *testing.T, arch, dir, query, key, count string) map[string]int64 {
	t.Helper()
	cfg := pipeline.Config{Checkpoint: filepath.Join(dir, "ck"), Table: filepath.Join(dir, "tbl"), LocalDir: filepath.Join(dir, "cache"),
		Sources: []pipeline.SourceSpec{{Name: ArchiveSource, Format: "s3archive", URI: "file://" + filepath.ToSlash(arch) + "/v1.0/eth/logs"}},
		Conf:    EvolutionConf(4), Trigger: engine.Trigger{Kind: engine.AvailableNow}, Query: query,
		Logger: slog.New(slog.DiscardHandler)}
	if _, err := pipeline.Run(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	snap, err := tableSnapshot(t.Context(), cfg.Table, -1)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	err = snap.Scan(t.Context(), func(b *stream.Batch) error {
		k, n := b.Column(key), b.Column(count)
		if k == nil || n == nil {
			return fmt.Errorf("the table has no %s, %s: %v", key, count, b.Columns)
		}
		for i := range b.Len {
			out[k.Strings[i]] = n.Int64s[i]
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// logsRecount reads the archive's logs files with parquet-go's row reader
// into ethtables.Log (not the engine's decoder) and counts both answers.
func logsRecount(ctx context.Context, arch string) (transfers, topics map[string]int64, err error) {
	files, err := filepath.Glob(filepath.Join(arch, "v1.0", "eth", "logs", "*", "*.parquet"))
	if err != nil || len(files) == 0 {
		return nil, nil, fmt.Errorf("no logs files under %s (%v)", arch, err)
	}
	transfers, topics = map[string]int64{}, map[string]int64{}
	for _, f := range files {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		rows, err := parquet.ReadFile[ethtables.Log](f)
		if err != nil {
			return nil, nil, err
		}
		for _, l := range rows {
			if len(l.Topics) == 3 && l.Topics[0] == ethtables.TransferTopic.Hex() {
				transfers[l.Address]++
			}
			for _, tp := range l.Topics {
				topics[tp]++
			}
		}
	}
	return transfers, topics, nil
}

// TestLogsTopicsQueries: the two topics queries run by the engine over an
// archive's logs equal a recount of the same files by parquet-go's row
// reader; with -duckref, DuckDB's answer over the files too (its list
// indexes are 1-based, unnest is explode).
func TestLogsTopicsQueries(t *testing.T) {
	dir := t.TempDir()
	arch := filepath.Join(dir, "arch")
	if _, err := archivegen.Generate(t.Context(), archivegen.Options{Out: arch, Preset: chain.LastBlocksPreset(300), Seed: 5, Tables: []string{ethtables.Logs}}); err != nil {
		t.Fatal(err)
	}
	wantTransfers, wantTopics, err := logsRecount(t.Context(), arch)
	if err != nil {
		t.Fatal(err)
	}
	if len(wantTransfers) < 2 || len(wantTopics) < 10 {
		t.Fatalf("the archive has %d tokens with transfers and %d topics: too few to test", len(wantTransfers), len(wantTopics))
	}
	gotTransfers := runLogsQuery(t, arch, filepath.Join(dir, "q1"), TransfersPerToken, "address", "transfers")
	if !maps.Equal(gotTransfers, wantTransfers) {
		t.Fatalf("transfers per token: engine %v\nrecount %v", gotTransfers, wantTransfers)
	}
	gotTopics := runLogsQuery(t, arch, filepath.Join(dir, "q2"), TopicCounts, "topic", "logs")
	if !maps.Equal(gotTopics, wantTopics) {
		t.Fatalf("topic counts: engine %d topics, recount %d", len(gotTopics), len(wantTopics))
	}
	bin := duckref.Optional(t)
	if bin == "" {
		return
	}
	glob := arch + "/v1.0/eth/logs/*/*.parquet"
	for _, c := range []struct {
		sql  string
		want map[string]int64
	}{
		{"SELECT address, count(*) FROM t WHERE len(topics) = 3 AND topics[1] = '" + ethtables.TransferTopic.Hex() + "' GROUP BY ALL ORDER BY ALL", wantTransfers},
		{"SELECT tp, count(*) FROM (SELECT unnest(topics) AS tp FROM t) GROUP BY ALL ORDER BY ALL", gotTopics},
	} {
		recs := duckref.Table(t, bin, glob, c.sql)
		if len(recs) < 2 {
			t.Fatalf("%s: DuckDB answered no row", c.sql)
		}
		duck := map[string]int64{}
		for _, r := range recs[1:] {
			n, _ := strconv.ParseInt(r[1], 10, 64)
			duck[r[0]] = n
		}
		if !maps.Equal(duck, c.want) {
			t.Fatalf("%s: DuckDB %d groups, the engine %d", c.sql, len(duck), len(c.want))
		}
	}
}

// TestTopicsRoundTrip: topics go Parquet (the archive) -> engine -> Delta
// (a stateless SELECT with topics[0] and size(topics) beside the array,
// the table's column array<string>, files in Spark's three-level LIST) -> the Delta source -> engine (explode, aggregated):
// the topic counts equal the parquet-go recount of the archive; the Delta
// table's schema names the array type, its files read back by parquet-go
// hold every log's topics, and with -duckref DuckDB reads the same lists
// from the table's files.
func TestTopicsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	arch := filepath.Join(dir, "arch")
	if _, err := archivegen.Generate(t.Context(), archivegen.Options{Out: arch, Preset: chain.LastBlocksPreset(200), Seed: 7, Tables: []string{ethtables.Logs}}); err != nil {
		t.Fatal(err)
	}
	_, wantTopics, err := logsRecount(t.Context(), arch)
	if err != nil {
		t.Fatal(err)
	}
	bronze := filepath.Join(dir, "bronze")
	cfg := pipeline.Config{Checkpoint: filepath.Join(dir, "ck1"), Table: bronze, LocalDir: filepath.Join(dir, "cache"),
		Sources: []pipeline.SourceSpec{{Name: ArchiveSource, Format: "s3archive", URI: "file://" + filepath.ToSlash(arch) + "/v1.0/eth/logs"}},
		Conf:    EvolutionConf(4), Trigger: engine.Trigger{Kind: engine.AvailableNow}, OutputMode: "append",
		Query:  "SELECT block_number, log_index, topics, topics[0] AS event, size(topics) AS n_topics FROM blocks WHERE size(topics) > 0",
		Logger: slog.New(slog.DiscardHandler)}
	if _, err := pipeline.Run(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	snap, err := tableSnapshot(t.Context(), bronze, -1)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(snap.Metadata.SchemaString, `{"name":"topics","type":{"type":"array","elementType":"string","containsNull":true},"nullable":true,"metadata":{}}`) {
		t.Fatalf("schema %s", snap.Metadata.SchemaString)
	}
	// The table's files, read by parquet-go into Go slices.
	type bronzeRow struct {
		BlockNumber *int64    `parquet:"block_number,optional"`
		LogIndex    *int64    `parquet:"log_index,optional"`
		Topics      []*string `parquet:"topics,optional,list"`
		Event       *string   `parquet:"event,optional"`
		NTopics     *int32    `parquet:"n_topics,optional"`
	}
	files, _ := filepath.Glob(filepath.Join(bronze, "*.parquet"))
	fileTopics := map[string]int64{}
	for _, f := range files {
		rows, err := parquet.ReadFile[bronzeRow](f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if len(r.Topics) == 0 || r.Event == nil || r.Topics[0] == nil || *r.Event != *r.Topics[0] || r.NTopics == nil || int(*r.NTopics) != len(r.Topics) {
				t.Fatalf("log %v/%v: topics %d, event %v, n_topics %v", r.BlockNumber, r.LogIndex, len(r.Topics), r.Event, r.NTopics)
			}
			for _, tp := range r.Topics {
				if tp == nil {
					t.Fatalf("a null topic in %s", f)
				}
				fileTopics[*tp]++
			}
		}
	}
	if !maps.Equal(fileTopics, wantTopics) {
		t.Fatalf("the Delta table's files hold %d topics, the archive %d", len(fileTopics), len(wantTopics))
	}
	// table show prints an array as a JSON list, in CSV and JSONL.
	for _, format := range []string{"csv", "jsonl"} {
		var buf strings.Builder
		if err := delta.Show(t.Context(), &buf, bronze, format, -1); err != nil {
			t.Fatal(err)
		}
		want := `["` + ethtables.TransferTopic.Hex() + `","0x`
		if format == "csv" {
			want = `"[""` + ethtables.TransferTopic.Hex() + `"",""0x` // the CSV cell quotes the JSON text
		}
		if !strings.Contains(buf.String(), want) {
			t.Fatalf("table show --format %s: no Transfer topics list in %.300s", format, buf.String())
		}
	}
	silver := filepath.Join(dir, "silver")
	cfg2 := pipeline.Config{Checkpoint: filepath.Join(dir, "ck2"), Table: silver, LocalDir: filepath.Join(dir, "cache2"),
		Sources: []pipeline.SourceSpec{{Name: "bronze", Format: "delta", URI: "file://" + filepath.ToSlash(bronze)}},
		Conf:    EvolutionConf(4), Trigger: engine.Trigger{Kind: engine.AvailableNow}, OutputMode: "update",
		Query:  "SELECT topic, count(*) AS logs FROM (SELECT explode(topics) AS topic FROM bronze) GROUP BY topic",
		Logger: slog.New(slog.DiscardHandler)}
	if _, err := pipeline.Run(t.Context(), cfg2); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	snap2, err := tableSnapshot(t.Context(), silver, -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := snap2.Scan(t.Context(), func(b *stream.Batch) error {
		for i := range b.Len {
			got[b.Column("topic").Strings[i]] = b.Column("logs").Int64s[i]
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, wantTopics) {
		t.Fatalf("through Delta: %d topics, the archive %d", len(got), len(wantTopics))
	}
	bin := duckref.Optional(t)
	if bin == "" {
		return
	}
	recs := duckref.Table(t, bin, bronze+"/*.parquet", "SELECT tp, count(*) FROM (SELECT unnest(topics) AS tp FROM t) GROUP BY ALL ORDER BY ALL")
	if len(recs) != len(wantTopics)+1 {
		t.Fatalf("DuckDB read %d topics from the Delta table's files, want %d", len(recs)-1, len(wantTopics))
	}
	for _, r := range recs[1:] {
		if n, _ := strconv.ParseInt(r[1], 10, 64); n != wantTopics[r[0]] {
			t.Fatalf("DuckDB: topic %s in %d logs, want %d", r[0], n, wantTopics[r[0]])
		}
	}
}
