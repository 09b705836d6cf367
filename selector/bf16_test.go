package selector

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/dnnl"
	"github.com/int8bert/int8bert/kernels"
	"github.com/stretchr/testify/require"
)

// wantBF16 is kernels.GemmBF16Ref's result with ldc, and each value's
// tolerance (bf16RelTol of sum |a||w| of the rounded operands, and the
// epilogue's terms).
func (p *f32Problem) wantBF16(t *testing.T, ldc int) ([]float32, []float64) {
	t.Helper()
	c := make([]float32, p.m*ldc)
	abs := make([]float64, p.m*p.n)
	if err := kernels.GemmBF16Ref(p.m, p.n, p.k, p.a, p.lda, p.w, p.ldw, c, ldc, p.ep, abs); err != nil {
		t.Fatal(err)
	}
	return c, f32Tolerance(p.m, p.n, abs, p.ep, bf16RelTol, f32AbsTol)
}

// runLinearBF16 runs p through a BF16 Linear of s with padded strides and
// checks the result against kernels.GemmBF16Ref.
func runLinearBF16(t *testing.T, s *Selector, p *f32Problem, pad, threads int) Choice {
	t.Helper()
	l, err := s.NewLinearBF16(p.n, p.k, p.w, p.ldw)
	c, ldc, ch := runFloatLinear(t, s, l, err, p, pad, BF16Key(p.m, p.k, p.n, p.ep, threads), func(c []float32, ldc int) *kernels.GEMMBF16 {
		return &kernels.GEMMBF16{M: p.m, A: p.a, Lda: p.lda, Ep: p.ep, C: c, Ldc: ldc, Threads: threads}
	})
	want, tol := p.wantBF16(t, ldc)
	bad := 0
	for i := 0; i < p.m; i++ {
		for j := 0; j < ldc; j++ {
			g, w := float64(c[i*ldc+j]), float64(want[i*ldc+j])
			if j >= p.n {
				if g != -7 {
					t.Fatalf("%v: padding [%d][%d] written: %v", p.kind, i, j, g)
				}
				continue
			}
			if !(math.Abs(g-w) <= tol[i*p.n+j]) {
				if bad < 3 {
					t.Errorf("%v m=%d threads=%d with %s: [%d][%d] = %v, want %v (tolerance %.3g)", p.kind, p.m, threads, ch.Kernel, i, j, g, w, tol[i*p.n+j])
				}
				bad++
			}
		}
	}
	return ch
}

