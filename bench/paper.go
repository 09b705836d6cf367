package bench

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/kernels/peak"
	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/selector"
)

// This file is "bench paper": the tables of the paper we reproduce
// ("Efficient INT8 Inference of Small NLP Models on Server CPUs with
// PyTorch Native Stack"), measured on the host it runs on
// (docs/DESIGN.md section 7.7).

// PaperModel is one model of Tables 11-13: an architecture of Archs (or a
// model folder) and its sequence length.
type PaperModel struct {
	Arch string `json:"arch"`
	Seq  int    `json:"seq"`
}

// PaperModels are the paper's three: BERT-large at 256 tokens,
// DistilBERT and XLM-R base at 128.
var PaperModels = []PaperModel{{"bert-large", 256}, {"distilbert", 128}, {"xlmr-base", 128}}

// PaperOptions configure Paper.
type PaperOptions struct {
	// Models of Tables 3 and 11-14 (nil: PaperModels); the first one's
	// GEMM shapes are Tables 5-7's.
	Models []PaperModel
	// Batch sequences per pass (0: 1), Threads per linear (0: 1),
	// Instances of each model (0: 1; see ModelOptions.Instances).
	Batch, Threads, Instances int
	// Precisions measured (nil: fp32, bf16 where the CPU has a bf16 path,
	// int8-static, int8-dynamic).
	Precisions []models.Precision
	// MinTime and Reps per precision of each model (ModelOptions; 0: 2s
	// and 3).
	MinTime time.Duration
	Reps    int
	// PeakTime is the time of each peak measurement (0: 300ms).
	PeakTime time.Duration
	// TriadBytes is the triad's footprint (0: TriadOptions' default).
	TriadBytes int64
	// GEMMRepTime and GEMMReps time each GEMM candidate (0: 20ms, 5).
	GEMMRepTime time.Duration
	GEMMReps    int
	// Selector runs everything (nil: the process-wide synchronous one,
	// selector.DefaultSync).
	Selector *selector.Selector
	// Progress hears each step: its number (from 1), the number of steps
	// and what it does.
	Progress func(step, steps int, what string)
	// Estimate, when set, hears the expected time of the rest of the run
	// once the peaks are measured (EstimatePaper), then again after each
	// part, rescaled by how the parts so far compared with their
	// estimates.
	Estimate func(rest time.Duration)
}

// The per-unit costs of EstimatePaper, measured part by part on the
// 2-vCPU Zen 5-class development VM (one thread; issue 30): building a
// model of random weights, per parameter, and rounding its linears to
// BF16, per parameter of the linears; quantizing it (calibration,
// SmoothQuant and the INT8 artifact), per parameter of the linears;
// tuning one GEMM shape of one data type that
// the tuning cache lacks (its epilogues and the attention products that
// come with it); and the GEMM step per candidate, shape and data type.
// The passes themselves are counted from their FLOPs.
const (
	estLoadNsPerParam  = 14
	estBF16NsPerParam  = 12
	estQuantNsPerParam = 70
	estTunePerShape    = 600 * time.Millisecond
	estGEMMPerCand     = 30 * time.Millisecond
)

// EstimatedPart is one part of a run of bench paper and its expected
// time.
type EstimatedPart struct {
	Name string        `json:"name"`
	Time time.Duration `json:"ns"`
}

