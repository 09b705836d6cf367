package encoder

import (
	"fmt"
	"math"

	"github.com/int8bert/int8bert/kernels"
	"github.com/int8bert/int8bert/selector"
)

// HeadAct is the activation after a head's dense layer.
type HeadAct int

// Head activations.
const (
	HeadNone HeadAct = iota
	HeadTanh
	HeadReLU
	// HeadGELU and HeadGELUTanh are the exact (erf) GELU and its tanh
	// approximation, in the GEMM's epilogue (ELECTRA's classifier,
	// masked-LM transforms).
	HeadGELU
	HeadGELUTanh
)

// epilogueAct is the activation the GEMM's epilogue applies for a (tanh
// is applied after it).
func (a HeadAct) epilogueAct() kernels.Activation {
	switch a {
	case HeadReLU:
		return kernels.ActReLU
	case HeadGELU:
		return kernels.ActGELU
	case HeadGELUTanh:
		return kernels.ActGELUTanh
	}
	return kernels.ActNone
}

// headActOf is the head activation of an encoder activation.
func headActOf(a kernels.Activation) HeadAct {
	switch a {
	case kernels.ActGELU:
		return HeadGELU
	case kernels.ActGELUTanh:
		return HeadGELUTanh
	case kernels.ActReLU:
		return HeadReLU
	}
	return HeadNone
}

// Dense is a head's linear layer y = act(x W^T + b), W [N][K].
type Dense struct {
	lin  *selector.Linear[kernels.GEMMF32]
	bias []float32
	N, K int
	act  HeadAct
}

// NewDense reads weight [n][k] and bias [n] and prepares the layer on sel.
func NewDense(l *Loader, sel *selector.Selector, weight, bias string, n, k int, act HeadAct) (*Dense, error) {
	w, err := l.Get(weight, n, k)
	if err != nil {
		return nil, err
	}
	b, err := l.Get(bias, n)
	if err != nil {
		return nil, err
	}
	lin, err := sel.NewLinearF32(n, k, w, k)
	if err != nil {
		return nil, fmt.Errorf("encoder: head %s: %w", weight, err)
	}
	return &Dense{lin: lin, bias: b, N: n, K: k, act: act}, nil
}

// Apply runs the layer on rows rows of x (row stride ldx) and returns
// [rows][N].
func (d *Dense) Apply(rows int, x []float32, ldx, threads int) ([]float32, error) {
	return d.ApplyTo(nil, rows, x, ldx, threads)
}

// ApplyTo is Apply writing into y when it holds at least rows x N values
// (it returns y[:rows*N]), else into a new slice. y must not overlap x.
func (d *Dense) ApplyTo(y []float32, rows int, x []float32, ldx, threads int) ([]float32, error) {
	return d.applyAs(y, rows, 0, x, ldx, threads)
}

// applyAs is ApplyTo on the kernel chosen for asRows rows (0: rows), for
// a pass whose rows left it (passLive).
func (d *Dense) applyAs(y []float32, rows, asRows int, x []float32, ldx, threads int) ([]float32, error) {
	if len(y) < rows*d.N {
		y = make([]float32, rows*d.N)
	}
	y = y[:rows*d.N]
	ep := &kernels.Epilogue{Bias: d.bias, Act: d.act.epilogueAct()}
	if err := d.lin.RunAs(&kernels.GEMMF32{M: rows, A: x, Lda: ldx, Ep: ep, C: y, Ldc: d.N, Threads: threads}, asRows); err != nil {
		return nil, err
	}
	if d.act == HeadTanh {
		for i, v := range y {
			y[i] = float32(math.Tanh(float64(v)))
		}
	}
	return y, nil
}

// Close releases the layer.
func (d *Dense) Close() error {
	if d == nil || d.lin == nil {
		return nil
	}
	return d.lin.Close()
}

// CLSRows gathers the first token of every sequence: [Batch][Hidden]
// (at each sequence's first row, Output.Rows, in either layout).
func (o *Output) CLSRows() []float32 {
	out := make([]float32, o.Batch*o.Hidden)
	for b := 0; b < o.Batch; b++ {
		r, _ := o.Rows(b)
		copy(out[b*o.Hidden:(b+1)*o.Hidden], o.Last[r*o.Hidden:])
	}
	return out
}

// MeanPool averages each sequence's hidden states over its unmasked
// tokens: [Batch][Hidden]. mask is the inputs' (one value per row of
// Last); nil counts every row of a sequence, as packed inputs without a
// mask mean. A sequence with no token gives zeros.
func (o *Output) MeanPool(mask []int32) []float32 {
	h := o.Hidden
	out := make([]float32, o.Batch*h)
	acc := make([]float64, h)
	for b := 0; b < o.Batch; b++ {
		meanRows(out[b*h:(b+1)*h], acc, o, b, mask)
	}
	return out
}

// MeanRow writes into v (Hidden values) the mean of sequence b's unmasked
// rows (zeros for none), as MeanPool does for every sequence.
func (o *Output) MeanRow(v []float32, b int, mask []int32) {
	meanRows(v, make([]float64, o.Hidden), o, b, mask)
}

// meanRows writes into v the mean of sequence b's unmasked rows of o
// (zeros for none); acc is Hidden values of scratch.
func meanRows(v []float32, acc []float64, o *Output, b int, mask []int32) {
	h := o.Hidden
	clear(acc)
	n := 0
	start, end := o.Rows(b)
	for i := start; i < end; i++ {
		if mask != nil && mask[i] == 0 {
			continue
		}
		n++
		for j, x := range o.Last[i*h : (i+1)*h] {
			acc[j] += float64(x)
		}
	}
	for j := range acc {
		v[j] = 0
		if n > 0 {
			v[j] = float32(acc[j] / float64(n))
		}
	}
}

// Normalize scales each of the rows of x ([rows][dim]) to unit L2 norm
// (zero rows stay zero).
func Normalize(x []float32, rows, dim int) {
	for r := 0; r < rows; r++ {
		row := x[r*dim : (r+1)*dim]
		var s float64
		for _, v := range row {
			s += float64(v) * float64(v)
		}
		if s == 0 {
			continue
		}
		inv := 1 / math.Sqrt(s)
		for j := range row {
			row[j] = float32(float64(row[j]) * inv)
		}
	}
}
