package chart

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// ErrInput is wrapped by every error about the data or the path a writer
// was given.
var ErrInput = errors.New("chart: bad input")

// Ceiling is one compute roof of a roofline: a name ("INT8 VNNI", "FP32
// FMA") and its peak in GOP/s. Series, when set, names the points'
// series (the data type) whose roof it is: the two share one colour.
type Ceiling struct {
	Name   string
	Peak   float64
	Series string
}

// Point is one measured kernel on a roofline: its arithmetic intensity in
// ops per byte of memory traffic and its rate in GOP/s. Label is written
// beside its mark; points of one Series share a mark and a legend entry.
type Point struct {
	Label    string
	AI, GOPS float64
	Series   string
}

// Roofline is a roofline chart: memory bandwidth in GB/s, the compute
// ceilings, and the measured points.
type Roofline struct {
	Title     string
	Bandwidth float64
	Ceilings  []Ceiling
	Points    []Point
}

// Series is one named row of values, one per group of a bar chart.
// Labels, when set (one per value), are printed on the bars instead of
// the values themselves ("" prints nothing there): a noisy figure's mark,
// say.
type Series struct {
	Name   string
	Values []float64
	Labels []string
}

// Bars is a grouped bar chart: one group per Groups entry and in each
// group one bar per series. RefLine, when above 0, draws a dashed
// horizontal line at that value (1.0 for speed-ups).
type Bars struct {
	Title, YLabel string
	Groups        []string
	Series        []Series
	RefLine       float64
}

// Stacked is a stacked bar chart: one bar per Groups entry made of one
// segment per part, each part's Values holding one value per group
// (milliseconds, or percent of a pass). Share says the values are
// percentages of a whole: the axis runs from 0 to 100 exactly and the
// legend goes beside the bars.
type Stacked struct {
	Title, YLabel string
	Groups        []string
	Parts         []Series
	Share         bool
}

// The size of every chart.
const (
	width  = 16 * vg.Centimeter
	height = 10 * vg.Centimeter
	// pngDPI gives a PNG of 1260 x 787 pixels, sharp on a page or a
	// high-density screen.
	pngDPI = 200
)