// EstimatePaper is the expected time of the rest of a run of o once the
// peaks and the triad are measured, part by part: the GEMM step, then
// each model (models given as folders are not counted). fp32GFLOPS is
// one core's FP32 peak; cached, when set, says whether the tuning cache
// holds a GEMM (op, M, K, N on o.Threads; selector.KnownKeys), so that a
// shape tuned once costs no more. A model's time is building it at each
// precision (FP32 once; BF16 on its own), quantizing each INT8 precision,
// tuning its uncached shapes, then per precision max(MinTime, Reps+1
// passes) of passes at a third of the peak (FP32; the others faster by
// their width: 2x BF16, 4x INT8) and three peak loops.
func EstimatePaper(o PaperOptions, fp32GFLOPS float64, cached func(op string, m, k, n int) bool) []EstimatedPart {
	if fp32GFLOPS <= 0 {
		return nil
	}
	ms := o.Models
	if ms == nil {
		ms = PaperModels
	}
	minTime := o.MinTime
	if minTime == 0 {
		minTime = 2 * time.Second
	}
	reps := o.Reps
	if reps == 0 {
		reps = 3
	}
	peakTime := o.PeakTime
	if peakTime <= 0 {
		peakTime = 300 * time.Millisecond
	}
	batch, threads := max(o.Batch, 1), max(o.Threads, 1)
	rate := fp32GFLOPS * 1e9 / 3 * float64(threads)
	tuned := map[string]bool{}
	isCached := func(op string, m, k, n int) bool {
		key := fmt.Sprint(op, selector.BucketM(m), k, n)
		if tuned[key] || (cached != nil && cached(op, selector.BucketM(m), k, n)) {
			return true
		}
		tuned[key] = true
		return false
	}
	dtypes := 2
	if slices.Contains(o.Precisions, models.PrecisionBF16) {
		dtypes = 3
	}
	// Four shapes, about six candidates each, every repetition paired with
	// peak loops.
	parts := []EstimatedPart{{Name: "GEMM shapes", Time: time.Duration(4*dtypes*max(o.GEMMReps, 1)*6) * estGEMMPerCand}}
	for _, m := range ms {
		a, err := LookupArch(m.Arch)
		if err != nil {
			continue // a folder: not loaded just to estimate
		}
		cfg, err := a.ModelConfig()
		if err != nil {
			continue
		}
		shapes := ModelShapes(cfg, m.Seq, batch)
		// Every parameter is made and read at load; only the linears'
		// are rounded to bf16 or quantized (the embeddings stay FP32:
		// xlmr-base's 250k-token table is two thirds of its weights).
		flops, linear := 0.0, 0.0
		for _, s := range shapes {
			flops += float64(s.Count) * s.Ops()
			linear += float64(s.Count) * float64(s.K*s.N+s.N)
		}
		params := linear + float64(cfg.Vocab+cfg.MaxPositions+cfg.TypeVocab)*float64(cfg.Hidden)
		flops += float64(cfg.Layers) * 4 * float64(m.Seq*m.Seq*cfg.Hidden*batch)
		total := time.Duration(params * estLoadNsPerParam)
		for _, p := range o.Precisions {
			width, op := 1.0, selector.OpF32
			switch {
			case p == models.PrecisionBF16:
				width, op = 2, selector.OpBF16
				total += time.Duration(linear * estBF16NsPerParam)
			case p.Int8():
				width, op = 4, selector.OpU8S8
				total += time.Duration(linear * estQuantNsPerParam)
			}
			for _, s := range shapes {
				if !isCached(op, s.M, s.K, s.N) {
					total += estTunePerShape
				}
			}
			pass := time.Duration(flops / (rate * width) * 1e9)
			// The untimed pass, the settle step's least passes, the
			// timed passes, the peak loops.
			total += max(minTime, time.Duration(reps+1)*pass) + settleMinPasses*pass + 3*peakTime
		}
		parts = append(parts, EstimatedPart{Name: fmt.Sprintf("%s at seq %d", m.Arch, m.Seq), Time: total})
	}
	return parts
}

// SumParts is the sum of parts' times.
func SumParts(parts []EstimatedPart) time.Duration {
	var t time.Duration
	for _, p := range parts {
		t += p.Time
	}
	return t
}

// PaperMeta says where and how a report was measured.
type PaperMeta struct {
	CPU      string    `json:"cpu"`
	Features string    `json:"features"`
	Cores    int       `json:"cores"`
	Date     time.Time `json:"date"`
	Commit   string    `json:"commit"`
	Go       string    `json:"go"`
	OneDNN   string    `json:"onednn"`
	// Command is the command line that reproduces the report.
	Command string `json:"command"`
	// Settings are the run's knobs (threads, batch, instances, OMP policy,
	// pinning, quick).
	Settings map[string]string `json:"settings"`
	// Seconds is how long the run took.
	Seconds float64 `json:"seconds"`
}

