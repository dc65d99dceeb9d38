package demo

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ethstream/ethstream/ui"
	"gonum.org/v1/plot/vg"
)

func TestChartsRender(t *testing.T) {
	var batches []BatchRecord
	var sources []SourceRecord
	phase := func(id int64) string {
		switch {
		case id <= 12:
			return "backfill"
		case id <= 28:
			return "add_live"
		case id <= 36:
			return "retire_archive"
		default:
			return "shrink_state"
		}
	}
	for id := int64(0); id <= 45; id++ {
		parts := int64(200)
		if id >= 37 {
			parts = 8
		}
		kind, ms := "data", float64(id%7+3)
		switch id {
		case 0:
			ms = 700 // the cold start
		case 12:
			kind = "no-data"
		case 37:
			kind, ms = "repartition", 0
		}
		keys, removed := 3000+id, int64(0)
		if id < 12 {
			keys = 9000 + id
		} else if id == 12 {
			removed = 6000 // the final watermark evicts the closed windows
		}
		batches = append(batches, BatchRecord{Phase: phase(id), BatchID: id, Kind: kind,
			NumInputRows: 20, AddBatchMs: ms, StateRowsTotal: keys, StateRowsRemoved: removed, StatePartitions: parts,
			StateMemoryBytes: parts << 18, Watermark: "2026-09-27T23:59:59.000Z"})
		sources = append(sources, SourceRecord{Phase: phase(id), BatchID: id, SourceName: "eth_live", NumInputRows: 20})
		if id <= 28 {
			sources = append(sources, SourceRecord{Phase: phase(id), BatchID: id, SourceName: "s3_backfill", NumInputRows: 35000})
		}
	}
	dir := t.TempDir()
	if err := WriteCharts(dir, batches, sources); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"state.svg", "memory.svg", "latency.svg", "input.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if !strings.Contains(s, "<svg") || !strings.Contains(s, "batch id") {
			t.Fatalf("%s does not look like a chart", name)
		}
	}
	if !strings.Contains(mustRead(t, filepath.Join(dir, "state.svg")), "shrink_state") {
		t.Fatal("phase marks missing from state.svg")
	}
	// The medians are over every data batch at the count, whichever phase
	// (brute force over the records here).
	med := func(parts int64) string {
		var ys []float64
		for _, b := range batches {
			if b.Kind == "data" && b.StatePartitions == parts {
				ys = append(ys, b.AddBatchMs)
			}
		}
		sort.Float64s(ys)
		m := ys[len(ys)/2]
		if len(ys)%2 == 0 {
			m = (ys[len(ys)/2-1] + ys[len(ys)/2]) / 2
		}
		return fmt.Sprintf("median addBatch at %d partitions: %.1f ms", parts, m)
	}
	if med(200) != "median addBatch at 200 partitions: 6.0 ms" || med(8) != "median addBatch at 8 partitions: 6.0 ms" {
		t.Fatalf("oracle: %s, %s", med(200), med(8))
	}
	lat := mustRead(t, filepath.Join(dir, "latency.svg"))
	if !strings.Contains(lat, "median addBatch at 200 partitions: 6.0 ms (batches 0-36)") {
		t.Error("latency.svg's 200-partition median does not span every phase at 200 partitions")
	}
	if !strings.Contains(lat, "Liberation Sans") {
		t.Error("latency.svg is not in Liberation Sans")
	}
	// Each median is labelled at its line, in its partition count's colour
	// (the dashboard's: the first count in force, then the second).
	for _, want := range []string{"batch 0: 700 ms, clipped (cold start: first batch of the process)", med(200), med(8),
		"control batch (REPARTITION)", "no-data batch",
		`fill:` + ui.PartitionColors[0] + `">median 6.0 ms at 200 partitions</text>`,
		`fill:` + ui.PartitionColors[1] + `">median 6.0 ms at 8 partitions</text>`} {
		if !strings.Contains(lat, want) {
			t.Errorf("latency.svg lacks %q", want)
		}
	}
	in := mustRead(t, filepath.Join(dir, "input.svg"))
	if !strings.Contains(in, "control batch (REPARTITION)") {
		t.Error("input.svg does not mark the control batch")
	}
	// Sources in the dashboard's colours, by order of first appearance
	// (eth_live is the first source of batch 0 here), not by name.
	live, arch := strings.Index(in, "Rows read per data batch: eth_live"), strings.Index(in, "Rows read per data batch: s3_backfill")
	if live < 0 || arch < 0 || live > arch || !strings.Contains(in[live:arch], "stroke:"+ui.SourceColors[0]) || !strings.Contains(in[arch:], "stroke:"+ui.SourceColors[1]) {
		t.Error("input.svg: the sources are not in the dashboard's colours, in order of first appearance")
	}
	if mem := mustRead(t, filepath.Join(dir, "memory.svg")); !strings.Contains(mem, "state memory at 200 partitions: 50.0 MiB") || !strings.Contains(mem, "state memory at 8 partitions: 2.0 MiB") {
		t.Error("memory.svg lacks the before/after keys")
	}
	if st := mustRead(t, filepath.Join(dir, "state.svg")); !strings.Contains(st, "batch 12 (no data): the watermark moves to 2026-09-27 23:59:59") || !strings.Contains(st, "and evicts 6000 keys of closed windows") {
		t.Error("state.svg does not explain the no-data batch's eviction")
	}
}

// The batches a chart draws as a line: data batches only, so a control or
// no-data batch is marked, never a drop to 0 rows; every y axis from 0.
func TestChartConventions(t *testing.T) {
	if c := coldStartCap([]float64{700, 5, 6, 7, 8, 5, 6, 7, 8, 9, 6}); c != 9 {
		t.Errorf("cap = %v, want the largest non-outlier 9", c)
	}
	if c := coldStartCap([]float64{50, 90, 220, 60}); c != 220 {
		t.Errorf("cap = %v: a slow live batch is not a cold start", c)
	}
	p := newPlot("x", "y", 10, []BatchRecord{{BatchID: 3}})
	if p.Y.Min >= 0 || p.Y.Max != 10*headroom || p.X.Max != 4 {
		t.Errorf("axes y %v..%v x ..%v", p.Y.Min, p.Y.Max, p.X.Max)
	}
	// The strip under 0 holds the batch marks; it has no tick: the axis
	// reads from 0.
	for _, tk := range p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max) {
		if tk.Value < 0 {
			t.Errorf("tick %v below 0", tk.Value)
		}
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestChartKeysFit: the keys under a chart wrap into rows no wider than the
// space given, so no key runs past the figure or over another.
func TestChartKeysFit(t *testing.T) {
	var keys []chartKey
	for i := range 12 {
		keys = append(keys, chartKey{text: strings.Repeat("key text ", 1+i%4)})
	}
	width := 12 * vg.Centimeter
	rows := keyRows(keys, width)
	n := 0
	sty := text(keyFont)
	for _, row := range rows {
		var w vg.Length
		for i, k := range row {
			if i > 0 {
				w += keyGap
			}
			w += keyThumb + vg.Points(3) + sty.Width(k.text)
		}
		if w > width && len(row) > 1 {
			t.Errorf("a row of %d keys is %v wide, more than %v", len(row), w, width)
		}
		n += len(row)
	}
	if n != len(keys) || len(rows) < 2 {
		t.Errorf("%d keys in %d rows", n, len(rows))
	}
}
