package delta

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/ethstream/ethstream/stream"
)

// TestScanMatchesRows: the columnar scan returns the rows the generic
// reader returns, over several MERGE batches (files rewritten, rows of
// nulls from another writer), and refuses a table of another schema.
func TestScanMatchesRows(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := newSink(t, dir, 5)
	rng := rand.New(rand.NewSource(3))
	for b := int64(0); b < 8; b++ {
		var rows []refRow
		for range 1 + rng.Intn(9) {
			rows = append(rows, row(rng.Intn(6), []string{"a", "b"}[rng.Intn(2)], minerName(rng.Intn(4)), rng.Int63n(50)))
		}
		if _, err := s.AddBatch(ctx, b, mkBatch(rows)); err != nil {
			t.Fatal(err)
		}
	}
	// A file another writer produced, with nulls.
	add, err := s.table.writeRefFile([]refRow{
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
	if err := snap.Scan(ctx, func(b *stream.Batch) error {
		val := func(name string, i int) any {
			c := b.Column(name)
			switch {
			case c.IsNull(i):
				return nil
			case c.Type == stream.String:
				return c.Strings[i]
			}
			return c.Int64s[i]
		}
		for i := range b.Len {
			hasNull := false
			for _, c := range b.Columns {
				hasNull = hasNull || c.IsNull(i)
			}
			if hasNull {
				nulls++
			}
			typed = append(typed, render(val(KeyWindowStart, i), val(KeyWindowEnd, i), val("source", i), val("miner", i), val("count", i)))
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
	// Spark's table of an integer and a string column reads (its integer
	// was refused before the sink had INT columns); a table of structs and
	// maps is not one the sink writes.
	rows := 0
	if err := fs.Scan(ctx, func(b *stream.Batch) error {
		if b.Columns[0].Type != stream.Int32 {
			return fmt.Errorf("id is %v", b.Columns[0].Type)
		}
		rows += b.Len
		return nil
	}); err != nil || rows != 140 {
		t.Fatalf("a Spark table of int and string: %d rows, %v", rows, err)
	}
	foreign = copyTable(t, filepath.Join(goldenDir(t), "delta-1.2.1-only-struct-stats"))
	if ft, err = Open(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	if fs, err = ft.Snapshot(ctx, -1); err != nil {
		t.Fatal(err)
	}
	if err := fs.Scan(ctx, func(*stream.Batch) error { return nil }); codeOf(err) != CodeSchemaMismatch {
		t.Fatalf("a foreign table: %v", err)
	}
}

// TestReadAheadOrderAndErrors: rows come in item order whatever order the
// workers finish in; a read error, a use error and a cancelled context each
// stop the scan with that error, and no goroutine is left behind.
func TestReadAheadOrderAndErrors(t *testing.T) {
	ctx := context.Background()
	before := runtime.NumGoroutine()
	rng := rand.New(rand.NewSource(5))
	delays := make([]time.Duration, 40)
	for i := range delays {
		delays[i] = time.Duration(rng.Intn(300)) * time.Microsecond
	}
	read := func(i int) ([]refRow, error) {
		time.Sleep(delays[i])
		return []refRow{{Count: int64(i)}, {Count: int64(i)}}, nil
	}
	for _, workers := range []int{1, 3, 8} {
		var got []int64
		if err := readAhead(ctx, len(delays), workers, read, func(rows []refRow) error {
			for _, r := range rows {
				got = append(got, r.Count)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for i, c := range got {
			if c != int64(i/2) || len(got) != 2*len(delays) {
				t.Fatalf("workers %d: rows %v", workers, got)
			}
		}
	}
	errRead, errUse := fmt.Errorf("read 7"), fmt.Errorf("use 9")
	failRead := func(i int) ([]refRow, error) {
		if i == 7 {
			return nil, errRead
		}
		return read(i)
	}
	n := 0
	if err := readAhead(ctx, len(delays), 3, failRead, func([]refRow) error { n++; return nil }); err != errRead || n != 7 {
		t.Fatalf("read error: %v after %d items", err, n)
	}
	n = 0
	if err := readAhead(ctx, len(delays), 3, read, func([]refRow) error {
		if n++; n == 10 {
			return errUse
		}
		return nil
	}); err != errUse || n != 10 {
		t.Fatalf("use error: %v after %d items", err, n)
	}
	cctx, cancel := context.WithCancel(ctx)
	n = 0
	if err := readAhead(cctx, len(delays), 3, read, func([]refRow) error {
		if n++; n == 4 {
			cancel()
		}
		return nil
	}); err != context.Canceled || n != 4 {
		t.Fatalf("cancelled: %v after %d items", err, n)
	}
	if err := readAhead(ctx, 0, 3, read, func([]refRow) error { return errUse }); err != nil {
		t.Fatalf("no items: %v", err)
	}
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before; {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines before, %d after", before, runtime.NumGoroutine())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