// Hotspot is one row of Table 3: where a pass of a model at a precision
// spends its time, in percent of the pass.
type Hotspot struct {
	Model        string  `json:"model"`
	Precision    string  `json:"precision"`
	MsPerBatch   float64 `json:"ms_per_batch"`
	LinearPct    float64 `json:"linear_pct"`
	AttentionPct float64 `json:"attention_pct"`
	LayerNormPct float64 `json:"layernorm_pct"`
	OtherPct     float64 `json:"other_pct"`
	// Spread is the pass's spread; Noisy its verdict (Noise).
	Spread Spread `json:"spread"`
	Noisy  bool   `json:"noisy,omitempty"`
}

// Peaks is Table 4: the measured peaks of one core and of Threads cores
// (all the cores used: threads x instances; GOP/s), the memory bandwidth
// of the triad on one and on Threads cores (GB/s), and the balance points
// (ops per byte at which a GEMM stops being bound by memory) of each
// arithmetic.
type Peaks struct {
	OneCore  peak.Figures `json:"one_core"`
	Threads  int          `json:"threads"`
	AllCores peak.Figures `json:"all_cores"`
	// Int8Kind names the INT8 figure used (the tier that runs).
	Int8Kind string      `json:"int8_kind"`
	TriadOne TriadResult `json:"triad_one_core"`
	TriadAll TriadResult `json:"triad_all_cores"`
	// Balance is the all-core peaks over the all-core triad.
	Balance    map[string]float64 `json:"balance_ops_per_byte"`
	BalanceOne map[string]float64 `json:"balance_one_core_ops_per_byte"`
	// PeakByDType and PassGBps are the roofline of one pass: the peaks
	// and bandwidth of one instance's Threads (the all-core figures over
	// the instances); PeakByDType1 one core's peaks.
	PeakByDType  map[string]float64 `json:"peak_gops"`
	PeakByDType1 map[string]float64 `json:"peak_one_core_gops"`
	PassGBps     float64            `json:"pass_gb_per_s"`
}

// PaperShape is one GEMM shape of a model's pass (Table 5): its count per
// pass and its arithmetic intensity per data type.
type PaperShape struct {
	Name  string             `json:"name"`
	M     int                `json:"m"`
	K     int                `json:"k"`
	N     int                `json:"n"`
	Count int                `json:"count_per_pass"`
	AI    map[string]float64 `json:"ai_ops_per_byte"`
}

// Ops is 2*M*K*N.
func (s PaperShape) Ops() float64 { return 2 * float64(s.M) * float64(s.K) * float64(s.N) }

// GEMMFigure is one shape at one data type (Tables 6-7): the selector's
// kernel measured, its throughput and effective bandwidth (the bytes of
// A, B and C over its time), and the roofline estimate min(peak, AI x BW).
type GEMMFigure struct {
	Shape    string  `json:"shape"`
	DType    string  `json:"dtype"`
	Kernel   string  `json:"kernel"`
	GOPS     float64 `json:"gops"`
	AI       float64 `json:"ai_ops_per_byte"`
	EffGBps  float64 `json:"effective_gb_per_s"`
	Roofline float64 `json:"roofline_gops"`
	PctRoof  float64 `json:"pct_of_roofline"`
	// Bound is "compute" or "memory": which roof the estimate is.
	Bound string `json:"bound"`
	// Spread is the kernel's timed repetitions (ms per call), Noisy the
	// verdict on them (GEMMResult.Noise).
	Spread Spread `json:"spread"`
	Noisy  bool   `json:"noisy,omitempty"`
}

