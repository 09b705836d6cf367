package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/dnnl"
	"github.com/int8bert/int8bert/internal/cgroup"
	"github.com/int8bert/int8bert/selector"
)

func TestInfoJSON(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"info", "-json"}, &out, &errb); err != nil {
		t.Fatal(err, errb.String())
	}
	var r infoReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("info -json is not JSON: %v\n%s", err, out.String())
	}
	if r.Paths.Int8 == "" || r.Paths.FP32 == "" {
		t.Errorf("missing paths: %+v", r.Paths)
	}
	if r.DNNL.Available != dnnl.Available {
		t.Errorf("onednn.available = %v in a build where dnnl.Available = %v", r.DNNL.Available, dnnl.Available)
	}
	if !r.DNNL.Available && !strings.Contains(r.DNNL.Reason, "not available") {
		t.Errorf("no reason given for oneDNN being unavailable: %q", r.DNNL.Reason)
	}
	if r.Resources != cgroup.Current() {
		t.Errorf("resources %+v, want %+v", r.Resources, cgroup.Current())
	}
	want := selector.DescribeInt8(cpu.X86)
	if r.Int8.Tier != want.Tier || r.Int8.Scheme != want.Scheme || !slices.Contains(r.Int8.Kernels, "gemmGeneric_1x16") || r.Int8.OneDNN == "" {
		t.Errorf("int8 tier %+v, want %+v", r.Int8, want)
	}
}

func TestInfoText(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"info"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	tier := selector.DescribeInt8(cpu.X86)
	for _, want := range []string{"cpu:", "cpus:     " + cgroup.Current().CPULine(), "memory:   ", "amx:", "paths:", "oneDNN:", "int8:     " + tier.Tier + " tier: " + tier.Scheme, "gemmGeneric_1x16", "INT8 linears can reach at most"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("info output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBadUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"nope"}, {"info", "extra"}, {"bench"}, {"bench", "gemm", "-threads", "0"}, {"bench", "gemm", "-bogus"}} {
		var out, errb bytes.Buffer
		if err := run(context.Background(), args, &out, &errb); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

func TestBenchGEMMJSON(t *testing.T) {
	var out, errb bytes.Buffer
	// Two small shapes keep this quick under -race; the BERT shapes are
	// what the command measures by default.
	args := []string{"bench", "gemm", "-json", "-reps", "1", "-rep-time", "1ms", "-peak-time", "30ms",
		"-dtypes", "int8,fp32", "-shapes", "16x64x48,33x96x80"}
	if err := run(context.Background(), args, &out, &errb); err != nil {
		t.Fatal(err, errb.String())
	}
	var r struct {
		CPU  string
		Peak struct {
			FP32     float64 `json:"fp32_gflops"`
			VNNI     float64 `json:"vnni_gops"`
			AVX2Int8 float64 `json:"avx2_int8_gops"`
		}
		Results []struct {
			Shape, DType, Epilogue, Kernel, Backend string
			GOPS                                    float64 `json:"gops"`
			PctPeak                                 float64 `json:"pct_peak"`
			PeakGOPS                                float64 `json:"peak_gops"`
			VsDNNL                                  float64 `json:"vs_dnnl"`
			Chosen                                  bool    `json:"chosen"`
		}
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	chosen := map[string]int{}
	backends := map[string]bool{}
	for _, x := range r.Results {
		if !(x.GOPS > 0) {
			t.Errorf("bad result %+v", x)
		}
		// The share of the peak loop run right before each repetition,
		// where this CPU and build have one: with one repetition, exactly
		// gops over that run's rate.
		if hasPeak := r.Peak.FP32 > 0 && x.DType == "fp32" || (r.Peak.VNNI > 0 || r.Peak.AVX2Int8 > 0) && x.DType == "int8"; hasPeak &&
			(!(x.PeakGOPS > 0) || math.Abs(x.PctPeak-100*x.GOPS/x.PeakGOPS) > 1e-9*x.PctPeak) {
			t.Errorf("%s %s %s %s: pct_peak %v, peak_gops %v, gops %v", x.Shape, x.DType, x.Epilogue, x.Kernel, x.PctPeak, x.PeakGOPS, x.GOPS)
		} else if !hasPeak && (x.PeakGOPS != 0 || x.PctPeak != 0) {
			t.Errorf("%s %s: a share of a peak this CPU lacks: %+v", x.Shape, x.DType, x)
		}
		if x.Chosen {
			chosen[x.Shape+x.DType+x.Epilogue]++
		}
		backends[x.Backend] = true
	}
	// 2 shapes x (4 INT8 + 3 FP32 epilogues), one pick each.
	if len(chosen) != 2*7 {
		t.Errorf("%d keys with a chosen kernel, want 14", len(chosen))
	}
	for k, n := range chosen {
		if n != 1 {
			t.Errorf("%s: %d chosen", k, n)
		}
	}
	if dnnl.Available && !backends["onednn"] {
		t.Error("oneDNN is built in but was never measured")
	}
	if !backends["native"] {
		t.Error("no native kernel measured")
	}
}

// TestBenchGEMMTextSkipped checks the text table's account of what was not
// measured: one line per kernel and reason, with the number of keys.
func TestBenchGEMMTextSkipped(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"bench", "gemm", "-reps", "1", "-rep-time", "1ms", "-peak-time", "30ms",
		"-dtypes", "int8", "-shapes", "16x64x48,33x96x80"}
	if err := run(context.Background(), args, &out, &errb); err != nil {
		t.Fatal(err, errb.String())
	}
	var lines []string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "not measured") {
			lines = append(lines, l)
		}
	}
	// oneDNN 2.6.3 declines the residual epilogue (a reference kernel
	// only), on both shapes alike: one line for the two keys. Nothing else
	// is left out on shapes this small.
	want := "not measured on 2 keys (16x64x48 int8 scale+bias+residual, ...): onednn: declines the key"
	if dnnl.Available {
		info, err := dnnl.GetInfo()
		if err != nil {
			t.Fatal(err)
		}
		if !info.ISA.ExactInt8() {
			// Below VNNI the binding refuses full-range u8 x s8 (docs/DESIGN.md
			// section 5.1), for every key alike: one line for all eight, and
			// oneDNN's u8 x s8 timings are not measured on this CPU.
			want = "not measured on 8 keys (16x64x48 int8 none, ...): onednn: declines the key: dnnl: u8 x s8 matmul refused: oneDNN's effective ISA " + info.ISA.String() + " has no VNNI"
			t.Logf("oneDNN's u8 x s8 GEMMs not measured on this CPU: its effective ISA %s has no VNNI (dnnl.ErrSaturation)", info.ISA)
		}
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, want) {
			t.Errorf("not-measured line %q, want one starting %q", l, want)
		}
	}
	if len(lines) > 1 || len(lines) == 1 && !dnnl.Available {
		t.Errorf("%d not-measured lines:\n%s", len(lines), out.String())
	}
}

