package kernels

import (
	"errors"
	"fmt"
	"math"
)

// ErrShape is wrapped by every error about sizes, strides or lengths.
var ErrShape = errors.New("kernels: bad shape")

// CheckGEMM validates the sizes of a GEMM's operands: A is [m][lda] with
// lda >= k, B is [n][ldb] with ldb >= k, C is [m][ldc] with ldc >= n, and each
// slice long enough for its last row.
func CheckGEMM(m, n, k, lenA, lda, lenB, ldb, lenC, ldc int) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("kernels: gemm m=%d n=%d k=%d: %s: %w", m, n, k, fmt.Sprintf(format, args...), ErrShape)
	}
	switch {
	case m < 0 || n < 0 || k < 0:
		return bad("negative dimension")
	case lda < max(k, 1):
		return bad("lda=%d < k", lda)
	case ldb < max(k, 1):
		return bad("ldb=%d < k", ldb)
	case ldc < max(n, 1):
		return bad("ldc=%d < n", ldc)
	}
	if m > 0 && k > 0 && lenA < (m-1)*lda+k {
		return bad("len(a)=%d, want >= %d", lenA, (m-1)*lda+k)
	}
	if n > 0 && k > 0 && lenB < (n-1)*ldb+k {
		return bad("len(b)=%d, want >= %d", lenB, (n-1)*ldb+k)
	}
	if m > 0 && n > 0 && lenC < (m-1)*ldc+n {
		return bad("len(c)=%d, want >= %d", lenC, (m-1)*ldc+n)
	}
	return nil
}

// GemmU8S8S32Ref computes c[i][j] = sum_p a[i][p]*b[j][p] in exact int32
// (u8 activations times s8 weights, as VPDPBUSD does).
func GemmU8S8S32Ref(m, n, k int, a []uint8, lda int, b []int8, ldb int, c []int32, ldc int) error {
	return gemmInt8Ref(m, n, k, a, lda, b, ldb, c, ldc)
}

// GemmS8S8S32Ref computes c[i][j] = sum_p a[i][p]*b[j][p] in exact int32
// (s8 activations times s8 weights).
func GemmS8S8S32Ref(m, n, k int, a []int8, lda int, b []int8, ldb int, c []int32, ldc int) error {
	return gemmInt8Ref(m, n, k, a, lda, b, ldb, c, ldc)
}

func gemmInt8Ref[T uint8 | int8](m, n, k int, a []T, lda int, b []int8, ldb int, c []int32, ldc int) error {
	if err := CheckGEMM(m, n, k, len(a), lda, len(b), ldb, len(c), ldc); err != nil {
		return err
	}
	for i := 0; i < m; i++ {
		ar := a[i*lda : i*lda+k]
		for j := 0; j < n; j++ {
			br := b[j*ldb : j*ldb+k]
			var s int32
			for p, x := range ar {
				s += int32(x) * int32(br[p])
			}
			c[i*ldc+j] = s
		}
	}
	return nil
}

// GemmF32Ref computes c = epilogue(a x b^T) in float32 with float64
// accumulation (the reference is more exact than any fast kernel). ep may be
// nil; its scales and requantization fields are ignored here.
func GemmF32Ref(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, ep *Epilogue) error {
	if err := CheckGEMM(m, n, k, len(a), lda, len(b), ldb, len(c), ldc); err != nil {
		return err
	}
	if err := ep.checkFloat(m, n); err != nil {
		return err
	}
	for i := 0; i < m; i++ {
		ar := a[i*lda : i*lda+k]
		for j := 0; j < n; j++ {
			br := b[j*ldb : j*ldb+k]
			var s float64
			for p, x := range ar {
				s += float64(x) * float64(br[p])
			}
			c[i*ldc+j] = float32(ep.finish(i, j, n, s))
		}
	}
	return nil
}

// Activation is the element-wise function of an epilogue.
type Activation int

// The activations.
const (
	ActNone Activation = iota
	// ActGELU is the exact (erf) GELU Hugging Face BERT uses.
	ActGELU
	// ActGELUTanh is the tanh approximation of GELU.
	ActGELUTanh
	// ActReLU is max(x, 0).
	ActReLU
)

// String names the activation.
func (a Activation) String() string {
	switch a {
	case ActNone:
		return "none"
	case ActGELU:
		return "gelu"
	case ActGELUTanh:
		return "gelu_tanh"
	case ActReLU:
		return "relu"
	}
	return fmt.Sprintf("Activation(%d)", int(a))
}

