package smoothquant

import (
	"math"

	"github.com/int8bert/int8bert/kernels"
)

// Bounds of a smoothing factor.
const (
	MinSmooth = 1e-5
	MaxSmooth = 1e5
)

// SmoothFactors returns, for each input channel j of len(actAbsMax),
//
//	s_j = max|X_j|^alpha / max|W_:,j|^(1-alpha)
//
// computed in float64, clamped to [MinSmooth, MaxSmooth] and rounded to
// float32. A channel whose activation or weight maximum is 0, negative or not
// finite (or that wColMax does not cover) gets s_j = 1, so an all-zero
// channel never divides by zero. wColMax[j] = max_n |W[n][j]| (WeightColMax).
func SmoothFactors(actAbsMax, wColMax []float32, alpha float64) []float32 {
	s := make([]float32, len(actAbsMax))
	for j := range s {
		s[j] = 1
		if j >= len(wColMax) {
			continue
		}
		a, w := float64(actAbsMax[j]), float64(wColMax[j])
		if !(a > 0) || !(w > 0) || math.IsInf(a, 0) || math.IsInf(w, 0) {
			continue
		}
		v := math.Pow(a, alpha) / math.Pow(w, 1-alpha)
		if math.IsNaN(v) {
			continue
		}
		s[j] = float32(min(max(v, MinSmooth), MaxSmooth))
	}
	return s
}

// QuantizeWeights quantizes w*diag(smooth) ([n][k], smooth nil = 1) to
// symmetric int8 per output channel:
//
//	v[r][j]  = float32(w[r][j] * smooth[j])
//	scale[r] = float32(max_j |v[r][j]| / 127)          (an all-zero row: 1)
//	q[r][j]  = clamp(roundHalfEven(v[r][j] / scale[r]), -127, 127)
//
// It returns nil, nil for mis-sized arguments.
func QuantizeWeights(w []float32, n, k int, smooth []float32) (q []int8, scale []float32) {
	return quantizeWeights(w, n, k, smooth, 1)
}

func quantizeWeights(w []float32, n, k int, smooth []float32, threads int) (q []int8, scale []float32) {
	if n < 0 || k < 0 || len(w) < n*k || (smooth != nil && len(smooth) < k) {
		return nil, nil
	}
	q = make([]int8, n*k)
	scale = make([]float32, n)
	const block = 64
	tasks := (n + block - 1) / block
	kernels.Parallel(threads, tasks, func(t int) {
		v := make([]float32, k)
		for r := t * block; r < min(n, (t+1)*block); r++ {
			row := w[r*k : r*k+k]
			var m float32
			for j, x := range row {
				if smooth != nil {
					x *= smooth[j]
				}
				v[j] = x
				if a := abs32(x); a > m {
					m = a
				}
			}
			sc := float32(float64(m) / 127)
			if !(sc > 0) || math.IsInf(float64(sc), 0) {
				sc = 1
			}
			scale[r] = sc
			out := q[r*k : r*k+k]
			d := float64(sc)
			inv := 1 / d
			const magic = 1.5 * (1 << 52)
			for j, x := range v {
				// roundDiv, inlined: the fast path here, the exact
				// division near a half-integer.
				r := float64(x) * inv
				f := (r + magic) - magic
				if e := r - f; e > 0.5-1e-6 || e < -(0.5-1e-6) {
					out[j] = roundDiv(float64(x), d, inv)
					continue
				}
				if f > 127 {
					f = 127
				} else if f < -127 {
					f = -127
				}
				out[j] = int8(f)
			}
		}
	})
	return q, scale
}

// roundDiv returns clamp(roundHalfEven(x/d), -127, 127) given inv = 1/d.
// It multiplies by inv and rounds with the 1.5*2^52 trick (exact round half
// to even for |x*inv| < 2^51); where the product lies within 1e-6 of a
// half-integer, the reciprocal's error could flip the rounding, so it
// divides exactly instead.
func roundDiv(x, d, inv float64) int8 {
	const magic = 1.5 * (1 << 52)
	r := x * inv
	f := (r + magic) - magic
	if e := math.Abs(r - f); e > 0.5-1e-6 {
		r = x / d
		f = math.RoundToEven(r)
	}
	return int8(min(max(f, -127), 127))
}

// StaticActParams returns the per-tensor asymmetric u8 parameters of a
// tensor whose values lie in [lo, hi]. The range is widened to include 0
// (lo = min(0, lo), hi = max(0, hi)), scale = (hi-lo)/255 (a zero range or
// a non-finite one: 1) and zeroPoint = clamp(roundHalfEven(-lo/scale), 0,
// 255), so that 0 is exactly representable.
func StaticActParams(lo, hi float32) (scale float32, zeroPoint int32) {
	l, h := min(0, float64(lo)), max(0, float64(hi))
	if math.IsNaN(l) || math.IsNaN(h) {
		return 1, 0
	}
	scale = float32((h - l) / 255)
	if !(scale > 0) || math.IsInf(float64(scale), 0) {
		return 1, 0
	}
	zp := math.RoundToEven(-l / float64(scale))
	return scale, int32(min(max(zp, 0), 255))
}