func TestLinearBF16EveryKind(t *testing.T) {
	var w warnings
	s := newSelector(t, testOptions(t, &w))
	cands := s.CandidatesOf(OpBF16)
	if !slices.Contains(cands, kernels.GenericBF16.Name) || dnnl.Available != slices.Contains(cands, OneDNN) {
		t.Fatalf("bf16 candidates %v: want the generic kernel, and onednn iff dnnl.Available (%v)", cands, dnnl.Available)
	}
	for _, k := range kernels.BF16Kernels() {
		if k.Available(cpu.X86) != slices.Contains(cands, k.Name) {
			t.Errorf("bf16 candidates %v: %s available %v", cands, k.Name, k.Available(cpu.X86))
		}
	}
	if !cpu.X86.AVX512BF16 {
		t.Logf("CPU lacks AVX512-BF16 (%s): the generic kernel (and oneDNN) only", cpu.X86)
	}
	for i, kind := range f32Kinds {
		for _, m := range []int{1, 6, 19} {
			p := newF32Problem(t, uint64(10*i+m), m, 45, 50, kind, 3)
			ch := runLinearBF16(t, s, p, 5, 1)
			if len(ch.Measured) == 0 || ch.Measured[0].Kernel != ch.Kernel || ch.Forced != "" || !slices.Contains(cands, ch.Kernel) {
				t.Errorf("%s: choice %s is not the fastest measured: %+v", kind, ch.Kernel, ch.Measured)
			}
			for _, name := range cands {
				if !mentions(ch, name) {
					t.Errorf("%s m=%d: %s was neither measured nor excluded:\n%v", kind, m, name, ch)
				}
			}
			if m == 19 && kind == "bias+gelu/f32" {
				t.Logf("%s", ch)
			}
		}
	}
	// Threads, odd K, N past a tile, and the residual given as c itself.
	runLinearBF16(t, s, newF32Problem(t, 99, 19, 63, 70, "bias+gelu/f32", 0), 0, 2)
	p := newF32Problem(t, 98, 6, 41, 33, "bias+residual/f32", 2)
	l, err := s.NewLinearBF16(p.n, p.k, p.w, p.ldw)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ldc := p.ep.LdResidual
	want, tol := p.wantBF16(t, ldc)
	c := p.ep.Residual
	if err := l.Run(&kernels.GEMMBF16{M: p.m, A: p.a, Lda: p.lda, Ep: p.ep, C: c, Ldc: ldc, Threads: 1}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < p.m; i++ {
		for j := 0; j < p.n; j++ {
			if d := math.Abs(float64(c[i*ldc+j] - want[i*ldc+j])); d > tol[i*p.n+j] {
				t.Fatalf("in-place residual: [%d][%d] = %v, want %v", i, j, c[i*ldc+j], want[i*ldc+j])
			}
		}
	}
	if l.Bytes() < 4*p.n*p.k+2*p.n*p.k {
		t.Errorf("Bytes() = %d: the f32 copy and a bf16 packing take at least %d", l.Bytes(), 6*p.n*p.k)
	}
}

// TestBF16Tuning checks that on a CPU with AVX512-BF16 the tuning of a
// BERT-like key picks an AVX512-BF16 kernel (the generic one is far
// slower), and that forcing the ISA restricts the bf16 operation only.
func TestBF16Tuning(t *testing.T) {
	var w warnings
	key := BF16Key(64, 256, 256, &kernels.Epilogue{Bias: make([]float32, 256), Act: kernels.ActGELU}, 1)
	require.NoError(t, key.Validate())
	if !cpu.X86.AVX512BF16 || !cpu.X86.AVX512F || !cpu.X86.AVX512BW {
		o := testOptions(t, &w)
		o.Force = string(cpu.ISAAVX512BF16)
		_, err := New(o)
		if !errors.Is(err, ErrForced) {
			t.Errorf("forcing avx512-bf16 on a CPU without it: err = %v, want ErrForced", err)
		}
		t.Skipf("CPU lacks AVX512-BF16 (%s): no native bf16 kernel to tune", cpu.X86)
	}
	s := newSelector(t, testOptions(t, &w))
	ch, err := s.Tune(t.Context(), key)
	require.NoError(t, err)
	if ch.ISA != cpu.ISAAVX512BF16 && ch.Kernel != OneDNN {
		t.Errorf("tuned %v: want an avx512-bf16 kernel (or oneDNN)", ch)
	}
	t.Logf("%s", ch)
	o := testOptions(t, &w)
	o.Force = string(cpu.ISAAVX512BF16)
	fs := newSelector(t, o)
	if ops := fs.ForcedOps(); !slices.Equal(ops, []string{OpBF16, OpBF16Kernel}) {
		t.Errorf("forcing avx512-bf16 applies to %v, want [bf16 bf16-kernel]", ops)
	}
	fch, err := fs.Choose(key)
	require.NoError(t, err)
	if fch.ISA != cpu.ISAAVX512BF16 || fch.Forced != string(cpu.ISAAVX512BF16) {
		t.Errorf("forced avx512-bf16, chose %v", fch)
	}
	// Forcing one kernel by name.
	o = testOptions(t, &w)
	o.Force = "gemmBF16_6x64"
	ks := newSelector(t, o)
	kch, err := ks.Choose(key)
	require.NoError(t, err)
	if kch.Kernel != "gemmBF16_6x64" {
		t.Errorf("forced gemmBF16_6x64, chose %v", kch)
	}
}

// TestOneDNNBF16Candidate forces oneDNN on the bf16 operation where the
// build has it: it must run (or be declined with a reason) and match the
// reference.
func TestOneDNNBF16Candidate(t *testing.T) {
	if !dnnl.Available {
		t.Skip("oneDNN is not in this build (CGO_ENABLED=0 or nodnnl): no bf16 oneDNN candidate")
	}
	var w warnings
	o := testOptions(t, &w)
	o.Force = OneDNN
	s := newSelector(t, o)
	for i, kind := range []string{"none/f32", "bias+gelu/f32", "bias+residual/f32"} {
		p := newF32Problem(t, uint64(300+i), 6, 40, 33, kind, 2)
		key := BF16Key(p.m, p.k, p.n, p.ep, 1)
		if _, err := s.Choose(key); err != nil {
			t.Logf("%s: oneDNN declines the bf16 matmul here: %v", kind, err)
			continue
		}
		ch := runLinearBF16(t, s, p, 3, 1)
		if ch.Kernel != OneDNN || ch.Forced != OneDNN {
			t.Fatalf("%s: forced onednn, chose %v", kind, ch)
		}
		t.Logf("%s", ch)
	}
}

func TestLinearBF16Errors(t *testing.T) {
	var w warnings
	s := newSelector(t, testOptions(t, &w))
	p := newF32Problem(t, 4, 4, 16, 16, "bias+residual/f32", 0)
	l, err := s.NewLinearBF16(p.n, p.k, p.w, p.ldw)
	if err != nil {
		t.Fatal(err)
	}
	c := make([]float32, p.m*p.n)
	run := func(g kernels.GEMMBF16) error { return l.Run(&g) }
	for name, err := range map[string]error{
		"short a":        run(kernels.GEMMBF16{M: p.m, A: p.a[:10], Lda: p.lda, Ep: p.ep, C: c, Ldc: p.n}),
		"short c":        run(kernels.GEMMBF16{M: p.m, A: p.a, Lda: p.lda, Ep: p.ep, C: c[:5], Ldc: p.n}),
		"small ldc":      run(kernels.GEMMBF16{M: p.m, A: p.a, Lda: p.lda, Ep: p.ep, C: c, Ldc: p.n - 1}),
		"small lda":      run(kernels.GEMMBF16{M: p.m, A: p.a, Lda: p.k - 1, Ep: p.ep, C: c, Ldc: p.n}),
		"short bias":     run(kernels.GEMMBF16{M: p.m, A: p.a, Lda: p.lda, Ep: &kernels.Epilogue{Bias: []float32{1}}, C: c, Ldc: p.n}),
		"short residual": run(kernels.GEMMBF16{M: p.m, A: p.a, Lda: p.lda, Ep: &kernels.Epilogue{Residual: c[:p.n]}, C: c, Ldc: p.n}),
		"bad activation": run(kernels.GEMMBF16{M: p.m, A: p.a, Lda: p.lda, Ep: &kernels.Epilogue{Act: 9}, C: c, Ldc: p.n}),
		"a overlaps c":   run(kernels.GEMMBF16{M: 2, A: c, Lda: p.k, C: c[8:], Ldc: p.n}),
		"own b":          run(kernels.GEMMBF16{M: p.m, A: p.a, Lda: p.lda, B: &kernels.PackedBF16{}, C: c, Ldc: p.n}),
		"wrong n":        run(kernels.GEMMBF16{M: p.m, N: 3, A: p.a, Lda: p.lda, C: c, Ldc: p.n}),
		"nil":            l.Run(nil),
	} {
		if !errors.Is(err, kernels.ErrShape) {
			t.Errorf("%s: err = %v, want ErrShape", name, err)
		}
	}
	if err := l.Run(&kernels.GEMMBF16{Lda: p.lda, Ldc: p.n}); err != nil {
		t.Errorf("m=0: %v", err)
	}
	if _, err := l.Key(&kernels.GEMMBF16{Lda: p.lda, Ldc: p.n}); !errors.Is(err, ErrKey) {
		t.Errorf("key of m=0: %v", err)
	}
	for _, bad := range [][3]int{{4, 4, 3}, {0, 4, 4}, {4, 0, 4}, {-1, 4, 4}} {
		if _, err := s.NewLinearBF16(bad[0], bad[1], make([]float32, 3), bad[2]); !errors.Is(err, kernels.ErrShape) {
			t.Errorf("NewLinearBF16%v: err = %v", bad, err)
		}
	}
	if _, err := s.NewLinearBF16(4, 4, nil, 4); !errors.Is(err, kernels.ErrShape) {
		t.Errorf("NewLinearBF16 nil w: err = %v", err)
	}
	// Keys of another epilogue or malformed keys are errors, not panics.
	for _, k := range []Key{
		{Op: OpBF16, M: 4, K: 16, N: 16, Epilogue: EpilogueKind{Out: U8}, Threads: 1},
		{Op: OpBF16, M: 4, K: 16, N: 16, Epilogue: EpilogueKind{Out: F32, ZeroPoint: true}, Threads: 1},
		{Op: OpBF16, M: 3 * 7, K: 16, N: 16, Epilogue: EpilogueKind{Out: F32}, Threads: 1},
		{Op: OpBF16, M: 4, K: 0, N: 16, Epilogue: EpilogueKind{Out: F32}, Threads: 1},
	} {
		if _, err := s.Choose(k); !errors.Is(err, ErrKey) {
			t.Errorf("Choose(%v): err = %v, want ErrKey", k, err)
		}
	}
	if err := l.Prepare(F32Key(4, 16, 16, nil, 1)); !errors.Is(err, ErrKey) {
		t.Errorf("prepare an f32 key on a bf16 linear: %v", err)
	}
	if err := l.Prepare(BF16Key(4, 16, 16, nil, 1)); err != nil {
		t.Errorf("prepare: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second close: %v", err)
	}
	if err := l.Run(&kernels.GEMMBF16{M: p.m, A: p.a, Lda: p.lda, Ep: p.ep, C: c, Ldc: p.n}); !errors.Is(err, ErrClosed) {
		t.Errorf("run after close: %v", err)
	}
}

// TestBF16WrongKernel: a wrong BF16 kernel among a selector's kernels is
// excluded by the reference check.
func TestBF16WrongKernel(t *testing.T) {
	var w warnings
	o := testOptions(t, &w)
	wrong := &kernels.KernelBF16{Name: "gemmBF16Wrong_1x32", ISA: "test-bf16", MR: 1, NR: 32, KStep: 2,
		Available: func(cpu.Features) bool { return true },
		Accepts:   func(m, n, k int) bool { return true },
		Run: func(g *kernels.GEMMBF16) error {
			if err := kernels.GenericBF16.Run(g); err != nil {
				return err
			}
			if g.M > 0 && g.N > 0 {
				g.C[(g.M-1)*g.Ldc+g.N/2] += 0.01
			}
			return nil
		}}
	s := newSelectorWith(t, o, withKernels(t, wrong))
	ch := runLinearBF16(t, s, newF32Problem(t, 7, 5, 30, 40, "bias/f32", 0), 0, 1)
	if why := excludedWhy(ch, wrong.Name); why == "" || ch.Kernel == wrong.Name {
		t.Errorf("the wrong extra kernel was not excluded: %v", ch)
	}
	_ = fmt.Sprint(ch)
}
