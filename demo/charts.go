package demo

import (
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/ethstream/ethstream/stream"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Charts are drawn from the CSV records only, so a chart shows exactly what the
// query reported about itself. Every y axis starts at 0; the top quarter of
// each plot is left free for the phase labels and the legend, so neither
// covers a line; batches that are not data batches (no-data, REPARTITION) are
// marked, never drawn as a drop to 0 rows.

var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
}

var (
	gray      = color.Gray{Y: 0x80}
	lightGray = color.Gray{Y: 0xe0}
	controlC  = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
)

// headroom is the share of the y range above the data, for labels and legend.
const headroom = 1.35

// phaseStarts returns the first batch id of each phase, in batch order.
func phaseStarts(batches []BatchRecord) []phaseMark {
	var marks []phaseMark
	seen := map[string]bool{}
	for _, b := range batches {
		if !seen[b.Phase] {
			seen[b.Phase] = true
			marks = append(marks, phaseMark{name: b.Phase, batch: b.BatchID})
		}
	}
	return marks
}

type phaseMark struct {
	name  string
	batch int64
}

// newPlot is a plot with the conventions of every chart: a light grid, y from
// 0 to ymax*headroom, x over the batch ids.
func newPlot(title, ylabel string, ymax float64, batches []BatchRecord) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "batch id"
	p.Y.Label.Text = ylabel
	g := plotter.NewGrid()
	g.Vertical.Color, g.Horizontal.Color = lightGray, lightGray
	p.Add(g)
	if ymax <= 0 {
		ymax = 1
	}
	p.Y.Min, p.Y.Max = 0, ymax*headroom
	var last int64
	for _, b := range batches {
		last = max(last, b.BatchID)
	}
	p.X.Min, p.X.Max = -1, float64(last)+1
	p.Y.Tick.Marker = plainTicks{}
	// Top left, below the row of phase labels, inside the free band and
	// within the first phase (the backfill), so no phase line crosses it.
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(6)
	p.Legend.YOffs = -vg.Points(14)
	p.Legend.TextStyle.Font.Size = vg.Points(7.5)
	return p
}

// plainTicks are plot's default ticks labelled without trailing zeros
// ("25", not "25.00").
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}

// addPhaseMarks draws a dashed vertical line at each phase start and the
// phase's name in the free band at the top.
func addPhaseMarks(p *plot.Plot, marks []phaseMark) error {
	top := p.Y.Max
	var labels plotter.XYLabels
	for _, m := range marks {
		x := float64(m.batch) - 0.5
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: top}})
		if err != nil {
			return err
		}
		l.Color = gray
		l.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
		p.Add(l)
		labels.XYs = append(labels.XYs, plotter.XY{X: x, Y: top * 0.98})
		labels.Labels = append(labels.Labels, " "+m.name)
	}
	return addLabels(p, labels, gray, 7, draw.YTop)
}

// addLabels draws left-aligned text at data coordinates; ya places the text
// relative to y (draw.YTop: hanging below it, draw.YBottom: above it).
func addLabels(p *plot.Plot, labels plotter.XYLabels, c color.Color, size float64, ya draw.YAlignment) error {
	if len(labels.Labels) == 0 {
		return nil
	}
	lp, err := plotter.NewLabels(labels)
	if err != nil {
		return err
	}
	for i := range lp.TextStyle {
		lp.TextStyle[i].Font.Size = vg.Points(size)
		lp.TextStyle[i].Color = c
		lp.TextStyle[i].YAlign = ya
	}
	p.Add(lp)
	return nil
}

func maxY(xys plotter.XYs) float64 {
	m := 0.0
	for _, v := range xys {
		m = max(m, v.Y)
	}
	return m
}

// savePlots stacks plots vertically into one file, written crash-safely: SVG,
// or PNG when the path ends in .png (to look at a chart as a reader would).
func savePlots(path string, w, h vg.Length, plots ...*plot.Plot) error {
	var c vg.CanvasSizer
	var out io.WriterTo
	if filepath.Ext(path) == ".png" {
		img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))
		c, out = img, vgimg.PngCanvas{Canvas: img}
	} else {
		svg := vgsvg.New(w, h)
		c, out = svg, svg
	}
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadX: vg.Millimeter, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 3}
	grid := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		grid[i] = []*plot.Plot{p}
	}
	canvases := plot.Align(grid, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[i][0])
	}
	return writeFile(path, func(w io.Writer) error {
		_, err := out.WriteTo(w)
		return err
	})
}

