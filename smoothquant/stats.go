package smoothquant

import (
	"math"

	"gonum.org/v1/gonum/mat"
)

// The calibration statistics that are vector algebra, computed with
// gonum/mat in float64: they run once per layer (WeightColMax) or once per
// alpha tried (SQNR), never at inference. The per-channel extremes the
// Observer keeps while calibration streams rows through it, and the
// percentiles, are running reductions and order statistics rather than
// algebra, and stay hand-written.

// SQNR returns 10*log10(sum ref^2 / sum (got-ref)^2) in dB, computed as
// 20*log10(||ref||_2 / ||got-ref||_2) with gonum's overflow-safe float64
// norms: +Inf when got equals ref (including both all zero), -Inf when ref
// is all zero but got is not, NaN when the lengths differ.
func SQNR(ref, got []float32) float64 {
	if len(ref) != len(got) {
		return math.NaN()
	}
	if len(ref) == 0 {
		return math.Inf(1) // no noise
	}
	r := make([]float64, len(ref))
	d := make([]float64, len(ref))
	for i, v := range ref {
		r[i] = float64(v)
		d[i] = float64(got[i]) - float64(v) // exact: two float32s
	}
	noise := mat.NewVecDense(len(d), d).Norm(2)
	if noise == 0 {
		return math.Inf(1)
	}
	return 20 * math.Log10(mat.NewVecDense(len(r), r).Norm(2)/noise)
}

// WeightColMax returns max_n |W[n][j]| for each input channel j of w
// ([n][k] row-major): the infinity norm of each column of W. Short or
// mis-sized input gives nil; n = 0 gives k zeros. W is expected finite
// (QuantizeLinear refuses other weights); a column whose first value is NaN
// reports NaN, which SmoothFactors turns into a factor of 1.
func WeightColMax(w []float32, n, k int) []float32 {
	if n < 0 || k < 0 || len(w) < n*k {
		return nil
	}
	m := make([]float32, k)
	if n == 0 || k == 0 {
		return m
	}
	w64 := make([]float64, n*k)
	for i, v := range w[:n*k] {
		w64[i] = float64(v)
	}
	wd := mat.NewDense(n, k, w64)
	for j := range m {
		// Exact: a maximum of exactly converted float32 magnitudes.
		m[j] = float32(mat.Norm(wd.ColView(j), math.Inf(1)))
	}
	return m
}
