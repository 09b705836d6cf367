package selector

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/int8bert/int8bert/kernels"
)

// u8s8Spec is the operation OpU8S8: u8 activations times packed s8
// weights (kernels.GEMMU8S8), on the kernels of kernels.U8S8Kernels() and
// oneDNN's int8 matmul; without oneDNN (kernelOnly) it is OpU8S8Kernel,
// whose calls the caller runs itself on the kernel chosen, and whose
// candidates add kernels.AttentionU8S8Kernels() (each declines the keys
// whose form its Kernel.Takes does not admit).
type u8s8Spec struct{ kernelOnly bool }

func (u u8s8Spec) natives(ks kernelSet) []*native[kernels.GEMMU8S8] {
	kern := ks.u8s8
	if u.kernelOnly {
		kern = append(slices.Clip(kern), ks.attention...)
	}
	return nativesOf(kern, func(k *kernels.Kernel) *native[kernels.GEMMU8S8] {
		return &native[kernels.GEMMU8S8]{k.Name, k.ISA, k.NR, k.Available, k.Accepts, k.RunU8S8, k}
	})
}

func (u8s8Spec) withB(g *kernels.GEMMU8S8, packed any) { g.B = packed.(*kernels.PackedS8) }

func (u u8s8Spec) oneDNN(p *dnnlPrims) cand[kernels.GEMMU8S8] {
	if u.kernelOnly {
		return nil
	}
	return &dnnlU8S8{p}
}

func (u8s8Spec) pack(w any, n, k, nr int) (any, error) {
	return kernels.PackS8(n, k, w.([]int8), k, nr)
}

func (u8s8Spec) prepare(l *Linear[kernels.GEMMU8S8], g *kernels.GEMMU8S8) (*kernels.GEMMU8S8, int, Key, error) {
	if err := l.shape(g.N, g.K, g.B != nil); err != nil {
		return nil, 0, Key{}, err
	}
	run := *g
	run.N, run.K = l.n, l.k
	chk := run
	chk.B = &kernels.PackedS8{N: l.n, K: l.k}
	if err := chk.Check(); err != nil {
		return nil, 0, Key{}, fmt.Errorf("selector: u8s8 linear run: %w", err)
	}
	if run.M == 0 {
		return &run, 0, Key{}, nil
	}
	key, err := U8S8Key(run.M, l.k, l.n, run.Ep, run.Out, run.Threads)
	return &run, run.M, key, err
}

// NewLinear prepares the int8 weights w ([n][ldw], ldw >= k) for Run. w is
// copied. Its calls compute Out = Ep(A x W^T) for the M rows of A
// ([M][Lda]): Out has exactly one destination (see kernels.Out); an s32
// destination takes no epilogue, a u8 or s8 one needs Ep.OutScale > 0.
// With Ep.ZeroPoint set, Ep.ColSum must be ColSum(): oneDNN compensates
// from the weights themselves. Ep.ColScale, the weight scales, should be
// the same slice on every call: oneDNN packs them with the weights.
func (s *Selector) NewLinear(n, k int, w []int8, ldw int) (*Linear[kernels.GEMMU8S8], error) {
	l, c, err := newLinear(s, s.u8s8, n, k, w, ldw)
	if err != nil {
		return nil, err
	}
	l.colSum = kernels.ColSums(n, k, c, k)
	return l, nil
}

// ColSum returns the column sums of W (one per output feature) of a u8s8
// Linear, the Epilogue.ColSum a shifted u8 source (Epilogue.ZeroPoint)
// needs; nil for the other operations. Do not modify it.
func (l *Linear[G]) ColSum() []int32 { return l.colSum }

// u8s8Form returns a call of key's form for a kernel of panel width nr:
// what a kernel's Takes reads (B's NR, K, threads, which epilogue steps are
// set, the destination type). Its slices are placeholders, not operands.
func u8s8Form(key Key, nr int) *kernels.GEMMU8S8 {
	kind := key.Epilogue
	f1, i1 := []float32{0}, []int32{0}
	g := &kernels.GEMMU8S8{M: key.M, N: key.N, K: key.K, Lda: kernels.RowStrideU8(key.K), Threads: key.Threads,
		B: &kernels.PackedS8{N: key.N, K: key.K, NR: nr}}
	switch kind.Out {
	case S32:
		g.Out.S32 = i1
		return g
	case F32:
		g.Out.F32 = f1
	case U8:
		g.Out.U8 = []uint8{0}
	case S8:
		g.Out.S8 = []int8{0}
	}
	ep := &kernels.Epilogue{Act: kind.Act}
	if kind.ZeroPoint {
		ep.ZeroPoint, ep.ColSum = 128, i1
	}
	if kind.ActScale {
		ep.ActScale = 1
	}
	if kind.RowScale {
		ep.RowScale = f1
	}
	if kind.ColScale {
		ep.ColScale = f1
	}
	if kind.Bias {
		ep.Bias = f1
	}
	if kind.Residual {
		ep.Residual = f1
	}
	if kind.Out == U8 || kind.Out == S8 {
		ep.OutScale = 1
	}
	g.Ep = ep
	return g
}

// u8s8Data is a random problem of a key's shape with its reference
// result on some rows.
type u8s8Data struct {
	key  Key
	g    kernels.GEMMU8S8
	outs outputs[kernels.Out]
	rows []int       // rows compared with the reference
	ref  kernels.Out // len(rows) x n
}

