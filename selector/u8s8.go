package selector

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/int8bert/int8bert/kernels"
)

// call is one u8 x s8 GEMM as Linear.Run received it.
type call struct {
	m       int
	a       []uint8
	lda     int
	ep      *kernels.Epilogue
	out     kernels.Out
	threads int
	kind    EpilogueKind
}

// u8s8Cand is a candidate of the u8s8 family.
type u8s8Cand interface {
	candidate
	// accepts reports whether the candidate takes this exact m.
	accepts(m, n, k int) bool
	run(l *Linear, c *call) error
	implName(l *Linear, c *call) string
}

type u8s8Family struct {
	s        *Selector
	compiled []*kernels.Kernel // every kernel compiled in, and the extras
	cands    []u8s8Cand        // those usable here, in trial order
	byName   map[string]u8s8Cand
	dnnl     *dnnlCand
}

func newU8S8Family(s *Selector) *u8s8Family {
	f := &u8s8Family{s: s, byName: map[string]u8s8Cand{}}
	f.compiled = append(kernels.U8S8Kernels(), s.opts.Extra...)
	// Assembly kernels first, then oneDNN (which falls back to slow
	// reference code for some epilogues), the generic ones last: the fast
	// ones set the bar that prunes the slow ones after a single run.
	var generic []u8s8Cand
	for _, k := range f.compiled {
		if k == nil || k.RunU8S8 == nil || k.Available == nil || !k.Available(s.features) {
			continue
		}
		if _, dup := f.byName[k.Name]; dup {
			continue
		}
		c := &nativeCand{k: k}
		f.byName[k.Name] = c
		if k.ISA == "generic" {
			generic = append(generic, c)
		} else {
			f.cands = append(f.cands, c)
		}
	}
	if s.eng != nil {
		f.dnnl = &dnnlCand{s: s, prims: map[string]*dnnlPrim{}}
		f.cands = append(f.cands, f.dnnl)
		f.byName[f.dnnl.name()] = f.dnnl
	}
	f.cands = append(f.cands, generic...)
	return f
}

// keep restricts the candidates to kept (the forced ones).
func (f *u8s8Family) keep(kept []candidate) {
	f.cands = f.cands[:0]
	f.byName = map[string]u8s8Cand{}
	for _, c := range kept {
		uc := c.(u8s8Cand)
		f.cands = append(f.cands, uc)
		f.byName[uc.name()] = uc
	}
}

func (f *u8s8Family) lookup(name string) candidate {
	if c, ok := f.byName[name]; ok {
		return c
	}
	return nil
}

func (f *u8s8Family) builtIn() []builtInKernel {
	var out []builtInKernel
	for _, k := range f.compiled {
		if k != nil {
			out = append(out, builtInKernel{name: k.Name, isa: string(k.ISA)})
		}
	}
	return out
}

func (f *u8s8Family) candidates() []candidate {
	out := make([]candidate, len(f.cands))
	for i, c := range f.cands {
		out[i] = c
	}
	return out
}

func (f *u8s8Family) close() error {
	if f.dnnl != nil {
		return f.dnnl.close()
	}
	return nil
}

// nativeCand is a kernel of package kernels.
type nativeCand struct{ k *kernels.Kernel }

func (c *nativeCand) name() string    { return c.k.Name }
func (c *nativeCand) backend() string { return BackendNative }
func (c *nativeCand) family() string  { return string(c.k.ISA) }
func (c *nativeCand) decline(key Key) error {
	if c.k.Accepts != nil && !c.k.Accepts(key.M, key.N, key.K) {
		return fmt.Errorf("kernel %s does not accept m=%d n=%d k=%d", c.k.Name, key.M, key.N, key.K)
	}
	return nil
}
func (c *nativeCand) accepts(m, n, k int) bool {
	return c.k.Accepts == nil || c.k.Accepts(m, n, k)
}
func (c *nativeCand) implName(*Linear, *call) string { return "" }
func (c *nativeCand) run(l *Linear, cl *call) error {
	p, err := l.packed(c.k.NR)
	if err != nil {
		return err
	}
	g := kernels.GEMMU8S8{M: cl.m, N: l.n, K: l.k, A: cl.a, Lda: cl.lda, B: p, Ep: cl.ep, Out: cl.out, Threads: cl.threads}
	return c.k.RunU8S8(&g)
}

