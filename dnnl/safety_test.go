//go:build cgo && !nodnnl

package dnnl_test

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/int8bert/int8bert/dnnl"
)

// TestConcurrentExecute: 32 goroutines share one primitive and one packed
// weight; every result must equal a single-goroutine run bit for bit.
func TestConcurrentExecute(t *testing.T) {
	eng := engine(t)
	cfg := dnnl.MatMulConfig{M: dnnl.RuntimeM, K: 96, N: 80, Src: dnnl.U8, Weights: dnnl.S8, Dst: dnnl.F32,
		SrcScale: true, WeightScales: true, Bias: true, PostOps: []dnnl.PostOp{{Kind: dnnl.GELUErf}}}
	fit(t, &cfg, 0)
	const goroutines, rounds = 32, 8
	problems := make([]*problem, goroutines)
	for g := range problems {
		problems[g] = makeProblem(t, cfg, 1+g*3, uint64(500+g))
	}
	mm, err := eng.NewMatMul(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer mm.Close()
	// All problems use the weights of problem 0 (same seed for weights is not
	// needed: the reference below is the serial run, not makeProblem's).
	w, err := mm.PackWeights(problems[0].w, problems[0].scales, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	run := func(p *problem) []float32 {
		a := p.args
		a.M, a.Src, a.Threads = p.m, p.src, 1
		dst := make([]float32, p.m*cfg.N)
		a.Dst = dst
		if err := mm.Execute(w, &a); err != nil {
			t.Error(err)
		}
		return dst
	}
	serial := make([][]float32, goroutines)
	for g, p := range problems {
		serial[g] = run(p)
	}
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				got := run(problems[g])
				for i := range got {
					if got[i] != serial[g][i] {
						t.Errorf("goroutine %d round %d: [%d] = %v, serial %v", g, r, i, got[i], serial[g][i])
						return
					}
				}
			}
		}(g)
	}
	wg.Wait()
}