// addSeries draws xys as a line with points; breaks (x gaps larger than one
// batch) split the line, so a batch that is not drawn is not bridged.
func addSeries(p *plot.Plot, xys plotter.XYs, c color.Color, legend string) error {
	var first *plotter.Line
	var firstS *plotter.Scatter
	start := 0
	for i := 1; i <= len(xys); i++ {
		if i < len(xys) && xys[i].X-xys[i-1].X <= 1 {
			continue
		}
		seg := xys[start:i]
		start = i
		l, s, err := plotter.NewLinePoints(seg)
		if err != nil {
			return err
		}
		l.Color = c
		l.Width = vg.Points(1.2)
		s.Color = c
		s.Radius = vg.Points(1.8)
		s.Shape = draw.CircleGlyph{}
		p.Add(l, s)
		if first == nil {
			first, firstS = l, s
		}
	}
	if legend != "" && first != nil {
		p.Legend.Add(legend, first, firstS)
	}
	return nil
}

// addBatchMarks marks the no-data and REPARTITION batches on the x axis.
func addBatchMarks(p *plot.Plot, batches []BatchRecord) error {
	var nodata, control plotter.XYs
	for _, b := range batches {
		switch b.Kind {
		case stream.KindNoData:
			nodata = append(nodata, plotter.XY{X: float64(b.BatchID), Y: 0})
		case stream.KindRepartition:
			control = append(control, plotter.XY{X: float64(b.BatchID), Y: 0})
		}
	}
	for _, m := range []struct {
		xys   plotter.XYs
		c     color.Color
		shape draw.GlyphDrawer
		text  string
	}{
		{nodata, gray, draw.RingGlyph{}, "no-data batch (watermark only)"},
		{control, controlC, draw.PyramidGlyph{}, "control batch (REPARTITION)"},
	} {
		if len(m.xys) == 0 {
			continue
		}
		s, err := plotter.NewScatter(m.xys)
		if err != nil {
			return err
		}
		s.Color, s.Shape, s.Radius = m.c, m.shape, vg.Points(3.5)
		p.Add(s)
		p.Legend.Add(m.text, s)
	}
	return nil
}

// StateChart draws keys in state and state partitions per batch, phases marked.
func StateChart(path string, batches []BatchRecord) error {
	var keys, parts plotter.XYs
	for _, b := range batches {
		keys = append(keys, plotter.XY{X: float64(b.BatchID), Y: float64(b.StateRowsTotal)})
		parts = append(parts, plotter.XY{X: float64(b.BatchID), Y: float64(b.StatePartitions)})
	}
	marks := phaseStarts(batches)
	top := newPlot("Keys in state after each batch", "keys", maxY(keys), batches)
	if err := addSeries(top, keys, palette[0], ""); err != nil {
		return err
	}
	if err := addPhaseMarks(top, marks); err != nil {
		return err
	}
	bottom := newPlot("State partitions in force", "partitions", maxY(parts), batches)
	if err := addSeries(bottom, parts, palette[1], ""); err != nil {
		return err
	}
	// Label each partition count where it comes into force.
	var counts plotter.XYLabels
	for i, pt := range parts {
		if i == 0 || pt.Y != parts[i-1].Y {
			counts.XYs = append(counts.XYs, plotter.XY{X: pt.X + 0.5, Y: pt.Y + bottom.Y.Max*0.03})
			counts.Labels = append(counts.Labels, fmt.Sprintf("%.0f partitions", pt.Y))
		}
	}
	if err := addLabels(bottom, counts, color.Black, 8, draw.YBottom); err != nil {
		return err
	}
	if err := addPhaseMarks(bottom, marks); err != nil {
		return err
	}
	return savePlots(path, 20*vg.Centimeter, 18*vg.Centimeter, top, bottom)
}

