package agg

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/stream"
)

// closedAtCommitRun runs three batches of a 10-minute tumbling count by
// miner, update mode, 10-minute delay, as the engine does (late input by the
// previous batch's watermark, NextWatermark before Finish); after0, if not
// nil, runs after batch 0's commit (a restart); abort1 runs batch 1 to its
// Finish and aborts it before running it again. It returns each batch's
// output ("start miner count") and progress, or the error of batch 1's
// Finish when it fails.
//
//	batch 0 (late 0, wm 0): 00:05 and 00:35. Next wm 00:25, so version 0
//	  closes [00:00, 00:10) at commit (carried) and stores [00:30, 00:40).
//	batch 1 (late 0, wm 00:25): 00:07 merges into [00:00, 00:10), count 2
//	  (Spark's version 0 holds it), evicted now; 00:50 moves the next wm to
//	  00:40, which closes the stored [00:30, 00:40) at commit.
//	batch 2 (late 00:25, wm 00:40): 00:33 merges into [00:30, 00:40), count 2.
func closedAtCommitRun(t *testing.T, after0 func(h *harness), abort1 bool) (outs []string, progs []stream.OperatorProgress, err1 error) {
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
		out, prog, err := h.finishCommitErr(int64(id), [][]testRow{rows})
		if err != nil {
			return outs, progs, err
		}
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
		if id == 0 && after0 != nil {
			after0(h)
		}
	}
	return outs, progs, nil
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
	outs, progs, err := closedAtCommitRun(t, nil, abort1)
	if err != nil {
		t.Fatal(err)
	}
	checkClosedAtCommitCarry(t, outs, progs)
}

// checkClosedAtCommitCarry checks closedAtCommitRun's results against
// Spark's.
func checkClosedAtCommitCarry(t *testing.T, outs []string, progs []stream.OperatorProgress) {
	t.Helper()
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

// TestClosedAtCommitRestart: the carry is part of state version 0 (in its
// record, or in a file of its own when larger: carryfile.go), so after a
// restart between batch 0's commit and batch 1 batch 1 still merges its row
// of [00:00, 00:10), a window version 0 closed at commit, as Spark merges it
// with its stored key (count 2; builds that kept the carry in memory dropped
// it as late). A carry file that is gone leaves the rule of those builds
// (the row is dropped as late, doc.go); one that does not verify is
// CHECKPOINT_CORRUPT.
func TestClosedAtCommitRestart(t *testing.T) {
	for _, inline := range []bool{true, false} {
		t.Run(fmt.Sprintf("inline=%v", inline), func(t *testing.T) {
			if !inline {
				defer setCarryInlineMax(0)()
			}
			var file string
			outs, progs, err := closedAtCommitRun(t, func(h *harness) {
				file = h.op.committed.CarryFile
				h.restart(true)
			}, false)
			if err != nil {
				t.Fatal(err)
			}
			if (file == "") != inline {
				t.Fatalf("version 0's record names carry file %q", file)
			}
			checkClosedAtCommitCarry(t, outs, progs)
		})
	}
	// The file's bytes changed or removed before the restart.
	for _, c := range []struct {
		name   string
		damage func(fs vfs.FS, path string) error
		code   string
	}{
		{"gone", func(fs vfs.FS, path string) error { return fs.Remove(path) }, ""},
		{"flipped", func(fs vfs.FS, path string) error { return flipByte(fs, path, carryHeaderSize+2) }, errcode.CheckpointCorrupt},
		{"header", func(fs vfs.FS, path string) error { return flipByte(fs, path, 1) }, errcode.CheckpointCorrupt},
		{"footer", func(fs vfs.FS, path string) error { return flipByte(fs, path, -3) }, errcode.CheckpointCorrupt},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer setCarryInlineMax(0)()
			outs, progs, err := closedAtCommitRun(t, func(h *harness) {
				if err := c.damage(h.fs, h.fs.PathJoin(h.stateDir, h.op.committed.CarryFile)); err != nil {
					t.Fatal(err)
				}
				h.restart(false)
			}, false)
			if c.code != "" {
				if errcode.Code(err) != c.code {
					t.Fatalf("batch 1 over a damaged carry: %v, want %s", err, c.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := "[00:50 0xaa [1]]"; outs[1] != want {
				t.Errorf("batch 1 without its carry: output %s, want %s", outs[1], want)
			}
			if progs[1].NumRowsDroppedByWatermark != 1 || progs[1].NumRowsRemoved != 1 {
				t.Errorf("batch 1 without its carry: numRowsDroppedByWatermark %d numRowsRemoved %d, want 1 1",
					progs[1].NumRowsDroppedByWatermark, progs[1].NumRowsRemoved)
			}
			// The batch after keeps Spark's rule: its carry is there.
			if want := "[00:30 0xaa [2]]"; outs[2] != want {
				t.Errorf("batch 2: output %s, want %s", outs[2], want)
			}
		})
	}
}

// flipByte inverts the byte at off of path (from the end when negative).
func flipByte(fs vfs.FS, path string, off int) error {
	f, err := fs.Open(path)
	if err != nil {
		return err
	}
	b, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return err
	}
	if off < 0 {
		off += len(b)
	}
	b[off] ^= 0xff
	if err := fs.Remove(path); err != nil {
		return err
	}
	w, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return errors.Join(err, w.Close())
	}
	return w.Close()
}
