package chart

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"gonum.org/v1/plot/vg"
)

// capture draws with testLayout set and returns the SVG's layout.
func capture(t *testing.T, draw func(path string) error) (layout, []byte) {
	t.Helper()
	var got []layout
	testLayout = func(_ string, l layout) { got = append(got, l) }
	defer func() { testLayout = nil }()
	path := filepath.Join(t.TempDir(), "c")
	if err := draw(path); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("%d layouts, want the SVG's one", len(got))
	}
	svg, err := os.ReadFile(path + ".svg")
	if err != nil {
		t.Fatal(err)
	}
	return got[0], svg
}

// checkLegend: the legend has area and lies inside the data area.
func checkLegend(t *testing.T, l layout) {
	t.Helper()
	if l.Legend.Size().X <= 0 || l.Legend.Size().Y <= 0 {
		t.Fatalf("no legend drawn: %+v", l.Legend)
	}
	if !inside(l.Legend, l.Data) {
		t.Errorf("legend %+v is not inside the plot area %+v", l.Legend, l.Data)
	}
}

// TestPlaceLabels: labels of marks on one another, or in a tight
// cluster, are nudged apart: no two boxes intersect, none covers a mark
// and all stay in bounds.
func TestPlaceLabels(t *testing.T) {
	bounds := vg.Rectangle{Max: vg.Point{X: 400, Y: 300}}
	sz := vg.Point{X: 30, Y: 8}
	cases := map[string][]vg.Point{
		"same point":  {{X: 200, Y: 150}, {X: 200, Y: 150}, {X: 200, Y: 150}, {X: 200, Y: 150}},
		"cluster":     {{X: 100, Y: 100}, {X: 102, Y: 104}, {X: 104, Y: 98}, {X: 99, Y: 107}, {X: 106, Y: 103}},
		"at the edge": {{X: 398, Y: 299}, {X: 396, Y: 297}, {X: 2, Y: 2}},
	}
	for name, anchors := range cases {
		sizes := make([]vg.Point, len(anchors))
		for i := range sizes {
			sizes[i] = sz
		}
		boxes := placeLabels(anchors, sizes, 3, bounds, nil)
		for i, b := range boxes {
			if !inside(b, bounds) {
				t.Errorf("%s: label %d %+v outside %+v", name, i, b, bounds)
			}
			for j := range i {
				if overlaps(b, boxes[j]) {
					t.Errorf("%s: labels %d and %d intersect: %+v %+v", name, j, i, boxes[j], b)
				}
			}
			for k, a := range anchors {
				mark := vg.Rectangle{Min: vg.Point{X: a.X - 3, Y: a.Y - 3}, Max: vg.Point{X: a.X + 3, Y: a.Y + 3}}
				if overlaps(b, mark) {
					t.Errorf("%s: label %d covers mark %d", name, i, k)
				}
			}
		}
	}
	// A free label sits right of its mark, vertically centred.
	b := placeLabels([]vg.Point{{X: 50, Y: 50}}, []vg.Point{sz}, 3, bounds, nil)[0]
	if b.Min.X <= 53 || b.Min.Y != 46 {
		t.Errorf("a lone label at %+v, want right of its mark", b)
	}
}

// crowded is the roofline of the first bench paper --quick: four points
// per data type within a few percent of one another.
func crowded() Roofline {
	return Roofline{
		Title: "crowded", Bandwidth: 35,
		Ceilings: []Ceiling{{Name: "fp32 peak", Peak: 260, Series: "fp32"}, {Name: "bf16 peak", Peak: 531, Series: "bf16"}, {Name: "int8 peak", Peak: 1032, Series: "int8"}},
		Points: []Point{
			{"qkv", 94, 480, "int8"}, {"attn-out", 91, 900, "int8"}, {"ffn1", 95, 820, "int8"}, {"ffn2", 110, 790, "int8"},
			{"qkv", 28, 215, "fp32"}, {"attn-out", 27, 220, "fp32"}, {"ffn1", 28, 190, "fp32"}, {"ffn2", 28, 170, "fp32"},
			{"qkv", 52, 440, "bf16"}, {"attn-out", 50, 460, "bf16"}, {"ffn1", 52, 420, "bf16"}, {"ffn2", 57, 290, "bf16"},
		},
	}
}

