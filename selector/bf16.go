package selector

import (
	"fmt"
	"math"

	"github.com/int8bert/int8bert/dnnl"
	"github.com/int8bert/int8bert/kernels"
)

// bf16Spec is the operation OpBF16: f32 activations rounded to bf16 in the
// call times weights rounded to bf16 and packed once (kernels.GEMMBF16),
// float32 sums, with the FP32 epilogue (bias, activation, residual), on the
// kernels of kernels.BF16Kernels() and oneDNN's bf16 x bf16 -> f32 matmul
// (docs/DESIGN.md 4.11).
type bf16Spec struct{}

func (bf16Spec) natives(ks kernelSet) []*native[kernels.GEMMBF16] {
	return nativesOf(ks.bf16, func(k *kernels.KernelBF16) *native[kernels.GEMMBF16] {
		return &native[kernels.GEMMBF16]{k.Name, k.ISA, k.NR, k.Available, k.Accepts, k.Run, k}
	})
}

func (bf16Spec) withB(g *kernels.GEMMBF16, packed any) { g.B = packed.(*kernels.PackedBF16) }

func (bf16Spec) oneDNN(p *dnnlPrims) cand[kernels.GEMMBF16] { return &dnnlBF16{p} }

func (bf16Spec) pack(w any, n, k, nr int) (any, error) {
	return kernels.PackBF16(n, k, w.([]float32), k, nr)
}

func (bf16Spec) prepare(l *Linear[kernels.GEMMBF16], g *kernels.GEMMBF16) (*kernels.GEMMBF16, int, Key, error) {
	if err := l.shape(g.N, g.K, g.B != nil); err != nil {
		return nil, 0, Key{}, err
	}
	run := *g
	run.N, run.K = l.n, l.k
	ep, err := prepareFloat(OpBF16, l.n, l.k, run.M, run.A, run.Lda, run.Ep, run.C, run.Ldc)
	if err != nil {
		return nil, 0, Key{}, err
	}
	if run.M == 0 {
		return &run, 0, Key{}, nil
	}
	run.Ep = ep
	return &run, run.M, BF16Key(run.M, l.k, l.n, run.Ep, run.Threads), nil
}

// NewLinearBF16 prepares the float32 weights w ([n][ldw], ldw >= k) for
// Run in BF16: w is copied, and each kernel's packing rounds it to
// bfloat16 (kernels.ToBF16, round half to even). Its calls compute
// C = Ep(bf16(A) x bf16(W)^T) for the M rows of A ([M][Lda], Lda >= K,
// float32, rounded to bf16 inside the call) into C ([M][Ldc], Ldc >= N)
// with float32 sums, on the candidate chosen for the call's key
// (BF16Key). Ep is as for NewLinearF32: bias, activation and residual in
// that order, its INT8 fields ignored; the residual may share memory with
// C (it is then copied first), A must not (an error wrapping
// kernels.ErrShape).
func (s *Selector) NewLinearBF16(n, k int, w []float32, ldw int) (*Linear[kernels.GEMMBF16], error) {
	l, _, err := newLinear(s, s.bf16, n, k, w, ldw)
	return l, err
}

// dnnlBF16 runs a BF16 GEMM as a oneDNN bf16 x bf16 -> f32 matmul whose M
// is the call's M: A rounded to bf16 (kernels.ToBF16) per call, the
// weights converted by oneDNN's packing, the epilogue as dnnlF32's.
type dnnlBF16 struct{ *dnnlPrims }

// dnnlBF16Config is dnnlF32Config on bf16 operands.
func dnnlBF16Config(m, k, n int, kind EpilogueKind) dnnl.MatMulConfig {
	cfg := dnnlF32Config(m, k, n, kind)
	cfg.Src, cfg.Weights = dnnl.BF16, dnnl.BF16
	return cfg
}

func (c *dnnlBF16) decline(key Key) error {
	if err := checkF32Kind(key.Epilogue); err != nil {
		return err
	}
	mm, err := c.prim(dnnlBF16Config(key.M, key.K, key.N, key.Epilogue))
	if err != nil {
		return err
	}
	return c.declineRef(mm)
}

func (c *dnnlBF16) implName(l *Linear[kernels.GEMMBF16], g *kernels.GEMMBF16, kind EpilogueKind) string {
	mm, err := c.prim(dnnlBF16Config(g.M, l.k, l.n, kind))
	if err != nil {
		return ""
	}
	return mm.Impl()
}

