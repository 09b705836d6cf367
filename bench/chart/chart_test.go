package chart_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/bench/chart"
)

var pngMagic = []byte("\x89PNG\r\n\x1a\n")

// checkFiles checks that path.svg and path.png exist, look like an SVG
// and a PNG, contain each of want (in the SVG), and that no temporary
// file is left beside them.
func checkFiles(t *testing.T, path string, want ...string) {
	t.Helper()
	svg, err := os.ReadFile(path + ".svg")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(svg, []byte("<?xml")) && !bytes.HasPrefix(svg, []byte("<svg")) {
		t.Errorf("%s.svg starts with %q", path, svg[:min(len(svg), 20)])
	}
	for _, w := range want {
		if !bytes.Contains(svg, []byte(w)) {
			t.Errorf("%s.svg lacks %q", path, w)
		}
	}
	png, err := os.ReadFile(path + ".png")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, pngMagic) || len(png) < 1000 {
		t.Errorf("%s.png: %d bytes starting %q", path, len(png), png[:min(len(png), 8)])
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file %s left", e.Name())
		}
	}
}

func roofline() chart.Roofline {
	return chart.Roofline{
		Title:     "Zen 5, one core",
		Bandwidth: 25,
		Ceilings:  []chart.Ceiling{{Name: "INT8 VNNI", Peak: 920}, {Name: "FP32 FMA", Peak: 225}},
		Points: []chart.Point{
			{Label: "qkv", AI: 160, GOPS: 700, Series: "int8"},
			{Label: "ffn2", AI: 170, GOPS: 650, Series: "int8"},
			{Label: "qkv", AI: 45, GOPS: 190, Series: "fp32"},
			{Label: "attn", AI: 2, GOPS: 30, Series: "fp32"},
		},
	}
}

func bars() chart.Bars {
	return chart.Bars{
		Title:  "INT8 over FP32",
		YLabel: "speed-up",
		Groups: []string{"bert-base", "bert-large", "distilbert"},
		Series: []chart.Series{
			{Name: "ours", Values: []float64{2.9, 3.1, 2.8}},
			{Name: "oneDNN", Values: []float64{2.5, 2.7, 2.4}},
		},
		RefLine: 1,
	}
}

func stacked() chart.Stacked {
	return chart.Stacked{
		Title:  "Where a pass goes",
		YLabel: "% of the pass",
		Groups: []string{"fp32", "int8"},
		Parts: []chart.Series{
			{Name: "linear", Values: []float64{80, 55}},
			{Name: "attention", Values: []float64{12, 30}},
			{Name: "layernorm", Values: []float64{5, 10}},
			{Name: "other", Values: []float64{3, 5}},
		},
	}
}

func TestWriteRoofline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "roofline")
	if err := chart.WriteRoofline(path, roofline()); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, path, "Zen 5, one core", "INT8 VNNI", "FP32 FMA", "int8", "fp32", "qkv", "ffn2", "attn", "ops/byte")
	// Writing again replaces the files.
	if err := chart.WriteRoofline(path, roofline()); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, path)
}

func TestWriteBars(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bars")
	if err := chart.WriteBars(path, bars()); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, path, "INT8 over FP32", "speed-up", "bert-base", "bert-large", "distilbert", "ours", "oneDNN")
	// No reference line, no title, all zeros.
	b := chart.Bars{Groups: []string{"a"}, Series: []chart.Series{{Name: "s", Values: []float64{0}}}}
	if err := chart.WriteBars(path, b); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, path, "s")
}

func TestWriteStacked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stacked")
	if err := chart.WriteStacked(path, stacked()); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, path, "Where a pass goes", "fp32", "int8", "linear", "attention", "layernorm", "other")
}