// MemoryChart draws state memory per batch (memoryUsedBytes: one memtable
// arena per partition holding keys, plus the pending batch), labelled with
// the last value before and after the shrink. A control batch reports no
// operator memory: it is marked, not drawn.
func MemoryChart(path string, batches []BatchRecord) error {
	var mem plotter.XYs
	type point struct {
		x, y  float64
		parts int64
	}
	last := map[string]point{}
	for _, b := range batches {
		if b.Kind == stream.KindRepartition {
			continue
		}
		y := float64(b.StateMemoryBytes) / (1 << 20)
		mem = append(mem, plotter.XY{X: float64(b.BatchID), Y: y})
		last[b.Phase] = point{float64(b.BatchID), y, b.StatePartitions}
	}
	p := newPlot("State memory after each batch (memoryUsedBytes)", "MiB", maxY(mem), batches)
	if err := addSeries(p, mem, palette[4], ""); err != nil {
		return err
	}
	if err := addBatchMarks(p, batches); err != nil {
		return err
	}
	if err := addPhaseMarks(p, phaseStarts(batches)); err != nil {
		return err
	}
	var labels plotter.XYLabels
	for _, ph := range []string{PhaseRetireArchive, PhaseShrinkState} {
		pt, ok := last[ph]
		if !ok {
			continue
		}
		labels.XYs = append(labels.XYs, plotter.XY{X: pt.x - 7, Y: pt.y + p.Y.Max*0.05})
		labels.Labels = append(labels.Labels, fmt.Sprintf("%.1f MiB at %d partitions", pt.y, pt.parts))
	}
	if err := addLabels(p, labels, color.Black, 8, draw.YBottom); err != nil {
		return err
	}
	return savePlots(path, 20*vg.Centimeter, 10*vg.Centimeter, p)
}

// coldStartCap is the y limit of the latency chart: a batch above twice the
// 90th percentile (typically batch 0, which opens every partition and creates
// the table) is drawn at the cap with its value written beside it, so one
// cold start does not flatten every other batch.
func coldStartCap(ys []float64) float64 {
	if len(ys) == 0 {
		return 1
	}
	s := append([]float64(nil), ys...)
	sort.Float64s(s)
	p90 := s[(len(s)*9)/10]
	c := 0.0
	for _, y := range s {
		if y <= 2*p90 {
			c = y
		}
	}
	return max(c, 1)
}

// LatencyChart draws addBatch milliseconds per data batch, one series per
// phase, with the median of the live batches before (retire_archive, the old
// partition count) and after the shrink as dashed lines.
func LatencyChart(path string, batches []BatchRecord) error {
	byPhase := map[string]plotter.XYs{}
	var order []string
	var all []float64
	for _, b := range batches {
		if b.Kind != stream.KindData {
			continue // no addBatch worth plotting; marked below
		}
		if _, ok := byPhase[b.Phase]; !ok {
			order = append(order, b.Phase)
		}
		byPhase[b.Phase] = append(byPhase[b.Phase], plotter.XY{X: float64(b.BatchID), Y: b.AddBatchMs})
		all = append(all, b.AddBatchMs)
	}
	ceiling := coldStartCap(all)
	p := newPlot("addBatch per data batch (aggregation, Delta MERGE, state commit)", "ms", ceiling, batches)
	var clipped plotter.XYLabels
	var clippedPts plotter.XYs
	for i, ph := range order {
		xys := byPhase[ph]
		for j := range xys {
			if xys[j].Y > ceiling {
				// Labels stack upwards in the free band, one line each.
				y := ceiling*1.04 + float64(len(clipped.Labels))*p.Y.Max*0.045
				text := fmt.Sprintf("batch %d: %.0f ms, clipped", int64(xys[j].X), xys[j].Y)
				if j == 0 {
					text += " (cold start: first batch of the process)"
				}
				clipped.XYs = append(clipped.XYs, plotter.XY{X: xys[j].X + 0.6, Y: y})
				clipped.Labels = append(clipped.Labels, text)
				xys[j].Y = ceiling
				clippedPts = append(clippedPts, xys[j])
			}
		}
		// The phase labels at the top name the series: no legend entry.
		if err := addSeries(p, xys, palette[i%len(palette)], ""); err != nil {
			return err
		}
	}
	if len(clippedPts) > 0 {
		s, err := plotter.NewScatter(clippedPts)
		if err != nil {
			return err
		}
		s.Shape, s.Color, s.Radius = draw.PyramidGlyph{}, color.Black, vg.Points(3.5)
		p.Add(s)
		p.Legend.Add("clipped at the axis top", s)
		if err := addLabels(p, clipped, color.Black, 7, draw.YBottom); err != nil {
			return err
		}
	}
	if err := addMedians(p, batches); err != nil {
		return err
	}
	if err := addBatchMarks(p, batches); err != nil {
		return err
	}
	if err := addPhaseMarks(p, phaseStarts(batches)); err != nil {
		return err
	}
	return savePlots(path, 20*vg.Centimeter, 11*vg.Centimeter, p)
}

