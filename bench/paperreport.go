package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/int8bert/int8bert/bench/chart"
)

// The paper's own figures, for the report's side-by-side columns where a
// table matches ours (docs/DESIGN.md section 7.7): Table 3's FP32 and BF16
// hotspot shares (BERT-large), Table 14's gap and the INT8-over-BF16
// range on Granite Rapids with AMX.
const (
	paperFP32Linear  = "86.9-88.5"
	paperFP32Attn    = "10.4-11.8"
	paperFP32LN      = "0.6-0.8"
	paperBF16Linear  = "72.7"
	paperBF16Attn    = "19.75"
	paperBF16LN      = "5.99"
	paperGap         = "18-30 (BERT-large 18)"
	paperInt8OverBF6 = "1.24-1.59 (Granite Rapids, AMX)"
)

// label is the line above every table: where and how it was measured.
func (r *PaperReport) label() string {
	m := r.Meta
	keys := make([]string, 0, len(m.Settings))
	for k := range m.Settings {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var set []string
	for _, k := range keys {
		set = append(set, k+"="+m.Settings[k])
	}
	return fmt.Sprintf("_%s (%d CPUs), %s, commit %s, %s; %s._\n_Reproduce: `%s`_\n",
		m.CPU, m.Cores, m.Date.UTC().Format("2006-01-02 15:04 UTC"), m.Commit, m.Go, strings.Join(set, ", "), m.Command)
}

// WriteMarkdown writes the report as Markdown, one section per table.
func (r *PaperReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	f := func(v float64, prec int) string {
		if v == 0 {
			return "-"
		}
		return fmt.Sprintf("%.*f", prec, v)
	}
	m := r.Meta
	p("# int8bert: the paper's tables on %s\n\n", m.CPU)
	p("Measured %s in %.0f s; features: %s; oneDNN %s.\n\n", m.Date.UTC().Format("2006-01-02 15:04 UTC"), m.Seconds, m.Features, m.OneDNN)
	for _, n := range r.Notes {
		p("- %s\n", n)
	}
	p("\n## Table 3: where a pass spends its time\n\n%s\n", r.label())
	p("| model | precision | ms/batch: median (min-max) | linear %% | attention %% | LayerNorm %% | other %% | paper (BERT-large): linear / attention / LN %% |\n|---|---|---:|---:|---:|---:|---:|---|\n")
	for _, h := range r.Hotspots {
		ref := ""
		switch h.Precision {
		case "fp32":
			ref = paperFP32Linear + " / " + paperFP32Attn + " / " + paperFP32LN
		case "bf16":
			ref = paperBF16Linear + " / " + paperBF16Attn + " / " + paperBF16LN
		}
		p("| %s | %s | %s | %.1f | %.1f | %.1f | %.1f | %s |\n", h.Model, h.Precision, markIf(spreadOr(h.Spread, h.MsPerBatch), h.Noisy), h.LinearPct, h.AttentionPct, h.LayerNormPct, h.OtherPct, ref)
	}
	r.legend(p, func(yield func(bool) bool) {
		for _, h := range r.Hotspots {
			if !yield(h.Noisy) {
				return
			}
		}
	})
	pk := r.Peaks
	p("\n## Table 4: peaks, memory bandwidth and balance points\n\n%s\n", r.label())
	p("| figure | one core | %d core(s) |\n|---|---:|---:|\n", pk.Threads)
	p("| FP32 FMA GFLOP/s | %s | %s |\n", f(pk.OneCore.FP32GFLOPS, 1), f(pk.AllCores.FP32GFLOPS, 1))
	p("| BF16 VDPBF16PS GFLOP/s | %s | %s |\n", f(pk.OneCore.BF16GFLOPS, 1), f(pk.AllCores.BF16GFLOPS, 1))
	p("| INT8 GOP/s (%s) | %s | %s |\n", pk.Int8Kind, f(pk.OneCore.Int8(), 1), f(pk.AllCores.Int8(), 1))
	p("| triad GB/s (best; median) | %.1f; %.1f | %.1f; %.1f |\n", pk.TriadOne.BestGBps, pk.TriadOne.MedianGBps, pk.TriadAll.BestGBps, pk.TriadAll.MedianGBps)
	for _, d := range PaperDTypes {
		p("| balance point %s (ops/byte) | %s | %s |\n", d, f(pk.BalanceOne[d], 1), f(pk.Balance[d], 1))
	}
	p("\nThe triad counts 24 bytes per element (STREAM's convention); a balance point is peak / bandwidth: a GEMM whose arithmetic intensity is below it is bound by memory.\n")

	p("\n## Table 5: the GEMMs of %s at seq %d (batch %s)\n\n%s\n", r.Model, r.ModelSeq, m.Settings["batch"], r.label())
	p("| GEMM | M x K x N | per pass | AI fp32 | AI bf16 | AI int8 |\n|---|---|---:|---:|---:|---:|\n")
	for _, s := range r.Shapes {
		p("| %s | %dx%dx%d | %d | %.1f | %.1f | %.1f |\n", s.Name, s.M, s.K, s.N, s.Count, s.AI["fp32"], s.AI["bf16"], s.AI["int8"])
	}
	p("\nAI (arithmetic intensity) is 2MNK over the bytes of A, B and C read or written once (u8 x s8 -> f32 for int8, bf16 x bf16 -> f32, f32). The QKV projections are one fused GEMM here; the paper counts Q, K, V and the output as four 1024 x 1024 GEMMs per layer (96 per pass of BERT-large).\n")

	p("\n## Tables 6-7: effective bandwidth, throughput and the roofline estimate\n\n%s\n", r.label())
	p("| GEMM | dtype | kernel | ms per call: median (min-max) | GOP/s | effective GB/s | roofline GOP/s | bound | %% of roofline |\n|---|---|---|---:|---:|---:|---:|---|---:|\n")
	for _, g := range r.GEMMs {
		p("| %s | %s | %s | %s | %s | %.1f | %.1f | %s | %s |\n", g.Shape, g.DType, g.Kernel, markIf(spreadMs(g.Spread), g.Noisy), markIf(fmt.Sprintf("%.1f", g.GOPS), g.Noisy),
			g.EffGBps, g.Roofline, g.Bound, markIf(fmt.Sprintf("%.1f", g.PctRoof), g.Noisy))
	}
	r.legend(p, func(yield func(bool) bool) {
		for _, g := range r.GEMMs {
			if !yield(g.Noisy) {
				return
			}
		}
	})
	p("\nThe roofline estimate is min(peak, AI x triad bandwidth) of one pass's threads (%.1f GB/s); effective bandwidth is the GEMM's bytes (as counted for AI) over its time.\n", pk.PassGBps)

	p("\n## Tables 11-13: speed-ups\n\n%s\n", r.label())
	p("| model | seq | precision | seq/s | ms/batch: median (min-max) | linear ms | vs fp32 | vs bf16 | linear vs fp32 | linear vs bf16 |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range r.Speedups {
		p("| %s | %d | %s | %s | %s | %.1f | %s | %s | %s | %s |\n", s.Model, s.Seq, s.Precision, markIf(fmt.Sprintf("%.2f", s.SeqPerS), s.Noisy),
			markIf(spreadOr(s.Spread, s.MsPerBatch), s.Noisy), s.LinearMs,
			Ratio(s.VsFP32, s.NoisyVsFP32), Ratio(s.VsBF16, s.NoisyVsBF16), Ratio(s.LinearVsFP32, s.NoisyVsFP32), Ratio(s.LinearVsBF16, s.NoisyVsBF16))
	}
	r.legend(p, func(yield func(bool) bool) {
		for _, s := range r.Speedups {
			if !yield(s.Noisy || s.NoisyVsFP32 || s.NoisyVsBF16) {
				return
			}
		}
	})
	p("\nThe paper: INT8 up to 5.8x FP32 end to end; %s over BF16.\n", paperInt8OverBF6)

	p("\n## Table 14: realized against the estimated ceiling\n\n%s\n", r.label())
	p("| model | precision | seq/s | ceiling seq/s | gap %% | linear ms | linear at roofline ms | lost in linears ms | attention ms | other ms |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range r.Ceilings {
		p("| %s | %s | %s | %.2f | %s | %.1f | %.1f | %.1f | %.1f | %.1f |\n", c.Model, c.Precision, markIf(fmt.Sprintf("%.2f", c.SeqPerS), c.Noisy), c.CeilSeqPerS,
			markIf(fmt.Sprintf("%.1f", c.GapPct), c.Noisy), c.LinearMs, c.RoofMs, c.LinearLossMs, c.AttentionMs, c.OtherMs)
	}
	r.legend(p, func(yield func(bool) bool) {
		for _, c := range r.Ceilings {
			if !yield(c.Noisy) {
				return
			}
		}
	})
	p("\nThe ceiling runs every linear at its roofline estimate and the rest of the pass (attention, LayerNorm, embeddings) as measured: the gap is all in the linears. The paper's gap: %s%%.\n", paperGap)

	p("\n## Table 15: accuracy\n\n%s\n", r.label())
	if len(r.Accuracy) == 0 {
		p("Not measured in this run (no --eval-models, or --quick without them).\n")
	} else {
		p("| model | task | precision | examples | accuracy | agreement with fp32 | F1 | EM |\n|---|---|---|---:|---:|---:|---:|---:|\n")
		for _, a := range r.Accuracy {
			p("| %s | %s | %s | %d | %s | %s | %s | %s |\n", a.Model, a.Task, a.Precision, a.N, pctp(a.Accuracy), pctp(a.Agreement), pctp(a.F1), pctp(a.EM))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// legend prints NoisyLegend under a table when one of its rows (noisy
// yields each row's verdict) is noisy.
func (r *PaperReport) legend(p func(string, ...any), noisy func(yield func(bool) bool)) {
	for n := range noisy {
		if n {
			p("\n%s\n", NoisyLegend)
			return
		}
	}
}

// spreadOr is the spread, or the median alone where the spread is not
// known (a report read from an older JSON).
func spreadOr(s Spread, median float64) string {
	if s.N == 0 {
		return fmt.Sprintf("%.1f", median)
	}
	return s.String()
}

// spreadMs is a GEMM's spread in ms per call, three decimals.
func spreadMs(s Spread) string {
	if s.N == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f (%.3f-%.3f)", s.Median, s.Min, s.Max)
}

func pctp(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f%%", 100**v)
}

// WriteFiles writes report.md, report.json and the charts (roofline,
// speedups, one hotspots-MODEL per model; .svg and .png) into dir, which it creates. It
// returns the files written.
func (r *PaperReport) WriteFiles(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: paper: %w", err)
	}
	var files []string
	write := func(name string, fn func(io.Writer) error) error {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		files = append(files, p)
		return nil
	}
	if err := write("report.md", r.WriteMarkdown); err != nil {
		return files, fmt.Errorf("bench: paper: %w", err)
	}
	if err := write("report.json", func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}); err != nil {
		return files, fmt.Errorf("bench: paper: %w", err)
	}
	charts, err := r.writeCharts(dir)
	files = append(files, charts...)
	return files, err
}

// writeCharts draws the roofline (Tables 5-7), the speed-ups (Tables
// 11-13) and the hotspots (Table 3).
func (r *PaperReport) writeCharts(dir string) ([]string, error) {
	var files []string
	both := func(base string) { files = append(files, base+".svg", base+".png") }
	pk := r.Peaks
	if len(r.GEMMs) > 0 && pk.PassGBps > 0 {
		rl := chart.Roofline{Title: fmt.Sprintf("%s seq %d GEMMs on %s (%s thread(s))", r.Model, r.ModelSeq, r.Meta.CPU, r.Meta.Settings["threads"]),
			Bandwidth: pk.PassGBps}
		for _, d := range PaperDTypes {
			if v := pk.PeakByDType[d]; v > 0 {
				rl.Ceilings = append(rl.Ceilings, chart.Ceiling{Name: d + " peak", Peak: v, Series: d})
			}
		}
		for _, g := range r.GEMMs {
			if g.GOPS > 0 && g.AI > 0 {
				rl.Points = append(rl.Points, chart.Point{Label: strings.Fields(g.Shape)[0], AI: g.AI, GOPS: g.GOPS, Series: g.DType})
			}
		}
		base := filepath.Join(dir, "roofline")
		if err := chart.WriteRoofline(base, rl); err != nil {
			return files, fmt.Errorf("bench: paper: roofline chart: %w", err)
		}
		both(base)
	}
	if len(r.Speedups) > 0 {
		var groups []string
		series := map[string][]float64{}
		labels := map[string][]string{}
		var names []string
		for _, s := range r.Speedups {
			g := fmt.Sprintf("%s/%d", s.Model, s.Seq)
			if len(groups) == 0 || groups[len(groups)-1] != g {
				groups = append(groups, g)
			}
			if s.Precision == "fp32" {
				continue
			}
			if _, ok := series[s.Precision]; !ok {
				names = append(names, s.Precision)
			}
			series[s.Precision] = append(series[s.Precision], s.VsFP32)
			labels[s.Precision] = append(labels[s.Precision], strings.TrimSuffix(Ratio(s.VsFP32, s.NoisyVsFP32), "x"))
		}
		b := chart.Bars{Title: "throughput speed-up over fp32", YLabel: "x fp32", Groups: groups, RefLine: 1}
		for _, s := range r.Speedups {
			if s.NoisyVsFP32 {
				b.Title += " (" + NoisyMark + ": noisy)"
				break
			}
		}
		for _, n := range names {
			if len(series[n]) == len(groups) {
				b.Series = append(b.Series, chart.Series{Name: n, Values: series[n], Labels: labels[n]})
			}
		}
		if len(b.Series) > 0 {
			base := filepath.Join(dir, "speedups")
			if err := chart.WriteBars(base, b); err != nil {
				return files, fmt.Errorf("bench: paper: speed-up chart: %w", err)
			}
			both(base)
		}
	}
	// One hotspot chart per model (the paper's Table 3 is BERT-large's):
	// its precisions side by side.
	var order []string
	byModel := map[string][]Hotspot{}
	for _, h := range r.Hotspots {
		if _, ok := byModel[h.Model]; !ok {
			order = append(order, h.Model)
		}
		byModel[h.Model] = append(byModel[h.Model], h)
	}
	for _, m := range order {
		s := chart.Stacked{Title: "where a pass of " + filepath.Base(m) + " spends its time", YLabel: "% of the pass", Share: true}
		parts := [4][]float64{}
		for _, h := range byModel[m] {
			s.Groups = append(s.Groups, h.Precision)
			for i, v := range []float64{h.LinearPct, h.AttentionPct, h.LayerNormPct, h.OtherPct} {
				parts[i] = append(parts[i], max(v, 0))
			}
		}
		for i, n := range []string{"linear", "attention", "LayerNorm", "other"} {
			s.Parts = append(s.Parts, chart.Series{Name: n, Values: parts[i]})
		}
		base := filepath.Join(dir, "hotspots-"+fileSafe(m))
		if err := chart.WriteStacked(base, s); err != nil {
			return files, fmt.Errorf("bench: paper: hotspot chart: %w", err)
		}
		both(base)
	}
	return files, nil
}

// fileSafe is a model name (an architecture, or a folder's base name)
// made safe for a file name.
func fileSafe(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, filepath.Base(name))
}