func (c *dnnlBF16) run(l *Linear[kernels.GEMMBF16], g *kernels.GEMMBF16, kind EpilogueKind) error {
	m, k, n, ep := g.M, l.k, l.n, g.Ep
	if err := checkF32Kind(kind); err != nil {
		return err
	}
	mm, err := c.prim(dnnlBF16Config(m, k, n, kind))
	if err != nil {
		return err
	}
	w, err := l.dnnlWeights(mm, nil, max(g.Threads, 1))
	if err != nil {
		return err
	}
	src := make([]uint16, m*k)
	for i := 0; i < m; i++ {
		for q, x := range g.A[i*g.Lda : i*g.Lda+k] {
			src[i*k+q] = kernels.ToBF16(x)
		}
	}
	args := &dnnl.Args{M: m, Threads: max(g.Threads, 1), Src: src}
	if kind.Bias {
		args.Bias = ep.Bias[:n]
	}
	exec := func(dst any) error {
		args.Dst = dst
		return mm.Execute(w, args)
	}
	return viaDst(g.C, g.Ldc, m, n, exec, residualPre(kind, ep, m, n))
}

// bf16Data is a random BF16 problem of a key's shape with its reference
// result (kernels.GemmBF16Ref: the bf16-rounded operands multiplied and
// summed in float64), and a tolerance per compared value, on some rows.
type bf16Data struct {
	key  Key
	g    kernels.GEMMBF16
	outs outputs[[]float32]
	rows []int
	ref  []float32
	tol  []float64
}

// bf16RelTol is the reference check's tolerance relative to the sum of the
// magnitudes that make a value (sum_k |a||w| of the rounded operands, the
// bias and residual): the products are exact, so only the float32
// summation differs from the reference, as for f32 (f32RelTol).
const bf16RelTol = f32RelTol

func (bf16Spec) problem(s *Selector, key Key) (*Linear[kernels.GEMMBF16], trialData[kernels.GEMMBF16], error) {
	if err := checkF32Kind(key.Epilogue); err != nil {
		return nil, nil, err
	}
	r := trialRand(key, 0xbf16)
	m, k, n := key.M, key.K, key.N
	w := make([]float32, n*k)
	for i := range w {
		w[i] = float32(2*r.Float64() - 1)
	}
	l, err := s.NewLinearBF16(n, k, w, k)
	if err != nil {
		return nil, nil, err
	}
	sc := 3 / math.Sqrt(float64(k))
	a := make([]float32, m*k)
	for i := range a {
		a[i] = float32((2*r.Float64() - 1) * sc)
	}
	t := &bf16Data{key: key, outs: outputs[[]float32]{make: func() []float32 { return newOut(F32, m, n).F32 }}}
	t.g = kernels.GEMMBF16{M: m, N: n, K: k, A: a, Lda: k, Ep: randomF32Epilogue(r, key), Ldc: n, Threads: key.Threads}
	t.rows = verifyRows(r, m, k, n, s.opts.VerifyMACs)
	ga, ep := gatherRows(t.g.A, t.g.Lda, k, n, t.rows, t.g.Ep)
	mr := len(t.rows)
	t.ref = make([]float32, mr*n)
	abs := make([]float64, mr*n)
	if err := kernels.GemmBF16Ref(mr, n, k, ga, k, w, k, t.ref, n, ep, abs); err != nil {
		l.Close()
		return nil, nil, fmt.Errorf("reference: %w", err)
	}
	t.tol = f32Tolerance(mr, n, abs, ep, bf16RelTol, f32AbsTol)
	return l, t, nil
}

func (t *bf16Data) call(name string) *kernels.GEMMBF16 {
	g := t.g
	g.C = t.outs.get(name)
	return &g
}

// verify compares the candidate's output on the trial's rows with the
// reference: |got - want| <= 1e-5 * (sum_k |a||w| + |bias| + |residual|).
func (t *bf16Data) verify(name string) error {
	got := t.outs.get(name)
	return compareRows(t.rows, t.key.N, func(g, w int) bool {
		return math.Abs(float64(got[g])-float64(t.ref[w])) <= t.tol[w]
	}, func(g, w int) string {
		return fmt.Sprintf("got %v, want %v (tolerance %.3g)", got[g], t.ref[w], t.tol[w])
	})
}