// addMedians draws the median addBatch of the live data batches before the
// shrink (retire_archive) and after it (shrink_state), over their batches.
func addMedians(p *plot.Plot, batches []BatchRecord) error {
	var labels plotter.XYLabels
	for _, ph := range []string{PhaseRetireArchive, PhaseShrinkState} {
		var ys []float64
		var lo, hi float64 = -1, -1
		parts := int64(0)
		for _, b := range batches {
			if b.Phase != ph || b.Kind != stream.KindData {
				continue
			}
			ys = append(ys, b.AddBatchMs)
			if lo < 0 {
				lo = float64(b.BatchID)
			}
			hi = float64(b.BatchID)
			parts = b.StatePartitions
		}
		if len(ys) == 0 {
			continue
		}
		m := median(ys)
		l, err := plotter.NewLine(plotter.XYs{{X: lo - 0.4, Y: m}, {X: hi + 0.4, Y: m}})
		if err != nil {
			return err
		}
		l.Color, l.Width = color.Black, vg.Points(1.5)
		l.Dashes = []vg.Length{vg.Points(5), vg.Points(2)}
		p.Add(l)
		labels.XYs = append(labels.XYs, plotter.XY{X: lo - 0.4, Y: m + p.Y.Max*0.03})
		labels.Labels = append(labels.Labels, fmt.Sprintf("median %.1f ms, %d partitions", m, parts))
	}
	return addLabels(p, labels, color.Black, 7.5, draw.YBottom)
}

// InputChart draws rows read per data batch, one panel per source, with the
// no-data and control batches marked on the axis.
func InputChart(path string, batches []BatchRecord, sources []SourceRecord) error {
	kind := map[int64]string{}
	for _, b := range batches {
		kind[b.BatchID] = b.Kind
	}
	bySource := map[string]plotter.XYs{}
	for _, s := range sources {
		if kind[s.BatchID] != stream.KindData {
			continue
		}
		bySource[s.SourceName] = append(bySource[s.SourceName], plotter.XY{X: float64(s.BatchID), Y: float64(s.NumInputRows)})
	}
	names := make([]string, 0, len(bySource))
	for n := range bySource {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return fmt.Errorf("input chart %s: no source records", path)
	}
	marks := phaseStarts(batches)
	var plots []*plot.Plot
	for i, n := range names {
		xys := bySource[n]
		sort.Slice(xys, func(a, b int) bool { return xys[a].X < xys[b].X })
		p := newPlot(fmt.Sprintf("Rows read per data batch: %s", n), "rows", maxY(xys), batches)
		if err := addSeries(p, xys, palette[i%len(palette)], ""); err != nil {
			return err
		}
		if err := addBatchMarks(p, batches); err != nil {
			return err
		}
		if err := addPhaseMarks(p, marks); err != nil {
			return err
		}
		plots = append(plots, p)
	}
	return savePlots(path, 20*vg.Centimeter, vg.Length(9*len(plots))*vg.Centimeter, plots...)
}

// chartNames are the charts WriteCharts draws, without extension.
var chartNames = []string{"state", "memory", "latency", "input"}

// WriteCharts draws state.svg, memory.svg, latency.svg and input.svg into dir.
func WriteCharts(dir string, batches []BatchRecord, sources []SourceRecord) error {
	return writeCharts(dir, ".svg", batches, sources)
}

func writeCharts(dir, ext string, batches []BatchRecord, sources []SourceRecord) error {
	for _, name := range chartNames {
		path := filepath.Join(dir, name+ext)
		var err error
		switch name {
		case "state":
			err = StateChart(path, batches)
		case "memory":
			err = MemoryChart(path, batches)
		case "latency":
			err = LatencyChart(path, batches)
		case "input":
			err = InputChart(path, batches, sources)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
