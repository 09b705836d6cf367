package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/kernels/peak"
	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/selector"
)

// Shape is one GEMM of a BERT layer: M tokens, K inputs, N outputs.
type Shape struct {
	Name    string `json:"name"`
	M, K, N int
}

// String prints the shape as MxKxN with its name.
func (s Shape) String() string { return fmt.Sprintf("%s %dx%dx%d", s.Name, s.M, s.K, s.N) }

// Ops is the number of multiply-adds times two.
func (s Shape) Ops() float64 { return 2 * float64(s.M) * float64(s.K) * float64(s.N) }

// BERTShapes are the linear layers of BERT-base at 128 tokens and of
// BERT-large at 256 tokens: QKV fused, attention output, FFN1, FFN2.
var BERTShapes = []Shape{
	{"bert-base qkv", 128, 768, 2304},
	{"bert-base attn-out", 128, 768, 768},
	{"bert-base ffn1", 128, 768, 3072},
	{"bert-base ffn2", 128, 3072, 768},
	{"bert-large qkv", 256, 1024, 3072},
	{"bert-large attn-out", 256, 1024, 1024},
	{"bert-large ffn1", 256, 1024, 4096},
	{"bert-large ffn2", 256, 4096, 1024},
}

// Epilogue is one epilogue of the GEMM benchmark, with its selector kinds
// for INT8 and FP32 ("" where it has no FP32 form).
type Epilogue struct {
	Name      string
	Int8, F32 string
}

// GEMMEpilogues are the epilogues "bench gemm" measures: the plain GEMM
// (s32 for INT8), dequantization by scales, and the two fused chains of a
// BERT layer.
var GEMMEpilogues = []Epilogue{
	{"none", "none/s32", "none/f32"},
	{"scale", "scale+colscale/f32", ""},
	{"scale+bias+gelu", "scale+colscale+bias+gelu/f32", "bias+gelu/f32"},
	{"scale+bias+residual", "scale+colscale+bias+residual/f32", "bias+residual/f32"},
}

// GEMMOptions control "bench gemm".
type GEMMOptions struct {
	// Threads per GEMM; 1 by default.
	Threads int
	// RepTime is the least time of one timed repetition; 20 ms by default.
	RepTime time.Duration
	// Reps is the number of timed repetitions per candidate (median); 5.
	Reps int
	// PeakTime is how long the peak microbenchmarks run at the start (300
	// ms by default), for the report's Peak. The shares of the peak of the
	// results pair each timed repetition with a run of the peak loop right
	// before it (GEMMResult.PeakGOPS).
	PeakTime time.Duration
	// Shapes default to BERTShapes, Epilogues to GEMMEpilogues.
	Shapes    []Shape
	Epilogues []Epilogue
	// DTypes are "int8", "fp32" and/or "bf16" (the epilogues' FP32 form);
	// int8 and fp32 by default.
	DTypes []string
	// Progress, when set, is told what is being measured.
	Progress func(what string)
}

// GEMMResult is one candidate measured on one shape, type and epilogue.
type GEMMResult struct {
	Shape    string  `json:"shape"`
	M        int     `json:"m"`
	K        int     `json:"k"`
	N        int     `json:"n"`
	DType    string  `json:"dtype"`
	Epilogue string  `json:"epilogue"`
	Kernel   string  `json:"kernel"`
	Backend  string  `json:"backend"`
	Impl     string  `json:"impl,omitempty"`
	GOPS     float64 `json:"gops"`
	MsPerOp  float64 `json:"ms_per_call"`
	// PeakGOPS is the median of the peak loop's rates (times the threads)
	// measured around each timed repetition of this candidate (the faster
	// of the runs right before and after it): VNNI for INT8, or VPMADDWD's
	// on CPUs without VNNI, FMA for FP32. PctPeak is the median over those
	// repetitions of the candidate's rate over that peak: on a shared
	// machine whose speed drifts (frequency, other guests), each pair sees
	// the same conditions. PctPeak is therefore not always GOPS/PeakGOPS;
	// both are 0 where the CPU or build has no peak loop.
	PeakGOPS float64 `json:"peak_gops"`
	PctPeak  float64 `json:"pct_peak"`
	// VsDNNL is GOPS over oneDNN's on the same shape, type and epilogue in
	// this run; 0 where oneDNN did not run (absent, or it declined).
	VsDNNL float64 `json:"vs_dnnl"`
	// Chosen marks the candidate the selector picked.
	Chosen bool `json:"chosen"`
	// Spread is the fastest, median and slowest timed repetition (ms per
	// call; the zero Spread for a candidate pruned before its
	// repetitions). Noise judges it (Classify) with the peak loop's
	// slowest and fastest runs around the repetitions as its before and
	// after.
	Spread Spread `json:"spread"`
	Noise  Noise  `json:"noise"`
}