// Speedup is one row of Tables 11-13.
type Speedup struct {
	Model      string  `json:"model"`
	Seq        int     `json:"seq"`
	Precision  string  `json:"precision"`
	SeqPerS    float64 `json:"seq_per_s"`
	MsPerBatch float64 `json:"ms_per_batch"`
	LinearMs   float64 `json:"linear_ms"`
	// VsFP32 and VsBF16 are the throughput speed-ups, LinearVs* those of
	// the linear block (0 where that precision did not run).
	VsFP32       float64 `json:"speedup_vs_fp32"`
	VsBF16       float64 `json:"speedup_vs_bf16"`
	LinearVsFP32 float64 `json:"linear_speedup_vs_fp32"`
	LinearVsBF16 float64 `json:"linear_speedup_vs_bf16"`
	// Spread is the passes' spread (ms); Noisy says this figure is noisy,
	// NoisyVsFP32 and NoisyVsBF16 that it or the figure it is divided by
	// is: such a ratio is never printed without NoisyMark.
	Spread      Spread `json:"spread"`
	Noisy       bool   `json:"noisy,omitempty"`
	NoisyVsFP32 bool   `json:"noisy_vs_fp32,omitempty"`
	NoisyVsBF16 bool   `json:"noisy_vs_bf16,omitempty"`
}

// Ceiling is one row of Table 14: the realized throughput against the
// estimated ceiling (every linear at its roofline estimate, the rest of
// the pass as measured), the gap, and where the lost time goes.
type Ceiling struct {
	Model       string  `json:"model"`
	Precision   string  `json:"precision"`
	SeqPerS     float64 `json:"seq_per_s"`
	CeilSeqPerS float64 `json:"ceiling_seq_per_s"`
	GapPct      float64 `json:"gap_pct"`
	// LinearMs is the measured linear block, RoofMs its roofline
	// estimate; LinearLossMs their difference (all of the gap: the rest
	// of the pass is in both), AttentionMs and OtherMs the rest.
	LinearMs     float64 `json:"linear_ms"`
	RoofMs       float64 `json:"linear_roofline_ms"`
	LinearLossMs float64 `json:"linear_loss_ms"`
	AttentionMs  float64 `json:"attention_ms"`
	OtherMs      float64 `json:"other_ms"`
	// Noisy: the realized figure is noisy.
	Noisy bool `json:"noisy,omitempty"`
}

// AccuracyRow is one row of Table 15.
type AccuracyRow struct {
	Model     string   `json:"model"`
	Task      string   `json:"task"`
	Precision string   `json:"precision"`
	N         int      `json:"n"`
	Accuracy  *float64 `json:"accuracy,omitempty"`
	Agreement *float64 `json:"agreement_with_fp32,omitempty"`
	F1        *float64 `json:"f1,omitempty"`
	EM        *float64 `json:"exact_match,omitempty"`
}

// PaperReport is every figure of a run.
type PaperReport struct {
	Meta     PaperMeta     `json:"meta"`
	Hotspots []Hotspot     `json:"table3_hotspots"`
	Peaks    Peaks         `json:"table4_peaks"`
	Model    string        `json:"table5_model"`
	ModelSeq int           `json:"table5_seq"`
	Shapes   []PaperShape  `json:"table5_shapes"`
	GEMMs    []GEMMFigure  `json:"table6_7_gemms"`
	Speedups []Speedup     `json:"table11_13_speedups"`
	Ceilings []Ceiling     `json:"table14_ceilings"`
	Accuracy []AccuracyRow `json:"table15_accuracy"`
	// Models are the raw bench model reports.
	Models []*ModelReport `json:"models"`
	// Notes are what the run could not measure, and why.
	Notes []string `json:"notes,omitempty"`
	// Parts are the estimated parts after the peaks (EstimatePaper) and
	// Actual what each took, in seconds; PeakRSS is the process's peak
	// resident memory at the end of the measurements (VmHWM; 0 where not
	// known).
	Parts   []EstimatedPart `json:"estimated_parts,omitempty"`
	Actual  []float64       `json:"actual_part_seconds,omitempty"`
	PeakRSS int64           `json:"peak_rss_bytes,omitempty"`
}

// DTypeOf is the GEMM data type of a precision: "int8", "bf16" or "fp32".
func DTypeOf(p models.Precision) string {
	switch {
	case p.Int8():
		return "int8"
	case p == models.PrecisionBF16:
		return "bf16"
	}
	return "fp32"
}

// PaperDTypes are the GEMM data types of the tables.
var PaperDTypes = []string{"fp32", "bf16", "int8"}

