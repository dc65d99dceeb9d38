package demo

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/ethstream/ethstream/stream"
	"github.com/ethstream/ethstream/ui"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Charts are drawn from the CSV records only, so a chart shows exactly what the
// query reported about itself. Every y axis starts at 0, and the strip under
// it holds the marks of the batches that are not data (below the axis, so no
// mark reads as a value of 0); the top band of each
// plot holds the phase names, above the dashed phase markers (which stop below
// it), in a second row where a name is wider than its phase; every other
// annotation (what a marker means, medians, clipped values, before/after
// figures) is a key in rows under the plot, so no text crosses a line or
// another text. Batches that are not data batches (no-data, REPARTITION) are
// marked, never drawn as a drop to 0 rows. Text is Liberation Sans (bundled
// with gonum/plot; the SVGs name Arial and Helvetica, which have the same
// metrics, and sans-serif as fallbacks).

// Colours are the dashboard's (ui/palette.go): a source and a state
// partition count keep one colour across the dashboard, the SVGs and the
// PNGs, by order of first appearance.
var (
	gray      = color.Gray{Y: 0x80}
	lightGray = color.Gray{Y: 0xe0}
	controlC  = hexColor(ui.ControlColor)
)

// hexColor parses "#RRGGBB".
func hexColor(s string) color.Color {
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "#"), 16, 32)
	if err != nil || len(s) != 7 {
		panic(fmt.Sprintf("bad colour %q", s)) // the palette is a constant
	}
	return color.RGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 0xff}
}

// sourceColor is the colour of the i-th source to appear.
func sourceColor(i int) color.Color { return hexColor(ui.SourceColors[i%len(ui.SourceColors)]) }

// partitionColors gives each state partition count in force its colour, in
// order of first use over the batches.
func partitionColors(batches []BatchRecord) map[int64]color.Color {
	m := map[int64]color.Color{}
	for _, b := range batches {
		if _, ok := m[b.StatePartitions]; !ok {
			m[b.StatePartitions] = hexColor(ui.PartitionColors[len(m)%len(ui.PartitionColors)])
		}
	}
	return m
}

// headroom is the y range over the data's maximum: the band above holds the
// phase names.
const headroom = 1.3

// markStrip is the strip under y=0, as a share of the y range above it: the
// no-data and control batch marks sit there, never on the axis like a value.
const markStrip = 0.07

// markTop is where the dashed phase markers stop, as a share of the y range:
// the phase names are above it.
const markTop = 0.86

// sans is the charts' font at size points.
func sans(size float64) font.Font {
	return font.From(font.Font{Typeface: "Liberation", Variant: "Sans"}, vg.Points(size))
}

// chart is a plot and the keys drawn in rows under it.
type chart struct {
	*plot.Plot
	keys []chartKey
}

// chartKey is one entry of a chart's key: a sample of what it names, then
// the text.
type chartKey struct {
	text   string
	thumbs []plot.Thumbnailer
}

func (c *chart) key(text string, thumbs ...plot.Thumbnailer) {
	c.keys = append(c.keys, chartKey{text: text, thumbs: thumbs})
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

// newPlot is a plot with the conventions of every chart: a light grid, y from
// 0 to ymax*headroom, x over the batch ids, Liberation Sans.
func newPlot(title, ylabel string, ymax float64, batches []BatchRecord) *chart {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = sans(11)
	p.X.Label.Text = "batch id"
	p.Y.Label.Text = ylabel
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = sans(10)
		a.Tick.Label.Font = sans(9)
	}
	g := plotter.NewGrid()
	g.Vertical.Color, g.Horizontal.Color = lightGray, lightGray
	p.Add(g)
	if ymax <= 0 {
		ymax = 1
	}
	p.Y.Min, p.Y.Max = -ymax*headroom*markStrip, ymax*headroom
	var last int64
	for _, b := range batches {
		last = max(last, b.BatchID)
	}
	p.X.Min, p.X.Max = -1, float64(last)+1
	p.Y.Tick.Marker = plainTicks{}
	p.Legend.TextStyle.Font = sans(8)
	return &chart{Plot: p}
}

// plainTicks are plot's default ticks labelled without trailing zeros
// ("25", not "25.00").
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(max(lo, 0), hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}

// plotHeight is the height of the latency chart's data area, roughly (the
// figure less the title, the x axis and the paddings).
const plotHeight = 8 * vg.Centimeter

