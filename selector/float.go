package selector

import (
	"fmt"
	"math"

	"github.com/int8bert/int8bert/dnnl"
	"github.com/int8bert/int8bert/kernels"
)

// This file is what the operations on float32 activations share: OpF32 (and
// OpF32Kernel, the same without oneDNN) and OpBF16. Each is a floatSpec[G]
// over its calls G (kernels.GEMMF32, kernels.GEMMBF16): the check and key of
// a call, the trial's random problem and its reference check, and the
// oneDNN candidate are written once here; what differs is the descriptor in
// f32.go and bf16.go (its kernels and packing, its key, its reference, the
// data types of its oneDNN matmul).

// floatCall is a call on float32 activations (a kernels.GEMMF32 or
// kernels.GEMMBF16) without its packed weights: hasB says whether it
// brought some.
type floatCall struct {
	M, N, K int
	A       []float32
	Lda     int
	Ep      *kernels.Epilogue
	C       []float32
	Ldc     int
	Threads int
	hasB    bool
}

// floatSpec is the opSpec of an operation on float32 activations over
// calls G, made of its descriptor.
type floatSpec[G any] struct {
	op string // OpF32 or OpBF16, for errors
	// kernelOnly leaves oneDNN out (OpF32Kernel, OpBF16Kernel).
	kernelOnly bool
	// salt seeds a trial's random data.
	salt uint64
	// packW packs w ([n][k]) for panel width nr.
	packW func(n, k int, w []float32, nr int) (any, error)
	// reference computes the reference of a ([m][k]) times w ([n][k])
	// into c ([m][n]) with the epilogue ep and returns, per value, the
	// sum over k of |a||w| (the operands as the operation reads them),
	// the scale of a float32 summation's error, to which the tolerance
	// (f32RelTol) is relative.
	reference func(m, n, k int, a, w, c []float32, ep *kernels.Epilogue) ([]float64, error)
	// dnnlType is the data type of the oneDNN matmul's source and
	// weights; dnnlSrc gives it the m x k source a (stride lda).
	dnnlType dnnl.DataType
	dnnlSrc  func(a []float32, m, k, lda int) any
}

// floatOf is the floatCall of g (a *kernels.GEMMF32 or *kernels.GEMMBF16).
func floatOf[G any](g *G) floatCall {
	switch g := any(g).(type) {
	case *kernels.GEMMF32:
		return floatCall{g.M, g.N, g.K, g.A, g.Lda, g.Ep, g.C, g.Ldc, g.Threads, g.B != nil}
	case *kernels.GEMMBF16:
		return floatCall{g.M, g.N, g.K, g.A, g.Lda, g.Ep, g.C, g.Ldc, g.Threads, g.B != nil}
	}
	panic(fmt.Sprintf("selector: %T is no call on float32 activations", g))
}

// floatCallOf is the call G (a kernels.GEMMF32 or kernels.GEMMBF16) of c,
// without weights.
func floatCallOf[G any](c floatCall) G {
	var g G
	switch g := any(&g).(type) {
	case *kernels.GEMMF32:
		*g = kernels.GEMMF32{M: c.M, N: c.N, K: c.K, A: c.A, Lda: c.Lda, Ep: c.Ep, C: c.C, Ldc: c.Ldc, Threads: c.Threads}
	case *kernels.GEMMBF16:
		*g = kernels.GEMMBF16{M: c.M, N: c.N, K: c.K, A: c.A, Lda: c.Lda, Ep: c.Ep, C: c.C, Ldc: c.Ldc, Threads: c.Threads}
	}
	return g
}

// natives lists the kernels of ks of G's operation: ks.f32 for
// kernels.GEMMF32 calls, ks.bf16 for kernels.GEMMBF16 ones.
func (f *floatSpec[G]) natives(ks kernelSet) []*native[G] {
	var out []*native[G]
	switch out := any(&out).(type) {
	case *[]*native[kernels.GEMMF32]:
		*out = nativesOf(ks.f32, func(k *kernels.KernelF32) *native[kernels.GEMMF32] {
			return &native[kernels.GEMMF32]{k.Name, k.ISA, k.NR, k.Available, k.Accepts, k.Run, k}
		})
	case *[]*native[kernels.GEMMBF16]:
		*out = nativesOf(ks.bf16, func(k *kernels.KernelBF16) *native[kernels.GEMMBF16] {
			return &native[kernels.GEMMBF16]{k.Name, k.ISA, k.NR, k.Available, k.Accepts, k.Run, k}
		})
	}
	return out
}

