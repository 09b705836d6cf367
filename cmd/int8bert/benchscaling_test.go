package main

import (
	"context"
	"encoding/json"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/bench"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseThreadCounts: --threads takes one count or an ascending list
// without repeats, each within the CPUs.
func TestParseThreadCounts(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
	}{{"1", []int{1}}, {"2", []int{2}}, {"1,2", []int{1, 2}}, {" 1, 4 ,16 ", []int{1, 4, 16}}, {"1,2,", []int{1, 2}}} {
		got, err := bench.ParseThreadCounts(c.in, 16)
		if assert.NoError(t, err, c.in) {
			assert.Equal(t, c.want, got, c.in)
		}
	}
	for _, c := range []struct{ in, has string }{
		{"", "want a count"}, {"0", "want 1 to 16"}, {"17", "want 1 to 16"}, {"1,32", "want 1 to 16"},
		{"2,1", "ascending"}, {"1,1", "ascending"}, {"x", "not a number"}, {"1.5", "not a number"}, {"1;2", "not a number"},
	} {
		_, err := bench.ParseThreadCounts(c.in, 16)
		if assert.Error(t, err, c.in) {
			assert.Contains(t, err.Error(), c.has, c.in)
		}
	}
}

// TestBenchModelThreadsFlags: bench model refuses a bad --threads list,
// and a list with --instances, before it loads anything.
func TestBenchModelThreadsFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		has  string
	}{
		{[]string{"--threads", "0"}, "want 1 to"},
		{[]string{"--threads", "2,1"}, "ascending"},
		{[]string{"--threads", "1,two"}, "not a number"},
		{[]string{"--threads", "1,1000000"}, "want 1 to"},
		{[]string{"--threads", "1,2", "--instances", "2"}, "give one thread count"},
	} {
		err := run(context.Background(), append([]string{"bench", "model", "--arch", "no-such-arch"}, c.args...), io.Discard, io.Discard)
		if assert.Error(t, err, "%v", c.args) {
			assert.Contains(t, err.Error(), c.has, "%v", c.args)
		}
	}
}

// TestBenchModelScaling runs bench model --threads 1,2 on the shipped
// mini model (seq 8, a few passes) and checks the report's fields, not
// its timings: a point per precision and count, the base's scaling 1, the
// others' with their spread and the peak loop's scaling; and the text
// table's columns.
func TestBenchModelScaling(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs")
	}
	fastKernels(t)
	args := []string{"bench", "model", "--arch", "../../assets/sst2-xlmr-mini", "--seq", "8", "--threads", "1,2", "--precision", "fp32,int8-static",
		"--min-time", "10ms", "--reps", "3", "--peak-time", "20ms"}
	out := mustCLI(t, append(args, "-json")...)
	var r bench.ScalingReport
	require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	assert.Equal(t, []int{1, 2}, r.Threads)
	assert.Equal(t, 8, r.Seq)
	require.Len(t, r.Precisions, 2, out)
	for i, want := range []string{"fp32", "int8-static"} {
		p := r.Precisions[i]
		assert.Equal(t, want, p.Precision)
		require.Len(t, p.Points, 2, out)
		for j, x := range p.Points {
			assert.Equal(t, r.Threads[j], x.Threads, want)
			assert.GreaterOrEqual(t, x.Spread.N, 3, "%s: passes", want)
			assert.Positive(t, x.MsPerBatch, want)
			assert.Equal(t, x.Spread.N, x.ScalingSpread.N, "%s: a ratio per round", want)
			assert.True(t, x.ScalingSpread.Min <= x.Scaling && x.Scaling <= x.ScalingSpread.Max, "%s: scaling %v outside %v", want, x.Scaling, x.ScalingSpread)
			if x.PeakScaling > 0 {
				assert.Positive(t, x.PeakScalingAfter, want)
				assert.InDelta(t, x.Scaling/x.PeakScaling, x.OfPeak, 1e-9, want)
			}
		}
		base := p.Points[0]
		assert.Equal(t, 1.0, base.Scaling, "%s: the base's scaling", want)
		if base.PeakScaling > 0 {
			assert.Equal(t, 1.0, base.PeakScaling, "%s: the base's peak scaling", want)
		}
		assert.Positive(t, p.Points[1].Scaling, want)
	}
	text := mustCLI(t, args...)
	for _, s := range []string{"threads [1 2]", "scaling vs 1 (min-max)", "peak loop scaling (before/after)", "of peak scaling", "fp32", "int8-static"} {
		assert.Contains(t, text, s)
	}
	rows := 0
	for _, line := range strings.Split(text, "\n") {
		if f := strings.Fields(line); len(f) > 2 && (f[0] == "fp32" || f[0] == "int8-static") && (f[1] == "1" || f[1] == "2") {
			rows++
		}
	}
	assert.Equal(t, 4, rows, "a row per precision and count:\n%s", text)
}