// dtypeBytes are the bytes of one element of A, B and C: u8 x s8 -> f32
// for int8, bf16 x bf16 -> f32, f32 x f32 -> f32.
func dtypeBytes(dtype string) (a, b, c float64) {
	switch dtype {
	case "int8":
		return 1, 1, 4
	case "bf16":
		return 2, 2, 4
	}
	return 4, 4, 4
}

// ArithmeticIntensity is 2MNK over the bytes of A (MxK), B (KxN) and C
// (MxN) at dtype: each read or written once, the ideal of a GEMM whose
// blocking keeps its tiles in cache.
func ArithmeticIntensity(m, k, n int, dtype string) float64 {
	a, b, c := dtypeBytes(dtype)
	bytes := a*float64(m)*float64(k) + b*float64(k)*float64(n) + c*float64(m)*float64(n)
	return 2 * float64(m) * float64(k) * float64(n) / bytes
}

// RooflineGOPS is min(peak, ai x bw): the attainable GOP/s of a kernel of
// arithmetic intensity ai (ops/byte) on a machine of that peak (GOP/s)
// and bandwidth (GB/s).
func RooflineGOPS(ai, peakGOPS, bwGBps float64) float64 { return math.Min(peakGOPS, ai*bwGBps) }

// ModelShapes are the linear GEMMs of one pass of a model of config c on
// batch sequences of seq tokens: QKV (fused), attention output, FFN1 and
// FFN2, each once per layer.
func ModelShapes(c models.Config, seq, batch int) []PaperShape {
	m, h, in := seq*batch, c.Hidden, c.Intermediate
	mk := func(name string, k, n int) PaperShape {
		s := PaperShape{Name: name, M: m, K: k, N: n, Count: c.Layers, AI: map[string]float64{}}
		for _, d := range PaperDTypes {
			s.AI[d] = ArithmeticIntensity(m, k, n, d)
		}
		return s
	}
	return []PaperShape{mk("qkv", h, 3*h), mk("attn-out", h, h), mk("ffn1", h, in), mk("ffn2", in, h)}
}

// peakOf is the peak of dtype in f (GOP/s; 0 where f has none).
func peakOf(f peak.Figures, dtype string) float64 {
	switch dtype {
	case "int8":
		return f.Int8()
	case "bf16":
		return f.BF16GFLOPS
	}
	return f.FP32GFLOPS
}

// int8Kind names the INT8 figure Figures.Int8 takes.
func int8Kind(f peak.Figures) string {
	switch {
	case f.VNNIGOPS > 0:
		return "AVX512-VNNI VPDPBUSD zmm"
	case f.AVXVNNIGOPS > 0:
		return "AVX-VNNI VPDPBUSD ymm"
	case f.AVX512Int16GOPS > 0:
		return "VPMADDWD zmm"
	case f.AVX2Int8GOPS > 0:
		return "VPMADDWD ymm"
	}
	return "none"
}

// measurePeaks measures one core's peaks, then threads cores' at once
// (each goroutine on its own locked thread; the sum).
func measurePeaks(d time.Duration, threads int) (one, all peak.Figures) {
	runtime.LockOSThread()
	one = peak.Measure(d)
	runtime.UnlockOSThread()
	if threads <= 1 {
		return one, one
	}
	figs := make([]peak.Figures, threads)
	var wg sync.WaitGroup
	for i := range figs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			figs[i] = peak.Measure(d)
		}()
	}
	wg.Wait()
	for _, f := range figs {
		all.FP32GFLOPS += f.FP32GFLOPS
		all.VNNIGOPS += f.VNNIGOPS
		all.BF16GFLOPS += f.BF16GFLOPS
		all.AVX2Int8GOPS += f.AVX2Int8GOPS
		all.AVX512Int16GOPS += f.AVX512Int16GOPS
		all.AVXVNNIGOPS += f.AVXVNNIGOPS
	}
	return one, all
}

// DefaultPaperPrecisions are fp32, bf16 where f has a bf16 path, and both
// INT8 precisions.
func DefaultPaperPrecisions(f cpu.Features) []models.Precision {
	p := []models.Precision{models.PrecisionFP32}
	if f.BF16Path() != cpu.ISANone {
		p = append(p, models.PrecisionBF16)
	}
	return append(p, models.PrecisionInt8Static, models.PrecisionInt8Dynamic)
}