// Linear is one int8 weight matrix W ([N][K], a PyTorch Linear weight),
// prepared once: each candidate's packed layout is made on its first use
// and kept. Run computes Out = epilogue(A x W^T) with the candidate the
// selector chose for the call's key. A Linear is safe for concurrent use.
type Linear struct {
	s      *Selector
	n, k   int
	w      []int8 // [n][k]
	colSum []int32

	mu     sync.Mutex
	closed bool
	packs  map[int]*kernels.PackedS8 // by NR
	dw     []*dnnlWeights
}

// NewLinear prepares the int8 weights w ([n][ldw], ldw >= k) for Run. w is
// copied.
func (s *Selector) NewLinear(n, k int, w []int8, ldw int) (*Linear, error) {
	if n < 1 || k < 1 || ldw < k || len(w) < (n-1)*ldw+k {
		return nil, fmt.Errorf("selector: linear n=%d k=%d ldw=%d len(w)=%d: %w", n, k, ldw, len(w), kernels.ErrShape)
	}
	l := &Linear{s: s, n: n, k: k, w: make([]int8, n*k), packs: map[int]*kernels.PackedS8{}}
	for j := 0; j < n; j++ {
		copy(l.w[j*k:(j+1)*k], w[j*ldw:j*ldw+k])
	}
	l.colSum = kernels.ColSums(n, k, l.w, k)
	return l, nil
}

// N is the number of output features.
func (l *Linear) N() int { return l.n }

// K is the number of input features.
func (l *Linear) K() int { return l.k }

// ColSum returns the column sums of W (one per output feature), the
// Epilogue.ColSum a shifted u8 source (Epilogue.ZeroPoint) needs. Do not
// modify it.
func (l *Linear) ColSum() []int32 { return l.colSum }

// Key returns the key Run uses for these operands.
func (l *Linear) Key(m int, ep *kernels.Epilogue, out kernels.Out, threads int) (Key, error) {
	return U8S8Key(m, l.k, l.n, ep, out, threads)
}

// Run computes out = ep(A x W^T) for the m rows of a ([m][lda]), on
// threads threads (<= 1: the calling goroutine). out has exactly one
// destination (see kernels.Out); an s32 destination takes no epilogue, a
// u8 or s8 one needs ep.OutScale > 0. With ep.ZeroPoint set, ep.ColSum
// must be l.ColSum(): oneDNN compensates from the weights themselves.
// ep.ColScale, the weight scales, should be the same slice on every call:
// oneDNN packs them with the weights.
func (l *Linear) Run(m int, a []uint8, lda int, ep *kernels.Epilogue, out kernels.Out, threads int) error {
	g := kernels.GEMMU8S8{M: m, N: l.n, K: l.k, A: a, Lda: lda, B: &kernels.PackedS8{N: l.n, K: l.k}, Ep: ep, Out: out}
	if err := g.Check(); err != nil {
		return fmt.Errorf("selector: linear run: %w", err)
	}
	if m == 0 {
		return nil
	}
	key, err := l.Key(m, ep, out, threads)
	if err != nil {
		return err
	}
	ch, err := l.s.choose(key)
	if err != nil {
		return err
	}
	cl := &call{m: m, a: a, lda: lda, ep: ep, out: out, threads: threads, kind: key.Epilogue}
	ran, err := runChosen(ch, l.s.u8s8.byName, m, l.n, l.k, func(c u8s8Cand) error {
		if err := c.run(l, cl); err != nil {
			return fmt.Errorf("selector: linear m=%d k=%d n=%d with %s: %w", m, l.k, l.n, c.name(), err)
		}
		return nil
	})
	if ran {
		return err
	}
	return fmt.Errorf("selector: linear m=%d k=%d n=%d: no candidate of %v takes this m: %w", m, l.k, l.n, key, ErrNoCandidate)
}

// packed returns W packed for panel width nr, packing it on first use.
func (l *Linear) packed(nr int) (*kernels.PackedS8, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, fmt.Errorf("selector: linear: %w", ErrClosed)
	}
	if p := l.packs[nr]; p != nil {
		return p, nil
	}
	p, err := kernels.PackS8(l.n, l.k, l.w, l.k, nr)
	if err != nil {
		return nil, fmt.Errorf("selector: linear: %w", err)
	}
	l.packs[nr] = p
	return p, nil
}

// Close releases the packed weights (oneDNN's are C memory). A second
// Close returns ErrClosed.
func (l *Linear) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("selector: linear close: %w", ErrClosed)
	}
	l.closed = true
	l.packs = nil
	var first error
	for _, d := range l.dw {
		if err := d.w.Close(); err != nil && first == nil {
			first = fmt.Errorf("selector: linear close: %w", err)
		}
	}
	l.dw = nil
	return first
}

