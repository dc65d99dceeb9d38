package delta

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/stream"
)

// TestAppendMode: a sink opened for a query with no stateful operator
// (SinkEnv.Append) appends each batch's rows, duplicates included, in one
// STREAMING UPDATE commit with the batch's txn; a re-run batch writes
// nothing; a retraction is refused; the rows read back are those written.
func TestAppendMode(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	schema := stream.Schema{Fields: []stream.Field{{Name: "number", Type: stream.Int64}, {Name: "miner", Type: stream.String, Nullable: true}}}
	s, err := NewMergeSink(SinkOptions{Path: dir, Logger: quietLog, TargetFileRows: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(ctx, stream.SinkEnv{QueryID: "q", Schema: schema, Append: true}); err != nil {
		t.Fatal(err)
	}
	batch := func(ns ...int64) *stream.Batch {
		b := &stream.Batch{Len: len(ns), Columns: []stream.Column{{Name: "number", Type: stream.Int64, Int64s: ns},
			{Name: "miner", Type: stream.String, Valid: make([]bool, len(ns))}}}
		for i, n := range ns {
			b.Columns[1].Strings = append(b.Columns[1].Strings, fmt.Sprint("m", n))
			b.Columns[1].Valid[i] = n%2 == 0
		}
		return b
	}
	for id, b := range []*stream.Batch{batch(1, 2, 2, 3, 4), batch(), batch(2, 5)} {
		p, err := s.AddBatch(ctx, int64(id), b)
		if err != nil || p.NumOutputRows != int64(b.Len) {
			t.Fatalf("batch %d: %+v %v", id, p, err)
		}
	}
	if p, err := s.AddBatch(ctx, 2, batch(9)); err != nil || p.Metrics["skipped"] != "true" {
		t.Fatalf("re-run batch 2: %+v %v", p, err)
	}
	neg := batch(6)
	neg.Signs = []int8{-1}
	if _, err := s.AddBatch(ctx, 3, neg); err == nil || !strings.Contains(err.Error(), "cannot take a row back") {
		t.Fatalf("a retraction: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	tbl, err := OpenFS(ctx, nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	if err := snap.Rows(ctx, func(r map[string]any) error {
		rows = append(rows, fmt.Sprint(r["number"], " ", r["miner"]))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(rows)
	if got := strings.Join(rows, ","); got != "1 <nil>,2 m2,2 m2,2 m2,3 <nil>,4 m4,5 <nil>" {
		t.Fatalf("rows %s", got)
	}
	if v, ok := snap.Txn("q"); !ok || v != 2 {
		t.Fatalf("txn %d %v", v, ok)
	}
	hist, err := tbl.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, c := range hist {
		ops = append(ops, fmt.Sprint(c.Operation, " ", c.OperationParameters["outputMode"], " ", *c.IsBlindAppend))
	}
	if got := strings.Join(ops, ","); got != "STREAMING UPDATE Append true,STREAMING UPDATE Append true,STREAMING UPDATE Append true,CREATE TABLE <nil> true" {
		t.Fatalf("history %s", got)
	}
}
