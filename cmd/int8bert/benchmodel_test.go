package main

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/kernels/peak"
	"github.com/int8bert/int8bert/selector"
	"github.com/stretchr/testify/assert"
)

// benchModelOutput is bench model -json's output.
type benchModelOutput struct {
	Arch    string `json:"arch"`
	Seq     int    `json:"seq"`
	Batch   int    `json:"batch"`
	Threads int    `json:"threads"`
	Results []struct {
		Precision  string   `json:"precision"`
		SeqPerS    *float64 `json:"seq_per_s"`
		MsPerBatch *float64 `json:"ms_per_batch"`
		LinearMs   *float64 `json:"linear_ms"`
		LinearGOPS float64  `json:"linear_gops"`
		Speedup    *float64 `json:"speedup_vs_fp32"`
		PeakGOPS   *float64 `json:"peak_gops"`
		PctPeak    *float64 `json:"linear_pct_peak"`
	} `json:"results"`
}

func TestBenchModelJSON(t *testing.T) {
	fastKernels(t)
	arch := sharedPath(t, "golden/models/bert-base")
	out := mustCLI(t, "bench", "model", "--arch", arch, "--seq", "8", "--min-time", "10ms", "--reps", "1", "--peak-time", "30ms", "-json")
	var r benchModelOutput
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("bench model -json: %v\n%s", err, out)
	}
	if r.Arch != arch || r.Seq != 8 || r.Batch != 1 || r.Threads != 1 {
		t.Errorf("arch %q seq %d batch %d threads %d; want %q 8 1 1", r.Arch, r.Seq, r.Batch, r.Threads, arch)
	}
	want := []string{"fp32", "int8-static", "int8-dynamic"}
	if len(r.Results) != len(want) {
		t.Fatalf("%d results, want %d:\n%s", len(r.Results), len(want), out)
	}
	pos := func(p *float64) bool { return p != nil && *p > 0 }
	for i, x := range r.Results {
		if x.Precision != want[i] {
			t.Errorf("result %d: precision %q, want %q", i, x.Precision, want[i])
		}
		if !pos(x.SeqPerS) || !pos(x.MsPerBatch) || !pos(x.LinearMs) || !pos(x.Speedup) {
			t.Errorf("%s: a value is missing or not positive:\n%s", x.Precision, out)
		}
		if x.Precision == "fp32" && (x.Speedup == nil || *x.Speedup != 1) {
			t.Errorf("fp32 speed-up over itself %v, want exactly 1", x.Speedup)
		}
		// The peak of the precision's instructions, where this CPU and
		// build have them, and the linears' share of it.
		hasPeak := peak.Measure(time.Millisecond)
		want := hasPeak.FP32GFLOPS > 0
		if x.Precision != "fp32" {
			want = hasPeak.Int8() > 0
		}
		switch {
		case want && (!pos(x.PeakGOPS) || !pos(x.PctPeak)):
			t.Errorf("%s: peak_gops %v, linear_pct_peak %v; want both positive:\n%s", x.Precision, x.PeakGOPS, x.PctPeak, out)
		case want && math.Abs(*x.PctPeak - 100*x.LinearGOPS / *x.PeakGOPS) > 1e-6**x.PctPeak:
			t.Errorf("%s: linear_pct_peak %v, want 100*%v/%v", x.Precision, *x.PctPeak, x.LinearGOPS, *x.PeakGOPS)
		case !want && (x.PeakGOPS != nil || x.PctPeak != nil):
			t.Errorf("%s: a peak without the instructions: %v %v", x.Precision, x.PeakGOPS, x.PctPeak)
		}
	}
	// -peak-time 0: no peak.
	out = mustCLI(t, "bench", "model", "--arch", arch, "--seq", "4", "--precision", "fp32", "--min-time", "1ms", "--reps", "1", "--peak-time", "0", "-json")
	if strings.Contains(out, "peak") {
		t.Errorf("bench model -peak-time 0 reported a peak:\n%s", out)
	}

	// One precision, text output, batch 2.
	out = mustCLI(t, "bench", "model", "--arch", arch, "--seq", "4", "--batch", "2", "--precision", "int8-dynamic", "--min-time", "1ms", "--reps", "1")
	if !strings.Contains(out, "int8-dynamic") || !strings.Contains(out, "batch 2") {
		t.Errorf("bench model text output:\n%s", out)
	}
	// It names the INT8 tier and the kernels that ran, next to the speed-up.
	tier := selector.DescribeInt8(cpu.X86)
	if !strings.Contains(out, "int8 tier: "+tier.Tier+": "+tier.Scheme) || !strings.Contains(out, "int8 kernels chosen: ") {
		t.Errorf("bench model does not name the INT8 tier %q and the kernels chosen:\n%s", tier.Tier, out)
	}
	chosen := false
	for _, k := range tier.Kernels {
		chosen = chosen || strings.Contains(out, k+" x")
	}
	if !chosen && !strings.Contains(out, "onednn x") {
		t.Errorf("no kernel of %v (nor onednn) among the chosen ones:\n%s", tier.Kernels, out)
	}
}

