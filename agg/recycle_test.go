package agg

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/stream"
)

// TestRecycledOutput: a batch handed back (Recycle) lends its columns to
// the next Finish, its string columns included (cleared while they wait:
// no string stays live through them), whose rows are those of an operator
// that never reuses (nulls of the batch before included); a batch not
// handed back, or not the last one Finish returned, is never written again.
func TestRecycledOutput(t *testing.T) {
	spec := Spec{Window: &Window{Column: ethblock.ColBlockTS, Size: 10 * time.Minute},
		GroupBy: []string{ethblock.ColGasUsed, ethblock.ColMiner}, Aggregates: []Aggregate{{Kind: Count, As: "count"}},
		HasWatermark: true, WatermarkDelay: time.Hour, Mode: Update, ColumnTypes: testColumnTypes}
	min := func(m int64) int64 { return m * int64(time.Minute/time.Microsecond) }
	batches := [][]testRow{
		{{miner: "0xaa", ts: min(1), gasNull: true}, {miner: "0xbb", ts: min(2), gas: 7}, {miner: "0xaa", ts: min(12), gas: 7}},
		{{miner: "0xaa", ts: min(3), gas: 7}, {miner: "0xcc", ts: min(21), gas: 8}},
		{{miner: "0xbb", ts: min(4), gas: 7}, {miner: "0xaa", ts: min(5), gasNull: true}, {miner: "0xdd", ts: min(33), gas: 9},
			{miner: "0xee", ts: min(34), gas: 9}},
		{{miner: "0xff", ts: min(45), gas: 1}},
	}
	fresh := newHarness(t, spec, vfs.NewMem(), 2) // never hands a batch back
	h := newHarness(t, spec, vfs.NewMem(), 2)
	var outs []*stream.Batch // kept, never handed back
	var renders []string
	var recycled *stream.Batch
	var recycledStrs *string // the first string of recycled's string column
	for i, rows := range batches {
		id := int64(i)
		chunks := [][]testRow{rows}
		fresh.process(id, chunks)
		want, _ := fresh.finishCommit(id, chunks)
		h.process(id, chunks)
		got, _ := h.finishCommit(id, chunks)
		if g, w := fmt.Sprint(decodeOutput(t, h.op.p, got)), fmt.Sprint(decodeOutput(t, fresh.op.p, want)); g != w {
			t.Fatalf("batch %d: output %s, want %s", id, g, w)
		}
		for j, old := range outs {
			if g := fmt.Sprint(decodeOutput(t, h.op.p, old)); g != renders[j] {
				t.Fatalf("batch %d wrote over batch %d's output: %s, was %s", id, j, g, renders[j])
			}
			if shares(got, old) {
				t.Fatalf("batch %d's output shares batch %d's columns, which were not handed back", id, j)
			}
		}
		if recycled != nil && !shares(got, recycled) {
			t.Fatalf("batch %d did not reuse the columns of the batch handed back", id)
		}
		if recycled != nil {
			if c := got.Columns[stringColumn(t, got)]; cap(c.Strings) == 0 || &c.Strings[:1][0] != recycledStrs {
				t.Fatalf("batch %d did not reuse the string column of the batch handed back", id)
			}
		}
		recycled = nil
		switch i {
		case 0, 1:
			outs, renders = append(outs, got), append(renders, fmt.Sprint(decodeOutput(t, h.op.p, got)))
		case 2:
			// Its rows have a null group value, batch 3's none.
			h.op.Recycle(outs[0]) // not the last Finish's: ignored
			h.op.Recycle(got)
			recycled = got
			c := &got.Columns[stringColumn(t, got)]
			for j, s := range c.Strings[:cap(c.Strings)] {
				if s != "" {
					t.Fatalf("the string column handed back holds %q at %d", s, j)
				}
			}
			if cap(c.Strings) == 0 {
				t.Fatal("Recycle let the string column go")
			}
			recycledStrs = &c.Strings[:1][0]
		}
	}
}

// stringColumn is the index of b's (one) string column.
func stringColumn(t *testing.T, b *stream.Batch) int {
	t.Helper()
	for i := range b.Columns {
		if b.Columns[i].Type.Storage() == stream.String {
			return i
		}
	}
	t.Fatal("no string column")
	return -1
}

// shares reports whether a and b have a column backed by the same memory.
func shares(a, b *stream.Batch) bool {
	for i := range a.Columns {
		if i >= len(b.Columns) {
			break
		}
		ca, cb := &a.Columns[i], &b.Columns[i]
		if cap(ca.Int64s) > 0 && cap(cb.Int64s) > 0 && &ca.Int64s[:1][0] == &cb.Int64s[:1][0] ||
			cap(ca.Strings) > 0 && cap(cb.Strings) > 0 && &ca.Strings[:1][0] == &cb.Strings[:1][0] {
			return true
		}
	}
	return false
}