func rssBytes(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skipf("resident memory is not readable here: %v", err)
	}
	f := strings.Fields(string(b))
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// TestNoLeak: 20,000 create / pack / execute / Close cycles keep resident
// memory flat after a warm-up (a leaked 32x48 int8 weight alone would add
// 30 MB, its primitive far more). The bound, 10 MB, leaves room for the
// allocators' noise; without the warm-up, -race grew ~17 MB once and then
// stayed flat.
func TestNoLeak(t *testing.T) {
	eng := engine(t)
	cfg := dnnl.MatMulConfig{M: 4, K: 48, N: 32, Src: dnnl.U8, Weights: dnnl.S8, Dst: dnnl.F32,
		SrcScale: true, WeightScales: true, Bias: true, PostOps: []dnnl.PostOp{{Kind: dnnl.GELUErf}}}
	fit(t, &cfg, 42)
	p := makeProblem(t, cfg, 4, 42)
	cycle := func() {
		mm, err := eng.NewMatMul(cfg)
		if err != nil {
			t.Fatal(err)
		}
		w, err := mm.PackWeights(p.w, p.scales, 1)
		if err != nil {
			t.Fatal(err)
		}
		a := p.args
		a.M, a.Src, a.Dst, a.Threads = 4, p.src, make([]float32, 4*32), 1
		if err := mm.Execute(w, &a); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := mm.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Warm up until the allocators (Go's, C's, the race detector's) have
	// reached their plateau: with -race that takes a few thousand cycles.
	for i := 0; i < 5000; i++ {
		cycle()
	}
	runtime.GC()
	before := rssBytes(t)
	const cycles = 20000
	for i := 0; i < cycles; i++ {
		cycle()
	}
	runtime.GC()
	after := rssBytes(t)
	t.Logf("resident memory: %.1f MB before, %.1f MB after %d cycles", float64(before)/1e6, float64(after)/1e6, cycles)
	if after-before > 10<<20 {
		t.Errorf("resident memory grew by %.1f MB over %d cycles", float64(after-before)/1e6, cycles)
	}
}

// TestMisuse: every misuse is an error, never a crash.
func TestMisuse(t *testing.T) {
	eng := engine(t)
	cfg := dnnl.MatMulConfig{M: 4, K: 10, N: 6, Src: dnnl.U8, Weights: dnnl.S8, Dst: dnnl.F32,
		SrcScale: true, WeightScales: true, Bias: true,
		PostOps: []dnnl.PostOp{{Kind: dnnl.Add, Shape: dnnl.PerRow}}}
	fit(t, &cfg, 0)
	mm, err := eng.NewMatMul(cfg)
	if err != nil {
		t.Fatal(err)
	}
	wdata := make([]int8, 60)
	scales := []float32{1, 1, 1, 1, 1, 1}
	w, err := mm.PackWeights(wdata, scales, 1)
	if err != nil {
		t.Fatal(err)
	}
	good := func() *dnnl.Args {
		return &dnnl.Args{M: 4, Src: make([]uint8, 40), Dst: make([]float32, 24), Bias: make([]float32, 6),
			SrcScale: 1, Binary: [][]float32{make([]float32, 4)}}
	}
	if err := mm.Execute(w, good()); err != nil {
		t.Fatalf("the good call fails: %v", err)
	}
	invalid := map[string]func(a *dnnl.Args){
		"short src":        func(a *dnnl.Args) { a.Src = make([]uint8, 39) },
		"nil src":          func(a *dnnl.Args) { a.Src = nil },
		"nil src slice":    func(a *dnnl.Args) { a.Src = []uint8(nil) },
		"src wrong type":   func(a *dnnl.Args) { a.Src = make([]int8, 40) },
		"src not a slice":  func(a *dnnl.Args) { a.Src = 3 },
		"short dst":        func(a *dnnl.Args) { a.Dst = make([]float32, 23) },
		"nil dst":          func(a *dnnl.Args) { a.Dst = nil },
		"dst wrong type":   func(a *dnnl.Args) { a.Dst = make([]int32, 24) },
		"short bias":       func(a *dnnl.Args) { a.Bias = a.Bias[:5] },
		"nil bias":         func(a *dnnl.Args) { a.Bias = nil },
		"wrong m":          func(a *dnnl.Args) { a.M = 5 },
		"negative m":       func(a *dnnl.Args) { a.M = -1 },
		"short binary":     func(a *dnnl.Args) { a.Binary[0] = a.Binary[0][:3] },
		"missing binary":   func(a *dnnl.Args) { a.Binary = nil },
		"extra binary":     func(a *dnnl.Args) { a.Binary = append(a.Binary, nil) },
		"NaN src scale":    func(a *dnnl.Args) { a.SrcScale = float32(nan()) },
		"negative threads": func(a *dnnl.Args) { a.Threads = -2 },
	}
	for name, mutate := range invalid {
		a := good()
		mutate(a)
		if err := mm.Execute(w, a); !errors.Is(err, dnnl.ErrInvalidArgument) {
			t.Errorf("%s: got %v, want ErrInvalidArgument", name, err)
		}
	}
	if err := mm.Execute(nil, good()); !errors.Is(err, dnnl.ErrInvalidArgument) {
		t.Errorf("nil weights: got %v", err)
	}
	if err := mm.Execute(w, nil); !errors.Is(err, dnnl.ErrInvalidArgument) {
		t.Errorf("nil args: got %v", err)
	}
	// Packing: K mismatch, wrong type, scales.
	packCases := map[string]func() (*dnnl.Weights, error){
		"k mismatch":     func() (*dnnl.Weights, error) { return mm.PackWeights(make([]int8, 66), scales, 1) },
		"nil weights":    func() (*dnnl.Weights, error) { return mm.PackWeights(nil, scales, 1) },
		"nil int8 slice": func() (*dnnl.Weights, error) { return mm.PackWeights([]int8(nil), scales, 1) },
		"f32 for int8":   func() (*dnnl.Weights, error) { return mm.PackWeights(make([]float32, 60), scales, 1) },
		"missing scales": func() (*dnnl.Weights, error) { return mm.PackWeights(wdata, nil, 1) },
		"short scales":   func() (*dnnl.Weights, error) { return mm.PackWeights(wdata, scales[:5], 1) },
		"Inf scale": func() (*dnnl.Weights, error) {
			return mm.PackWeights(wdata, []float32{1, 1, 1, float32(inf()), 1, 1}, 1)
		},
		"unsupported type": func() (*dnnl.Weights, error) { return mm.PackWeights([]int64{1}, scales, 1) },
	}
	for name, f := range packCases {
		if w2, err := f(); !errors.Is(err, dnnl.ErrInvalidArgument) {
			t.Errorf("pack %s: got %v, want ErrInvalidArgument", name, err)
			if w2 != nil {
				w2.Close()
			}
		}
	}
	// Weights of another shape.
	otherCfg := dnnl.MatMulConfig{M: 4, K: 12, N: 6, Src: dnnl.U8, Weights: dnnl.S8, Dst: dnnl.F32, SrcScale: true, WeightScales: true}
	fit(t, &otherCfg, 0)
	other, err := eng.NewMatMul(otherCfg)
	if err != nil {
		t.Fatal(err)
	}
	ow, err := other.PackWeights(make([]int8, 72), scales, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := mm.Execute(ow, good()); !errors.Is(err, dnnl.ErrInvalidArgument) {
		t.Errorf("weights of another shape: got %v", err)
	}
	if mm.Accepts(ow) {
		t.Error("Accepts weights of another shape")
	}
	// Engine close while primitives are open.
	if err := eng.Close(); !errors.Is(err, dnnl.ErrInUse) {
		t.Errorf("engine close with open primitives: got %v", err)
	}
	// Use after Close, double Close.
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mm.Execute(w, good()); !errors.Is(err, dnnl.ErrClosed) {
		t.Errorf("closed weights: got %v", err)
	}
	if err := w.Close(); !errors.Is(err, dnnl.ErrClosed) {
		t.Errorf("double weights close: got %v", err)
	}
	if err := mm.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mm.Execute(ow, good()); !errors.Is(err, dnnl.ErrClosed) && !errors.Is(err, dnnl.ErrInvalidArgument) {
		t.Errorf("closed matmul: got %v", err)
	}
	w3, err := other.PackWeights(make([]int8, 72), scales, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w3.Close()
	if err := mm.Close(); !errors.Is(err, dnnl.ErrClosed) {
		t.Errorf("double matmul close: got %v", err)
	}
	if _, err := mm.PackWeights(wdata, scales, 1); !errors.Is(err, dnnl.ErrClosed) {
		t.Errorf("pack after close: got %v", err)
	}
	if mm.Impl() != "" {
		t.Error("Impl after Close is not empty")
	}
	ow.Close()
	other.Close()
	// A private engine: close, then use.
	e2, err := dnnl.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	if err := e2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e2.Close(); !errors.Is(err, dnnl.ErrClosed) {
		t.Errorf("double engine close: got %v", err)
	}
	if _, err := e2.NewMatMul(cfg); !errors.Is(err, dnnl.ErrClosed) {
		t.Errorf("matmul on closed engine: got %v", err)
	}
	var nilEng *dnnl.Engine
	if _, err := nilEng.NewMatMul(cfg); !errors.Is(err, dnnl.ErrInvalidArgument) {
		t.Errorf("nil engine: got %v", err)
	}
}

// TestUnsupportedConfigs: combinations oneDNN cannot do are refused before
// any C call, with the reason.
func TestUnsupportedConfigs(t *testing.T) {
	eng := engine(t)
	for name, cfg := range map[string]dnnl.MatMulConfig{
		"u8 x f32":          {M: 2, K: 4, N: 4, Src: dnnl.U8, Weights: dnnl.F32, Dst: dnnl.F32},
		"f32 x s8":          {M: 2, K: 4, N: 4, Src: dnnl.F32, Weights: dnnl.S8, Dst: dnnl.F32},
		"u8 x u8":           {M: 2, K: 4, N: 4, Src: dnnl.U8, Weights: dnnl.U8, Dst: dnnl.S32},
		"bf16 -> s32":       {M: 2, K: 4, N: 4, Src: dnnl.BF16, Weights: dnnl.BF16, Dst: dnnl.S32},
		"f32 with scales":   {M: 2, K: 4, N: 4, Src: dnnl.F32, Weights: dnnl.F32, Dst: dnnl.F32, SrcScale: true},
		"s8 dst no scale":   {M: 2, K: 4, N: 4, Src: dnnl.U8, Weights: dnnl.S8, Dst: dnnl.S8},
		"f32 dst zp":        {M: 2, K: 4, N: 4, Src: dnnl.U8, Weights: dnnl.S8, Dst: dnnl.F32, DstZeroPoint: 3},
		"k zero":            {M: 2, K: 0, N: 4, Src: dnnl.F32, Weights: dnnl.F32, Dst: dnnl.F32},
		"negative m":        {M: -1, K: 4, N: 4, Src: dnnl.F32, Weights: dnnl.F32, Dst: dnnl.F32},
		"unknown type":      {M: 2, K: 4, N: 4, Src: 42, Weights: dnnl.F32, Dst: dnnl.F32},
		"unknown post-op":   {M: 2, K: 4, N: 4, Src: dnnl.F32, Weights: dnnl.F32, Dst: dnnl.F32, PostOps: []dnnl.PostOp{{Kind: 99}}},
		"add without shape": {M: 2, K: 4, N: 4, Src: dnnl.F32, Weights: dnnl.F32, Dst: dnnl.F32, PostOps: []dnnl.PostOp{{Kind: dnnl.Add}}},
		"too many post-ops": {M: 2, K: 4, N: 4, Src: dnnl.F32, Weights: dnnl.F32, Dst: dnnl.F32, PostOps: make([]dnnl.PostOp, 8)},
	} {
		if mm, err := eng.NewMatMul(cfg); !errors.Is(err, dnnl.ErrInvalidArgument) {
			t.Errorf("%s: got %v, want ErrInvalidArgument", name, err)
			if mm != nil {
				mm.Close()
			}
		}
	}
}