// TestBF16PeakNote checks the warning info -peak prints when BF16's peak
// loop is below FP32's, and only then.
func TestBF16PeakNote(t *testing.T) {
	for _, c := range []struct {
		fp32, bf16 float64
		warn       bool
	}{{176, 75.6, true}, {243, 478, false}, {100, 100, false}, {179, 0, false}, {0, 50, false}} {
		got := bf16PeakNote(c.fp32, c.bf16)
		if (got != "") != c.warn {
			t.Errorf("fp32 %v bf16 %v: %q, want a warning: %v", c.fp32, c.bf16, got, c.warn)
		}
		if c.warn && !strings.Contains(got, "slower than fp32") {
			t.Errorf("fp32 %v bf16 %v: %q does not say bf16 is slower", c.fp32, c.bf16, got)
		}
	}
}

// TestResourceLines: info's lines say what was derived and from where,
// the memory line whether GOMEMLIMIT was set from the limit or kept, and
// a cgroup that could not be read gives a note.
func TestResourceLines(t *testing.T) {
	l := cgroup.Limits{Version: 2, CPUQuota: 200000, CPUPeriod: 100000, CPUFrom: "cgroup v2 cpu.max",
		Memory: 4 << 30, MemoryFrom: "cgroup v2 memory.max"}
	got := resourceLines(cgroup.Derive(l, nil, cgroup.Host{NumCPU: 64, GOMAXPROCS: 2}))
	want := []string{"cpus:     2 (cgroup v2 cpu.max 200000 100000; host 64; GOMAXPROCS 2)",
		"memory:   limit 4.0 GiB (cgroup v2 memory.max), GOMEMLIMIT 3.6 GiB set from it (90%)"}
	if !slices.Equal(got, want) {
		t.Errorf("lines\n%q\nwant\n%q", got, want)
	}
	got = resourceLines(cgroup.Derive(l, nil, cgroup.Host{NumCPU: 64, GOMAXPROCS: 3, GOMAXPROCSEnv: "3", GOMEMLIMITEnv: "2GiB", SoftLimit: 2 << 30}))
	want = []string{"cpus:     3 (GOMAXPROCS=3 (environment); host 64; GOMAXPROCS 3)",
		"memory:   limit 4.0 GiB (cgroup v2 memory.max), GOMEMLIMIT 2.0 GiB from the environment"}
	if !slices.Equal(got, want) {
		t.Errorf("lines\n%q\nwant\n%q", got, want)
	}
	got = resourceLines(cgroup.Derive(l, fmt.Errorf("cgroup: cpu.max: %q: %w", "x", cgroup.ErrMalformed), cgroup.Host{NumCPU: 64, GOMAXPROCS: 2}))
	want = []string{"cpus:     2 (GOMAXPROCS; host 64; GOMAXPROCS 2)", "memory:   no limit",
		`note:     cgroup limits not used, the host's apply: cgroup: cpu.max: "x": malformed cgroup file`}
	if !slices.Equal(got, want) {
		t.Errorf("lines\n%q\nwant\n%q", got, want)
	}
}
