package selector

import (
	"github.com/int8bert/int8bert/dnnl"
	"github.com/int8bert/int8bert/kernels"
)

// bf16Spec is the operation OpBF16: f32 activations rounded to bf16 in the
// call times weights rounded to bf16 and packed once (kernels.GEMMBF16),
// float32 sums, with the FP32 epilogue (bias, activation, residual), on the
// kernels of kernels.BF16Kernels() and oneDNN's bf16 x bf16 -> f32 matmul
// (docs/DESIGN.md 4.11), whose source is rounded per call (kernels.ToBF16)
// and whose weights oneDNN's packing converts. Its reference is
// kernels.GemmBF16Ref: the bf16-rounded operands multiplied and summed in
// float64; the products are exact, so only the float32 summation differs
// from it, as for f32 (f32RelTol). Without oneDNN (kernelOnly) it is
// OpBF16Kernel, whose calls the caller runs itself on the kernel chosen.
func bf16Spec(kernelOnly bool) *floatSpec[kernels.GEMMBF16] {
	return &floatSpec[kernels.GEMMBF16]{
		op: OpBF16, kernelOnly: kernelOnly, salt: 0xbf16,
		packW: func(n, k int, w []float32, nr int) (any, error) { return kernels.PackBF16(n, k, w, k, nr) },
		reference: func(m, n, k int, a, w, c []float32, ep *kernels.Epilogue) ([]float64, error) {
			abs := make([]float64, m*n)
			return abs, kernels.GemmBF16Ref(m, n, k, a, k, w, k, c, n, ep, abs)
		},
		dnnlType: dnnl.BF16,
		dnnlSrc: func(a []float32, m, k, lda int) any {
			src := make([]uint16, m*k)
			for i := 0; i < m; i++ {
				for q, x := range a[i*lda : i*lda+k] {
					src[i*k+q] = kernels.ToBF16(x)
				}
			}
			return src
		},
	}
}

// bf16RelTol is the reference check's tolerance relative to the sum of the
// magnitudes that make a value (sum_k |a||w| of the rounded operands, the
// bias and residual): f32RelTol, as the products are exact.
const bf16RelTol = f32RelTol

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
