package selector

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"sync"
	"unsafe"

	"github.com/int8bert/int8bert/dnnl"
	"github.com/int8bert/int8bert/kernels"
)

// callF32 is one FP32 GEMM as LinearF32.Run received it.
type callF32 struct {
	m       int
	a       []float32
	lda     int
	ep      *kernels.Epilogue
	c       []float32
	ldc     int
	threads int
	kind    EpilogueKind
}

// f32Cand is a candidate of the f32 family.
type f32Cand interface {
	candidate
	// accepts reports whether the candidate takes this exact m.
	accepts(m, n, k int) bool
	run(l *LinearF32, c *callF32) error
	implName(l *LinearF32, c *callF32) string
}

// f32Family is the FP32 operation (OpF32): the kernels of
// kernels.F32Kernels() this CPU runs, oneDNN's f32 matmul, and
// Options.ExtraF32.
type f32Family struct {
	s        *Selector
	compiled []*kernels.KernelF32
	cands    []f32Cand // usable here, in trial order
	byName   map[string]f32Cand
	dnnl     *dnnlF32Cand
}

func newF32Family(s *Selector) *f32Family {
	f := &f32Family{s: s, byName: map[string]f32Cand{}}
	f.compiled = append(kernels.F32Kernels(), s.opts.ExtraF32...)
	// As for u8s8: assembly first, then oneDNN, the generic kernel last.
	var generic []f32Cand
	for _, k := range f.compiled {
		if k == nil || k.Run == nil || k.Available == nil || !k.Available(s.features) {
			continue
		}
		if _, dup := f.byName[k.Name]; dup {
			continue
		}
		c := &nativeF32Cand{k: k}
		f.byName[k.Name] = c
		if k.ISA == "generic" {
			generic = append(generic, c)
		} else {
			f.cands = append(f.cands, c)
		}
	}
	if s.eng != nil {
		f.dnnl = &dnnlF32Cand{&dnnlCand{s: s, prims: map[string]*dnnlPrim{}}}
		f.cands = append(f.cands, f.dnnl)
		f.byName[f.dnnl.name()] = f.dnnl
	}
	f.cands = append(f.cands, generic...)
	return f
}

func (f *f32Family) candidates() []candidate {
	out := make([]candidate, len(f.cands))
	for i, c := range f.cands {
		out[i] = c
	}
	return out
}

func (f *f32Family) lookup(name string) candidate {
	if c, ok := f.byName[name]; ok {
		return c
	}
	return nil
}

func (f *f32Family) builtIn() []builtInKernel {
	var out []builtInKernel
	for _, k := range f.compiled {
		if k != nil {
			out = append(out, builtInKernel{name: k.Name, isa: string(k.ISA)})
		}
	}
	return out
}

func (f *f32Family) keep(kept []candidate) {
	f.cands = f.cands[:0]
	f.byName = map[string]f32Cand{}
	for _, c := range kept {
		fc := c.(f32Cand)
		f.cands = append(f.cands, fc)
		f.byName[fc.name()] = fc
	}
}

func (f *f32Family) close() error {
	if f.dnnl != nil {
		return f.dnnl.close()
	}
	return nil
}

// checkF32Kind reports a kind the f32 operation does not have.
func checkF32Kind(kind EpilogueKind) error {
	if kind.Out != F32 || kind.ZeroPoint || kind.ActScale || kind.RowScale || kind.ColScale {
		return fmt.Errorf("epilogue %v is not an FP32 epilogue (bias, activation, residual to f32): %w", kind, ErrKey)
	}
	return nil
}

// nativeF32Cand is an FP32 kernel of package kernels.
type nativeF32Cand struct{ k *kernels.KernelF32 }

func (c *nativeF32Cand) name() string    { return c.k.Name }
func (c *nativeF32Cand) backend() string { return BackendNative }
func (c *nativeF32Cand) family() string  { return string(c.k.ISA) }
func (c *nativeF32Cand) decline(key Key) error {
	if c.k.Accepts != nil && !c.k.Accepts(key.M, key.N, key.K) {
		return fmt.Errorf("kernel %s does not accept m=%d n=%d k=%d", c.k.Name, key.M, key.N, key.K)
	}
	return nil
}
func (c *nativeF32Cand) accepts(m, n, k int) bool {
	return c.k.Accepts == nil || c.k.Accepts(m, n, k)
}
func (c *nativeF32Cand) implName(*LinearF32, *callF32) string { return "" }
func (c *nativeF32Cand) run(l *LinearF32, cl *callF32) error {
	p, err := l.packed(c.k.NR)
	if err != nil {
		return err
	}
	g := kernels.GEMMF32{M: cl.m, N: l.n, K: l.k, A: cl.a, Lda: cl.lda, B: p, Ep: cl.ep, C: cl.c, Ldc: cl.ldc, Threads: cl.threads}
	return c.k.Run(&g)
}