// WriteRoofline draws r on log-log axes, arithmetic intensity (ops/byte)
// against GOP/s: one roof min(peak, AI x bandwidth) per ceiling, and the
// points as marks grouped by series with their labels beside them. It
// writes path+".svg" and path+".png".
func WriteRoofline(path string, r Roofline) error {
	if err := checkPath(path); err != nil {
		return err
	}
	if err := finitePositive("bandwidth", r.Bandwidth); err != nil {
		return err
	}
	if len(r.Ceilings) == 0 {
		return fmt.Errorf("%w: roofline %q has no ceiling", ErrInput, r.Title)
	}
	if len(r.Points) == 0 {
		return fmt.Errorf("%w: roofline %q has no point", ErrInput, r.Title)
	}
	// The x range spans every point and every ridge (peak / bandwidth,
	// where a roof bends) with a margin; the y range every point and the
	// roofs over that x range.
	xmin, xmax := math.Inf(1), math.Inf(-1)
	ymin, ymax := math.Inf(1), math.Inf(-1)
	for i, c := range r.Ceilings {
		if err := finitePositive(fmt.Sprintf("ceiling %d (%q) peak", i, c.Name), c.Peak); err != nil {
			return err
		}
		ridge := c.Peak / r.Bandwidth
		xmin, xmax = min(xmin, ridge), max(xmax, ridge)
		ymax = max(ymax, c.Peak)
	}
	for i, p := range r.Points {
		if err := finitePositive(fmt.Sprintf("point %d (%q) AI", i, p.Label), p.AI); err != nil {
			return err
		}
		if err := finitePositive(fmt.Sprintf("point %d (%q) GOP/s", i, p.Label), p.GOPS); err != nil {
			return err
		}
		xmin, xmax = min(xmin, p.AI), max(xmax, p.AI)
		ymin, ymax = min(ymin, p.GOPS), max(ymax, p.GOPS)
	}
	xmin, xmax = xmin/4, xmax*4
	ymin = min(ymin, xmin*r.Bandwidth) / 2
	ymax *= 2
	if math.IsInf(xmax, 0) || math.IsInf(ymax, 0) || xmin == 0 || ymin == 0 {
		return fmt.Errorf("%w: roofline %q: values out of the range a log axis can show", ErrInput, r.Title)
	}

	return draws(path, func(lay *layout) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = r.Title
		p.X.Label.Text = "arithmetic intensity (ops/byte)"
		p.Y.Label.Text = "GOP/s"
		p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
		p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
		p.Add(plotter.NewGrid())
		// Bottom right is below the roofs, where a roofline has no points
		// but memory-bound ones at low intensity.
		leg := &legendBox{right: true, style: legendStyle(p), out: lay}
		leg.corners = [][2]bool{{false, true}, {false, false}, {true, false}, {true, true}}

		// One colour per series: a ceiling and the points of its data
		// type share it.
		colours := map[string]int{}
		colourOf := func(series string) color.Color {
			if series == "" {
				series = "\x00" + strconv.Itoa(len(colours))
			}
			if _, ok := colours[series]; !ok {
				colours[series] = len(colours)
			}
			return plotutil.Color(colours[series])
		}
		for i, c := range r.Ceilings {
			ridge := c.Peak / r.Bandwidth
			roof := plotter.XYs{{X: xmin, Y: xmin * r.Bandwidth}, {X: ridge, Y: c.Peak}, {X: xmax, Y: c.Peak}}
			l, err := plotter.NewLine(roof)
			if err != nil {
				return nil, err
			}
			l.Color = colourOf(c.Series)
			l.Width = vg.Points(1.5)
			l.Dashes = plotutil.Dashes(i)
			p.Add(l)
			leg.add(fmt.Sprintf("%s (%s GOP/s)", c.Name, num(c.Peak)), l)
		}

		var order []string
		groups := map[string][]Point{}
		for _, pt := range r.Points {
			if _, ok := groups[pt.Series]; !ok {
				order = append(order, pt.Series)
			}
			groups[pt.Series] = append(groups[pt.Series], pt)
		}
		labels := &pointLabels{radius: vg.Points(3), style: p.Legend.TextStyle, legend: leg, out: lay}
		labels.style.Font.Size = vg.Points(7)
		for i, name := range order {
			pts := groups[name]
			xys := make(plotter.XYs, len(pts))
			for j, pt := range pts {
				xys[j] = plotter.XY{X: pt.AI, Y: pt.GOPS}
				labels.xys, labels.labels = append(labels.xys, xys[j]), append(labels.labels, pt.Label)
			}
			s, err := plotter.NewScatter(xys)
			if err != nil {
				return nil, err
			}
			s.GlyphStyle.Color = colourOf(name)
			s.GlyphStyle.Shape = plotutil.Shape(i)
			s.GlyphStyle.Radius = labels.radius
			p.Add(s)
			if name != "" {
				leg.add(name, s)
			}
		}
		// In the corner with the fewest points under it, bottom right
		// first.
		leg.avoid = labels.xys
		p.Add(labels, leg)
		// Set after Add, which widens the ranges to the data.
		p.X.Min, p.X.Max = xmin, xmax
		p.Y.Min, p.Y.Max = ymin, ymax
		return p, nil
	})
}

// WriteBars draws b as grouped bars with each value (or its label) on
// its bar, a legend inside the plot at the top right and, when b.RefLine
// is above 0, a dashed horizontal line at it. It writes path+".svg" and
// path+".png".
func WriteBars(path string, b Bars) error {
	if err := checkPath(path); err != nil {
		return err
	}
	if err := checkTable("bars", b.Title, b.Groups, b.Series); err != nil {
		return err
	}
	if math.IsNaN(b.RefLine) || math.IsInf(b.RefLine, 0) || b.RefLine < 0 {
		return fmt.Errorf("%w: bars %q: reference line %v", ErrInput, b.Title, b.RefLine)
	}
	return draws(path, func(lay *layout) (*plot.Plot, error) {
		p := barPlot(b.Title, b.YLabel, b.Groups)
		leg := &legendBox{top: true, right: true, style: legendStyle(p), out: lay}
		vals := &barValues{style: valueStyle(p), out: lay}
		w := barWidth(len(b.Groups), len(b.Series))
		n := len(b.Series)
		for i, s := range b.Series {
			bc, err := plotter.NewBarChart(plotter.Values(s.Values), w)
			if err != nil {
				return nil, err
			}
			bc.Color = plotutil.Color(i)
			bc.LineStyle.Width = 0
			bc.Offset = vg.Length(float64(i)-float64(n-1)/2) * w
			p.Add(bc)
			leg.add(s.Name, bc)
			vals.bars, vals.labels = append(vals.bars, bc), append(vals.labels, valueLabels(s))
		}
		if b.RefLine > 0 {
			l, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: b.RefLine}, {X: float64(len(b.Groups)) - 0.5, Y: b.RefLine}})
			if err != nil {
				return nil, err
			}
			l.Color = color.Gray{Y: 64}
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(l)
		}
		p.Add(vals, leg)
		top := b.RefLine
		for _, s := range b.Series {
			for _, v := range s.Values {
				top = max(top, v)
			}
		}
		fitLegend(p, len(b.Groups), top, len(b.Series))
		return p, nil
	})
}