// TestBadInput: every validation error wraps ErrInput and writes nothing.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x")
	nan, inf := math.NaN(), math.Inf(1)
	roof := func(f func(*chart.Roofline)) func() error {
		return func() error {
			r := roofline()
			r.Ceilings = append([]chart.Ceiling(nil), r.Ceilings...)
			r.Points = append([]chart.Point(nil), r.Points...)
			f(&r)
			return chart.WriteRoofline(path, r)
		}
	}
	bar := func(f func(*chart.Bars)) func() error {
		return func() error {
			b := bars()
			f(&b)
			return chart.WriteBars(path, b)
		}
	}
	stack := func(f func(*chart.Stacked)) func() error {
		return func() error {
			s := stacked()
			f(&s)
			return chart.WriteStacked(path, s)
		}
	}
	cases := map[string]func() error{
		"roofline empty path":    func() error { return chart.WriteRoofline("", roofline()) },
		"roofline no points":     roof(func(r *chart.Roofline) { r.Points = nil }),
		"roofline no ceilings":   roof(func(r *chart.Roofline) { r.Ceilings = nil }),
		"roofline bandwidth 0":   roof(func(r *chart.Roofline) { r.Bandwidth = 0 }),
		"roofline bandwidth <0":  roof(func(r *chart.Roofline) { r.Bandwidth = -1 }),
		"roofline bandwidth NaN": roof(func(r *chart.Roofline) { r.Bandwidth = nan }),
		"roofline peak 0":        roof(func(r *chart.Roofline) { r.Ceilings[0].Peak = 0 }),
		"roofline peak Inf":      roof(func(r *chart.Roofline) { r.Ceilings[1].Peak = inf }),
		"roofline AI 0":          roof(func(r *chart.Roofline) { r.Points[0].AI = 0 }),
		"roofline AI <0":         roof(func(r *chart.Roofline) { r.Points[0].AI = -3 }),
		"roofline AI NaN":        roof(func(r *chart.Roofline) { r.Points[1].AI = nan }),
		"roofline GOPS 0":        roof(func(r *chart.Roofline) { r.Points[2].GOPS = 0 }),
		"roofline GOPS -Inf":     roof(func(r *chart.Roofline) { r.Points[2].GOPS = -inf }),
		"roofline range":         roof(func(r *chart.Roofline) { r.Points[0].AI = math.MaxFloat64 }),
		"bars empty path":        func() error { return chart.WriteBars("", bars()) },
		"bars no groups":         bar(func(b *chart.Bars) { b.Groups = nil }),
		"bars no series":         bar(func(b *chart.Bars) { b.Series = nil }),
		"bars short series":      bar(func(b *chart.Bars) { b.Series[0].Values = []float64{1, 2} }),
		"bars long series":       bar(func(b *chart.Bars) { b.Series[1].Values = []float64{1, 2, 3, 4} }),
		"bars NaN":               bar(func(b *chart.Bars) { b.Series[0].Values = []float64{1, nan, 3} }),
		"bars Inf":               bar(func(b *chart.Bars) { b.Series[0].Values = []float64{1, 2, inf} }),
		"bars negative":          bar(func(b *chart.Bars) { b.Series[1].Values = []float64{-1, 2, 3} }),
		"bars refline negative":  bar(func(b *chart.Bars) { b.RefLine = -1 }),
		"bars refline NaN":       bar(func(b *chart.Bars) { b.RefLine = nan }),
		"stacked empty path":     func() error { return chart.WriteStacked("", stacked()) },
		"stacked no groups":      stack(func(s *chart.Stacked) { s.Groups = nil }),
		"stacked no parts":       stack(func(s *chart.Stacked) { s.Parts = nil }),
		"stacked len mismatch":   stack(func(s *chart.Stacked) { s.Parts[2].Values = []float64{1} }),
		"stacked NaN":            stack(func(s *chart.Stacked) { s.Parts[0].Values = []float64{nan, 1} }),
		"stacked negative":       stack(func(s *chart.Stacked) { s.Parts[3].Values = []float64{1, -0.5} }),
	}
	for name, f := range cases {
		err := f()
		if !errors.Is(err, chart.ErrInput) {
			t.Errorf("%s: err = %v, want one wrapping ErrInput", name, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("bad input wrote %d files", len(entries))
	}
}

// TestMissingFolder: a path whose folder does not exist is an error that
// says so, before anything is drawn.
func TestMissingFolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "chart")
	for name, err := range map[string]error{
		"roofline": chart.WriteRoofline(path, roofline()),
		"bars":     chart.WriteBars(path, bars()),
		"stacked":  chart.WriteStacked(path, stacked()),
	} {
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "folder") {
			t.Errorf("%s: err = %v, want a missing-folder error", name, err)
		}
	}
}

func Example() {
	dir, err := os.MkdirTemp("", "chart")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "speedup")
	err = chart.WriteBars(path, chart.Bars{
		Title:   "INT8 over FP32, one core",
		YLabel:  "speed-up",
		Groups:  []string{"bert-base", "bert-large"},
		Series:  []chart.Series{{Name: "ours", Values: []float64{2.9, 3.1}}, {Name: "oneDNN", Values: []float64{2.5, 2.7}}},
		RefLine: 1,
	})
	fmt.Println(err)
	for _, ext := range []string{".svg", ".png"} {
		_, err := os.Stat(path + ext)
		fmt.Println(ext, err == nil)
	}
	// Output:
	// <nil>
	// .svg true
	// .png true
}