// u8s8Trial is a random problem of a key's shape with its reference result
// on some rows.
type u8s8Trial struct {
	key  Key
	l    *Linear
	cl   call
	outs map[string]kernels.Out
	rows []int       // rows compared with the reference
	ref  kernels.Out // len(rows) x n
}

func (f *u8s8Family) newTrial(s *Selector, key Key) (trial, error) {
	h := fnv.New64a()
	h.Write([]byte(key.String()))
	r := rand.New(rand.NewPCG(h.Sum64(), 0x8be7))
	m, k, n := key.M, key.K, key.N
	w := make([]int8, n*k)
	for i := range w {
		w[i] = int8(r.IntN(255) - 127)
	}
	l, err := s.NewLinear(n, k, w, k)
	if err != nil {
		return nil, err
	}
	a := make([]uint8, m*k)
	for i := range a {
		a[i] = uint8(r.IntN(256))
	}
	t := &u8s8Trial{key: key, l: l, outs: map[string]kernels.Out{}}
	t.cl = call{m: m, a: a, lda: k, ep: randomEpilogue(r, key), threads: key.Threads, kind: key.Epilogue}
	if t.cl.ep != nil && t.cl.ep.ZeroPoint != 0 {
		t.cl.ep.ColSum = l.colSum
	}
	t.rows = verifyRows(r, m, k, n, s.opts.VerifyMACs)
	if err := t.reference(); err != nil {
		l.Close()
		return nil, err
	}
	return t, nil
}

// randomEpilogue returns an epilogue of the key's kind whose results are of
// order 1 (so requantization spans the output type).
func randomEpilogue(r *rand.Rand, key Key) *kernels.Epilogue {
	kind := key.Epilogue
	if kind.Out == S32 {
		return nil
	}
	m, n := key.M, key.N
	u := func(lo, hi float64) float32 { return float32(lo + (hi-lo)*r.Float64()) }
	ep := &kernels.Epilogue{Act: kind.Act}
	// An accumulator's spread is about sqrt(K) * 74 * 73 (uniform u8 and
	// s8 operands); unit is what it is scaled to.
	sc := 1 / (math.Sqrt(float64(key.K)) * 74 * 73)
	unit := 1.0
	if !kind.ActScale && !kind.RowScale && !kind.ColScale {
		unit = 1 / sc
	}
	if kind.ZeroPoint {
		ep.ZeroPoint = 128
	}
	rowSc, colSc := sc, 1.0
	if !kind.ActScale && !kind.RowScale {
		rowSc, colSc = 1, sc
	}
	switch {
	case kind.ActScale:
		ep.ActScale = u(0.5, 1.5) * float32(rowSc)
	case kind.RowScale:
		ep.RowScale = make([]float32, m)
		for i := range ep.RowScale {
			ep.RowScale[i] = u(0.5, 1.5) * float32(rowSc)
		}
	}
	if kind.ColScale {
		ep.ColScale = make([]float32, n)
		for j := range ep.ColScale {
			ep.ColScale[j] = u(0.5, 1.5) * float32(colSc)
		}
	}
	if kind.Bias {
		ep.Bias = make([]float32, n)
		for j := range ep.Bias {
			ep.Bias[j] = u(-1, 1) * float32(unit)
		}
	}
	if kind.Residual {
		ep.Residual = make([]float32, m*n)
		for i := range ep.Residual {
			ep.Residual[i] = u(-2, 2) * float32(unit)
		}
	}
	switch kind.Out {
	case U8:
		ep.OutScale, ep.OutZeroPoint = float32(4*unit/127), 128
	case S8:
		ep.OutScale, ep.OutZeroPoint = float32(4*unit/127), 0
	}
	return ep
}

// verifyRows returns every row when the problem is small, else the first
// and last rows and some random ones.
func verifyRows(r *rand.Rand, m, k, n, budget int) []int {
	var rows []int
	if m*k*n <= budget {
		for i := 0; i < m; i++ {
			rows = append(rows, i)
		}
		return rows
	}
	for i := 0; i < min(4, m); i++ {
		rows = append(rows, i, m-1-i)
	}
	for i := 0; i < 8; i++ {
		rows = append(rows, r.IntN(m))
	}
	slices.Sort(rows)
	return slices.Compact(rows)
}

