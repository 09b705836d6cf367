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
func f32Spec(kernelOnly bool) *floatSpec[kernels.GEMMF32] {
	return &floatSpec[kernels.GEMMF32]{
		op: OpF32, kernelOnly: kernelOnly, salt: 0xf32,
		packW: func(n, k int, w []float32, nr int) (any, error) { return kernels.PackF32(n, k, w, k, nr) },
		reference: func(m, n, k int, a, w, c []float32, ep *kernels.Epilogue) ([]float64, error) {
			return absSums(m, n, k, a, k, w), kernels.GemmF32Ref(m, n, k, a, k, w, k, c, n, ep)
		},
		dnnlType: dnnl.F32,
		dnnlSrc:  func(a []float32, m, k, lda int) any { return compact(a, m, k, lda) },
	}
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
			aa[p] = abs64(float64(a[i*lda+p]))
		}
		for j := 0; j < n; j++ {
			var s float64
			for p, x := range w[j*k : (j+1)*k] {
				s += aa[p] * abs64(float64(x))
			}
			out[i*n+j] = s
		}
	}
	return out
}

// abs64 is |v| (a NaN stays a NaN) by comparison: math.Abs goes through
// math.Float64bits, whose pointer conversion the race detector's checkptr
// instruments, which made this loop most of a tuning under -race.
func abs64(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}