func (f *floatSpec[G]) withB(g *G, packed any) {
	switch g := any(g).(type) {
	case *kernels.GEMMF32:
		g.B = packed.(*kernels.PackedF32)
	case *kernels.GEMMBF16:
		g.B = packed.(*kernels.PackedBF16)
	}
}

func (f *floatSpec[G]) oneDNN(p *dnnlPrims) cand[G] {
	if f.kernelOnly {
		return nil
	}
	return &dnnlFloat[G]{p, f}
}

func (f *floatSpec[G]) pack(w any, n, k, nr int) (any, error) {
	return f.packW(n, k, w.([]float32), nr)
}

func (f *floatSpec[G]) prepare(l *Linear[G], g *G) (*G, int, Key, error) {
	c := floatOf(g)
	if err := l.shape(c.N, c.K, c.hasB); err != nil {
		return nil, 0, Key{}, err
	}
	c.N, c.K = l.n, l.k
	ep, err := prepareFloat(f.op, l.n, l.k, c.M, c.A, c.Lda, c.Ep, c.C, c.Ldc)
	if err != nil {
		return nil, 0, Key{}, err
	}
	c.Ep = ep
	run := floatCallOf[G](c)
	if c.M == 0 {
		return &run, 0, Key{}, nil
	}
	return &run, c.M, floatKey(f.op, c.M, l.k, l.n, c.Ep, c.Threads), nil
}

// checkF32Kind reports a kind the operations on float32 activations do not
// have.
func checkF32Kind(kind EpilogueKind) error {
	if kind.Out != F32 || kind.ZeroPoint || kind.ActScale || kind.RowScale || kind.ColScale {
		return fmt.Errorf("epilogue %v is not an FP32 epilogue (bias, activation, residual to f32): %w", kind, ErrKey)
	}
	return nil
}

// dnnlFloat runs a call of an operation on float32 activations as a oneDNN
// matmul whose M is the call's M: source and weights of the spec's
// dnnlType (f32; bf16, the source rounded per call, the weights converted
// by oneDNN's packing), f32 destination. The epilogue maps onto oneDNN as
//
//	Bias      -> Bias
//	GELU, GELU tanh, ReLU -> eltwise post-ops (GELU is gelu_erf)
//	Residual  -> Sum (scale 1), the residual copied into dst first
//
// which covers every FP32 epilogue kind; what oneDNN has no implementation
// for is declined, and so is its reference code unless oneDNN is forced.
// It shares the primitive cache and its code with the u8s8 candidate.
type dnnlFloat[G any] struct {
	*dnnlPrims
	spec *floatSpec[G]
}

// dnnlFloatConfig maps an FP32 epilogue kind onto a matmul configuration
// on operands of type t: the int8 one's (an FP32 kind has none of the int8
// steps).
func dnnlFloatConfig(m, k, n int, kind EpilogueKind, t dnnl.DataType) dnnl.MatMulConfig {
	cfg := dnnlConfig(m, k, n, kind, nil)
	cfg.Src, cfg.Weights = t, t
	return cfg
}

func (c *dnnlFloat[G]) decline(key Key) error {
	if err := checkF32Kind(key.Epilogue); err != nil {
		return err
	}
	mm, err := c.prim(dnnlFloatConfig(key.M, key.K, key.N, key.Epilogue, c.spec.dnnlType))
	if err != nil {
		return err
	}
	return c.declineRef(mm)
}

func (c *dnnlFloat[G]) implName(l *Linear[G], g *G, kind EpilogueKind) string {
	mm, err := c.prim(dnnlFloatConfig(floatOf(g).M, l.k, l.n, kind, c.spec.dnnlType))
	if err != nil {
		return ""
	}
	return mm.Impl()
}