// GELU is 0.5*x*(1+erf(x/sqrt 2)) in float64, computed as
// 0.5*x*erfc(-x/sqrt 2), which is the same function without the
// cancellation of 1+erf for negative x.
func GELU(x float64) float64 { return 0.5 * x * math.Erfc(-x/math.Sqrt2) }

// GELUTanh is the tanh approximation of GELU in float64.
func GELUTanh(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

// Epilogue is what happens to each accumulator c[i][j] of a GEMM, in this
// order (docs/DESIGN.md section 3.5):
//
//	y = (acc - ZeroPoint*ColSum[j]) * rowScale(i) * ColScale[j]   (INT8 only)
//	y = y + Bias[j]
//	y = act(y)
//	y = y + Residual[i][j]
//	q = saturate(roundHalfEven(y*(1/OutScale) + OutZeroPoint))     (requantize)
//
// rowScale(i) is RowScale[i] when RowScale is set (dynamic, per token), else
// ActScale (static, per tensor; 0 means 1). A nil ColScale means 1. The
// compensation ZeroPoint*ColSum[j] undoes a u8 source that was shifted by
// ZeroPoint (128 for s8 data stored as u8). A nil *Epilogue is the identity.
type Epilogue struct {
	ZeroPoint  int32
	ColSum     []int32
	ActScale   float32
	RowScale   []float32
	ColScale   []float32
	Bias       []float32
	Act        Activation
	Residual   []float32
	LdResidual int // 0 means n
	// OutScale and OutZeroPoint requantize (RequantRef only).
	OutScale     float32
	OutZeroPoint int32
	// PreciseGELU asks the native assembly kernels (AVX512-VNNI and FP32)
	// for their erfc form of ActGELU on float32 outputs: within 6e-7 of the
	// float64 GELU relative to the result, even in the far negative tail
	// where it is a few denormals, at about twice the cost. Without it they
	// use a rational erf within 3e-7*max(1, |x|) absolute (what a float32
	// erf GELU such as PyTorch's or oneDNN's guarantees, and far below
	// INT8's own error); requantized outputs always use that one. The Go
	// kernels and the references compute the float64 GELU.
	PreciseGELU bool
}

func (ep *Epilogue) checkFloat(m, n int) error {
	if ep == nil {
		return nil
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("kernels: epilogue m=%d n=%d: %s: %w", m, n, fmt.Sprintf(format, args...), ErrShape)
	}
	if ep.Bias != nil && len(ep.Bias) < n {
		return bad("len(bias)=%d < n", len(ep.Bias))
	}
	if ep.Residual != nil {
		ld := ep.ldr(n)
		if ld < n {
			return bad("residual stride %d < n", ld)
		}
		if m > 0 && n > 0 && len(ep.Residual) < (m-1)*ld+n {
			return bad("len(residual)=%d, want >= %d", len(ep.Residual), (m-1)*ld+n)
		}
	}
	if ep.Act < ActNone || ep.Act > ActReLU {
		return bad("unknown activation %d", int(ep.Act))
	}
	return nil
}

func (ep *Epilogue) check(m, n int) error {
	if ep == nil {
		return nil
	}
	if err := ep.checkFloat(m, n); err != nil {
		return err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("kernels: epilogue m=%d n=%d: %s: %w", m, n, fmt.Sprintf(format, args...), ErrShape)
	}
	if ep.ZeroPoint != 0 && len(ep.ColSum) < n {
		return bad("zero point %d needs %d column sums, have %d", ep.ZeroPoint, n, len(ep.ColSum))
	}
	if ep.RowScale != nil && len(ep.RowScale) < m {
		return bad("len(row scale)=%d < m", len(ep.RowScale))
	}
	if ep.ColScale != nil && len(ep.ColScale) < n {
		return bad("len(col scale)=%d < n", len(ep.ColScale))
	}
	return nil
}

func (ep *Epilogue) ldr(n int) int {
	if ep.LdResidual == 0 {
		return n
	}
	return ep.LdResidual
}

// dequant turns an int32 accumulator into the scaled real value.
func (ep *Epilogue) dequant(i, j int, acc int32) float64 {
	if ep == nil {
		return float64(acc)
	}
	v := int64(acc)
	if ep.ZeroPoint != 0 {
		v -= int64(ep.ZeroPoint) * int64(ep.ColSum[j])
	}
	y := float64(v)
	switch {
	case ep.RowScale != nil:
		y *= float64(ep.RowScale[i])
	case ep.ActScale != 0:
		y *= float64(ep.ActScale)
	}
	if ep.ColScale != nil {
		y *= float64(ep.ColScale[j])
	}
	return y
}

// finish applies bias, activation and residual.
func (ep *Epilogue) finish(i, j, n int, y float64) float64 {
	if ep == nil {
		return y
	}
	if ep.Bias != nil {
		y += float64(ep.Bias[j])
	}
	switch ep.Act {
	case ActGELU:
		y = GELU(y)
	case ActGELUTanh:
		y = GELUTanh(y)
	case ActReLU:
		y = math.Max(y, 0)
	}
	if ep.Residual != nil {
		y += float64(ep.Residual[i*ep.ldr(n)+j])
	}
	return y
}

// Value is the float64 result of ep for accumulator acc at row i, column j
// of an n-column output, before any requantization: dequantization, bias,
// activation and residual, as DequantRef computes each element.
func (ep *Epilogue) Value(i, j, n int, acc int32) float64 {
	return ep.finish(i, j, n, ep.dequant(i, j, acc))
}

// Dequant is the dequantized accumulator alone (compensation and scales).
func (ep *Epilogue) Dequant(i, j int, acc int32) float64 { return ep.dequant(i, j, acc) }

// DequantRef applies ep to the int32 accumulators acc ([m][ldacc]) and
// stores float32 results in out ([m][ldo]).
func DequantRef(m, n int, acc []int32, ldacc int, ep *Epilogue, out []float32, ldo int) error {
	if err := checkMN(m, n, len(acc), ldacc, len(out), ldo); err != nil {
		return err
	}
	if err := ep.check(m, n); err != nil {
		return err
	}
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			out[i*ldo+j] = float32(ep.Value(i, j, n, acc[i*ldacc+j]))
		}
	}
	return nil
}

