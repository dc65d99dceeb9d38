package agg

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/stream"
)

// closedAtCommitRun runs three batches of a 10-minute tumbling count by
// miner, update mode, 10-minute delay, as the engine does (late input by the
// previous batch's watermark, NextWatermark before Finish); restartAfter0
// closes and reopens the operator after batch 0's commit; abort1 runs batch
// 1 to its Finish and aborts it before running it again. It returns each
// batch's output ("start miner count") and progress.
//
//	batch 0 (late 0, wm 0): 00:05 and 00:35. Next wm 00:25, so version 0
//	  closes [00:00, 00:10) at commit (carried) and stores [00:30, 00:40).
//	batch 1 (late 0, wm 00:25): 00:07 merges into [00:00, 00:10), count 2
//	  (Spark's version 0 holds it), evicted now; 00:50 moves the next wm to
//	  00:40, which closes the stored [00:30, 00:40) at commit.
//	batch 2 (late 00:25, wm 00:40): 00:33 merges into [00:30, 00:40), count 2.
func closedAtCommitRun(t *testing.T, restartAfter0, abort1 bool) (outs []string, progs []stream.OperatorProgress) {
	t.Helper()
	spec := Spec{Window: &Window{Column: ethblock.ColBlockTS, Size: 10 * time.Minute},
		GroupBy: []string{ethblock.ColMiner}, Aggregates: []Aggregate{{Kind: Count, As: "count"}},
		Mode: Update, WatermarkDelay: 10 * time.Minute, ColumnTypes: testColumnTypes}
	h := newHarness(t, spec, vfs.NewMem(), 2)
	h.lookahead = true
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	at := func(m int) testRow {
		return testRow{source: "s", miner: "0xaa", ts: t0.Add(time.Duration(m) * time.Minute).UnixMicro()}
	}
	for id, rows := range [][]testRow{{at(5), at(35)}, {at(7), at(50)}, {at(33)}} {
		if id == 1 && abort1 {
			h.process(1, [][]testRow{rows})
			if _, err := h.finish(1, [][]testRow{rows}); err != nil {
				t.Fatal(err)
			}
			h.op.Abort()
		}
		h.process(int64(id), [][]testRow{rows})
		out, prog := h.finishCommit(int64(id), [][]testRow{rows})
		s := ""
		for _, r := range decodeOutput(t, h.op.p, out) {
			var start, end int64
			var miner string
			if _, err := fmt.Sscanf(strings.ReplaceAll(r.key, "|", " "), "%d %d %s", &start, &end, &miner); err != nil {
				t.Fatal(err)
			}
			s += fmt.Sprintf("[%s %s %v]", time.UnixMicro(start).UTC().Format("15:04"), miner, r.vals)
		}
		outs, progs = append(outs, s), append(progs, prog)
		if id == 0 && restartAfter0 {
			h.restart(false)
		}
	}
	return outs, progs
}

// TestClosedAtCommitCarry: batch N+1 merges its rows of windows version N
// closed at commit with N's values (the carry), as Spark merges them with
// its stored keys; the progress figures are Spark's. An abort of batch 1
// keeps the carry for its rerun (doc.go, Closed at commit).
func TestClosedAtCommitCarry(t *testing.T) {
	for _, abort1 := range []bool{false, true} {
		t.Run(fmt.Sprintf("abort1=%v", abort1), func(t *testing.T) { testClosedAtCommitCarry(t, abort1) })
	}
}

func testClosedAtCommitCarry(t *testing.T, abort1 bool) {
	outs, progs := closedAtCommitRun(t, false, abort1)
	want := []string{
		"[00:00 0xaa [1]][00:30 0xaa [1]]",
		"[00:00 0xaa [2]][00:50 0xaa [1]]",
		"[00:30 0xaa [2]]",
	}
	for i := range want {
		if outs[i] != want[i] {
			t.Errorf("batch %d output %s, want %s", i, outs[i], want[i])
		}
	}
	// Spark's state: version 0 holds 2 keys, version 1 [00:30) and [00:50),
	// version 2 [00:50) only; batch 1 evicts [00:00), batch 2 [00:30).
	for i, w := range []struct{ total, removed, dropped, closed int64 }{{2, 0, 0, 1}, {2, 1, 0, 1}, {1, 1, 0, 0}} {
		p := progs[i]
		if p.NumRowsTotal != w.total || p.NumRowsRemoved != w.removed || p.NumRowsDroppedByWatermark != w.dropped ||
			p.CustomMetrics[MetricClosedUnstored] != w.closed {
			t.Errorf("batch %d: numRowsTotal %d numRowsRemoved %d numRowsDroppedByWatermark %d %s %d, want %d %d %d %d", i,
				p.NumRowsTotal, p.NumRowsRemoved, p.NumRowsDroppedByWatermark, MetricClosedUnstored, p.CustomMetrics[MetricClosedUnstored],
				w.total, w.removed, w.dropped, w.closed)
		}
	}
}

// TestClosedAtCommitRestart pins the one difference from Spark the carry
// leaves (doc.go, Closed at commit; docs/contracts.md, State): after a
// restart between batch 0's commit and batch 1 the carry is gone, and
// batch 1 drops its row of [00:00, 00:10), a window version 0 closed at
// commit, as late by its own watermark (Spark merges it: count 2).
func TestClosedAtCommitRestart(t *testing.T) {
	outs, progs := closedAtCommitRun(t, true, false)
	if want := "[00:50 0xaa [1]]"; outs[1] != want {
		t.Errorf("batch 1 after a restart: output %s, want %s", outs[1], want)
	}
	if progs[1].NumRowsDroppedByWatermark != 1 || progs[1].NumRowsRemoved != 1 {
		t.Errorf("batch 1 after a restart: numRowsDroppedByWatermark %d numRowsRemoved %d, want 1 1",
			progs[1].NumRowsDroppedByWatermark, progs[1].NumRowsRemoved)
	}
	// The batch after keeps Spark's rule: its carry is there.
	if want := "[00:30 0xaa [2]]"; outs[2] != want {
		t.Errorf("batch 2: output %s, want %s", outs[2], want)
	}
}