// PaperSteps is the number of steps Paper reports for o's models: the
// peaks, the triad, the GEMMs, then one per model.
func PaperSteps(o PaperOptions) int {
	if o.Models == nil {
		return 3 + len(PaperModels)
	}
	return 3 + len(o.Models)
}

// Paper measures Tables 3-14 (Table 15, the accuracy, is the caller's:
// cmd/int8bert runs eval for it) in one run.
func Paper(ctx context.Context, o PaperOptions) (*PaperReport, error) {
	if o.Models == nil {
		o.Models = PaperModels
	}
	o.Batch, o.Threads, o.Instances = max(o.Batch, 1), max(o.Threads, 1), max(o.Instances, 1)
	if o.PeakTime <= 0 {
		o.PeakTime = 300 * time.Millisecond
	}
	for _, m := range o.Models {
		if m.Arch == "" || m.Seq < 1 {
			return nil, fmt.Errorf("bench: paper: model %q at seq %d: want an architecture or folder and a positive length: %w", m.Arch, m.Seq, models.ErrConfig)
		}
	}
	sel, err := syncOr(o.Selector)
	if err != nil {
		return nil, err
	}
	if o.Precisions == nil {
		o.Precisions = DefaultPaperPrecisions(sel.Features())
	}
	steps := PaperSteps(o)
	step := 0
	say := func(what string) {
		step++
		if o.Progress != nil {
			o.Progress(step, steps, what)
		}
	}
	rep := &PaperReport{}

	// Table 4.
	say("peaks of one core and of all used cores")
	used := o.Threads * o.Instances
	one, all := measurePeaks(o.PeakTime, used)
	pk := Peaks{OneCore: one, AllCores: all, Threads: used, Int8Kind: int8Kind(one),
		Balance: map[string]float64{}, BalanceOne: map[string]float64{}, PeakByDType: map[string]float64{}, PeakByDType1: map[string]float64{}}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	say("memory bandwidth (triad)")
	if pk.TriadOne, err = Triad(ctx, TriadOptions{Bytes: o.TriadBytes, Threads: 1}); err != nil {
		return nil, err
	}
	pk.TriadAll = pk.TriadOne
	if used > 1 {
		if pk.TriadAll, err = Triad(ctx, TriadOptions{Bytes: o.TriadBytes, Threads: used}); err != nil {
			return nil, err
		}
	}
	for _, d := range PaperDTypes {
		// The roofline of one pass (one instance's threads): the
		// all-core figure's share of them.
		pk.PeakByDType[d], pk.PeakByDType1[d] = peakOf(all, d)/float64(used)*float64(o.Threads), peakOf(one, d)
		if pk.TriadAll.BestGBps > 0 {
			pk.Balance[d] = peakOf(all, d) / pk.TriadAll.BestGBps
		}
		if pk.TriadOne.BestGBps > 0 {
			pk.BalanceOne[d] = pk.PeakByDType1[d] / pk.TriadOne.BestGBps
		}
	}
	rep.Peaks = pk
	// One instance's share of the bandwidth.
	bw := pk.TriadAll.BestGBps / float64(o.Instances)
	pk.PassGBps, rep.Peaks.PassGBps = bw, bw
	cached := map[string]bool{}
	for _, key := range sel.KnownKeys() {
		var op string
		var m, k, n int
		if _, err := fmt.Sscanf(key, "%s m=%d k=%d n=%d", &op, &m, &k, &n); err == nil && strings.HasSuffix(key, fmt.Sprintf("threads=%d", o.Threads)) {
			cached[fmt.Sprint(op, m, k, n)] = true
		}
	}
	rep.Parts = EstimatePaper(o, one.FP32GFLOPS, func(op string, m, k, n int) bool { return cached[fmt.Sprint(op, m, k, n)] })
	partStart := time.Now()
	// partDone records the part that just ended and tells o.Estimate the
	// rest, its estimate scaled by actual over estimated so far.
	partDone := func() {
		i := len(rep.Actual)
		if i >= len(rep.Parts) {
			return
		}
		rep.Actual = append(rep.Actual, time.Since(partStart).Seconds())
		partStart = time.Now()
		if o.Estimate == nil || i+1 >= len(rep.Parts) {
			return
		}
		// The models' parts alone: the GEMM step costs differently.
		var est, act float64
		for j := 1; j <= i; j++ {
			est, act = est+rep.Parts[j].Time.Seconds(), act+rep.Actual[j]
		}
		if est > 0 {
			o.Estimate(time.Duration(SumParts(rep.Parts[i+1:]).Seconds() * act / est * 1e9))
		}
	}
	if o.Estimate != nil && len(rep.Parts) > 0 {
		o.Estimate(SumParts(rep.Parts))
	}

	// Tables 5-7: the first model's shapes.
	say(fmt.Sprintf("GEMM shapes of %s at seq %d", o.Models[0].Arch, o.Models[0].Seq))
	cfg0, err := configOf(ctx, o.Models[0].Arch, sel)
	if err != nil {
		return nil, err
	}
	rep.Model, rep.ModelSeq = o.Models[0].Arch, o.Models[0].Seq
	rep.Shapes = ModelShapes(cfg0, o.Models[0].Seq, o.Batch)
	var shapes []Shape
	for _, s := range rep.Shapes {
		shapes = append(shapes, Shape{Name: s.Name, M: s.M, K: s.K, N: s.N})
	}
	dts := []string{"int8", "fp32"}
	if slices.Contains(o.Precisions, models.PrecisionBF16) {
		dts = append(dts, "bf16")
	}
	gr, err := GEMM(ctx, GEMMOptions{Threads: o.Threads, RepTime: o.GEMMRepTime, Reps: o.GEMMReps, PeakTime: o.PeakTime,
		Shapes: shapes, Epilogues: GEMMEpilogues[:1], DTypes: dts})
	if err != nil {
		return nil, err
	}
	for _, s := range rep.Shapes {
		for _, d := range dts {
			if f, ok := chosenFigure(gr, s, d, pk.PeakByDType[d], bw); ok {
				rep.GEMMs = append(rep.GEMMs, f)
			}
		}
	}
	partDone()

	// Tables 3 and 11-14.
	for _, pm := range o.Models {
		say(fmt.Sprintf("%s at seq %d: %v", pm.Arch, pm.Seq, o.Precisions))
		mr, err := Model(ctx, ModelOptions{Arch: pm.Arch, Seq: pm.Seq, Batch: o.Batch, Threads: o.Threads, Precisions: o.Precisions,
			MinTime: o.MinTime, Reps: o.Reps, PeakTime: o.PeakTime, Selector: sel, Instances: o.Instances, Pin: o.Instances > 1})
		if err != nil {
			return nil, fmt.Errorf("bench: paper: %s: %w", pm.Arch, err)
		}
		rep.Models = append(rep.Models, mr)
		cfg, err := configOf(ctx, pm.Arch, sel)
		if err != nil {
			return nil, err
		}
		rep.addModel(pm, mr, ModelShapes(cfg, pm.Seq, o.Batch), pk, bw)
		if _, err := LookupArch(pm.Arch); err == nil {
			partDone() // folders are not among the estimated parts
		}
	}
	rep.PeakRSS = PeakResidentBytes()
	return rep, nil
}

