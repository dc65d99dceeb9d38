package delta

import (
	"context"
	"fmt"
	"github.com/ethstream/ethstream/internal/fixture"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
)

// goldenDir is shared/testdata/delta-golden (package fixture: skipped
// without it, failed under CI=true).
func goldenDir(t testing.TB) string {
	t.Helper()
	return fixture.Shared(t, "delta-golden")
}

type goldenCase struct {
	name       string
	version    int64
	liveFiles  int
	rows       int
	tombstones int // -1: not checked
	check      func(t *testing.T, s *Snapshot, rows []map[string]any)
}

func collectRows(t *testing.T, s *Snapshot) []map[string]any {
	t.Helper()
	var rows []map[string]any
	err := s.Rows(context.Background(), func(r map[string]any) error {
		c := make(map[string]any, len(r))
		for k, v := range r {
			c[k] = v
		}
		rows = append(rows, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func intsOf(t *testing.T, rows []map[string]any, col string) []int64 {
	t.Helper()
	var out []int64
	for _, r := range rows {
		v, ok := r[col].(int64)
		if !ok {
			t.Fatalf("column %s = %#v, want int64", col, r[col])
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func rangeInts(lo, hi int64) []int64 {
	var out []int64
	for i := lo; i <= hi; i++ {
		out = append(out, i)
	}
	return out
}

var goldenCases = []goldenCase{
	{name: "simple_table", version: 4, liveFiles: 5, rows: 3, tombstones: 31, check: func(t *testing.T, s *Snapshot, rows []map[string]any) {
		if got := intsOf(t, rows, "id"); !reflect.DeepEqual(got, []int64{5, 7, 9}) {
			t.Errorf("ids = %v", got)
		}
	}},
	{name: "basic-with-inserts-merge", version: 1, liveFiles: 1, rows: 140, tombstones: 2, check: func(t *testing.T, s *Snapshot, rows []map[string]any) {
		if got := intsOf(t, rows, "id"); !reflect.DeepEqual(got, rangeInts(10, 149)) {
			t.Errorf("ids = %v", got)
		}
		if n, ok := s.NumRecords(); !ok || n != 140 {
			t.Errorf("numRecords = %d %v", n, ok)
		}
	}},
	{name: "basic-with-inserts-deletes-checkpoint", version: 13, liveFiles: 7, rows: 41, tombstones: 7, check: func(t *testing.T, s *Snapshot, rows []map[string]any) {
		var want []int64
		for _, lo := range []int64{0, 10, 20, 30, 40} {
			want = append(want, rangeInts(lo, lo+4)...)
		}
		want = append(want, rangeInts(50, 65)...)
		if got := intsOf(t, rows, "id"); !reflect.DeepEqual(got, want) {
			t.Errorf("ids = %v", got)
		}
	}},
	{name: "delta-0.2.0", version: 3, liveFiles: 3, rows: 6, tombstones: -1, check: func(t *testing.T, s *Snapshot, rows []map[string]any) {
		if got := intsOf(t, rows, "value"); !reflect.DeepEqual(got, []int64{1, 1, 2, 2, 3, 3}) {
			t.Errorf("values = %v", got)
		}
		v, ok := s.Txn("e4a20b59-dd0e-4c50-b074-e8ae4786df30")
		if !ok || v != 0 {
			t.Errorf("txn = %d %v, want 0 true", v, ok)
		}
	}},
	{name: "delta-2.2.0-partitioned-types", version: 0, liveFiles: 3, rows: 3, tombstones: 0, check: func(t *testing.T, s *Snapshot, rows []map[string]any) {
		var got []string
		for _, r := range rows {
			got = append(got, fmt.Sprint(r["c1"], ",", r["c2"], ",", r["c3"]))
		}
		sort.Strings(got)
		if want := []string{"4,c,5", "5,b,6", "6,a,4"}; !reflect.DeepEqual(got, want) {
			t.Errorf("rows = %v, want %v", got, want)
		}
	}},
	{name: "delta-0.8.0-special-partition", version: 0, liveFiles: 2, rows: 2, tombstones: 0, check: func(t *testing.T, s *Snapshot, rows []map[string]any) {
		var got []string
		for _, r := range rows {
			got = append(got, fmt.Sprint(r["x"], "|", r["y"]))
		}
		sort.Strings(got)
		if want := []string{"A/A|1", "B B|2"}; !reflect.DeepEqual(got, want) {
			t.Errorf("rows = %q, want %q", got, want)
		}
	}},
	{name: "table_with_null_stats_in_notnull_struct", version: 1, liveFiles: 2, rows: 2, tombstones: -1, check: func(t *testing.T, s *Snapshot, rows []map[string]any) {
		var got []string
		for _, r := range rows {
			st, _ := r["s"].(map[string]any)
			got = append(got, fmt.Sprint(st["l"], ",", st["b"]))
		}
		sort.Strings(got)
		if want := []string{"10,true", "20,false"}; !reflect.DeepEqual(got, want) {
			t.Errorf("rows = %v, want %v", got, want)
		}
	}},
	{name: "delta-1.2.1-only-struct-stats", version: 12, liveFiles: 12, rows: 12, tombstones: 0, check: func(t *testing.T, s *Snapshot, rows []map[string]any) {
		if got := intsOf(t, rows, "integer"); !reflect.DeepEqual(got, rangeInts(0, 11)) {
			t.Errorf("integer = %v", got)
		}
		for _, r := range rows {
			nc := r["new_column"]
			if r["integer"] == int64(9) {
				if nc != int64(0) {
					t.Errorf("new_column at 9 = %#v, want 0", nc)
				}
			} else if nc != nil {
				t.Errorf("new_column at %v = %#v, want nil", r["integer"], nc)
			}
			ts, ok := r["timestamp"].(interface{ Year() int })
			if !ok || ts.Year() != 2022 {
				t.Errorf("timestamp = %#v, want a 2022 time", r["timestamp"])
			}
		}
		if n, ok := s.NumRecords(); !ok || n != 12 {
			t.Errorf("numRecords from stats (incl. stats_parsed) = %d %v, want 12", n, ok)
		}
	}},
}

func TestGoldenTables(t *testing.T) {
	root := goldenDir(t)
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			tbl, err := Open(ctx, filepath.Join(root, tc.name))
			if err != nil {
				t.Fatal(err)
			}
			s, err := tbl.Snapshot(ctx, -1)
			if err != nil {
				t.Fatal(err)
			}
			if s.Version != tc.version {
				t.Errorf("version = %d, want %d", s.Version, tc.version)
			}
			if got := len(s.Files()); got != tc.liveFiles {
				t.Errorf("live files = %d, want %d", got, tc.liveFiles)
			}
			if tc.tombstones >= 0 && len(s.Tombstones()) != tc.tombstones {
				t.Errorf("tombstones = %d, want %d", len(s.Tombstones()), tc.tombstones)
			}
			if s.Protocol.MinReaderVersion != 1 || s.Protocol.MinWriterVersion != 2 {
				t.Errorf("protocol = %+v", s.Protocol)
			}
			rows := collectRows(t, s)
			if len(rows) != tc.rows {
				t.Fatalf("rows = %d, want %d", len(rows), tc.rows)
			}
			tc.check(t, s, rows)

			// Checkpoint + tail must equal JSON-only replay.
			l, err := tbl.list()
			if err != nil {
				t.Fatal(err)
			}
			l.checkpoints = nil
			js, err := tbl.replay(ctx, l, s.Version)
			if err != nil {
				t.Fatalf("JSON-only replay: %v", err)
			}
			if !reflect.DeepEqual(pathsOf(js.Files()), pathsOf(s.Files())) {
				t.Errorf("JSON-only live files differ:\n%v\n%v", pathsOf(js.Files()), pathsOf(s.Files()))
			}
			if !reflect.DeepEqual(js.txns, s.txns) {
				t.Errorf("JSON-only txns differ: %v vs %v", js.txns, s.txns)
			}
			if js.Metadata.SchemaString != s.Metadata.SchemaString {
				t.Errorf("JSON-only schema differs")
			}
		})
	}
}

func pathsOf(fs []AddFile) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Path)
	}
	return out
}

func TestGoldenTimeTravel(t *testing.T) {
	root := goldenDir(t)
	ctx := context.Background()
	tbl, err := Open(ctx, filepath.Join(root, "basic-with-inserts-deletes-checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	// v4: five appends of 10 rows; v12: after the checkpoint, 80 - 25 rows.
	for _, tc := range []struct {
		v    int64
		rows int
	}{{0, 10}, {4, 50}, {9, 25}, {10, 35}, {12, 55}, {13, 41}} {
		s, err := tbl.Snapshot(ctx, tc.v)
		if err != nil {
			t.Fatal(err)
		}
		if rows := collectRows(t, s); len(rows) != tc.rows {
			t.Errorf("version %d: %d rows, want %d", tc.v, len(rows), tc.rows)
		}
	}
	if _, err := tbl.Snapshot(ctx, 14); err == nil {
		t.Error("version 14 should not exist")
	}
}