// plotWidth is the width of a chart's data area, roughly (the figure less
// the y axis and the paddings); it sizes the phase names in batch units.
const plotWidth = 17.5 * vg.Centimeter

// addPhaseMarks draws a dashed vertical line at each phase start, up to
// markTop, and the phase's name above it; a name wider than its phase goes one
// row lower (still above the markers), so names never overlap.
func addPhaseMarks(p *chart, marks []phaseMark) error {
	top := p.Y.Max
	var rows [2]plotter.XYLabels
	style := text(7)
	perPt := (p.X.Max - p.X.Min) / float64(plotWidth)
	rowEnd := [2]float64{p.X.Min - 1, p.X.Min - 1}
	for i, m := range marks {
		x := float64(m.batch) - 0.5
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: top * markTop}})
		if err != nil {
			return err
		}
		l.Color = gray
		l.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
		p.Add(l)
		end := x + float64(style.Width(m.name)+vg.Points(6))*perPt
		row := 0
		if x < rowEnd[0] || (i+1 < len(marks) && end > float64(marks[i+1].batch)-0.5 && x >= rowEnd[1]) {
			row = 1
		}
		if x < rowEnd[row] {
			row = 0 // both rows taken: the first row's overlap is the lesser evil
		}
		rowEnd[row] = end
		y := top * (0.995 - 0.06*float64(row))
		rows[row].XYs = append(rows[row].XYs, plotter.XY{X: x, Y: y})
		rows[row].Labels = append(rows[row].Labels, m.name)
	}
	for _, r := range rows {
		if err := addLabels(p, r, gray, 7, draw.YTop); err != nil {
			return err
		}
	}
	return nil
}

// text is the charts' text style at size points.
func text(size float64) draw.TextStyle {
	return draw.TextStyle{Color: color.Black, Font: sans(size), Handler: plot.DefaultTextHandler}
}

// addLabels draws left-aligned text at data coordinates, 2 points to the
// right; ya places the text relative to y (draw.YTop: hanging below it,
// draw.YBottom: above it).
func addLabels(p *chart, labels plotter.XYLabels, c color.Color, size float64, ya draw.YAlignment) error {
	if len(labels.Labels) == 0 {
		return nil
	}
	lp, err := plotter.NewLabels(labels)
	if err != nil {
		return err
	}
	lp.Offset = vg.Point{X: vg.Points(2)}
	for i := range lp.TextStyle {
		lp.TextStyle[i].Font = sans(size)
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

// Keys under a chart: rows of keyHeight, each key a sample keyThumb wide, the
// text, and keyGap before the next.
const (
	keyHeight = 11 * vg.Length(1)
	keyThumb  = 16 * vg.Length(1)
	keyGap    = 12 * vg.Length(1)
	keyFont   = 7.5
)

// keyRows lays the keys out in rows no wider than width.
func keyRows(keys []chartKey, width vg.Length) [][]chartKey {
	sty := text(keyFont)
	var rows [][]chartKey
	var x vg.Length
	for _, k := range keys {
		w := keyThumb + vg.Points(3) + sty.Width(k.text)
		if len(rows) == 0 || (x > 0 && x+w > width) {
			rows = append(rows, nil)
			x = 0
		}
		rows[len(rows)-1] = append(rows[len(rows)-1], k)
		x += w + keyGap
	}
	return rows
}

// drawKeys draws rows of keys into c from its top left.
func drawKeys(c draw.Canvas, rows [][]chartKey) {
	sty := text(keyFont)
	sty.YAlign = draw.YCenter
	for i, row := range rows {
		y := c.Max.Y - keyHeight*vg.Length(i) - keyHeight/2
		x := c.Min.X
		for _, k := range row {
			tc := draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{
				Min: vg.Point{X: x, Y: y - keyHeight/2 + 1}, Max: vg.Point{X: x + keyThumb, Y: y + keyHeight/2 - 1}}}
			for _, t := range k.thumbs {
				t.Thumbnail(&tc)
			}
			x += keyThumb + vg.Points(3)
			c.FillText(sty, vg.Point{X: x, Y: y}, k.text)
			x += sty.Width(k.text) + keyGap
		}
	}
}

// savePlots stacks charts vertically into one file, each with its keys in
// rows under its x axis, written crash-safely: SVG, or PNG when the path ends
// in .png (to look at a chart as a reader would).
func savePlots(path string, w, h vg.Length, charts ...*chart) error {
	keyW := w - 3*vg.Centimeter
	rows := make([][][]chartKey, len(charts))
	var keysH vg.Length
	for i, c := range charts {
		rows[i] = keyRows(c.keys, keyW)
		keysH += keyHeight * vg.Length(len(rows[i]))
	}
	h += keysH // the keys add to the figure; the plots keep their size
	var c vg.CanvasSizer
	var out io.WriterTo
	png := filepath.Ext(path) == ".png"
	if png {
		img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))
		c, out = img, vgimg.PngCanvas{Canvas: img}
	} else {
		svg := vgsvg.New(w, h)
		c, out = svg, svg
	}
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: len(charts), Cols: 1, PadX: vg.Millimeter, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 3}
	grid := make([][]*plot.Plot, len(charts))
	for i, ch := range charts {
		grid[i] = []*plot.Plot{ch.Plot}
	}
	// Align lines up the data areas of stacked plots; each tile's keys are
	// then cut from its bottom.
	canvases := plot.Align(grid, tiles, dc)
	for i, ch := range charts {
		tile := canvases[i][0]
		kh := keyHeight * vg.Length(len(rows[i]))
		ch.Draw(draw.Crop(tile, 0, 0, kh, 0))
		keysC := tile
		keysC.Max.Y = tile.Min.Y + kh
		keysC.Min.X += vg.Centimeter * 1.5 // under the data, past the y axis
		drawKeys(keysC, rows[i])
	}
	return writeFile(path, func(w io.Writer) error {
		if png {
			_, err := out.WriteTo(w)
			return err
		}
		var b bytes.Buffer
		if _, err := out.WriteTo(&b); err != nil {
			return err
		}
		// The SVG names the font the text was measured with; a viewer
		// without it takes a metric-compatible one, or any sans-serif.
		_, err := io.WriteString(w, strings.ReplaceAll(b.String(), "font-family:Liberation Sans;",
			"font-family:'Liberation Sans',Arial,Helvetica,sans-serif;"))
		return err
	})
}