// configOf is the encoder shape of an architecture or folder.
func configOf(ctx context.Context, arch string, sel *selector.Selector) (models.Config, error) {
	if a, err := LookupArch(arch); err == nil {
		return a.ModelConfig()
	}
	m, err := loadFP32(ctx, &ModelOptions{Arch: arch, Threads: 1}, sel)
	if err != nil {
		return models.Config{}, err
	}
	defer m.Close()
	return m.Config(), nil
}

// chosenFigure is the selector's pick on shape s at dtype d in gr, with
// its roofline figures (ok false when it was not measured).
func chosenFigure(gr *GEMMReport, s PaperShape, d string, peakGOPS, bw float64) (GEMMFigure, bool) {
	var best *GEMMResult
	for i := range gr.Results {
		r := &gr.Results[i]
		if r.M != s.M || r.K != s.K || r.N != s.N || r.DType != d {
			continue
		}
		if r.Chosen {
			best = r
			break
		}
		if best == nil || r.GOPS > best.GOPS {
			best = r
		}
	}
	if best == nil {
		return GEMMFigure{}, false
	}
	ai := s.AI[d]
	f := GEMMFigure{Shape: fmt.Sprintf("%s %dx%dx%d", s.Name, s.M, s.K, s.N), DType: d, Kernel: best.Kernel, GOPS: best.GOPS, AI: ai,
		EffGBps: best.GOPS / ai, Roofline: RooflineGOPS(ai, peakGOPS, bw), Bound: "compute", Spread: best.Spread, Noisy: best.Noise.Noisy}
	if ai*bw < peakGOPS {
		f.Bound = "memory"
	}
	if f.Roofline > 0 {
		f.PctRoof = 100 * f.GOPS / f.Roofline
	}
	return f, true
}

