package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ethstream/ethstream/agg"
	"github.com/ethstream/ethstream/chain"
	"github.com/ethstream/ethstream/engine"
	"github.com/ethstream/ethstream/pipeline"
	"github.com/ethstream/ethstream/sink/delta"
	"github.com/ethstream/ethstream/stream"
)

// backfilledTable generates a two-day archive and backfills it into a real
// Delta table through the engine (file by file, so there are several data
// files).
func backfilledTable(t *testing.T) (Options, *Env, string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	o := Options{WorkDir: filepath.Join(dir, "work"), ResultsDir: filepath.Join(dir, "results"), Preset: chain.LastDaysPreset(2)}
	o.defaults()
	env, err := Setup(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Close)
	table := filepath.Join(dir, "table")
	cfg := pipeline.Config{Checkpoint: filepath.Join(dir, "checkpoint"), Table: table, LocalDir: filepath.Join(dir, "cache"),
		Sources: []pipeline.SourceSpec{env.ArchiveSource(1)}, Conf: EvolutionConf(4), Trigger: engine.Trigger{Kind: engine.AvailableNow}}
	if _, err := pipeline.Run(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	return o, env, table
}

// compareWith runs check 8's recount of the archive and its comparison with
// the table at path.
func compareWith(t *testing.T, env *Env, path string) tableVsRecount {
	t.Helper()
	ctx := context.Background()
	raw, err := recount(ctx, env.ArchiveRoot, env.Manifest.Files, "", 1, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tableSnapshot(ctx, path, -1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := compareTable(raw, func(fn func(tableRow) error) error { return scanTable(ctx, snap, fn) })
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// check8Lines are the verification lines of check 8 on the table at path
// (no live blocks), by name.
func check8Lines(t *testing.T, o Options, env *Env, path string) map[string]Check {
	t.Helper()
	e := *env
	e.Table = path
	cs, err := newVerifier(o, &e).tableChecks(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]Check{}
	for _, c := range cs {
		m[c.Name] = c
	}
	return m
}

const (
	lineDups     = "8. duplicate (window, source, miner) rows"
	lineMismatch = "8. rows whose count differs from a recount of the raw blocks"
)

// TestRecountMatchesBruteForce: the column-wise, parallel recount equals a
// plain row-by-row read of every archive file.
func TestRecountMatchesBruteForce(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	ctx := context.Background()
	dir := t.TempDir()
	o := Options{WorkDir: dir, Preset: chain.LastDaysPreset(3)}
	o.defaults()
	env, err := Setup(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	want := map[windowKey]int64{}
	for _, b := range readArchive(t, env) {
		want[windowKey{windowOf(b.Timestamp), ArchiveSource, strings.ToLower(b.Miner)}]++
	}
	raw, err := recount(ctx, env.ArchiveRoot, env.Manifest.Files, "", 1, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(raw.miners))
	for m, id := range raw.miners {
		names[id] = m
	}
	got := map[windowKey]int64{}
	for i, g := range raw.archive {
		if i > 0 && groupCmp(raw.archive[i-1], g) >= 0 {
			t.Fatalf("groups %d and %d out of order: %v %v", i-1, i, raw.archive[i-1], g)
		}
		got[windowKey{g.start, ArchiveSource, names[g.miner]}] = int64(g.count)
	}
	if len(raw.live) != 0 {
		t.Fatalf("%d live groups without live blocks", len(raw.live))
	}
	if len(want) < 1000 {
		t.Fatalf("only %d groups: the archive is too small to test anything", len(want))
	}
	if d := diffRows(got, want); d != 0 {
		t.Fatalf("%d of %d groups differ from the brute-force recount", d, len(want))
	}
}

// TestLookupMatchesBruteForce: the galloping search finds exactly the
// groups a linear scan finds, whatever order the keys come in, and the
// out-of-order merge adds up a group two files hold.
func TestLookupMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for round := range 200 {
		var groups []archiveGroup
		for range rng.Intn(60) {
			groups = append(groups, archiveGroup{start: int64(rng.Intn(20)) * 300e6, miner: uint32(rng.Intn(5)), count: uint32(1 + rng.Intn(3))})
		}
		want := map[liveKey]uint32{}
		for _, g := range groups {
			want[liveKey{g.start, g.miner}] += g.count
		}
		g := &groupCounts{archive: slices.Clone(groups)}
		if err := g.sortAndMerge(); err != nil {
			t.Fatal(err)
		}
		if len(g.archive) != len(want) {
			t.Fatalf("round %d: %d groups after the merge, want %d", round, len(g.archive), len(want))
		}
		for range 100 {
			k := liveKey{int64(rng.Intn(22)-1) * 300e6, uint32(rng.Intn(6))}
			if rng.Intn(4) == 0 {
				k.start++ // not a window start
			}
			i, ok := g.lookup(k.start, k.miner)
			c, exists := want[k]
			if ok != exists || ok && g.archive[i].count != c {
				t.Fatalf("round %d: lookup %v = %d, %v; want found %v with %d", round, k, i, ok, exists, c)
			}
			if lb := sort.Search(len(g.archive), func(j int) bool { return groupCmp(g.archive[j], archiveGroup{start: k.start, miner: k.miner}) >= 0 }); i != lb {
				t.Fatalf("round %d: lookup %v ended at %d, the lower bound is %d", round, k, i, lb)
			}
		}
	}
}

// TestCheck8CatchesCorruptTable: check 8's comparison passes on the table
// the engine wrote and fails on a copy with each kind of damage.
func TestCheck8CatchesCorruptTable(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	o, env, table := backfilledTable(t)
	rows := env.Manifest.Rows
	if got, want := compareWith(t, env, table), (tableVsRecount{sum: rows}); got != want {
		t.Fatalf("the engine's table: %+v, want %+v", got, want)
	}
	lines := check8Lines(t, o, env, table)
	if !lines[lineDups].Pass || !lines[lineMismatch].Pass {
		t.Fatalf("check 8 fails on the engine's table: %+v", lines)
	}
	ctx := context.Background()
	snap, err := tableSnapshot(ctx, table, -1)
	if err != nil {
		t.Fatal(err)
	}
	files := snap.Files()
	if len(files) < 2 {
		t.Fatalf("the table has %d data files; the duplicate-file case needs two", len(files))
	}
	var stats struct {
		NumRecords int64 `json:"numRecords"`
	}
	if err := json.Unmarshal([]byte(files[0].Stats), &stats); err != nil || stats.NumRecords == 0 {
		t.Fatalf("stats of %s: %q (%v)", files[0].Path, files[0].Stats, err)
	}
	var first tableRow
	seen := false
	if err := tableRows(ctx, table, -1, func(r tableRow) error {
		if !seen {
			first, seen = r, true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	other := first
	other.Miner = "0x" + strings.Repeat("ab", 20)
	upper := first
	upper.Miner = "0x" + strings.ToUpper(strings.TrimPrefix(first.Miner, "0x"))
	if upper.Miner == first.Miner {
		t.Fatalf("miner %s has no letters to change the case of", first.Miner)
	}
	bumped := first
	bumped.Count++
	for _, tc := range []struct {
		name    string
		corrupt func(t *testing.T, path string)
		want    tableVsRecount
	}{
		{"a count off by one", func(t *testing.T, p string) { mergeRows(t, p, []tableRow{bumped}, nil) },
			tableVsRecount{sum: rows + 1, mismatch: 1}},
		{"a missing row", func(t *testing.T, p string) { mergeRows(t, p, []tableRow{first}, []int8{-1}) },
			tableVsRecount{sum: rows - first.Count, mismatch: 1}},
		{"a row the recount has no group for", func(t *testing.T, p string) { mergeRows(t, p, []tableRow{other}, nil) },
			tableVsRecount{sum: rows + first.Count, mismatch: 1}},
		{"a miner in upper case", func(t *testing.T, p string) { mergeRows(t, p, []tableRow{upper}, nil) },
			tableVsRecount{sum: rows + first.Count, mismatch: 1}},
		{"a data file added twice", func(t *testing.T, p string) { addCopyOf(t, p, files[0].Path) },
			tableVsRecount{sum: -1, dups: stats.NumRecords}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "table")
			if err := os.CopyFS(p, os.DirFS(table)); err != nil {
				t.Fatal(err)
			}
			tc.corrupt(t, p)
			if tc.want.sum < 0 { // the sum of the copied file's counts
				tc.want.sum = 0
				if err := tableRows(ctx, p, -1, func(r tableRow) error { tc.want.sum += r.Count; return nil }); err != nil {
					t.Fatal(err)
				}
				if tc.want.sum <= rows {
					t.Fatalf("the copy added nothing: sum %d", tc.want.sum)
				}
			}
			if got := compareWith(t, env, p); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			// The demo's own check lines fail, with the numbers.
			lines := check8Lines(t, o, env, p)
			for name, n := range map[string]int64{lineDups: tc.want.dups, lineMismatch: tc.want.mismatch} {
				c, ok := lines[name]
				if !ok || c.Pass != (n == 0) || c.Actual != fmt.Sprint(n) {
					t.Errorf("line %q = %+v, want actual %d", name, c, n)
				}
			}
		})
	}
}

// mergeRows upserts (or with sign -1 deletes) rows as another query would.
func mergeRows(t *testing.T, path string, rows []tableRow, signs []int8) {
	t.Helper()
	ctx := context.Background()
	ref, err := agg.New(pipeline.ReferenceSpec())
	if err != nil {
		t.Fatal(err)
	}
	s, err := delta.NewMergeSink(delta.SinkOptions{Path: path, Schema: ref.OutputSchema(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), AutoCompactMinFiles: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(ctx, stream.SinkEnv{QueryID: "corrupting"}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := &stream.Batch{Len: len(rows), Signs: signs, Columns: []stream.Column{
		{Name: delta.KeyWindowStart, Type: stream.Timestamp}, {Name: delta.KeyWindowEnd, Type: stream.Timestamp},
		{Name: "source", Type: stream.String}, {Name: "miner", Type: stream.String}, {Name: "count", Type: stream.Int64},
	}}
	for _, r := range rows {
		b.Columns[0].Int64s = append(b.Columns[0].Int64s, r.WindowStart)
		b.Columns[1].Int64s = append(b.Columns[1].Int64s, r.WindowEnd)
		b.Columns[2].Strings = append(b.Columns[2].Strings, r.Source)
		b.Columns[3].Strings = append(b.Columns[3].Strings, r.Miner)
		b.Columns[4].Int64s = append(b.Columns[4].Int64s, r.Count)
	}
	if _, err := s.AddBatch(ctx, 0, b); err != nil {
		t.Fatal(err)
	}
}

// addCopyOf commits an add of a copy of a live data file: every row of that
// file is then in the table twice.
func addCopyOf(t *testing.T, path, file string) {
	t.Helper()
	ctx := context.Background()
	snap, err := tableSnapshot(ctx, path, -1)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(path, file))
	if err != nil {
		t.Fatal(err)
	}
	name := "part-00000-00000000-0000-0000-0000-000000000000-c000.snappy.parquet"
	if err := os.WriteFile(filepath.Join(path, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	commit := fmt.Sprintf(`{"commitInfo":{"timestamp":%d,"operation":"WRITE"}}`+"\n"+
		`{"add":{"path":%q,"partitionValues":{},"size":%d,"modificationTime":%d,"dataChange":true}}`+"\n",
		time.Now().UnixMilli(), name, len(data), time.Now().UnixMilli())
	if err := os.WriteFile(filepath.Join(path, "_delta_log", fmt.Sprintf("%020d.json", snap.Version+1)), []byte(commit), 0o644); err != nil {
		t.Fatal(err)
	}
}