// addSeries draws xys as a line with points; breaks (x gaps larger than one
// batch) split the line, so a batch that is not drawn is not bridged. It
// returns the first segment's line and points (for a key).
func addSeries(p *chart, xys plotter.XYs, c color.Color) ([]plot.Thumbnailer, error) {
	var thumbs []plot.Thumbnailer
	start := 0
	for i := 1; i <= len(xys); i++ {
		if i < len(xys) && xys[i].X-xys[i-1].X <= 1 {
			continue
		}
		seg := xys[start:i]
		start = i
		l, s, err := plotter.NewLinePoints(seg)
		if err != nil {
			return nil, err
		}
		l.Color = c
		l.Width = vg.Points(1.2)
		s.Color = c
		s.Radius = vg.Points(1.8)
		s.Shape = draw.CircleGlyph{}
		p.Add(l, s)
		if thumbs == nil {
			thumbs = []plot.Thumbnailer{l, s}
		}
	}
	return thumbs, nil
}

// addByPartitions draws xys (one point per batch of batches, by batch id) as
// addSeries does, each run of batches at one state partition count in that
// count's colour; it returns the thumbnails of each count's first run.
func addByPartitions(p *chart, xys plotter.XYs, batches []BatchRecord) (map[int64][]plot.Thumbnailer, error) {
	colors := partitionColors(batches)
	parts := map[int64]int64{}
	for _, b := range batches {
		parts[b.BatchID] = b.StatePartitions
	}
	thumbs := map[int64][]plot.Thumbnailer{}
	start := 0
	for i := 1; i <= len(xys); i++ {
		if i < len(xys) && parts[int64(xys[i].X)] == parts[int64(xys[start].X)] {
			continue
		}
		n := parts[int64(xys[start].X)]
		th, err := addSeries(p, xys[start:i], colors[n])
		if err != nil {
			return nil, err
		}
		if thumbs[n] == nil {
			thumbs[n] = th
		}
		start = i
	}
	return thumbs, nil
}