// dnnlF32Cand runs an FP32 GEMM as a oneDNN f32 x f32 -> f32 matmul whose
// M is the call's M. The epilogue maps onto oneDNN as
//
//	Bias      -> Bias
//	GELU, GELU tanh, ReLU -> eltwise post-ops (GELU is gelu_erf)
//	Residual  -> Sum (scale 1), the residual copied into dst first
//
// which covers every FP32 epilogue kind; what oneDNN has no implementation
// for is declined, and so is its reference code unless oneDNN is forced.
// It shares the primitive cache and its code with the u8s8 candidate.
type dnnlF32Cand struct{ *dnnlCand }

func (c *dnnlF32Cand) accepts(m, n, k int) bool { return true }

func (c *dnnlF32Cand) decline(key Key) error {
	if err := checkF32Kind(key.Epilogue); err != nil {
		return err
	}
	mm, err := c.prim(dnnlF32Config(key.M, key.K, key.N, key.Epilogue))
	if err != nil {
		return err
	}
	return c.declineRef(mm)
}

// dnnlF32Config maps an FP32 epilogue kind onto a matmul configuration.
func dnnlF32Config(m, k, n int, kind EpilogueKind) dnnl.MatMulConfig {
	cfg := dnnl.MatMulConfig{M: m, K: k, N: n, Src: dnnl.F32, Weights: dnnl.F32, Dst: dnnl.F32, Bias: kind.Bias}
	switch kind.Act {
	case kernels.ActGELU:
		cfg.PostOps = append(cfg.PostOps, dnnl.PostOp{Kind: dnnl.GELUErf})
	case kernels.ActGELUTanh:
		cfg.PostOps = append(cfg.PostOps, dnnl.PostOp{Kind: dnnl.GELUTanh})
	case kernels.ActReLU:
		cfg.PostOps = append(cfg.PostOps, dnnl.PostOp{Kind: dnnl.ReLU})
	}
	if kind.Residual {
		cfg.PostOps = append(cfg.PostOps, dnnl.PostOp{Kind: dnnl.Sum, Scale: 1})
	}
	return cfg
}

func (c *dnnlF32Cand) implName(l *LinearF32, cl *callF32) string {
	mm, err := c.prim(dnnlF32Config(cl.m, l.k, l.n, cl.kind))
	if err != nil {
		return ""
	}
	return mm.Impl()
}

func (c *dnnlF32Cand) run(l *LinearF32, cl *callF32) error {
	m, k, n, ep, kind := cl.m, l.k, l.n, cl.ep, cl.kind
	if err := checkF32Kind(kind); err != nil {
		return err
	}
	mm, err := c.prim(dnnlF32Config(m, k, n, kind))
	if err != nil {
		return err
	}
	w, err := l.dnnlWeights(mm, max(cl.threads, 1))
	if err != nil {
		return err
	}
	args := &dnnl.Args{M: m, Threads: max(cl.threads, 1), Src: compact(cl.a, m, k, cl.lda)}
	if kind.Bias {
		args.Bias = ep.Bias[:n]
	}
	var pre func([]float32)
	if kind.Residual {
		pre = func(d []float32) {
			lr := ldr(ep, n)
			for i := 0; i < m; i++ {
				copy(d[i*n:(i+1)*n], ep.Residual[i*lr:i*lr+n])
			}
		}
	}
	exec := func(dst any) error {
		args.Dst = dst
		return mm.Execute(w, args)
	}
	return viaDst(cl.c, cl.ldc, m, n, exec, pre)
}

// LinearF32 is one float32 weight matrix W ([N][K], a PyTorch Linear
// weight), prepared once: each candidate's packed layout (kernels.PackF32
// per panel width, oneDNN's own) is made on its first use and kept. Run
// computes C = epilogue(A x W^T) with the candidate the selector chose for
// the call's key (F32Key). It is what the FP32 encoder calls for every
// linear layer. A LinearF32 is safe for concurrent use.
type LinearF32 struct {
	s    *Selector
	n, k int
	w    []float32 // [n][k]

	mu     sync.Mutex
	closed bool
	packs  map[int]*kernels.PackedF32 // by NR
	dw     []*dnnl.Weights
}