func (u8s8Spec) problem(s *Selector, key Key) (*Linear[kernels.GEMMU8S8], trialData[kernels.GEMMU8S8], error) {
	r := trialRand(key, 0x8be7)
	m, k, n := key.M, key.K, key.N
	w := make([]int8, n*k)
	for i := range w {
		w[i] = int8(r.IntN(255) - 127)
	}
	l, err := s.NewLinear(n, k, w, k)
	if err != nil {
		return nil, nil, err
	}
	l.trial = true // a tuning's problem: its packs are not the model's (Stats.Packs)
	// A's rows are kernels.RowStrideU8(k) apart, as the encoder lays out a
	// linear's u8 input: at k a multiple of 4096 a packed A would time the
	// 8- and 12-row VNNI tiles in an L1 set-aliasing slow mode that the
	// model's calls do not meet.
	lda := kernels.RowStrideU8(k)
	a := make([]uint8, m*lda)
	for i := range a {
		a[i] = uint8(r.IntN(256))
	}
	t := &u8s8Data{key: key, outs: outputs[kernels.Out]{make: func() kernels.Out { return newOut(key.Epilogue.Out, m, n) }, reset: fillOut}}
	t.g = kernels.GEMMU8S8{M: m, N: n, K: k, A: a, Lda: lda, Ep: randomEpilogue(r, key), Threads: key.Threads}
	if t.g.Ep != nil && t.g.Ep.ZeroPoint != 0 {
		t.g.Ep.ColSum = l.colSum
	}
	t.rows = verifyRows(r, m, k, n, s.opts.VerifyMACs)
	if err := t.reference(l); err != nil {
		l.Close()
		return nil, nil, err
	}
	return l, t, nil
}

// trialRand is the random source of a key's problem: the same data for the
// same key in every run.
func trialRand(key Key, salt uint64) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(key.String()))
	return rand.New(rand.NewPCG(h.Sum64(), salt))
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

// fillOut fills o again as newOut does.
func fillOut(o kernels.Out) {
	for i := range o.S32 {
		o.S32[i] = math.MinInt32 + 12345
	}
	for i := range o.F32 {
		o.F32[i] = float32(math.NaN())
	}
	clear(o.U8)
	clear(o.S8)
}

// reference runs the generic kernel on the problem's rows.
func (t *u8s8Data) reference(l *Linear[kernels.GEMMU8S8]) error {
	k, n := t.key.K, t.key.N
	mr := len(t.rows)
	a, ep := gatherRows(t.g.A, t.g.Lda, k, n, t.rows, t.g.Ep)
	t.ref = newOut(t.key.Epilogue.Out, mr, n)
	p, err := l.packed(kernels.GenericU8S8.NR)
	if err != nil {
		return err
	}
	g := kernels.GEMMU8S8{M: mr, N: n, K: k, A: a, Lda: k, B: p.(*kernels.PackedS8), Ep: ep, Out: t.ref, Threads: 1}
	if err := kernels.GenericU8S8.RunU8S8(&g); err != nil {
		return fmt.Errorf("reference: %w", err)
	}
	return nil
}

// gatherRows returns the rows of a ([][lda], k used) and of the
// epilogue's row-wise operands (row scales, residual) that the reference
// check compares, packed densely. The epilogue is a copy; nil stays nil.
func gatherRows[E uint8 | float32](a []E, lda, k, n int, rows []int, src *kernels.Epilogue) ([]E, *kernels.Epilogue) {
	mr := len(rows)
	out := make([]E, mr*k)
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
	for q, i := range rows {
		copy(out[q*k:(q+1)*k], a[i*lda:i*lda+k])
		if ep != nil && ep.RowScale != nil {
			ep.RowScale[q] = src.RowScale[i]
		}
		if ep != nil && ep.Residual != nil {
			lr := ldr(src, n)
			copy(ep.Residual[q*n:(q+1)*n], src.Residual[i*lr:i*lr+n])
		}
	}
	return out, ep
}

func (t *u8s8Data) call(name string) *kernels.GEMMU8S8 {
	g := t.g
	g.Out = t.outs.get(name)
	return &g
}

// verify compares the candidate's output on the trial's rows: int32 exactly,
// f32 within 1e-4 relative, u8 and s8 within 1.
func (t *u8s8Data) verify(name string) error {
	got, ref := t.outs.get(name), t.ref
	within1 := func(g, w int) bool { return g-w <= 1 && w-g <= 1 }
	switch t.key.Epilogue.Out {
	case S32:
		return compareRows(t.rows, t.key.N, func(g, w int) bool { return got.S32[g] == ref.S32[w] },
			func(g, w int) string { return fmt.Sprintf("got %v, want %v", got.S32[g], ref.S32[w]) })
	case F32:
		var ss float64
		for _, v := range ref.F32 {
			ss += float64(v) * float64(v)
		}
		rms := math.Sqrt(ss / float64(max(len(ref.F32), 1)))
		return compareRows(t.rows, t.key.N, func(g, w int) bool {
			gv, wv := float64(got.F32[g]), float64(ref.F32[w])
			return math.Abs(gv-wv) <= 1e-4*max(math.Abs(wv), rms)
		}, func(g, w int) string { return fmt.Sprintf("got %v, want %v", got.F32[g], ref.F32[w]) })
	case U8:
		return compareRows(t.rows, t.key.N, func(g, w int) bool { return within1(int(got.U8[g]), int(ref.U8[w])) },
			func(g, w int) string { return fmt.Sprintf("got %v, want %v", got.U8[g], ref.U8[w]) })
	case S8:
		return compareRows(t.rows, t.key.N, func(g, w int) bool { return within1(int(got.S8[g]), int(ref.S8[w])) },
			func(g, w int) string { return fmt.Sprintf("got %v, want %v", got.S8[g], ref.S8[w]) })
	}
	return fmt.Errorf("selector: no check for destination %q: %w", t.key.Epilogue.Out, ErrKey)
}