// addBatchMarks marks the no-data and REPARTITION batches in the strip under
// the axis.
func addBatchMarks(p *chart, batches []BatchRecord) error {
	var nodata, control plotter.XYs
	for _, b := range batches {
		switch b.Kind {
		case stream.KindNoData:
			nodata = append(nodata, plotter.XY{X: float64(b.BatchID), Y: p.Y.Min / 2})
		case stream.KindRepartition:
			control = append(control, plotter.XY{X: float64(b.BatchID), Y: p.Y.Min / 2})
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
		p.key(m.text, s)
	}
	return nil
}

// StateChart draws keys in state and state partitions per batch, phases
// marked; the drop of a no-data batch whose watermark evicted closed windows
// is labelled where it happens.
func StateChart(path string, batches []BatchRecord) error {
	var keys, parts plotter.XYs
	for _, b := range batches {
		keys = append(keys, plotter.XY{X: float64(b.BatchID), Y: float64(b.StateRowsTotal)})
		parts = append(parts, plotter.XY{X: float64(b.BatchID), Y: float64(b.StatePartitions)})
	}
	marks := phaseStarts(batches)
	top := newPlot("Keys in state after each batch", "keys", maxY(keys), batches)
	if _, err := addSeries(top, keys, color.Black); err != nil {
		return err
	}
	if err := addEvictions(top, batches); err != nil {
		return err
	}
	if err := addBatchMarks(top, batches); err != nil {
		return err
	}
	if err := addPhaseMarks(top, marks); err != nil {
		return err
	}
	bottom := newPlot("State partitions in force", "partitions", maxY(parts), batches)
	if _, err := addByPartitions(bottom, parts, batches); err != nil {
		return err
	}
	// Label each partition count where it comes into force, above the line,
	// in its colour (the band under the phase names is free: the count only
	// falls).
	colors := partitionColors(batches)
	for i, pt := range parts {
		if i == 0 || pt.Y != parts[i-1].Y {
			l := plotter.XYLabels{XYs: plotter.XYs{{X: pt.X, Y: pt.Y + bottom.Y.Max*0.03}},
				Labels: []string{fmt.Sprintf("%.0f partitions", pt.Y)}}
			if err := addLabels(bottom, l, colors[int64(pt.Y)], 8, draw.YBottom); err != nil {
				return err
			}
		}
	}
	if err := addBatchMarks(bottom, batches); err != nil {
		return err
	}
	if err := addPhaseMarks(bottom, marks); err != nil {
		return err
	}
	return savePlots(path, 20*vg.Centimeter, 18*vg.Centimeter, top, bottom)
}

// addEvictions labels each no-data batch that removed keys from state: its
// watermark closed windows and evicted their keys (their final counts are in
// the table), the drop the line shows there.
func addEvictions(p *chart, batches []BatchRecord) error {
	for i, b := range batches {
		if b.Kind != stream.KindNoData || b.StateRowsRemoved == 0 || i == 0 {
			continue
		}
		wm := strings.TrimSuffix(b.Watermark, ".000Z")
		wm = strings.Replace(wm, "T", " ", 1)
		prev := float64(batches[i-1].StateRowsTotal)
		// Right of the drop and of a phase marker at the next batch.
		l := plotter.XYLabels{XYs: plotter.XYs{{X: float64(b.BatchID) + 0.7, Y: (prev + float64(b.StateRowsTotal)) / 2}},
			Labels: []string{fmt.Sprintf("batch %d (no data): the watermark moves to %s\nand evicts %d keys of closed windows", b.BatchID, wm, b.StateRowsRemoved)}}
		if err := addLabels(p, l, color.Black, 8, draw.YCenter); err != nil {
			return err
		}
	}
	return nil
}

// MemoryChart draws state memory per batch (memoryUsedBytes: one memtable
// arena per partition holding keys, plus the pending batch), with the last
// value before and after the shrink in its key. A control batch reports no
// operator memory: it is marked, not drawn.
func MemoryChart(path string, batches []BatchRecord) error {
	var mem plotter.XYs
	type point struct {
		y     float64
		parts int64
	}
	last := map[string]point{}
	for _, b := range batches {
		if b.Kind == stream.KindRepartition {
			continue
		}
		y := float64(b.StateMemoryBytes) / (1 << 20)
		mem = append(mem, plotter.XY{X: float64(b.BatchID), Y: y})
		last[b.Phase] = point{y, b.StatePartitions}
	}
	p := newPlot("State memory after each batch (memoryUsedBytes)", "MiB", maxY(mem), batches)
	byCount, err := addByPartitions(p, mem, batches)
	if err != nil {
		return err
	}
	// One key per partition count, in its colour: the last value at it
	// before the shrink and after.
	for _, ph := range []string{PhaseRetireArchive, PhaseShrinkState} {
		if pt, ok := last[ph]; ok {
			p.key(fmt.Sprintf("state memory at %d partitions: %.1f MiB (end of %s)", pt.parts, pt.y, ph), byCount[pt.parts]...)
		}
	}
	if err := addBatchMarks(p, batches); err != nil {
		return err
	}
	if err := addPhaseMarks(p, phaseStarts(batches)); err != nil {
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
// phase, with the median at each state partition count (over every data
// batch that ran at it) as a dashed line over those batches.
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
	var clipped []string
	var clippedPts plotter.XYs
	for _, ph := range order {
		xys := byPhase[ph]
		for j := range xys {
			if xys[j].Y > ceiling {
				text := fmt.Sprintf("batch %d: %.0f ms, clipped", int64(xys[j].X), xys[j].Y)
				if j == 0 {
					text += " (cold start: first batch of the process)"
				}
				clipped = append(clipped, text)
				xys[j].Y = ceiling
				clippedPts = append(clippedPts, xys[j])
			}
		}
		// A phase's batches in the colour of their partition count; the
		// phase names at the top name the series.
		if _, err := addByPartitions(p, xys, batches); err != nil {
			return err
		}
	}
	var drawn plotter.XYs // what a median's label must not cover: the series and the phase markers
	for _, ph := range order {
		drawn = append(drawn, byPhase[ph]...)
	}
	for _, m := range phaseStarts(batches) {
		for k := range 20 {
			drawn = append(drawn, plotter.XY{X: float64(m.batch) - 0.5, Y: ceiling * float64(k) / 19})
		}
	}
	if err := addMedians(p, batches, drawn); err != nil {
		return err
	}
	if len(clippedPts) > 0 {
		s, err := plotter.NewScatter(clippedPts)
		if err != nil {
			return err
		}
		s.Shape, s.Color, s.Radius = draw.PyramidGlyph{}, color.Black, vg.Points(3.5)
		p.Add(s)
		for _, c := range clipped {
			p.key(c, s)
		}
	}
	if err := addBatchMarks(p, batches); err != nil {
		return err
	}
	if err := addPhaseMarks(p, phaseStarts(batches)); err != nil {
		return err
	}
	return savePlots(path, 20*vg.Centimeter, 11*vg.Centimeter, p)
}

// partitionMedian is the median addBatch of the data batches that ran at
// one state partition count, and the batches it spans.
type partitionMedian struct {
	partitions int64
	median     float64
	first, end int64
}

// addBatchMedians is the median addBatch at each state partition count, over
// every data batch that ran at it, whichever phase, in order of first use
// (the chart's dashed lines and check 9's figures).
func addBatchMedians(batches []BatchRecord) []partitionMedian {
	var out []partitionMedian
	ys := map[int64][]float64{}
	at := map[int64]int{}
	for _, b := range batches {
		if b.Kind != stream.KindData {
			continue
		}
		i, ok := at[b.StatePartitions]
		if !ok {
			i = len(out)
			at[b.StatePartitions] = i
			out = append(out, partitionMedian{partitions: b.StatePartitions, first: b.BatchID})
		}
		out[i].end = b.BatchID
		ys[b.StatePartitions] = append(ys[b.StatePartitions], b.AddBatchMs)
	}
	for i := range out {
		out[i].median = median(ys[out[i].partitions])
	}
	return out
}

// addMedians draws each partition count's median addBatch as a dashed line
// over its batches in the count's colour, labelled beside the line where the
// label covers the fewest data points (pts: the drawn series).
func addMedians(p *chart, batches []BatchRecord, pts plotter.XYs) error {
	colors := partitionColors(batches)
	for _, m := range addBatchMedians(batches) {
		x0, x1 := float64(m.first)-0.4, float64(m.end)+0.4
		l, err := plotter.NewLine(plotter.XYs{{X: x0, Y: m.median}, {X: x1, Y: m.median}})
		if err != nil {
			return err
		}
		l.Color, l.Width = colors[m.partitions], vg.Points(2)
		l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		p.Add(l)
		label := fmt.Sprintf("median %.1f ms at %d partitions", m.median, m.partitions)
		at := labelSpot(p, label, 8, pts, [][2]float64{
			{x0, m.median}, {x1, m.median}, {x0, m.median}, {x1, m.median}, {x0, m.median}, {x1, m.median}},
			[]labelPlace{belowRight, belowLeft, aboveRight, aboveLeft, leftOf, rightOf})
		lab := plotter.XYLabels{XYs: plotter.XYs{at}, Labels: []string{label}}
		if err := addLabels(p, lab, colors[m.partitions], 8, draw.YCenter); err != nil {
			return err
		}
		p.key(fmt.Sprintf("median addBatch at %d partitions: %.1f ms (batches %d-%d)", m.partitions, m.median, m.first, m.end), l)
	}
	return nil
}

// labelPlace is where a label goes relative to an anchor point.
type labelPlace int

const (
	belowRight labelPlace = iota // under the anchor, starting at it
	belowLeft                    // under the anchor, ending at it
	aboveRight
	aboveLeft
	leftOf // on the anchor's line, ending before it
	rightOf
)

// labelSpot returns the left-middle point (data coordinates) of the first
// candidate label box that covers the fewest points of pts (and of the
// straight lines between consecutive ones), inside the data area.
func labelSpot(p *chart, label string, size float64, pts plotter.XYs, anchors [][2]float64, places []labelPlace) plotter.XY {
	sty := text(size)
	xPerPt := (p.X.Max - p.X.Min) / float64(plotWidth)
	yPerPt := (p.Y.Max - p.Y.Min) / float64(plotHeight)
	w := float64(sty.Width(label)+vg.Points(4)) * xPerPt
	h := float64(sty.Height(label)+vg.Points(2)) * yPerPt
	// The series sampled densely, so a line crossing the box counts.
	var dense plotter.XYs
	for i, pt := range pts {
		dense = append(dense, pt)
		if i+1 < len(pts) && pts[i+1].X-pt.X <= 1 {
			for k := 1; k < 8; k++ {
				f := float64(k) / 8
				dense = append(dense, plotter.XY{X: pt.X + f*(pts[i+1].X-pt.X), Y: pt.Y + f*(pts[i+1].Y-pt.Y)})
			}
		}
	}
	best, bestN := plotter.XY{}, -1
	for i, pl := range places {
		ax, ay := anchors[i][0], anchors[i][1]
		var x, y float64 // left, vertical middle
		switch pl {
		case belowRight:
			x, y = ax, ay-h*0.7
		case belowLeft:
			x, y = ax-w, ay-h*0.7
		case aboveRight:
			x, y = ax, ay+h*0.7
		case aboveLeft:
			x, y = ax-w, ay+h*0.7
		case leftOf:
			x, y = ax-w-0.2, ay
		case rightOf:
			x, y = ax+0.2, ay
		}
		if x < p.X.Min || x+w > p.X.Max || y-h/2 < 0 || y+h/2 > p.Y.Max/headroom*1.1 {
			continue
		}
		n := 0
		for _, d := range dense {
			if d.X >= x && d.X <= x+w && d.Y >= y-h/2 && d.Y <= y+h/2 {
				n++
			}
		}
		if bestN < 0 || n < bestN {
			best, bestN = plotter.XY{X: x, Y: y}, n
		}
	}
	if bestN < 0 {
		return plotter.XY{X: anchors[0][0], Y: anchors[0][1]}
	}
	return best
}

// InputChart draws rows read per data batch, one panel per source, with the
// no-data and control batches marked on the axis.
func InputChart(path string, batches []BatchRecord, sources []SourceRecord) error {
	kind := map[int64]string{}
	for _, b := range batches {
		kind[b.BatchID] = b.Kind
	}
	bySource := map[string]plotter.XYs{}
	var names []string // in order of first appearance: their colours are the dashboard's
	for _, s := range sources {
		if kind[s.BatchID] != stream.KindData {
			continue
		}
		if _, ok := bySource[s.SourceName]; !ok {
			names = append(names, s.SourceName)
		}
		bySource[s.SourceName] = append(bySource[s.SourceName], plotter.XY{X: float64(s.BatchID), Y: float64(s.NumInputRows)})
	}
	if len(names) == 0 {
		return fmt.Errorf("input chart %s: no source records", path)
	}
	marks := phaseStarts(batches)
	var plots []*chart
	for i, n := range names {
		xys := bySource[n]
		sort.Slice(xys, func(a, b int) bool { return xys[a].X < xys[b].X })
		p := newPlot(fmt.Sprintf("Rows read per data batch: %s", n), "rows", maxY(xys), batches)
		if _, err := addSeries(p, xys, sourceColor(i)); err != nil {
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
