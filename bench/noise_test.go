package bench

import (
	"bufio"
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSpreadOf: min, median (the upper middle of an even count, as the
// bench's median pass) and max, whatever the order.
func TestSpreadOf(t *testing.T) {
	assert.Equal(t, Spread{}, SpreadOf(nil))
	assert.Equal(t, Spread{Min: 5, Median: 5, Max: 5, N: 1}, SpreadOf([]float64{5}))
	s := SpreadOf([]float64{12, 10, 11, 30})
	assert.Equal(t, Spread{Min: 10, Median: 12, Max: 30, N: 4}, s)
	assert.InDelta(t, 20.0/12, s.Rel(), 1e-12)
	assert.Equal(t, "12.0 (10.0-30.0)", s.String())
	in := []float64{3, 1, 2}
	SpreadOf(in)
	assert.Equal(t, []float64{3, 1, 2}, in, "the samples are left in the order timed")
	assert.Zero(t, Spread{}.Rel())
}

// TestClassify checks the verdict on synthetic figures at and around
// both thresholds.
func TestClassify(t *testing.T) {
	quiet := SpreadOf([]float64{100, 101, 102, 103})
	cases := []struct {
		name          string
		s             Spread
		before, after float64
		noisy         bool
		why           string
	}{
		{"quiet", quiet, 400, 410, false, ""},
		{"spread at the threshold", SpreadOf([]float64{100, 115, 100}), 400, 400, false, ""},
		{"spread over it", SpreadOf([]float64{100, 116, 100}), 400, 400, true, "passes spread 16%"},
		{"one slow pass", SpreadOf([]float64{10, 10, 10, 10, 31}), 0, 0, true, "spread"},
		{"peak fell 10%", quiet, 400, 360, false, ""},
		{"peak fell 11%", quiet, 400, 356, true, "peak loop moved 11% (400 -> 356 GOP/s)"},
		{"peak rose 25%", quiet, 400, 500, true, "peak loop moved 25%"},
		{"no peak after", quiet, 400, 0, false, ""},
		{"no peak at all", quiet, 0, 0, false, ""},
		{"both", SpreadOf([]float64{10, 20}), 100, 50, true, "peak loop"},
		{"no passes", Spread{}, 100, 100, false, ""},
	}
	for _, c := range cases {
		n := Classify(c.s, c.before, c.after)
		assert.Equal(t, c.noisy, n.Noisy, c.name)
		assert.Equal(t, c.noisy, n.String() != "", c.name)
		if c.why != "" {
			assert.Contains(t, n.String(), c.why, c.name)
		}
	}
	both := Classify(SpreadOf([]float64{10, 20}), 100, 50)
	assert.Len(t, both.Why, 2)
	assert.InDelta(t, 50, both.PeakDriftPct, 1e-9)
	assert.InDelta(t, 100*10/20.0, both.SpreadPct, 1e-9)
}

// TestRatio: a ratio from a noisy pair always carries the mark.
func TestRatio(t *testing.T) {
	assert.Equal(t, "3.45x", Ratio(3.449, false))
	assert.Equal(t, NoisyMark+"12.05x", Ratio(12.05, true))
	assert.Equal(t, "-", Ratio(0, true))
}

// noisyReport is syntheticReport with fp32 of its model noisy: every
// ratio over fp32 is made from a noisy pair.
func noisyReport(t *testing.T) *PaperReport {
	t.Helper()
	rep := syntheticReport(t)
	mr := rep.Models[0]
	mr.Results[0].Spread = SpreadOf([]float64{8, 10, 14})
	mr.Results[0].Noise = Classify(mr.Results[0].Spread, 0, 0)
	require.True(t, mr.Results[0].Noise.Noisy)
	for i := 1; i < len(mr.Results); i++ {
		x := &mr.Results[i]
		x.Spread = SpreadOf([]float64{x.MsPerBatch, x.MsPerBatch, x.MsPerBatch})
		x.Noise = Classify(x.Spread, 100, 101)
	}
	rep.Hotspots, rep.Speedups, rep.Ceilings = nil, nil, nil
	rep.addModel(PaperModel{Arch: "tiny", Seq: 32}, mr, rep.Shapes, rep.Peaks, 10)
	return rep
}

// TestPaperNoisyMarks: bench paper prints no speed-up over a noisy FP32
// without the mark, marks the noisy row's own figures, leaves the quiet
// pair (int8-static over bf16) unmarked, and explains the mark.
func TestPaperNoisyMarks(t *testing.T) {
	rep := noisyReport(t)
	var md bytes.Buffer
	require.NoError(t, rep.WriteMarkdown(&md))
	s := md.String()
	table := s[strings.Index(s, "## Tables 11-13"):strings.Index(s, "## Table 14")]
	assert.Contains(t, table, NoisyLegend)
	rows := 0
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| tiny |") {
			continue
		}
		rows++
		cells := strings.Split(line, "|")
		vsFP32, vsBF16 := strings.TrimSpace(cells[7]), strings.TrimSpace(cells[8])
		assert.True(t, strings.HasPrefix(vsFP32, NoisyMark), "a ratio over the noisy fp32 without the mark: %s", line)
		assert.True(t, strings.HasPrefix(strings.TrimSpace(cells[9]), NoisyMark), line)
		switch {
		case strings.Contains(line, "| fp32 |"):
			assert.Contains(t, line, NoisyMark+"10.0 (8.0-14.0)", "the noisy row's spread is marked")
			assert.True(t, strings.HasPrefix(vsBF16, NoisyMark), line)
		case strings.Contains(line, "| int8-static |"):
			assert.Equal(t, "2.00x", vsBF16, "both quiet: no mark")
		}
	}
	assert.Equal(t, 3, rows)
	// A quiet report has no mark and no legend.
	quiet := syntheticReport(t)
	md.Reset()
	require.NoError(t, quiet.WriteMarkdown(&md))
	assert.NotContains(t, md.String(), NoisyLegend)
	assert.NotContains(t, md.String(), "| "+NoisyMark)
}