func TestBenchModelErrors(t *testing.T) {
	fastKernels(t)
	arch := sharedPath(t, "golden/models/bert-base")
	fast := []string{"--min-time", "1ms", "--reps", "1", "--precision", "fp32"}
	bm := func(args ...string) []string { return append(append([]string{"bench", "model"}, args...), fast...) }
	wantCLIError(t, "no-such-arch", bm("--arch", "no-such-arch", "--seq", "8")...)
	// max_position_embeddings is 128.
	wantCLIError(t, "129", bm("--arch", arch, "--seq", "129")...)
	wantCLIError(t, "", bm("--arch", arch, "--seq", "0")...)
	wantCLIError(t, "", bm("--arch", arch, "--seq", "8", "--batch", "-1")...)
	wantCLIError(t, "", "bench", "model", "--arch", arch, "--seq", "8", "--precision", "int4")
	wantCLIError(t, "", "bench", "model", "--arch", arch, "--seq", "8", "--precision", "fp32,,int8-static")
	wantCLIError(t, "", "bench", "model", "--arch", arch, "--seq", "8", "--alpha", "3")
	wantCLIError(t, "", "bench", "model", "--arch", arch, "--seq", "8", "--reps", "0")
	wantCLIError(t, "unexpected", "bench", "model", "--arch", arch, "--seq", "8", "extra")
	wantCLIError(t, "flags go before the texts", bm("--arch", arch, "--seq", "8", "extra")...)
}

func TestBenchModelInstances(t *testing.T) {
	fastKernels(t)
	arch := sharedPath(t, "golden/models/bert-base")
	fast := []string{"--arch", arch, "--seq", "4", "--precision", "int8-static", "--min-time", "1ms", "--reps", "1", "--peak-time", "0"}
	out := mustCLI(t, append([]string{"bench", "model", "--instances", "2", "--pin=false"}, fast...)...)
	if !strings.Contains(out, "2 instance(s)") || !strings.Contains(out, "2 instances: ") || !strings.Contains(out, "x one instance") || !strings.Contains(out, "RSS ") {
		t.Errorf("bench model --instances 2:\n%s", out)
	}
	wantCLIError(t, "--instances 0", append([]string{"bench", "model", "--instances", "0"}, fast...)...)
	wantCLIError(t, "CPUs in all", append([]string{"bench", "model", "--instances", "1000"}, fast...)...)
}

// TestBenchModelBenchstat: -benchstat writes one line in Go's benchmark
// format per timed pass of each precision, and the text output gives
// each figure's spread.
func TestBenchModelBenchstat(t *testing.T) {
	fastKernels(t)
	arch := sharedPath(t, "golden/models/bert-base")
	file := filepath.Join(t.TempDir(), "new.txt")
	out := mustCLI(t, "bench", "model", "--arch", arch, "--seq", "4", "--precision", "fp32,int8-dynamic", "--min-time", "1ms", "--reps", "3",
		"--peak-time", "0", "--benchstat", file)
	if !strings.Contains(out, "ms/batch (min-max)") {
		t.Errorf("bench model prints no spread:\n%s", out)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 4 || f[1] != "1" || f[3] != "ns/op" {
			t.Errorf("not a benchmark line: %q", line)
			continue
		}
		counts[f[0]]++
	}
	name := "BenchmarkModel/arch=bert-base/seq=4/batch=1/threads=1/dtype="
	for _, p := range []string{"fp32", "int8-dynamic"} {
		if counts[name+p] < 3 {
			t.Errorf("%s: %d lines, want one per timed pass (at least 3):\n%s", p, counts[name+p], raw)
		}
	}
	wantCLIError(t, "-benchstat", "bench", "model", "--arch", arch, "--seq", "4", "--precision", "fp32", "--min-time", "1ms", "--reps", "1",
		"--peak-time", "0", "--benchstat", filepath.Join(t.TempDir(), "no", "such", "file"))
}

