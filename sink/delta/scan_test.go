package delta

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// TestSinkRowsMatchesRows: the typed scan returns the rows the generic
// reader returns, over several MERGE batches (files rewritten, rows of
// nulls from another writer), and refuses a table of another schema.
func TestSinkRowsMatchesRows(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := newSink(t, dir, 5)
	rng := rand.New(rand.NewSource(3))
	for b := int64(0); b < 8; b++ {
		var rows []sinkRow
		for range 1 + rng.Intn(9) {
			rows = append(rows, row(rng.Intn(6), []string{"a", "b"}[rng.Intn(2)], minerName(rng.Intn(4)), rng.Int63n(50)))
		}
		if _, err := s.AddBatch(ctx, b, mkBatch(rows)); err != nil {
			t.Fatal(err)
		}
	}
	// A file another writer produced, with nulls.
	add, err := s.table.writeSinkFile([]sinkRow{
		{nulls: nullWindow | nullWS | nullWE, Source: "c", Miner: "m", Count: 2},
		{WS: baseTS, WE: baseTS + window, nulls: nullSource | nullMiner | nullCount},
	}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.snap.commitActions([]action{{Add: add}}, filepath.Join(dir, add.Path)); err != nil {
		t.Fatal(err)
	}
	tbl, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	render := func(ws, we any, src, miner, count any) string {
		return fmt.Sprintf("%v|%v|%v|%v|%v", ws, we, src, miner, count)
	}
	var generic, typed []string
	if err := snap.Rows(ctx, func(r map[string]any) error {
		var ws, we any
		if w, ok := r["window"].(map[string]any); ok {
			if v, ok := w["start"].(time.Time); ok {
				ws = v.UnixMicro()
			}
			if v, ok := w["end"].(time.Time); ok {
				we = v.UnixMicro()
			}
		}
		generic = append(generic, render(ws, we, r["source"], r["miner"], r["count"]))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	nulls := 0
	if err := snap.SinkRows(ctx, func(r SinkRow) error {
		if !r.HasNull {
			typed = append(typed, render(r.WindowStart, r.WindowEnd, r.Source, r.Miner, r.Count))
			return nil
		}
		nulls++
		// Nulls read as zero values; render them as the generic reader does.
		if r.Source == "c" {
			typed = append(typed, render(nil, nil, r.Source, r.Miner, r.Count))
		} else {
			typed = append(typed, render(r.WindowStart, r.WindowEnd, nil, nil, nil))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(generic)
	sort.Strings(typed)
	if nulls != 2 || len(typed) < 10 || fmt.Sprint(generic) != fmt.Sprint(typed) {
		t.Fatalf("%d rows with nulls\ntyped   %v\ngeneric %v", nulls, typed, generic)
	}

	foreign := copyTable(t, filepath.Join(goldenDir(t), "basic-with-inserts-merge"))
	ft, err := Open(ctx, foreign)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := ft.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.SinkRows(ctx, func(SinkRow) error { return nil }); codeOf(err) != CodeSchemaMismatch {
		t.Fatalf("a foreign table: %v", err)
	}
}