func (c *dnnlFloat[G]) run(l *Linear[G], g *G, kind EpilogueKind) error {
	call := floatOf(g)
	m, k, n, ep := call.M, l.k, l.n, call.Ep
	if err := checkF32Kind(kind); err != nil {
		return err
	}
	mm, err := c.prim(dnnlFloatConfig(m, k, n, kind, c.spec.dnnlType))
	if err != nil {
		return err
	}
	threads := max(call.Threads, 1)
	w, err := l.dnnlWeights(mm, nil, threads)
	if err != nil {
		return err
	}
	args := &dnnl.Args{M: m, Threads: threads, Src: c.spec.dnnlSrc(call.A, m, k, call.Lda)}
	if kind.Bias {
		args.Bias = ep.Bias[:n]
	}
	exec := func(dst any) error {
		args.Dst = dst
		// oneDNN's OpenMP threads run now: the pool's idle workers park
		// rather than spin against them (docs/DESIGN.md section 2.4).
		kernels.ForeignEnter()
		defer kernels.ForeignExit()
		return mm.Execute(w, args)
	}
	return viaDst(call.C, call.Ldc, m, n, exec, residualPre(kind, ep, m, n))
}

// floatData is a random problem of a key's shape with its reference result
// (the spec's reference, on some rows) and a tolerance per compared value.
type floatData[G any] struct {
	key  Key
	spec *floatSpec[G]
	g    floatCall
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

func (f *floatSpec[G]) problem(s *Selector, key Key) (*Linear[G], trialData[G], error) {
	if err := checkF32Kind(key.Epilogue); err != nil {
		return nil, nil, err
	}
	r := trialRand(key, f.salt)
	m, k, n := key.M, key.K, key.N
	w := make([]float32, n*k)
	for i := range w {
		w[i] = float32(2*r.Float64() - 1)
	}
	l, _, err := newLinear(s, s.byOp[f.op].(*opSet[G]), n, k, w, k)
	if err != nil {
		return nil, nil, err
	}
	l.trial = true // a tuning's problem: its packs are not the model's (Stats.Packs)
	// Activations scaled so that an accumulator's spread is about 1 (the
	// region where GELU is not linear).
	sc := 3 / math.Sqrt(float64(k))
	a := make([]float32, m*k)
	for i := range a {
		a[i] = float32((2*r.Float64() - 1) * sc)
	}
	t := &floatData[G]{key: key, spec: f, outs: outputs[[]float32]{make: func() []float32 { return newOut(F32, m, n).F32 },
		reset: func(c []float32) { fillOut(kernels.Out{F32: c}) }}}
	t.g = floatCall{M: m, N: n, K: k, A: a, Lda: k, Ep: randomF32Epilogue(r, key), Ldc: n, Threads: key.Threads}
	t.rows = verifyRows(r, m, k, n, s.opts.VerifyMACs)
	ga, ep := gatherRows(a, k, k, n, t.rows, t.g.Ep)
	mr := len(t.rows)
	t.ref = make([]float32, mr*n)
	abs, err := f.reference(mr, n, k, ga, w, t.ref, ep)
	if err != nil {
		l.Close()
		return nil, nil, fmt.Errorf("reference: %w", err)
	}
	t.tol = f32Tolerance(mr, n, abs, ep, f32RelTol, f32AbsTol)
	return l, t, nil
}

func (t *floatData[G]) call(name string) *G {
	c := t.g
	c.C = t.outs.get(name)
	g := floatCallOf[G](c)
	return &g
}

// verify compares the candidate's output on the trial's rows with the
// reference: |got - want| <= 1e-5 * (sum_k |a||w| + |bias| + |residual|).
func (t *floatData[G]) verify(name string) error {
	got := t.outs.get(name)
	return compareRows(t.rows, t.key.N, func(g, w int) bool {
		return math.Abs(float64(got[g])-float64(t.ref[w])) <= t.tol[w]
	}, func(g, w int) string {
		return fmt.Sprintf("got %v, want %v (tolerance %.3g)", got[g], t.ref[w], t.tol[w])
	})
}
