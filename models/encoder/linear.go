package encoder

import (
	"fmt"
	"sync"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/kernels"
	"github.com/int8bert/int8bert/selector"
)

// linear is one of an FP32 or BF16 layer's four linears: a call is a
// kernels.GEMMF32 (f32 input and output, the epilogue of the f32 kernels)
// whatever the arithmetic inside.
type linear interface {
	Run(g *kernels.GEMMF32) error
	// key is the selector key of a call of rows rows with epilogue ep on
	// th threads; Prepare tunes and packs the linear for it (the warm-up).
	key(rows int, ep *kernels.Epilogue, th int) selector.Key
	Prepare(key selector.Key) error
	Bytes() int
	Close() error
}

// f32Linear is an FP32 linear.
type f32Linear struct {
	*selector.Linear[kernels.GEMMF32]
}

func (l f32Linear) key(rows int, ep *kernels.Epilogue, th int) selector.Key {
	return selector.F32Key(rows, l.K(), l.N(), ep, th)
}

// newLinear makes the linear of weights w ([n][k]) at precision prec
// (PrecisionFP32 or PrecisionBF16).
func newLinear(sel *selector.Selector, prec Precision, n, k int, w []float32) (linear, error) {
	if prec == PrecisionBF16 {
		return newBF16Linear(sel, n, k, w)
	}
	l, err := sel.NewLinearF32(n, k, w, k)
	if err != nil {
		return nil, err
	}
	return f32Linear{l}, nil
}

// checkBF16 says why this CPU (as the selector sees it) cannot run the
// bf16 precision, or nil.
func checkBF16(sel *selector.Selector) error {
	f := sel.Features()
	if f.BF16Path() == cpu.ISANone {
		return fmt.Errorf("encoder: bf16 needs a CPU with AVX512-BF16 (or AMX-BF16); this one has neither (%s): run fp32 or int8 instead: %w",
			f.String(), ErrConfig)
	}
	return nil
}

// bf16Linear is a BF16 linear: its weights are rounded to bfloat16 once,
// and every call rounds its input to bfloat16 before the product, which
// accumulates in float32 (docs/DESIGN.md section 3.9).
type bf16Linear struct {
	*selector.Linear[kernels.GEMMF32]
	// a holds rounded inputs between calls.
	a sync.Pool
}

func newBF16Linear(sel *selector.Selector, n, k int, w []float32) (*bf16Linear, error) {
	if err := checkBF16(sel); err != nil {
		return nil, err
	}
	r := make([]float32, len(w))
	for i, v := range w {
		r[i] = kernels.FromBF16(kernels.ToBF16(v))
	}
	l, err := sel.NewLinearF32(n, k, r, k)
	if err != nil {
		return nil, err
	}
	return &bf16Linear{Linear: l}, nil
}

func (l *bf16Linear) key(rows int, ep *kernels.Epilogue, th int) selector.Key {
	return selector.F32Key(rows, l.K(), l.N(), ep, th)
}

// Run rounds g's input to bfloat16 and runs the product.
func (l *bf16Linear) Run(g *kernels.GEMMF32) error {
	k := l.K()
	if g.M <= 0 || g.Lda < k || len(g.A) < (g.M-1)*g.Lda+k {
		return l.Linear.Run(g) // the linear's own checks say what is wrong
	}
	n := g.M * k
	p, _ := l.a.Get().(*[]float32)
	if p == nil || cap(*p) < n {
		b := make([]float32, n)
		p = &b
	}
	a := (*p)[:n]
	for i := 0; i < g.M; i++ {
		src, dst := g.A[i*g.Lda:i*g.Lda+k], a[i*k:(i+1)*k]
		for j, v := range src {
			dst[j] = kernels.FromBF16(kernels.ToBF16(v))
		}
	}
	c := *g
	c.A, c.Lda = a, k
	err := l.Linear.Run(&c)
	l.a.Put(p)
	return err
}