// TestRooflineLayout: on the crowded roofline no two point labels
// intersect, none covers a mark or the legend, and the legend is inside
// the plot area.
func TestRooflineLayout(t *testing.T) {
	l, _ := capture(t, func(p string) error { return WriteRoofline(p, crowded()) })
	checkLegend(t, l)
	if len(l.Labels) != 12 {
		t.Fatalf("%d labels, want 12", len(l.Labels))
	}
	for i, b := range l.Labels {
		if !inside(b, l.Data) {
			t.Errorf("label %d %+v leaves the plot area %+v", i, b, l.Data)
		}
		if overlaps(b, l.Legend) {
			t.Errorf("label %d is under the legend", i)
		}
		for j := range i {
			if overlaps(b, l.Labels[j]) {
				t.Errorf("labels %d and %d intersect: %+v %+v", j, i, l.Labels[j], b)
			}
		}
		for k, m := range l.Marks {
			if overlaps(b, m) {
				t.Errorf("label %d covers mark %d", i, k)
			}
		}
	}
}

var strokeRE = regexp.MustCompile(`stroke:(#[0-9A-F]{6});stroke-width:([0-9.]+)`)

// TestRooflineColours: each data type's peak line (1.5 wide) and its
// marks (0.5) have one colour, and the three types three colours.
func TestRooflineColours(t *testing.T) {
	_, svg := capture(t, func(p string) error { return WriteRoofline(p, crowded()) })
	lines, marks := map[string]bool{}, map[string]bool{}
	for _, m := range strokeRE.FindAllStringSubmatch(string(svg), -1) {
		switch m[1] {
		case "#000000", "#808080", "#A0A0A0":
			continue // axes, grid, legend box
		}
		switch m[2] {
		case "1.5":
			lines[m[1]] = true
		case "0.5":
			marks[m[1]] = true
		}
	}
	if len(lines) != 3 {
		t.Fatalf("peak line colours %v, want 3", lines)
	}
	for c := range lines {
		if !marks[c] {
			t.Errorf("peak line colour %s has no marks of its colour (marks: %v)", c, marks)
		}
	}
	if len(marks) != 3 {
		t.Errorf("mark colours %v, want the 3 of the peak lines", marks)
	}
}

// TestStackedShareAxis: a share chart's axis is 0-100 exactly, its
// values are on the segments that hold them, and its legend is inside the
// plot and right of the bars.
func TestStackedShareAxis(t *testing.T) {
	s := Stacked{Title: "shares", YLabel: "%", Groups: []string{"fp32", "bf16", "int8-static", "int8-dynamic"}, Share: true,
		Parts: []Series{{Name: "linear", Values: []float64{97.9, 89.8, 93.6, 93.5}}, {Name: "attention", Values: []float64{1.5, 2.2, 3.85, 3.53}},
			{Name: "LayerNorm", Values: []float64{0.2, 0.4, 1.2, 1.1}}, {Name: "other", Values: []float64{0.4, 7.56, 1.35, 1.87}}}}
	l, svg := capture(t, func(p string) error { return WriteStacked(p, s) })
	if l.YMin != 0 || l.YMax != 100 {
		t.Errorf("share axis %v-%v, want 0-100", l.YMin, l.YMax)
	}
	checkLegend(t, l)
	if l.BarsRight <= 0 || l.Legend.Min.X < l.BarsRight {
		t.Errorf("legend from x=%v, the bars end at %v: it covers them", l.Legend.Min.X, l.BarsRight)
	}
	for _, v := range []string{">97.9<", ">93.6<", ">7.56<"} {
		if !regexp.MustCompile(regexp.QuoteMeta(v)).Match(svg) {
			t.Errorf("value %s is not on its bar", v)
		}
	}
	// Without Share, the axis fits the data (ms).
	s.Share = false
	l, _ = capture(t, func(p string) error { return WriteStacked(p, s) })
	if l.YMax <= 100 {
		t.Errorf("ms axis to %v, want room above the bars for the legend", l.YMax)
	}
}

// TestBarsValuesAndLegend: every bar carries its value or label, and the
// legend is inside the plot above the bars.
func TestBarsValuesAndLegend(t *testing.T) {
	b := Bars{Title: "x", Groups: []string{"a", "b"}, RefLine: 1,
		Series: []Series{{Name: "int8", Values: []float64{3.45, 12.05}, Labels: []string{"3.45", "~12.05"}}, {Name: "bf16", Values: []float64{1.79, 2.6}}}}
	l, svg := capture(t, func(p string) error { return WriteBars(p, b) })
	checkLegend(t, l)
	for _, v := range []string{">3.45<", ">~12.05<", ">1.79<", ">2.6<"} {
		if !regexp.MustCompile(regexp.QuoteMeta(v)).Match(svg) {
			t.Errorf("value %s is not on its bar", v)
		}
	}
	b.Series[0].Labels = []string{"one"}
	if err := WriteBars(filepath.Join(t.TempDir(), "x"), b); err == nil {
		t.Error("labels of the wrong length accepted")
	}
}