// TestBenchColdFlags: bench cold refuses bad flags before it loads
// anything.
func TestBenchColdFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		has  string
	}{
		{[]string{"--threads", "0"}, "threads"},
		{[]string{"extra"}, `unexpected arguments ["extra"]`},
		{[]string{"--precision", "int4"}, "int4"},
		{[]string{"--calls", "-2"}, "--calls -2 is negative"},
		{[]string{"--calls", "0"}, "--calls 0: want at least 1 (leave the flag out for its default, 200)"},
		{[]string{"--warm-batch", "0"}, "--warm-batch 0: want at least 1"},
		{[]string{"--warm-length", "0"}, "--warm-length 0: want at least 1"},
		{[]string{"--max-length", "0"}, "--max-length 0: want at least 1"},
		{[]string{"--warm-rounds", "0"}, "--warm-rounds 0: want at least 1"},
		{[]string{"--arch", "no-such-arch"}, "neither a model folder nor a known architecture"},
	} {
		err := run(context.Background(), append([]string{"bench", "cold"}, c.args...), io.Discard, io.Discard)
		if assert.Error(t, err, "%v", c.args) {
			assert.Contains(t, err.Error(), c.has, "%v", c.args)
		}
	}
}

// TestBenchModelDeBERTaAttentionSplit: on a DeBERTa folder (the committed
// tiny golden) bench model splits the attention into its content, c2p
// and p2c terms, at FP32 and INT8 (INT8 attention with the FP32 relative
// terms where the CPU's auto mode picks it), and prints
// the split; a family without the terms reports none.
func TestBenchModelDeBERTaAttentionSplit(t *testing.T) {
	fastKernels(t)
	arch := filepath.Join("..", "..", "models", "testdata", "golden", "deberta-v3-base")
	args := []string{"bench", "model", "--arch", arch, "--seq", "16", "--precision", "fp32,int8-static", "--min-time", "1ms", "--reps", "2", "--peak-time", "0"}
	out := mustCLI(t, append(args, "-json")...)
	var r struct {
		Results []struct {
			Precision   string  `json:"precision"`
			AttentionMs float64 `json:"attention_ms"`
			Content     float64 `json:"attention_content_ms"`
			C2P         float64 `json:"attention_c2p_ms"`
			P2C         float64 `json:"attention_p2c_ms"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("bench model -json: %v\n%s", err, out)
	}
	if len(r.Results) != 2 {
		t.Fatalf("%d results, want 2:\n%s", len(r.Results), out)
	}
	for _, x := range r.Results {
		if x.Content <= 0 || x.C2P <= 0 || x.P2C <= 0 {
			t.Errorf("%s: attention split content %v c2p %v p2c %v, want all positive:\n%s", x.Precision, x.Content, x.C2P, x.P2C, out)
		}
		if sum := x.Content + x.C2P + x.P2C; math.Abs(sum-x.AttentionMs) > 1e-9*x.AttentionMs+1e-12 {
			t.Errorf("%s: the split sums to %v, attention %v", x.Precision, sum, x.AttentionMs)
		}
	}
	if text := mustCLI(t, args...); !strings.Contains(text, "int8-static attention: content ") || !strings.Contains(text, "fp32 attention: content ") {
		t.Errorf("bench model does not print the attention split:\n%s", text)
	}
	bert := filepath.Join("..", "..", "models", "testdata", "golden", "mpnet-base")
	if out := mustCLI(t, "bench", "model", "--arch", bert, "--seq", "8", "--precision", "fp32", "--min-time", "1ms", "--reps", "1", "--peak-time", "0", "-json"); strings.Contains(out, "c2p") {
		t.Errorf("a family without relative terms reports a c2p split:\n%s", out)
	}
}