// NewLinearF32 prepares the float32 weights w ([n][ldw], ldw >= k) for
// Run. w is copied.
func (s *Selector) NewLinearF32(n, k int, w []float32, ldw int) (*LinearF32, error) {
	if n < 1 || k < 1 || ldw < k || len(w) < (n-1)*ldw+k {
		return nil, fmt.Errorf("selector: linear f32 n=%d k=%d ldw=%d len(w)=%d: %w", n, k, ldw, len(w), kernels.ErrShape)
	}
	l := &LinearF32{s: s, n: n, k: k, w: make([]float32, n*k), packs: map[int]*kernels.PackedF32{}}
	for j := 0; j < n; j++ {
		copy(l.w[j*k:(j+1)*k], w[j*ldw:j*ldw+k])
	}
	return l, nil
}

// N is the number of output features.
func (l *LinearF32) N() int { return l.n }

// K is the number of input features.
func (l *LinearF32) K() int { return l.k }

// Key returns the key Run uses for these operands.
func (l *LinearF32) Key(m int, ep *kernels.Epilogue, threads int) Key {
	return F32Key(m, l.k, l.n, ep, threads)
}

// check validates Run's operands.
func (l *LinearF32) check(m int, a []float32, lda int, ep *kernels.Epilogue, c []float32, ldc int) error {
	n, k := l.n, l.k
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

// Run computes c = ep(a x W^T) for the m rows of a ([m][lda], lda >= K)
// into c ([m][ldc], ldc >= N), on threads threads (<= 1: the calling
// goroutine). ep may be nil; its bias, activation and residual apply in
// that order (kernels.Epilogue), its INT8 fields are ignored. The residual
// may share memory with c (c = c + ...: it is then copied first, since the
// assembly kernels store into c before they read the residual); a must
// not (an error wrapping kernels.ErrShape).
func (l *LinearF32) Run(m int, a []float32, lda int, ep *kernels.Epilogue, c []float32, ldc int, threads int) error {
	if err := l.check(m, a, lda, ep, c, ldc); err != nil {
		return fmt.Errorf("selector: linear f32 run: %w", err)
	}
	if m == 0 {
		return nil
	}
	cs := spanOf(c, m, l.n, ldc)
	if spanOf(a, m, l.k, lda).overlaps(cs) {
		return fmt.Errorf("selector: linear f32 run: a and c overlap: %w", kernels.ErrShape)
	}
	if ep != nil && ep.Residual != nil {
		if lr := ldr(ep, l.n); spanOf(ep.Residual, m, l.n, lr).overlaps(cs) {
			e := *ep
			e.Residual, e.LdResidual = make([]float32, m*l.n), 0
			for i := 0; i < m; i++ {
				copy(e.Residual[i*l.n:(i+1)*l.n], ep.Residual[i*lr:i*lr+l.n])
			}
			ep = &e
		}
	}
	key := l.Key(m, ep, threads)
	ch, err := l.s.choose(key)
	if err != nil {
		return err
	}
	cl := &callF32{m: m, a: a, lda: lda, ep: ep, c: c, ldc: ldc, threads: threads, kind: key.Epilogue}
	ran, err := runChosen(ch, l.s.f32.byName, m, l.n, l.k, func(cd f32Cand) error {
		if err := cd.run(l, cl); err != nil {
			return fmt.Errorf("selector: linear f32 m=%d k=%d n=%d with %s: %w", m, l.k, l.n, cd.name(), err)
		}
		return nil
	})
	if ran {
		return err
	}
	return fmt.Errorf("selector: linear f32 m=%d k=%d n=%d: no candidate of %v takes this m: %w", m, l.k, l.n, key, ErrNoCandidate)
}

// packed returns W packed for panel width nr, packing it on first use.
func (l *LinearF32) packed(nr int) (*kernels.PackedF32, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, fmt.Errorf("selector: linear f32: %w", ErrClosed)
	}
	if p := l.packs[nr]; p != nil {
		return p, nil
	}
	p, err := kernels.PackF32(l.n, l.k, l.w, l.k, nr)
	if err != nil {
		return nil, fmt.Errorf("selector: linear f32: %w", err)
	}
	l.packs[nr] = p
	return p, nil
}

// dnnlWeights returns W packed for mm, packing it when no packed copy fits.
func (l *LinearF32) dnnlWeights(mm *dnnl.MatMul, threads int) (*dnnl.Weights, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, fmt.Errorf("selector: linear f32: %w", ErrClosed)
	}
	for _, w := range l.dw {
		if mm.Accepts(w) {
			return w, nil
		}
	}
	w, err := mm.PackWeights(l.w, nil, threads)
	if err != nil {
		return nil, err
	}
	l.dw = append(l.dw, w)
	return w, nil
}