// newOut allocates a destination of the kind's type for m x n, filled with
// values a correct kernel overwrites.
func newOut(t DType, m, n int) kernels.Out {
	o := kernels.Out{Ldc: n}
	switch t {
	case S32:
		o.S32 = make([]int32, m*n)
		for i := range o.S32 {
			o.S32[i] = math.MinInt32 + 12345
		}
	case F32:
		o.F32 = make([]float32, m*n)
		for i := range o.F32 {
			o.F32[i] = float32(math.NaN())
		}
	case U8:
		o.U8 = make([]uint8, m*n)
	case S8:
		o.S8 = make([]int8, m*n)
	}
	return o
}

// reference runs the generic kernel on the trial's rows.
func (t *u8s8Trial) reference() error {
	k, n := t.key.K, t.key.N
	mr := len(t.rows)
	src := t.cl.ep
	a := make([]uint8, mr*k)
	var ep *kernels.Epilogue
	if src != nil {
		e := *src
		ep = &e
		if src.RowScale != nil {
			ep.RowScale = make([]float32, mr)
		}
		if src.Residual != nil {
			ep.Residual = make([]float32, mr*n)
			ep.LdResidual = 0
		}
	}
	for q, i := range t.rows {
		copy(a[q*k:(q+1)*k], t.cl.a[i*t.cl.lda:i*t.cl.lda+k])
		if ep != nil && ep.RowScale != nil {
			ep.RowScale[q] = src.RowScale[i]
		}
		if ep != nil && ep.Residual != nil {
			copy(ep.Residual[q*n:(q+1)*n], src.Residual[i*n:(i+1)*n])
		}
	}
	t.ref = newOut(t.key.Epilogue.Out, mr, n)
	p, err := t.l.packed(kernels.GenericU8S8.NR)
	if err != nil {
		return err
	}
	g := kernels.GEMMU8S8{M: mr, N: n, K: k, A: a, Lda: k, B: p, Ep: ep, Out: t.ref, Threads: 1}
	if err := kernels.GenericU8S8.RunU8S8(&g); err != nil {
		return fmt.Errorf("reference: %w", err)
	}
	return nil
}

func (t *u8s8Trial) exec(c candidate) error {
	o, ok := t.outs[c.name()]
	if !ok {
		o = newOut(t.key.Epilogue.Out, t.key.M, t.key.N)
		t.outs[c.name()] = o
	}
	cl := t.cl
	cl.out = o
	return c.(u8s8Cand).run(t.l, &cl)
}

func (t *u8s8Trial) impl(c candidate) string {
	cl := t.cl
	cl.out = t.outs[c.name()]
	return c.(u8s8Cand).implName(t.l, &cl)
}

func (t *u8s8Trial) close() { t.l.Close() }

// verify compares the candidate's output on the trial's rows: int32 exactly,
// f32 within 1e-4 relative, u8 and s8 within 1.
func (t *u8s8Trial) verify(c candidate) error {
	got := t.outs[c.name()]
	n := t.key.N
	bad, total := 0, len(t.rows)*n
	var first string
	note := func(i, j int, g, w any) {
		if bad == 0 {
			first = fmt.Sprintf("row %d column %d: got %v, want %v", i, j, g, w)
		}
		bad++
	}
	switch t.key.Epilogue.Out {
	case S32:
		for q, i := range t.rows {
			for j := 0; j < n; j++ {
				if g, w := got.S32[i*n+j], t.ref.S32[q*n+j]; g != w {
					note(i, j, g, w)
				}
			}
		}
	case F32:
		var ss float64
		for _, v := range t.ref.F32 {
			ss += float64(v) * float64(v)
		}
		rms := math.Sqrt(ss / float64(max(len(t.ref.F32), 1)))
		for q, i := range t.rows {
			for j := 0; j < n; j++ {
				g, w := float64(got.F32[i*n+j]), float64(t.ref.F32[q*n+j])
				if !(math.Abs(g-w) <= 1e-4*max(math.Abs(w), rms)) {
					note(i, j, g, w)
				}
			}
		}
	case U8:
		for q, i := range t.rows {
			for j := 0; j < n; j++ {
				if g, w := int(got.U8[i*n+j]), int(t.ref.U8[q*n+j]); g-w > 1 || w-g > 1 {
					note(i, j, g, w)
				}
			}
		}
	case S8:
		for q, i := range t.rows {
			for j := 0; j < n; j++ {
				if g, w := int(got.S8[i*n+j]), int(t.ref.S8[q*n+j]); g-w > 1 || w-g > 1 {
					note(i, j, g, w)
				}
			}
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d compared values differ; first at %s", bad, total, first)
	}
	return nil
}