// WriteStacked draws s as one stacked bar per group, the first part at
// the bottom, each segment's value on it where it fits, with a legend
// listed top part first as the bars read; with s.Share the y axis runs
// over 0-100 and the legend stands right of the bars. It writes
// path+".svg" and path+".png".
func WriteStacked(path string, s Stacked) error {
	if err := checkPath(path); err != nil {
		return err
	}
	if err := checkTable("stacked bars", s.Title, s.Groups, s.Parts); err != nil {
		return err
	}
	return draws(path, func(lay *layout) (*plot.Plot, error) {
		p := barPlot(s.Title, s.YLabel, s.Groups)
		leg := &legendBox{top: true, right: true, style: legendStyle(p), out: lay}
		vals := &barValues{stacked: true, style: valueStyle(p), out: lay}
		w := barWidth(len(s.Groups), 1)
		var prev *plotter.BarChart
		charts := make([]*plotter.BarChart, len(s.Parts))
		for i, part := range s.Parts {
			bc, err := plotter.NewBarChart(plotter.Values(part.Values), w)
			if err != nil {
				return nil, err
			}
			bc.Color = plotutil.Color(i)
			bc.LineStyle.Width = 0
			if prev != nil {
				bc.StackOn(prev)
			}
			prev = bc
			charts[i] = bc
			p.Add(bc)
			vals.bars, vals.labels = append(vals.bars, bc), append(vals.labels, valueLabels(part))
		}
		for i := len(charts) - 1; i >= 0; i-- {
			leg.add(s.Parts[i].Name, charts[i])
		}
		p.Add(vals, leg)
		if s.Share {
			// The bars fill the axis: the legend takes a column of its own
			// right of them, as wide as it is.
			lw, _ := leg.size()
			data := float64(width - 3*vg.Centimeter)
			frac := min((float64(lw)+float64(4*vg.Millimeter))/data, 0.6)
			groups := float64(len(s.Groups))
			p.Y.Min, p.Y.Max = 0, 100
			p.X.Min, p.X.Max = -0.5, groups-0.5+groups*frac/(1-frac)
			return p, nil
		}
		top := 0.0
		for j := range s.Groups {
			top = max(top, charts[len(charts)-1].BarHeight(j))
		}
		fitLegend(p, len(s.Groups), top, len(s.Parts))
		return p, nil
	})
}

// barPlot is a plot with a nominal x axis of groups.
func barPlot(title, ylabel string, groups []string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.NominalX(groups...)
	p.Add(plotter.NewGrid())
	return p
}

// legendStyle is the legends' text: gonum's legend font, smaller.
func legendStyle(p *plot.Plot) draw.TextStyle {
	s := p.Legend.TextStyle
	s.Font.Size = vg.Points(9)
	return s
}

// valueStyle is the text of the values on bars.
func valueStyle(p *plot.Plot) draw.TextStyle {
	s := p.Legend.TextStyle
	s.Font.Size = vg.Points(7)
	return s
}

// valueLabels are a series' labels, or its values printed.
func valueLabels(s Series) []string {
	if len(s.Labels) == len(s.Values) {
		return s.Labels
	}
	out := make([]string, len(s.Values))
	for i, v := range s.Values {
		out[i] = num(v)
	}
	return out
}

