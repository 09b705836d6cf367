package chart

import (
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// This file lays out what gonum/plot leaves to chance: point labels that
// do not overlap one another, the marks or the legend, and a legend drawn
// inside the data area (gonum's own is placed against the canvas edge,
// where it was cut).

// layout is what a chart placed, in canvas coordinates: for the tests
// (testLayout), which check it against the SVG's promises.
type layout struct {
	Data   vg.Rectangle
	Legend vg.Rectangle
	Labels []vg.Rectangle
	Marks  []vg.Rectangle
	// BarsRight is the right edge of the rightmost bar (bar charts).
	BarsRight vg.Length
	YMin      float64
	YMax      float64
}

// testLayout, when set (by tests), hears each chart's layout as drawn,
// with the chart's file path.
var testLayout func(path string, l layout)

// overlaps is whether a and b share area.
func overlaps(a, b vg.Rectangle) bool {
	return a.Min.X < b.Max.X && b.Min.X < a.Max.X && a.Min.Y < b.Max.Y && b.Min.Y < a.Max.Y
}

// inside is whether a lies within b.
func inside(a, b vg.Rectangle) bool {
	return a.Min.X >= b.Min.X && a.Max.X <= b.Max.X && a.Min.Y >= b.Min.Y && a.Max.Y <= b.Max.Y
}

// overlapArea is the area a and b share.
func overlapArea(a, b vg.Rectangle) vg.Length {
	w := min(a.Max.X, b.Max.X) - max(a.Min.X, b.Min.X)
	h := min(a.Max.Y, b.Max.Y) - max(a.Min.Y, b.Min.Y)
	if w <= 0 || h <= 0 {
		return 0
	}
	return w * h / vg.Points(1)
}

// placeLabels places one label of size sizes[i] beside each anchor (a
// mark of the given radius): right of it if that is free, else at the
// first free place among left, above, below and then ever further up or
// down on either side, nudged by half a label height at a time. Free
// means inside bounds and clear of every label placed before, of every
// mark and of avoid. A label with no free place takes the candidate that
// overlaps least. It returns each label's box.
func placeLabels(anchors, sizes []vg.Point, radius vg.Length, bounds vg.Rectangle, avoid []vg.Rectangle) []vg.Rectangle {
	gap := vg.Points(2)
	marks := make([]vg.Rectangle, len(anchors))
	for i, a := range anchors {
		marks[i] = vg.Rectangle{Min: vg.Point{X: a.X - radius, Y: a.Y - radius}, Max: vg.Point{X: a.X + radius, Y: a.Y + radius}}
	}
	placed := make([]vg.Rectangle, 0, len(anchors))
	for i, a := range anchors {
		w, h := sizes[i].X, sizes[i].Y
		at := func(x, y vg.Length) vg.Rectangle { // x, y: the box's lower left
			return vg.Rectangle{Min: vg.Point{X: x, Y: y}, Max: vg.Point{X: x + w, Y: y + h}}
		}
		right, left := a.X+radius+gap, a.X-radius-gap-w
		mid := a.Y - h/2
		cands := []vg.Rectangle{at(right, mid), at(left, mid), at(a.X-w/2, a.Y+radius+gap), at(a.X-w/2, a.Y-radius-gap-h)}
		for step := 1; step <= 12; step++ {
			d := vg.Length(step) * h / 2
			cands = append(cands, at(right, mid+d), at(right, mid-d), at(left, mid+d), at(left, mid-d))
		}
		cost := func(r vg.Rectangle) vg.Length {
			var c vg.Length
			if !inside(r, bounds) {
				c += w * h // as bad as a full overlap
			}
			for _, p := range placed {
				c += overlapArea(r, p)
			}
			for _, m := range marks {
				c += overlapArea(r, m)
			}
			for _, v := range avoid {
				c += overlapArea(r, v)
			}
			return c
		}
		best, bestCost := cands[0], vg.Length(-1)
		for _, r := range cands {
			c := cost(r)
			if c == 0 {
				best, bestCost = r, 0
				break
			}
			if bestCost < 0 || c < bestCost {
				best, bestCost = r, c
			}
		}
		placed = append(placed, best)
	}
	return placed
}

// pointLabels draws labels beside points (data coordinates), placed by
// placeLabels clear of each other, of the marks and of the legend.
type pointLabels struct {
	xys    plotter.XYs
	labels []string
	radius vg.Length
	style  draw.TextStyle
	legend *legendBox
	out    *layout
}

func (pl *pointLabels) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	anchors := make([]vg.Point, len(pl.xys))
	sizes := make([]vg.Point, len(pl.xys))
	for i, xy := range pl.xys {
		anchors[i] = vg.Point{X: trX(xy.X), Y: trY(xy.Y)}
		sizes[i] = vg.Point{X: pl.style.Width(pl.labels[i]), Y: pl.style.Height(pl.labels[i])}
	}
	var avoid []vg.Rectangle
	if pl.legend != nil {
		avoid = append(avoid, pl.legend.rect(c, p))
	}
	boxes := placeLabels(anchors, sizes, pl.radius, c.Rectangle, avoid)
	sty := pl.style
	sty.XAlign, sty.YAlign = draw.XLeft, draw.YBottom
	descent := sty.FontExtents().Descent
	for i, b := range boxes {
		c.FillText(sty, vg.Point{X: b.Min.X, Y: b.Min.Y + descent}, pl.labels[i])
	}
	if pl.out != nil {
		pl.out.Labels = append(pl.out.Labels, boxes...)
		for _, a := range anchors {
			pl.out.Marks = append(pl.out.Marks, vg.Rectangle{Min: vg.Point{X: a.X - pl.radius, Y: a.Y - pl.radius}, Max: vg.Point{X: a.X + pl.radius, Y: a.Y + pl.radius}})
		}
	}
}