// Skipped is a candidate that was not measured on a key, and why.
type Skipped struct {
	Shape    string `json:"shape"`
	DType    string `json:"dtype"`
	Epilogue string `json:"epilogue"`
	Kernel   string `json:"kernel"`
	Reason   string `json:"reason"`
}

// GEMMReport is what "bench gemm -json" prints.
type GEMMReport struct {
	CPU     string       `json:"cpu"`
	Threads int          `json:"threads"`
	Peak    peak.Figures `json:"peak"`
	// Schemes are the exact and range-limited INT8 schemes without VNNI
	// (peak.Schemes), measured where int8 is among the types.
	Schemes []peak.SchemeRate `json:"schemes,omitempty"`
	Results []GEMMResult      `json:"results"`
	Skipped []Skipped         `json:"skipped,omitempty"`
}

// measurePeak measures the peak of a precision's arithmetic on the calling
// thread for d and returns it for threads threads: VNNI for INT8 (VPMADDWD's
// on CPUs without VNNI), VDPBF16PS for BF16, FMA for FP32, times threads
// (one core's figure each).
func measurePeak(d time.Duration, prec models.Precision, threads int) float64 {
	p := peak.Measure(d)
	switch {
	case prec.Int8():
		return p.Int8() * float64(threads)
	case prec == models.PrecisionBF16:
		return p.BF16GFLOPS * float64(threads)
	}
	return p.FP32GFLOPS * float64(threads)
}

// peakRate is one run of the peak loop of prec's arithmetic for d on the
// calling thread (peak.Rate: VNNI or the INT8 tier's loop, VDPBF16PS,
// FMA), in GOP/s times threads; 0 without one. Unlike measurePeak's best
// of short runs it sees what the timed passes next to it see, for the
// before/after check of Classify.
func peakRate(d time.Duration, prec models.Precision, threads int) float64 {
	kind := peakKind(prec)
	return peak.Rate(kind, d) / 1e9 * float64(threads)
}

