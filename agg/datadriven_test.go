package agg

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/ethstream/ethstream/errcode"
	"github.com/ethstream/ethstream/ethblock"
	"github.com/ethstream/ethstream/internal/streamtest"
	"github.com/ethstream/ethstream/stream"
)

// TestDataDriven runs the scenario scripts in testdata/ with the shared
// harness's built-in commands (internal/streamtest: fault, crash, inspect,
// clock) and these:
//
//	new window=5m [slide=1m] group=(source,miner) aggs=(count,sum:gas_used,...) mode=update [watermark=48h] [partitions=N]
//	    a new query on an empty checkpoint (state in /ckpt/state/0); prints the state schema
//	batch [id=N]      one batch; input lines "<source> <miner> <MM-DD hh:mm:ss> [gas=N]";
//	                  prints the watermark, the output rows (sorted) and metrics, then commits;
//	                  a failure (an armed fault) aborts the batch and prints the error
//	crash-batch at=(process|finish)
//	                  the batch's first attempt dies at that point (abort); nothing is committed
//	needs-no-data     NeedsNoDataBatch at the next batch's watermark
//	state             the committed state, read back through the state reader
//	restart [fresh] [window=... etc]
//	                  close and reopen at the committed version (fresh: empty local dir;
//	                  spec arguments: reopen with a changed query)
//
// Times are in 2026, UTC; "--" marks a null.
func TestDataDriven(t *testing.T) {
	streamtest.Walk(t, "testdata", func(w *streamtest.World) streamtest.Commands {
		s := &aggScript{}
		w.AtEnd(func() {
			if s.h != nil {
				_ = s.h.op.Close()
			}
		})
		return streamtest.Commands{"new": s.new, "batch": s.batch, "crash-batch": s.crashBatch,
			"needs-no-data": s.needsNoData, "state": s.state, "restart": s.restart}
	})
}

// aggScript is one script's operator harness, one handler per command.
type aggScript struct {
	h      *harness
	nextID int64
}

func (s *aggScript) new(w *streamtest.World, d *datadriven.TestData) string {
	spec := ddSpec(w.T, d, Spec{})
	parts := 4
	d.MaybeScanArgs(w.T, "partitions", &parts)
	if s.h != nil {
		_ = s.h.op.Close()
	}
	// A new query starts on an empty checkpoint: a new file system.
	w.Faults = streamtest.NewFaultFS(streamtest.Root)
	if err := streamtest.MkdirAllDurable(w.Faults.FS(), streamtest.Root+"/state/0"); err != nil {
		w.T.Fatal(err)
	}
	s.h = newHarnessAt(w.T, spec, w.Faults.FS(), streamtest.Root+"/state/0", parts)
	s.nextID = 0
	return s.h.op.Schema().String() + "\n"
}

func (s *aggScript) batch(w *streamtest.World, d *datadriven.TestData) string {
	h := s.h
	id := s.nextID
	d.MaybeScanArgs(w.T, "id", &id)
	rows := ddRows(w.T, d.Input)
	wm := h.wmMs
	chunks := [][]testRow{rows}
	err := h.op.Process(context.Background(), id, h.wmMs, makeBatch(rows))
	var out *stream.Batch
	if err == nil {
		out, err = h.finish(id, chunks)
	}
	if err == nil {
		err = h.op.Commit(context.Background(), id)
	}
	if err != nil {
		h.op.Abort()
		return fmt.Sprintf("batch %d: error: %s\n", id, streamtest.ScrubTemp(err.Error()))
	}
	h.committed = id
	h.wmMs, h.maxEvent = h.nextWm(chunks)
	prog := h.op.Progress()
	s.nextID = id + 1
	var b strings.Builder
	fmt.Fprintf(&b, "batch %d watermark=%s\n", id, fmtWatermark(wm, h.spec))
	for _, line := range fmtOutput(w.T, h.op.p, out) {
		fmt.Fprintf(&b, "  %s\n", line)
	}
	fmt.Fprintf(&b, "dropped=%d updated=%d removed=%d total=%d next-watermark=%s\n",
		prog.NumRowsDroppedByWatermark, prog.NumRowsUpdated, prog.NumRowsRemoved,
		prog.NumRowsTotal, fmtWatermark(h.wmMs, h.spec))
	return b.String()
}

func (s *aggScript) crashBatch(w *streamtest.World, d *datadriven.TestData) string {
	h := s.h
	var at string
	d.ScanArgs(w.T, "at", &at)
	rows := ddRows(w.T, d.Input)
	h.process(s.nextID, [][]testRow{rows})
	if at == "finish" {
		if _, _, err := h.op.Finish(context.Background(), s.nextID, h.wmMs); err != nil {
			w.T.Fatal(err)
		}
	}
	h.op.Abort()
	return fmt.Sprintf("batch %d aborted after %s\n", s.nextID, at)
}

func (s *aggScript) needsNoData(w *streamtest.World, d *datadriven.TestData) string {
	needs, err := s.h.op.NeedsNoDataBatch(s.h.wmMs)
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	return fmt.Sprintf("%v at watermark %s\n", needs, fmtWatermark(s.h.wmMs, s.h.spec))
}