// fitLegend sets the axes of a bar plot of groups groups whose tallest
// bar is top: y from 0 with room above the bars for their values and a
// legend of rows entries at the top, x half a group beyond the first and
// last.
func fitLegend(p *plot.Plot, groups int, top float64, rows int) {
	// The data area is about the chart's height less 3 cm of title and
	// axis; a legend row takes about its font's height and a gap, the
	// values above the bars one more.
	area := float64(height - 3*vg.Centimeter)
	row := float64(legendStyle(p).Font.Size) * 1.2
	free := 1 - (float64(rows+1)*row+float64(2*legendPad+2*vg.Millimeter))/area - 0.02
	if top <= 0 {
		top = 1
	}
	p.Y.Min, p.Y.Max = 0, top/max(free, 0.3)
	p.X.Min, p.X.Max = -0.5, float64(groups)-0.5
}

// barWidth fits n bars per group and a gap of one bar into the width.
func barWidth(groups, n int) vg.Length {
	w := (width - 2*vg.Centimeter) / vg.Length(groups*(n+1))
	return min(max(w, vg.Points(2)), vg.Points(40))
}

// checkTable checks that a bar chart has groups, series, one finite
// non-negative value per group in each series.
func checkTable(kind, title string, groups []string, series []Series) error {
	if len(groups) == 0 {
		return fmt.Errorf("%w: %s %q has no group", ErrInput, kind, title)
	}
	if len(series) == 0 {
		return fmt.Errorf("%w: %s %q has no series", ErrInput, kind, title)
	}
	for _, s := range series {
		if len(s.Values) != len(groups) {
			return fmt.Errorf("%w: %s %q: series %q has %d values for %d groups", ErrInput, kind, title, s.Name, len(s.Values), len(groups))
		}
		if s.Labels != nil && len(s.Labels) != len(s.Values) {
			return fmt.Errorf("%w: %s %q: series %q has %d labels for %d values", ErrInput, kind, title, s.Name, len(s.Labels), len(s.Values))
		}
		for j, v := range s.Values {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return fmt.Errorf("%w: %s %q: series %q, group %q: value %v", ErrInput, kind, title, s.Name, groups[j], v)
			}
		}
	}
	return nil
}

// finitePositive checks that v is finite and above 0.
func finitePositive(what string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		return fmt.Errorf("%w: %s %v (must be finite and above 0)", ErrInput, what, v)
	}
	return nil
}

// checkPath checks that path is set and that its folder exists.
func checkPath(path string) error {
	if path == "" {
		return fmt.Errorf("%w: empty path", ErrInput)
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("chart: the folder of %s: %w", path, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("chart: the folder of %s: %s is not a folder", path, dir)
	}
	return nil
}

// draws builds the plot and writes it as SVG and PNG, turning a panic of
// gonum/plot into an error. build fills the layout it is given as the
// plot is drawn; testLayout hears the SVG's.
func draws(path string, build func(*layout) (*plot.Plot, error)) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("chart: drawing %s: %v", path, r)
		}
	}()
	lay := &layout{}
	p, err := build(lay)
	if err != nil {
		return fmt.Errorf("chart: %s: %w", path, err)
	}
	for _, format := range []string{"svg", "png"} {
		*lay = layout{}
		if err := save(p, path+"."+format, format); err != nil {
			return err
		}
		if format == "svg" && testLayout != nil {
			lay.YMin, lay.YMax = p.Y.Min, p.Y.Max
			testLayout(path, *lay)
		}
	}
	return nil
}

// save renders p in format into a temporary file next to file and renames
// it into place.
func save(p *plot.Plot, file, format string) (err error) {
	var wt io.WriterTo
	if format == "png" {
		c := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(pngDPI), vgimg.UseBackgroundColor(color.White))
		p.Draw(draw.New(c))
		wt = vgimg.PngCanvas{Canvas: c}
	} else if wt, err = p.WriterTo(width, height, format); err != nil {
		return fmt.Errorf("chart: %s: %w", file, err)
	}
	f, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*.tmp")
	if err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = wt.WriteTo(f); err != nil {
		return fmt.Errorf("chart: writing %s: %w", file, err)
	}
	// CreateTemp makes the file private; a chart is for reading.
	if err = f.Chmod(0o644); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("chart: writing %s: %w", file, err)
	}
	if err = os.Rename(tmp, file); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	return nil
}

// num prints a figure with three significant digits, or as an integer
// from 100 up.
func num(v float64) string {
	if v >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
