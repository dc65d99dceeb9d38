package demo

import (
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Charts are drawn from the CSV records only, so a chart shows exactly what the
// query reported about itself.

var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
}

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

// addPhaseMarks draws a dashed vertical line and a label at each phase start.
func addPhaseMarks(p *plot.Plot, marks []phaseMark, ymax float64) error {
	var labels plotter.XYLabels
	for _, m := range marks {
		x := float64(m.batch) - 0.5
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: ymax}})
		if err != nil {
			return err
		}
		l.Color = color.Gray{Y: 0x80}
		l.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
		p.Add(l)
		labels.XYs = append(labels.XYs, plotter.XY{X: x, Y: ymax})
		labels.Labels = append(labels.Labels, " "+m.name)
	}
	if len(labels.Labels) == 0 {
		return nil
	}
	lp, err := plotter.NewLabels(labels)
	if err != nil {
		return err
	}
	for i := range lp.TextStyle {
		lp.TextStyle[i].Font.Size = vg.Points(7)
		lp.TextStyle[i].Rotation = -0.6
	}
	p.Add(lp)
	return nil
}

func maxY(xys plotter.XYs) float64 {
	m := 1.0
	for _, v := range xys {
		if v.Y > m {
			m = v.Y
		}
	}
	return m
}

// savePlots stacks plots vertically into one SVG file, written crash-safely.
func savePlots(path string, w, h vg.Length, plots ...*plot.Plot) error {
	c := vgsvg.New(w, h)
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadX: vg.Millimeter, PadY: vg.Millimeter * 3,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	grid := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		grid[i] = []*plot.Plot{p}
	}
	canvases := plot.Align(grid, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[i][0])
	}
	return writeFile(path, func(w io.Writer) error {
		_, err := c.WriteTo(w)
		return err
	})
}

// StateChart draws keys in state and state partitions per batch, phases marked.
func StateChart(path string, batches []BatchRecord) error {
	var keys, parts plotter.XYs
	for _, b := range batches {
		keys = append(keys, plotter.XY{X: float64(b.BatchID), Y: float64(b.StateRowsTotal)})
		parts = append(parts, plotter.XY{X: float64(b.BatchID), Y: float64(b.StatePartitions)})
	}
	marks := phaseStarts(batches)
	top := plot.New()
	top.Title.Text = "Keys in state per batch"
	top.X.Label.Text = "batch id"
	top.Y.Label.Text = "keys"
	if err := addSeries(top, keys, palette[0], ""); err != nil {
		return err
	}
	if err := addPhaseMarks(top, marks, maxY(keys)); err != nil {
		return err
	}
	bottom := plot.New()
	bottom.Title.Text = "State partitions per batch"
	bottom.X.Label.Text = "batch id"
	bottom.Y.Label.Text = "partitions"
	if err := addSeries(bottom, parts, palette[1], ""); err != nil {
		return err
	}
	if err := addPhaseMarks(bottom, marks, maxY(parts)); err != nil {
		return err
	}
	return savePlots(path, 20*vg.Centimeter, 18*vg.Centimeter, top, bottom)
}

// LatencyChart draws addBatch milliseconds per batch, one series per phase.
func LatencyChart(path string, batches []BatchRecord) error {
	p := plot.New()
	p.Title.Text = "addBatch duration per batch"
	p.X.Label.Text = "batch id"
	p.Y.Label.Text = "addBatch (ms)"
	byPhase := map[string]plotter.XYs{}
	var order []string
	for _, b := range batches {
		if b.Kind == "repartition" {
			continue // a control batch has no addBatch; its time is controlBatch.REPARTITION
		}
		if _, ok := byPhase[b.Phase]; !ok {
			order = append(order, b.Phase)
		}
		byPhase[b.Phase] = append(byPhase[b.Phase], plotter.XY{X: float64(b.BatchID), Y: b.AddBatchMs})
	}
	for i, ph := range order {
		if err := addSeries(p, byPhase[ph], palette[i%len(palette)], ph); err != nil {
			return err
		}
	}
	p.Legend.Top = true
	return savePlots(path, 20*vg.Centimeter, 10*vg.Centimeter, p)
}

// InputChart draws rows read per batch, one panel per source.
func InputChart(path string, batches []BatchRecord, sources []SourceRecord) error {
	bySource := map[string]plotter.XYs{}
	for _, s := range sources {
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
	var lastBatch int64
	for _, b := range batches {
		lastBatch = max(lastBatch, b.BatchID)
	}
	var plots []*plot.Plot
	for i, n := range names {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("Rows read per batch: %s", n)
		p.X.Label.Text = "batch id"
		p.Y.Label.Text = "rows"
		xys := bySource[n]
		sort.Slice(xys, func(a, b int) bool { return xys[a].X < xys[b].X })
		if err := addSeries(p, xys, palette[i%len(palette)], ""); err != nil {
			return err
		}
		if err := addPhaseMarks(p, marks, maxY(xys)); err != nil {
			return err
		}
		// One batch axis for every panel, so phases line up across sources.
		p.X.Min, p.X.Max = -1, float64(lastBatch)+1
		plots = append(plots, p)
	}
	return savePlots(path, 20*vg.Centimeter, vg.Length(9*len(plots))*vg.Centimeter, plots...)
}

func addSeries(p *plot.Plot, xys plotter.XYs, c color.Color, legend string) error {
	l, s, err := plotter.NewLinePoints(xys)
	if err != nil {
		return err
	}
	l.Color = c
	s.Color = c
	s.Radius = vg.Points(1.5)
	p.Add(l, s)
	if legend != "" {
		p.Legend.Add(legend, l, s)
	}
	return nil
}

// WriteCharts draws state.svg, latency.svg and input.svg into dir.
func WriteCharts(dir string, batches []BatchRecord, sources []SourceRecord) error {
	if err := StateChart(filepath.Join(dir, "state.svg"), batches); err != nil {
		return err
	}
	if err := LatencyChart(filepath.Join(dir, "latency.svg"), batches); err != nil {
		return err
	}
	return InputChart(filepath.Join(dir, "input.svg"), batches, sources)
}