// GEMM measures every candidate the selector has (native kernels of every
// ISA this CPU runs, and oneDNN when built in) on each shape x type x
// epilogue, in one run, after checking each against the reference, and
// reports throughput, share of the measured peak, the ratio to oneDNN and
// the selector's pick.
func GEMM(ctx context.Context, o GEMMOptions) (*GEMMReport, error) {
	if o.Threads <= 0 {
		o.Threads = 1
	}
	if o.RepTime <= 0 {
		o.RepTime = 20 * time.Millisecond
	}
	if o.Reps <= 0 {
		o.Reps = 5
	}
	if o.PeakTime <= 0 {
		o.PeakTime = 300 * time.Millisecond
	}
	if o.Shapes == nil {
		o.Shapes = BERTShapes
	}
	if o.Epilogues == nil {
		o.Epilogues = GEMMEpilogues
	}
	if o.DTypes == nil {
		o.DTypes = []string{"int8", "fp32"}
	}
	for _, d := range o.DTypes {
		if d != "int8" && d != "fp32" && d != "bf16" {
			return nil, fmt.Errorf("bench: unknown dtype %q (int8, fp32, bf16)", d)
		}
	}
	progress := func(format string, args ...any) {
		if o.Progress != nil {
			o.Progress(fmt.Sprintf(format, args...))
		}
	}
	progress("peak microbenchmarks")
	r := &GEMMReport{CPU: cpu.X86.Brand, Threads: o.Threads, Peak: peak.Measure(o.PeakTime)}
	if slices.Contains(o.DTypes, "int8") {
		r.Schemes = peak.Schemes(o.PeakTime)
	}
	// Each timed repetition is paired with a run of the peak loop of its
	// precision right before it.
	ref := func(key selector.Key, d time.Duration) float64 {
		kind := peak.FP32
		switch key.Op {
		case selector.OpU8S8:
			kind = peak.Int8
		case selector.OpBF16:
			kind = peak.BF16
		}
		return peak.Rate(kind, d) * float64(o.Threads)
	}
	sel, err := selector.New(selector.Options{CachePath: "off", Reps: o.Reps, RepTime: o.RepTime, KeyBudget: -1, DeriveAbove: -1, PruneFactor: math.Inf(1), Reference: ref})
	if err != nil {
		return nil, err
	}
	defer sel.Close()
	for _, s := range o.Shapes {
		for _, dt := range o.DTypes {
			for _, e := range o.Epilogues {
				if err := ctx.Err(); err != nil {
					return r, err
				}
				kindName, op := e.Int8, selector.OpU8S8
				switch dt {
				case "fp32":
					kindName, op = e.F32, selector.OpF32
				case "bf16":
					kindName, op = e.F32, selector.OpBF16
				}
				if kindName == "" {
					continue
				}
				kind, err := selector.ParseEpilogueKind(kindName)
				if err != nil {
					return r, err
				}
				key, err := selector.NewKey(op, s.M, s.K, s.N, kind, o.Threads)
				if err != nil {
					return r, err
				}
				progress("%s %s %s", s, dt, e.Name)
				ch, err := sel.Choose(key)
				if err != nil {
					return r, fmt.Errorf("bench: %v %s %s: %w", s, dt, e.Name, err)
				}
				var dnnl float64
				for _, m := range ch.Measured {
					if m.Backend == selector.BackendOneDNN && !m.Pruned && m.Median > 0 {
						dnnl = s.Ops() / m.Median.Seconds() / 1e9
					}
				}
				for _, m := range ch.Measured {
					if m.Median <= 0 {
						continue
					}
					g := s.Ops() / m.Median.Seconds() / 1e9
					res := GEMMResult{
						Shape: s.Name, M: s.M, K: s.K, N: s.N, DType: dt, Epilogue: e.Name,
						Kernel: m.Kernel, Backend: m.Backend, Impl: m.Impl, GOPS: g,
						MsPerOp: float64(m.Median.Microseconds()) / 1e3,
						Chosen:  m.Kernel == ch.Kernel,
					}
					if m.Min > 0 && m.Runs > 1 {
						res.Spread = Spread{Min: float64(m.Min) / 1e6, Median: float64(m.Median) / 1e6, Max: float64(m.Max) / 1e6, N: m.Runs}
						res.Noise = Classify(res.Spread, m.RefMin/1e9, m.RefMax/1e9)
					}
					if m.RefWork > 0 {
						res.PeakGOPS, res.PctPeak = m.RefRate/1e9, 100*s.Ops()/m.RefWork
					}
					if dnnl > 0 {
						res.VsDNNL = g / dnnl
					}
					r.Results = append(r.Results, res)
				}
				for _, x := range ch.Excluded {
					r.Skipped = append(r.Skipped, Skipped{Shape: s.Name, DType: dt, Epilogue: e.Name, Kernel: x.Kernel, Reason: x.Reason})
				}
			}
		}
	}
	return r, nil
}