// legendEntry is one row of a legendBox: a thumbnail and its text.
type legendEntry struct {
	text  string
	thumb plot.Thumbnailer
}

// legendBox is a legend drawn inside the data area, on a white box with
// a grey border, in one corner (top: at the top; right: at the right)
// with a margin.
type legendBox struct {
	entries    []legendEntry
	top, right bool
	style      draw.TextStyle
	out        *layout
	// corners, when set, are the corners ({top, right}) to choose from,
	// in order of preference: the first with the fewest of avoid (data
	// coordinates) under the legend wins.
	corners [][2]bool
	avoid   plotter.XYs
}

const (
	legendPad   = 3 * vg.Millimeter / 2
	legendThumb = 6 * vg.Millimeter
	legendGap   = 2 * vg.Millimeter
)

func (l *legendBox) add(text string, t plot.Thumbnailer) {
	l.entries = append(l.entries, legendEntry{text, t})
}

// rowHeight is the height of one entry.
func (l *legendBox) rowHeight() vg.Length {
	e := l.style.FontExtents()
	return (e.Ascent + e.Descent) * 1.15
}

// size is the legend's width and height.
func (l *legendBox) size() (w, h vg.Length) {
	for _, e := range l.entries {
		w = max(w, l.style.Width(e.text))
	}
	return w + legendThumb + legendGap + 2*legendPad, vg.Length(len(l.entries))*l.rowHeight() + 2*legendPad
}

