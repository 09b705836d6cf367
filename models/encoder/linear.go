package encoder

import (
	"fmt"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/kernels"
	"github.com/int8bert/int8bert/selector"
)

// linear is one of an FP32 or BF16 layer's four linears: a call is a
// kernels.GEMMF32 (f32 input and output, the epilogue of the f32 kernels)
// whatever the arithmetic inside.
type linear interface {
	Run(g *kernels.GEMMF32) error
	// RunAs is Run on the kernel chosen for a call of asRows rows
	// (selector.Linear.RunAs; 0: g's own).
	RunAs(g *kernels.GEMMF32, asRows int) error
	// key is the selector key of a call of rows rows with epilogue ep on
	// th threads; Prepare tunes and packs the linear for it (the warm-up).
	key(rows int, ep *kernels.Epilogue, th int) selector.Key
	Prepare(key selector.Key) error
	Bytes() int
	Trim() int
	Compact() int
	Close() error
}

// f32Linear is an FP32 linear.
type f32Linear struct {
	*selector.Linear[kernels.GEMMF32]
}

func (l f32Linear) key(rows int, ep *kernels.Epilogue, th int) selector.Key {
	return selector.F32Key(rows, l.K(), l.N(), ep, th)
}

// newF32Linear makes the FP32 linear of weights w ([n][k]); newBF16Linear
// is its BF16 twin, which newModel picks once for every linear of a BF16
// model.
func newF32Linear(sel *selector.Selector, n, k int, w []float32) (linear, error) {
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

// bf16Linear is a BF16 linear: its weights are rounded to bfloat16 and
// packed once, every call's input is rounded to bfloat16 inside the
// product, which accumulates in float32 (docs/DESIGN.md sections 3.9 and
// 4.11), on the BF16 kernel the selector chose for the call.
type bf16Linear struct {
	*selector.Linear[kernels.GEMMBF16]
}

func newBF16Linear(sel *selector.Selector, n, k int, w []float32) (linear, error) {
	if err := checkBF16(sel); err != nil {
		return nil, err
	}
	l, err := sel.NewLinearBF16(n, k, w, k)
	if err != nil {
		return nil, err
	}
	return bf16Linear{l}, nil
}

func (l bf16Linear) key(rows int, ep *kernels.Epilogue, th int) selector.Key {
	return selector.BF16Key(rows, l.K(), l.N(), ep, th)
}

// Run runs g's product in bf16.
func (l bf16Linear) Run(g *kernels.GEMMF32) error { return l.RunAs(g, 0) }

// RunAs is Run on the kernel chosen for asRows rows.
func (l bf16Linear) RunAs(g *kernels.GEMMF32, asRows int) error {
	return l.Linear.RunAs(&kernels.GEMMBF16{M: g.M, N: g.N, K: g.K, A: g.A, Lda: g.Lda, Ep: g.Ep, C: g.C, Ldc: g.Ldc, Threads: g.Threads}, asRows)
}