// Close releases the packed weights (oneDNN's are C memory). A second
// Close returns ErrClosed.
func (l *LinearF32) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("selector: linear f32 close: %w", ErrClosed)
	}
	l.closed = true
	l.packs = nil
	var first error
	for _, w := range l.dw {
		if err := w.Close(); err != nil && first == nil {
			first = fmt.Errorf("selector: linear f32 close: %w", err)
		}
	}
	l.dw = nil
	return first
}

// f32Trial is a random FP32 problem of a key's shape with its reference
// result, and a tolerance per compared value, on some rows.
type f32Trial struct {
	key  Key
	l    *LinearF32
	cl   callF32
	outs map[string][]float32
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

func (f *f32Family) newTrial(s *Selector, key Key) (trial, error) {
	if err := checkF32Kind(key.Epilogue); err != nil {
		return nil, err
	}
	h := fnv.New64a()
	h.Write([]byte(key.String()))
	r := rand.New(rand.NewPCG(h.Sum64(), 0xf32))
	m, k, n := key.M, key.K, key.N
	w := make([]float32, n*k)
	for i := range w {
		w[i] = float32(2*r.Float64() - 1)
	}
	l, err := s.NewLinearF32(n, k, w, k)
	if err != nil {
		return nil, err
	}
	// Activations scaled so that an accumulator's spread is about 1 (the
	// region where GELU is not linear).
	sc := 3 / math.Sqrt(float64(k))
	a := make([]float32, m*k)
	for i := range a {
		a[i] = float32((2*r.Float64() - 1) * sc)
	}
	t := &f32Trial{key: key, l: l, outs: map[string][]float32{}}
	t.cl = callF32{m: m, a: a, lda: k, ep: randomF32Epilogue(r, key), ldc: n, threads: key.Threads, kind: key.Epilogue}
	t.rows = verifyRows(r, m, k, n, s.opts.VerifyMACs)
	if err := t.reference(); err != nil {
		l.Close()
		return nil, err
	}
	return t, nil
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

// reference runs kernels.GemmF32Ref (float64 accumulation) on the trial's
// rows and derives each compared value's tolerance.
func (t *f32Trial) reference() error {
	k, n := t.key.K, t.key.N
	mr := len(t.rows)
	src := t.cl.ep
	a := make([]float32, mr*k)
	var ep *kernels.Epilogue
	if src != nil {
		e := *src
		ep = &e
		if src.Residual != nil {
			ep.Residual = make([]float32, mr*n)
			ep.LdResidual = 0
		}
	}
	for q, i := range t.rows {
		copy(a[q*k:(q+1)*k], t.cl.a[i*t.cl.lda:i*t.cl.lda+k])
		if ep != nil && ep.Residual != nil {
			copy(ep.Residual[q*n:(q+1)*n], src.Residual[i*n:(i+1)*n])
		}
	}
	t.ref = make([]float32, mr*n)
	if err := kernels.GemmF32Ref(mr, n, k, a, k, t.l.w, k, t.ref, n, ep); err != nil {
		return fmt.Errorf("reference: %w", err)
	}
	t.tol = f32Tolerance(mr, n, absSums(mr, n, k, a, k, t.l.w), ep, f32RelTol, f32AbsTol)
	return nil
}

func (t *f32Trial) exec(c candidate) error {
	o, ok := t.outs[c.name()]
	if !ok {
		o = make([]float32, t.key.M*t.key.N)
		for i := range o {
			o[i] = float32(math.NaN())
		}
		t.outs[c.name()] = o
	}
	cl := t.cl
	cl.c = o
	return c.(f32Cand).run(t.l, &cl)
}

func (t *f32Trial) impl(c candidate) string {
	cl := t.cl
	cl.c = t.outs[c.name()]
	return c.(f32Cand).implName(t.l, &cl)
}

func (t *f32Trial) close() { t.l.Close() }

// verify compares the candidate's output on the trial's rows with the
// reference: |got - want| <= 1e-5 * (sum_k |a||w| + |bias| + |residual|).
func (t *f32Trial) verify(c candidate) error {
	got := t.outs[c.name()]
	n := t.key.N
	bad := 0
	var first string
	for q, i := range t.rows {
		for j := 0; j < n; j++ {
			g, w := float64(got[i*n+j]), float64(t.ref[q*n+j])
			if tol := t.tol[q*n+j]; !(math.Abs(g-w) <= tol) {
				if bad == 0 {
					first = fmt.Sprintf("row %d column %d: got %v, want %v (tolerance %.3g)", i, j, g, w, tol)
				}
				bad++
			}
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d compared values differ; first at %s", bad, len(t.rows)*n, first)
	}
	return nil
}