// addModel adds one model's rows to Tables 3, 11-13 and 14.
func (rep *PaperReport) addModel(pm PaperModel, mr *ModelReport, shapes []PaperShape, pk Peaks, bw float64) {
	var fp32, bf16 *ModelResult
	for i := range mr.Results {
		switch mr.Results[i].Precision {
		case models.PrecisionFP32.String():
			fp32 = &mr.Results[i]
		case models.PrecisionBF16.String():
			bf16 = &mr.Results[i]
		}
	}
	ratio := func(a, b float64) float64 {
		if b <= 0 {
			return 0
		}
		return a / b
	}
	for _, r := range mr.Results {
		pct := func(ms float64) float64 { return 100 * ms / r.MsPerBatch }
		rep.Hotspots = append(rep.Hotspots, Hotspot{Model: pm.Arch, Precision: r.Precision, MsPerBatch: r.MsPerBatch,
			LinearPct: pct(r.LinearMs), AttentionPct: pct(r.AttentionMs), LayerNormPct: pct(r.LayerNormMs),
			OtherPct: pct(r.OtherMs - r.LayerNormMs), Spread: r.Spread, Noisy: r.Noise.Noisy})
		sp := Speedup{Model: pm.Arch, Seq: pm.Seq, Precision: r.Precision, SeqPerS: r.SeqPerS, MsPerBatch: r.MsPerBatch, LinearMs: r.LinearMs,
			Spread: r.Spread, Noisy: r.Noise.Noisy}
		if fp32 != nil {
			sp.VsFP32, sp.LinearVsFP32 = ratio(fp32.MsPerBatch, r.MsPerBatch), ratio(fp32.LinearMs, r.LinearMs)
			sp.NoisyVsFP32 = r.Noise.Noisy || fp32.Noise.Noisy
		}
		if bf16 != nil {
			sp.VsBF16, sp.LinearVsBF16 = ratio(bf16.MsPerBatch, r.MsPerBatch), ratio(bf16.LinearMs, r.LinearMs)
			sp.NoisyVsBF16 = r.Noise.Noisy || bf16.Noise.Noisy
		}
		rep.Speedups = append(rep.Speedups, sp)

		p, err := models.ParsePrecision(r.Precision)
		if err != nil {
			continue
		}
		d := DTypeOf(p)
		roof := 0.0
		for _, s := range shapes {
			g := RooflineGOPS(s.AI[d], pk.PeakByDType[d], bw)
			if g <= 0 {
				roof = 0
				break
			}
			roof += float64(s.Count) * s.Ops() / g / 1e6 // ms
		}
		if roof <= 0 {
			continue
		}
		ceilMs := roof + r.AttentionMs + r.OtherMs
		c := Ceiling{Model: pm.Arch, Precision: r.Precision, SeqPerS: r.SeqPerS, CeilSeqPerS: float64(mr.Batch) / ceilMs * 1e3,
			LinearMs: r.LinearMs, RoofMs: roof, LinearLossMs: r.LinearMs - roof, AttentionMs: r.AttentionMs, OtherMs: r.OtherMs, Noisy: r.Noise.Noisy}
		c.GapPct = 100 * (1 - c.SeqPerS/c.CeilSeqPerS)
		rep.Ceilings = append(rep.Ceilings, c)
	}
}