// RequantU8Ref applies ep and requantizes to u8 (OutScale > 0 required).
func RequantU8Ref(m, n int, acc []int32, ldacc int, ep *Epilogue, out []uint8, ldo int) error {
	return requant(m, n, acc, ldacc, ep, out, ldo, 0, 255)
}

// RequantS8Ref applies ep and requantizes to s8 (OutScale > 0 required).
func RequantS8Ref(m, n int, acc []int32, ldacc int, ep *Epilogue, out []int8, ldo int) error {
	return requant(m, n, acc, ldacc, ep, out, ldo, -128, 127)
}

func requant[T uint8 | int8](m, n int, acc []int32, ldacc int, ep *Epilogue, out []T, ldo int, lo, hi float64) error {
	if err := checkMN(m, n, len(acc), ldacc, len(out), ldo); err != nil {
		return err
	}
	if err := ep.check(m, n); err != nil {
		return err
	}
	if ep == nil || !(ep.OutScale > 0) {
		return fmt.Errorf("kernels: requantize needs OutScale > 0: %w", ErrShape)
	}
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			y := ep.Value(i, j, n, acc[i*ldacc+j])
			out[i*ldo+j] = T(Quantize(y, ep.OutScale, ep.OutZeroPoint, lo, hi))
		}
	}
	return nil
}

// Quantize returns clamp(roundHalfEven(y*(1/scale) + zp), lo, hi), computed
// in float32 as the vector kernels and oneDNN do (multiply by the inverse
// scale, add the zero point, convert with round-half-even). NaN maps to zp.
func Quantize(y float64, scale float32, zp int32, lo, hi float64) float64 {
	q := math.RoundToEven(float64(float32(y)*(1/scale) + float32(zp)))
	if math.IsNaN(q) {
		return float64(zp)
	}
	return math.Min(math.Max(q, lo), hi)
}

func checkMN(m, n, lenAcc, ldacc, lenOut, ldo int) error {
	if m < 0 || n < 0 || ldacc < max(n, 1) || ldo < max(n, 1) {
		return fmt.Errorf("kernels: epilogue m=%d n=%d ldacc=%d ldo=%d: %w", m, n, ldacc, ldo, ErrShape)
	}
	if m > 0 && n > 0 && (lenAcc < (m-1)*ldacc+n || lenOut < (m-1)*ldo+n) {
		return fmt.Errorf("kernels: epilogue m=%d n=%d: len(acc)=%d len(out)=%d too short: %w", m, n, lenAcc, lenOut, ErrShape)
	}
	return nil
}

// ColSums returns, for each of the n rows of b ([n][ldb]), the sum of its k
// weights: the compensation term of a u8 source with a zero point.
func ColSums(n, k int, b []int8, ldb int) []int32 {
	s := make([]int32, n)
	for j := range s {
		for _, w := range b[j*ldb : j*ldb+k] {
			s[j] += int32(w)
		}
	}
	return s
}