// benchLineRE is Go's benchmark result line: a name starting with
// Benchmark and holding no space, an iteration count, then value-unit
// pairs (golang.org/x/perf/benchfmt's format).
var benchLineRE = regexp.MustCompile(`^(Benchmark[^\s]+)\s+([0-9]+)((?:\s+[0-9.eE+-]+\s+[^\s]+)+)\s*$`)

// TestBenchstatFormat writes a model report's passes and reads them back
// as benchstat would: configuration lines, then one line per pass whose
// name has one key=value per dimension.
func TestBenchstatFormat(t *testing.T) {
	r := &ModelReport{Arch: "/some dir/my model", Seq: 128, Batch: 1, Threads: 2, Results: []ModelResult{
		{Precision: "fp32", PassesMs: []float64{96.2, 97.5, 95.0}},
		{Precision: "int8-static", PassesMs: []float64{27.9, 28.1}},
	}}
	var b bytes.Buffer
	require.NoError(t, WriteBenchstat(&b, "AMD  EPYC\tX", r.BenchLines()))
	sc := bufio.NewScanner(&b)
	var conf []string
	got := map[string][]float64{}
	for sc.Scan() {
		line := sc.Text()
		if m := benchLineRE.FindStringSubmatch(line); m != nil {
			assert.Equal(t, "1", m[2], line)
			f := strings.Fields(m[3])
			require.Len(t, f, 2, line)
			assert.Equal(t, "ns/op", f[1])
			v, err := strconv.ParseFloat(f[0], 64)
			require.NoError(t, err)
			got[m[1]] = append(got[m[1]], v)
			continue
		}
		k, _, ok := strings.Cut(line, ": ")
		require.True(t, ok && !strings.ContainsAny(k, " \t") && k != "", "neither a result nor a configuration line: %q", line)
		conf = append(conf, line)
	}
	assert.Contains(t, conf, "cpu: AMD EPYC X")
	fp := "BenchmarkModel/arch=my_model/seq=128/batch=1/threads=2/dtype=fp32"
	i8 := "BenchmarkModel/arch=my_model/seq=128/batch=1/threads=2/dtype=int8-static"
	assert.Equal(t, map[string][]float64{fp: {96.2e6, 97.5e6, 95.0e6}, i8: {27.9e6, 28.1e6}}, got)
	for name := range got {
		for _, part := range strings.Split(name, "/")[1:] {
			k, v, ok := strings.Cut(part, "=")
			assert.True(t, ok && k != "" && v != "" && !strings.Contains(v, "="), "%s: part %q is not key=value", name, part)
		}
	}
	// A paper report's lines are its models' lines.
	pr := &PaperReport{Models: []*ModelReport{r, r}}
	assert.Len(t, pr.BenchLines(), 10)
	assert.Equal(t, "x_y", benchValue("x y"))
	assert.Equal(t, "-", benchValue(""))
}