func (s *aggScript) state(w *streamtest.World, d *datadriven.TestData) string {
	var b strings.Builder
	for _, r := range s.h.stateRows() {
		b.WriteString(fmtStateRow(r))
		b.WriteByte('\n')
	}
	if b.Len() == 0 {
		return "(empty)\n"
	}
	return b.String()
}

func (s *aggScript) restart(w *streamtest.World, d *datadriven.TestData) string {
	h := s.h
	if err := h.op.Close(); err != nil {
		w.T.Fatal(err)
	}
	h.fs = w.Faults.FS() // the same FS, or what a crash left of it
	if d.HasArg("fresh") {
		h.localDir = w.T.TempDir()
	}
	spec := ddSpec(w.T, d, h.spec)
	op, err := New(spec)
	if err != nil {
		return fmt.Sprintf("error: %v\n", err)
	}
	if err := op.Open(context.Background(), h.env()); err != nil {
		// Reopen the old query so later commands still run.
		h.open()
		return fmt.Sprintf("error: %s\n", errcode.Code(err))
	}
	h.op, h.spec = op, spec
	return fmt.Sprintf("reopened at version %d\n", h.committed)
}

// ddSpec reads spec arguments, starting from base.
func ddSpec(t *testing.T, d *datadriven.TestData, base Spec) Spec {
	spec := base
	spec.ColumnTypes = testColumnTypes
	if base.Window != nil {
		w := *base.Window
		spec.Window = &w
	}
	dur := func(s string) time.Duration {
		v, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, a := range d.CmdArgs {
		switch a.Key {
		case "window":
			if a.Vals[0] == "none" {
				spec.Window = nil
			} else {
				spec.Window = &Window{Column: ethblock.ColBlockTS, Size: dur(a.Vals[0])}
			}
		case "slide":
			spec.Window.Slide = dur(a.Vals[0])
		case "group":
			spec.GroupBy = a.Vals
		case "aggs":
			spec.Aggregates = nil
			for _, v := range a.Vals {
				kind, col, _ := strings.Cut(v, ":")
				ag := Aggregate{Column: col}
				switch kind {
				case "count":
					ag.Kind = Count
				case "sum":
					ag.Kind = Sum
				case "min":
					ag.Kind = Min
				case "max":
					ag.Kind = Max
				default:
					t.Fatalf("unknown aggregate %q", v)
				}
				spec.Aggregates = append(spec.Aggregates, ag)
			}
		case "mode":
			switch a.Vals[0] {
			case "update":
				spec.Mode = Update
			case "append":
				spec.Mode = Append
			case "complete":
				spec.Mode = Complete
			}
		case "watermark":
			spec.WatermarkDelay = dur(a.Vals[0])
		}
	}
	return spec
}

const ddTimeLayout = "01-02 15:04:05"

func ddTime(t *testing.T, s string) int64 {
	v, err := time.Parse("2006-"+ddTimeLayout, "2026-"+s)
	if err != nil {
		t.Fatalf("bad time %q: %v", s, err)
	}
	return v.UnixMicro()
}

func fmtTime(us int64) string { return time.UnixMicro(us).UTC().Format(ddTimeLayout) }

func fmtWatermark(ms int64, spec Spec) string {
	if spec.WatermarkDelay == 0 {
		return "none"
	}
	if ms == 0 {
		return "0"
	}
	return fmtTime(ms * 1000)
}

// ddRows parses "<source> <miner> <MM-DD> <hh:mm:ss> [gas=N]" lines.
func ddRows(t *testing.T, input string) []testRow {
	var rows []testRow
	for _, line := range strings.Split(input, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 4 {
			t.Fatalf("bad row %q", line)
		}
		r := testRow{source: f[0], miner: f[1], gasNull: true, feeNull: true}
		if f[2] == "--" {
			r.tsNull = true
		} else {
			r.ts = ddTime(t, f[2]+" "+f[3])
		}
		for _, kv := range f[4:] {
			k, v, _ := strings.Cut(kv, "=")
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || k != "gas" {
				t.Fatalf("bad field %q", kv)
			}
			r.gas, r.gasNull = n, false
		}
		rows = append(rows, r)
	}
	return rows
}

// fmtOutput renders output rows sorted, window times as MM-DD hh:mm:ss.
func fmtOutput(t *testing.T, p *plan, b *stream.Batch) []string {
	var lines []string
	for i := 0; i < b.Len; i++ {
		var parts []string
		for c := range b.Columns {
			col := &b.Columns[c]
			s := streamtest.Value(col, i)
			if col.Type == stream.Timestamp && !col.IsNull(i) {
				s = fmtTime(col.Int64s[i])
			}
			if c >= len(b.Columns)-len(p.aggs) {
				s = col.Name + "=" + s
			}
			parts = append(parts, s)
		}
		lines = append(lines, strings.Join(parts, " "))
	}
	sort.Strings(lines)
	return lines
}

// fmtStateRow rewrites the window times of a harness state row.
func fmtStateRow(r string) string {
	key, val, _ := strings.Cut(r, " -> ")
	f := strings.Fields(strings.Trim(key, "[]"))
	for i := 0; i < len(f) && i < 2; i++ {
		if n, err := strconv.ParseInt(f[i], 10, 64); err == nil && n > 1_000_000_000_000_000 {
			f[i] = fmtTime(n)
		}
	}
	return "[" + strings.Join(f, " ") + "] -> " + val
}
