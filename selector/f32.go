package selector

import (
	"fmt"
	"math"
	"math/rand/v2"
	"unsafe"

	"github.com/int8bert/int8bert/dnnl"
	"github.com/int8bert/int8bert/kernels"
)

// f32Spec is the operation OpF32: f32 activations times packed f32
// weights (kernels.GEMMF32) with bias, activation and residual, on the
// kernels of kernels.F32Kernels() and oneDNN's f32 matmul; without oneDNN
// (kernelOnly) it is OpF32Kernel, whose calls the caller runs itself on
// the kernel chosen.
type f32Spec struct{ kernelOnly bool }

func (f32Spec) natives(ks kernelSet) []*native[kernels.GEMMF32] {
	return nativesOf(ks.f32, func(k *kernels.KernelF32) *native[kernels.GEMMF32] {
		return &native[kernels.GEMMF32]{k.Name, k.ISA, k.NR, k.Available, k.Accepts, k.Run, k}
	})
}

func (f32Spec) withB(g *kernels.GEMMF32, packed any) { g.B = packed.(*kernels.PackedF32) }

func (f f32Spec) oneDNN(p *dnnlPrims) cand[kernels.GEMMF32] {
	if f.kernelOnly {
		return nil
	}
	return &dnnlF32{p}
}

func (f32Spec) pack(w any, n, k, nr int) (any, error) {
	return kernels.PackF32(n, k, w.([]float32), k, nr)
}

// checkF32Kind reports a kind the f32 operation does not have.
func checkF32Kind(kind EpilogueKind) error {
	if kind.Out != F32 || kind.ZeroPoint || kind.ActScale || kind.RowScale || kind.ColScale {
		return fmt.Errorf("epilogue %v is not an FP32 epilogue (bias, activation, residual to f32): %w", kind, ErrKey)
	}
	return nil
}

// dnnlF32 runs an FP32 GEMM as a oneDNN f32 x f32 -> f32 matmul whose
// M is the call's M. The epilogue maps onto oneDNN as
//
//	Bias      -> Bias
//	GELU, GELU tanh, ReLU -> eltwise post-ops (GELU is gelu_erf)
//	Residual  -> Sum (scale 1), the residual copied into dst first
//
// which covers every FP32 epilogue kind; what oneDNN has no implementation
// for is declined, and so is its reference code unless oneDNN is forced.
// It shares the primitive cache and its code with the u8s8 candidate.
type dnnlF32 struct{ *dnnlPrims }

func (c *dnnlF32) decline(key Key) error {
	if err := checkF32Kind(key.Epilogue); err != nil {
		return err
	}
	mm, err := c.prim(dnnlF32Config(key.M, key.K, key.N, key.Epilogue))
	if err != nil {
		return err
	}
	return c.declineRef(mm)
}

// dnnlF32Config maps an FP32 epilogue kind onto a matmul configuration:
// the int8 one's (an FP32 kind has none of the int8 steps) on f32 operands.
func dnnlF32Config(m, k, n int, kind EpilogueKind) dnnl.MatMulConfig {
	cfg := dnnlConfig(m, k, n, kind, nil)
	cfg.Src, cfg.Weights = dnnl.F32, dnnl.F32
	return cfg
}

func (c *dnnlF32) implName(l *Linear[kernels.GEMMF32], g *kernels.GEMMF32, kind EpilogueKind) string {
	mm, err := c.prim(dnnlF32Config(g.M, l.k, l.n, kind))
	if err != nil {
		return ""
	}
	return mm.Impl()
}

func (c *dnnlF32) run(l *Linear[kernels.GEMMF32], g *kernels.GEMMF32, kind EpilogueKind) error {
	m, k, n, ep := g.M, l.k, l.n, g.Ep
	if err := checkF32Kind(kind); err != nil {
		return err
	}
	mm, err := c.prim(dnnlF32Config(m, k, n, kind))
	if err != nil {
		return err
	}
	w, err := l.dnnlWeights(mm, nil, max(g.Threads, 1))
	if err != nil {
		return err
	}
	args := &dnnl.Args{M: m, Threads: max(g.Threads, 1), Src: compact(g.A, m, k, g.Lda)}
	if kind.Bias {
		args.Bias = ep.Bias[:n]
	}
	exec := func(dst any) error {
		args.Dst = dst
		return mm.Execute(w, args)
	}
	return viaDst(g.C, g.Ldc, m, n, exec, residualPre(kind, ep, m, n))
}

// NewLinearF32 prepares the float32 weights w ([n][ldw], ldw >= k) for
// Run. w is copied. Its calls compute C = Ep(A x W^T) for the M rows of A
// ([M][Lda], Lda >= K) into C ([M][Ldc], Ldc >= N) with the candidate
// chosen for the call's key (F32Key); it is what the FP32 encoder calls
// for every linear layer. Ep may be nil; its bias, activation and residual
// apply in that order (kernels.Epilogue), its INT8 fields are ignored. The
// residual may share memory with C (C = C + ...: it is then copied first,
// since the assembly kernels store into C before they read the residual);
// A must not (an error wrapping kernels.ErrShape).
func (s *Selector) NewLinearF32(n, k int, w []float32, ldw int) (*Linear[kernels.GEMMF32], error) {
	l, _, err := newLinear(s, s.f32, n, k, w, ldw)
	return l, err
}

