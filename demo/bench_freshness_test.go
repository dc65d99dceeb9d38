package demo

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/sink/delta"
)

// tableColumns is the columns of the Delta table at path's rows.
func tableColumns(t *testing.T, path string) []string {
	t.Helper()
	tb, err := delta.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tb.Snapshot(context.Background(), -1)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	if err := snap.Rows(context.Background(), func(row map[string]any) error {
		for k := range row {
			seen[k] = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var cols []string
	for k := range seen {
		cols = append(cols, k)
	}
	slices.Sort(cols)
	return cols
}

// TestSelectFreshnessQueries: none is the reference query, all is every
// one in order, and an unknown name is refused before anything runs.
func TestSelectFreshnessQueries(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{{nil, "reference"}, {[]string{"all"}, "reference where two-stateful transactions"}, {[]string{"transactions", "where"}, "where transactions"}} {
		got, err := SelectFreshnessQueries(c.in)
		if err != nil || strings.Join(got, " ") != c.want {
			t.Errorf("%v: %v, %v; want %s", c.in, got, err, c.want)
		}
	}
	if _, err := SelectFreshnessQueries([]string{"joins"}); err == nil || !strings.Contains(err.Error(), "two-stateful") {
		t.Fatalf("unknown query: %v", err)
	}
}

// TestBenchFreshnessShort runs the freshness bench end to end on a few
// blocks, with every query --freshness-query names: every measured block
// has a freshness, each mined block was notified, the figures are ordered,
// and the run's table is the query's.
func TestBenchFreshnessShort(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	dir := t.TempDir()
	for _, q := range FreshnessQueryNames() {
		t.Run(q, func(t *testing.T) { freshnessShort(t, dir, q) })
	}
}

// freshnessRate is the in-repo node's blocks per second here. A node that
// falls behind its wall-clock schedule mines the backlog (32 blocks at a
// time) before each call it answers; at 40 blocks/s under load ~25 a block
// cost 32 ms of wall time to mine (BenchmarkNodeBatch20's mine-ms/block),
// more than the run could spend, so batch 0's dozen calls outlasted the
// source's 30 s batch deadline (RPC_UNAVAILABLE, both subtests of a stress
// run). At 10 the node needs a third of that even then.
const freshnessRate = 10

func freshnessShort(t *testing.T, dir, query string) {
	res, err := BenchFreshness(context.Background(), FreshnessOptions{WorkDir: dir, Seed: 3, Blocks: 20, Rate: freshnessRate, Query: query})
	if err != nil {
		t.Fatal(err)
	}
	if res.Query != query || !strings.HasSuffix(res.Targets[0].Name, map[bool]string{true: "p50", false: "p50 (query " + query + ")"}[query == "reference"]) {
		t.Fatalf("query %q: result's %q, targets %+v", query, res.Query, res.Targets)
	}
	cols := tableColumns(t, filepath.Join(dir, "freshness", "table"))
	if want := map[string]string{"transactions": "fees_gwei", "two-stateful": "count", "where": "count", "reference": "count"}[query]; !slices.Contains(cols, want) {
		t.Fatalf("query %q wrote columns %v, want %s among them", query, cols, want)
	}
	if res.Blocks != 20 || res.Batches == 0 || res.Batches > 20 || res.Trigger != "real-time" {
		t.Fatalf("%d blocks in %d batches, trigger %q", res.Blocks, res.Batches, res.Trigger)
	}
	if !(0 < res.P50Ms && res.P50Ms <= res.P99Ms && res.P99Ms <= res.MaxMs) {
		t.Fatalf("freshness p50 %v p99 %v max %v", res.P50Ms, res.P99Ms, res.MaxMs)
	}
	if n, _ := strconv.Atoi(res.Notified); res.Resubscribe != "1" || n < 20 {
		t.Fatalf("subscriptions %s, notifications %s", res.Resubscribe, res.Notified)
	}
	if res.TableFiles == 0 || res.LogFiles == 0 || res.CkptFiles == 0 || res.PhaseMedianMs["triggerExecution"] <= 0 {
		t.Fatalf("files %d/%d/%d, phases %v", res.TableFiles, res.LogFiles, res.CkptFiles, res.PhaseMedianMs)
	}
}