// rect is where the legend goes on the data canvas c of p.
func (l *legendBox) rect(c draw.Canvas, p *plot.Plot) vg.Rectangle {
	if len(l.corners) == 0 {
		return l.at(c, l.top, l.right)
	}
	trX, trY := p.Transforms(&c)
	best, bestN := vg.Rectangle{}, -1
	for _, k := range l.corners {
		r := l.at(c, k[0], k[1])
		// A point's label reaches beyond it: count a margin around it.
		m := vg.Points(12)
		wide := vg.Rectangle{Min: vg.Point{X: r.Min.X - 4*m, Y: r.Min.Y - m}, Max: vg.Point{X: r.Max.X + m, Y: r.Max.Y + m}}
		n := 0
		for _, xy := range l.avoid {
			x, y := trX(xy.X), trY(xy.Y)
			if x >= wide.Min.X && x <= wide.Max.X && y >= wide.Min.Y && y <= wide.Max.Y {
				n++
			}
		}
		if bestN < 0 || n < bestN {
			best, bestN = r, n
		}
	}
	return best
}

// at is the legend's rectangle in one corner of c.
func (l *legendBox) at(c draw.Canvas, top, right bool) vg.Rectangle {
	w, h := l.size()
	m := 2 * vg.Millimeter
	x := c.Min.X + m
	if right {
		x = c.Max.X - m - w
	}
	y := c.Min.Y + m
	if top {
		y = c.Max.Y - m - h
	}
	return vg.Rectangle{Min: vg.Point{X: x, Y: y}, Max: vg.Point{X: x + w, Y: y + h}}
}

func (l *legendBox) Plot(c draw.Canvas, p *plot.Plot) {
	if len(l.entries) == 0 {
		return
	}
	r := l.rect(c, p)
	c.FillPolygon(color.White, []vg.Point{r.Min, {X: r.Max.X, Y: r.Min.Y}, r.Max, {X: r.Min.X, Y: r.Max.Y}})
	c.StrokeLines(draw.LineStyle{Color: color.Gray{Y: 160}, Width: vg.Points(0.5)},
		[]vg.Point{r.Min, {X: r.Max.X, Y: r.Min.Y}, r.Max, {X: r.Min.X, Y: r.Max.Y}, r.Min})
	sty := l.style
	sty.XAlign, sty.YAlign = draw.XLeft, draw.YBottom
	rh := l.rowHeight()
	descent := sty.FontExtents().Descent
	for i, e := range l.entries {
		y := r.Max.Y - legendPad - vg.Length(i+1)*rh
		icon := draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: r.Min.X + legendPad, Y: y + rh*0.1}, Max: vg.Point{X: r.Min.X + legendPad + legendThumb, Y: y + rh*0.9}}}
		e.thumb.Thumbnail(&icon)
		c.FillText(sty, vg.Point{X: r.Min.X + legendPad + legendThumb + legendGap, Y: y + descent + rh*0.05}, e.text)
	}
	if l.out != nil {
		l.out.Legend, l.out.Data = r, c.Rectangle
	}
}

// barValues writes each bar's value label above it (bars) or in the
// middle of its segment when the segment is tall enough (stacked).
type barValues struct {
	bars    []*plotter.BarChart
	labels  [][]string
	stacked bool
	style   draw.TextStyle
	out     *layout
}

func (bv *barValues) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	sty := bv.style
	sty.XAlign = draw.XCenter
	h := sty.Height("0")
	for i, b := range bv.bars {
		for j, v := range b.Values {
			x := trX(float64(j)) + b.Offset
			if bv.out != nil {
				bv.out.BarsRight = max(bv.out.BarsRight, x+b.Width/2)
			}
			txt := bv.labels[i][j]
			if txt == "" {
				continue
			}
			bottom := 0.0
			if bv.stacked {
				bottom = b.BarHeight(j) - v
			}
			y0, y1 := trY(bottom), trY(bottom+v)
			var y vg.Length
			if bv.stacked {
				if y1-y0 < h*1.1 || sty.Width(txt) > b.Width {
					continue // too small a segment to hold its value
				}
				sty.YAlign = draw.YCenter
				y = (y0 + y1) / 2
			} else {
				sty.YAlign = draw.YBottom
				y = y1 + vg.Points(1.5)
			}
			c.FillText(sty, vg.Point{X: x, Y: y}, txt)
		}
	}
}