// checkF32 validates an FP32 call's operands.
func checkF32(n, k, m int, a []float32, lda int, ep *kernels.Epilogue, c []float32, ldc int) error {
	if err := kernels.CheckGEMM(m, n, k, len(a), lda, n*k, k, len(c), ldc); err != nil {
		return err
	}
	if ep == nil {
		return nil
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("selector: linear f32 epilogue m=%d n=%d: %s: %w", m, n, fmt.Sprintf(format, args...), kernels.ErrShape)
	}
	if ep.Bias != nil && len(ep.Bias) < n {
		return bad("len(bias)=%d < n", len(ep.Bias))
	}
	if ep.Residual != nil {
		lr := ldr(ep, n)
		if lr < n {
			return bad("residual stride %d < n", lr)
		}
		if m > 0 && len(ep.Residual) < (m-1)*lr+n {
			return bad("len(residual)=%d, want >= %d", len(ep.Residual), (m-1)*lr+n)
		}
	}
	if ep.Act < kernels.ActNone || ep.Act > kernels.ActReLU {
		return bad("unknown activation %d", int(ep.Act))
	}
	return nil
}

// span is the address range of a matrix.
type span struct{ lo, hi uintptr }

// spanOf returns the address range of the r x n matrix x with row stride ld.
func spanOf(x []float32, r, n, ld int) span {
	if r == 0 || n == 0 || len(x) == 0 {
		return span{}
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(x)))
	return span{lo, lo + uintptr((r-1)*ld+n)*4}
}

// overlaps reports whether two ranges share memory.
func (x span) overlaps(y span) bool { return x.lo < y.hi && y.lo < x.hi }

func (f32Spec) prepare(l *Linear[kernels.GEMMF32], g *kernels.GEMMF32) (*kernels.GEMMF32, int, Key, error) {
	if err := l.shape(g.N, g.K, g.B != nil); err != nil {
		return nil, 0, Key{}, err
	}
	run := *g
	run.N, run.K = l.n, l.k
	ep, err := prepareFloat(OpF32, l.n, l.k, run.M, run.A, run.Lda, run.Ep, run.C, run.Ldc)
	if err != nil {
		return nil, 0, Key{}, err
	}
	if run.M == 0 {
		return &run, 0, Key{}, nil
	}
	run.Ep = ep
	return &run, run.M, F32Key(run.M, l.k, l.n, run.Ep, run.Threads), nil
}

// prepareFloat checks the operands of a call of an operation on float32
// activations (OpF32, OpBF16) and returns the epilogue to run: ep, or a
// copy whose residual no longer shares memory with c.
func prepareFloat(op string, n, k, m int, a []float32, lda int, ep *kernels.Epilogue, c []float32, ldc int) (*kernels.Epilogue, error) {
	if err := checkF32(n, k, m, a, lda, ep, c, ldc); err != nil {
		return nil, fmt.Errorf("selector: %s linear run: %w", op, err)
	}
	if m == 0 {
		return ep, nil
	}
	cs := spanOf(c, m, n, ldc)
	if spanOf(a, m, k, lda).overlaps(cs) {
		return nil, fmt.Errorf("selector: %s linear run: a and c overlap: %w", op, kernels.ErrShape)
	}
	if ep != nil && ep.Residual != nil {
		if lr := ldr(ep, n); spanOf(ep.Residual, m, n, lr).overlaps(cs) {
			e := *ep
			e.Residual, e.LdResidual = make([]float32, m*n), 0
			for i := 0; i < m; i++ {
				copy(e.Residual[i*n:(i+1)*n], ep.Residual[i*lr:i*lr+n])
			}
			return &e, nil
		}
	}
	return ep, nil
}

// f32Data is a random FP32 problem of a key's shape with its reference
// result, and a tolerance per compared value, on some rows.
type f32Data struct {
	key  Key
	g    kernels.GEMMF32
	outs outputs[[]float32]
	rows []int     // rows compared with the reference
	ref  []float32 // len(rows) x n
	tol  []float64 // len(rows) x n
}

// f32RelTol is the tolerance of the reference check relative to the sum of
// the magnitudes that make a value (sum_k |a||w|, the bias and residual).
// Float32 accumulation in any order stays well within it for random data.
const f32RelTol = 1e-5

// f32AbsTol is the tolerance's absolute floor (a value whose terms are all
// zero).
const f32AbsTol = 1e-30

func (f32Spec) problem(s *Selector, key Key) (*Linear[kernels.GEMMF32], trialData[kernels.GEMMF32], error) {
	if err := checkF32Kind(key.Epilogue); err != nil {
		return nil, nil, err
	}
	r := trialRand(key, 0xf32)
	m, k, n := key.M, key.K, key.N
	w := make([]float32, n*k)
	for i := range w {
		w[i] = float32(2*r.Float64() - 1)
	}
	l, err := s.NewLinearF32(n, k, w, k)
	if err != nil {
		return nil, nil, err
	}
	// Activations scaled so that an accumulator's spread is about 1 (the
	// region where GELU is not linear).
	sc := 3 / math.Sqrt(float64(k))
	a := make([]float32, m*k)
	for i := range a {
		a[i] = float32((2*r.Float64() - 1) * sc)
	}
	t := &f32Data{key: key, outs: outputs[[]float32]{make: func() []float32 { return newOut(F32, m, n).F32 }}}
	t.g = kernels.GEMMF32{M: m, N: n, K: k, A: a, Lda: k, Ep: randomF32Epilogue(r, key), Ldc: n, Threads: key.Threads}
	t.rows = verifyRows(r, m, k, n, s.opts.VerifyMACs)
	if err := t.reference(l.w.([]float32)); err != nil {
		l.Close()
		return nil, nil, err
	}
	return l, t, nil
}

// randomF32Epilogue returns an epilogue of the key's kind with values of
// order 1.
func randomF32Epilogue(r *rand.Rand, key Key) *kernels.Epilogue {
	kind := key.Epilogue
	if !kind.Bias && kind.Act == kernels.ActNone && !kind.Residual {
		return nil
	}
	ep := &kernels.Epilogue{Act: kind.Act}
	if kind.Bias {
		ep.Bias = make([]float32, key.N)
		for j := range ep.Bias {
			ep.Bias[j] = float32(2*r.Float64() - 1)
		}
	}
	if kind.Residual {
		ep.Residual = make([]float32, key.M*key.N)
		for i := range ep.Residual {
			ep.Residual[i] = float32(4*r.Float64() - 2)
		}
	}
	return ep
}

// f32Tolerance returns, for each element of want, the tolerance of a
// result computed in float32: rel times the sum of the magnitudes of its
// terms (absSum, sum_k |a||w|; the bias; the residual) plus abs. An
// activation scales the error before it by at most its largest slope
// (GELU's is below 1.13; 1.2 is used).
func f32Tolerance(m, n int, absSum []float64, ep *kernels.Epilogue, rel, abs float64) []float64 {
	tol := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			s := absSum[i*n+j]
			if ep != nil {
				if ep.Bias != nil {
					s += math.Abs(float64(ep.Bias[j]))
				}
				if ep.Act != kernels.ActNone {
					s *= 1.2
				}
				if ep.Residual != nil {
					s += math.Abs(float64(ep.Residual[i*ldr(ep, n)+j]))
				}
			}
			tol[i*n+j] = rel*s + abs
		}
	}
	return tol
}

// absSums returns sum_k |a[i][k]| |w[j][k]| for the m rows of a.
func absSums(m, n, k int, a []float32, lda int, w []float32) []float64 {
	out := make([]float64, m*n)
	aa := make([]float64, k)
	for i := 0; i < m; i++ {
		for p := range aa {
			aa[p] = math.Abs(float64(a[i*lda+p]))
		}
		for j := 0; j < n; j++ {
			var s float64
			for p, x := range w[j*k : (j+1)*k] {
				s += aa[p] * math.Abs(float64(x))
			}
			out[i*n+j] = s
		}
	}
	return out
}

// reference runs kernels.GemmF32Ref (float64 accumulation) on the
// problem's rows and derives each compared value's tolerance.
func (t *f32Data) reference(w []float32) error {
	k, n := t.key.K, t.key.N
	mr := len(t.rows)
	a, ep := gatherRows(t.g.A, t.g.Lda, k, n, t.rows, t.g.Ep)
	t.ref = make([]float32, mr*n)
	if err := kernels.GemmF32Ref(mr, n, k, a, k, w, k, t.ref, n, ep); err != nil {
		return fmt.Errorf("reference: %w", err)
	}
	t.tol = f32Tolerance(mr, n, absSums(mr, n, k, a, k, w), ep, f32RelTol, f32AbsTol)
	return nil
}

func (t *f32Data) call(name string) *kernels.GEMMF32 {
	g := t.g
	g.C = t.outs.get(name)
	return &g
}

// verify compares the candidate's output on the trial's rows with the
// reference: |got - want| <= 1e-5 * (sum_k |a||w| + |bias| + |residual|).
func (t *f32Data) verify(name string) error {
	got := t.outs.get(name)
	return compareRows(t.rows, t.key.N, func(g, w int) bool {
		return math.Abs(float64(got[g])-float64(t.ref[w])) <= t.tol[w]
	}, func(g, w int) string {
		return fmt.Sprintf("got %v, want %v (tolerance %.3g)", got[g], t.ref[w], t.tol[w])
	})
}
