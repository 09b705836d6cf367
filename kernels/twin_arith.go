package kernels

import "math"

// The float32 arithmetic the twins share, as the assembly performs it: the
// fused multiply-add rounded once (fma32) and the two float32 GELUs of the
// epilogues (geluF32, geluQ8F32), used by the VNNI, AVX2 and FP32 epilogue
// twins and by the element-wise twins.

// geluF32 is the float32 GELU of the assembly epilogue (vnniEpilogueS,
// vnniEpilogue3S), step for step:
// 0.5*x*erfc(-x/sqrt2) with erfc from Numerical Recipes' erfcc (relative
// error < 1.2e-7), z^2 kept exact as x*x plus its FMA residual, exp
// range-reduced on the exact part (its Taylor coefficients carry the 1/2),
// both polynomials as an even and an odd half in the square of their
// argument. (The Horner epilogues, vnniEpilogue and vnniEpilogue3, differ
// from it only in rounding.)
// Relative error against float64 GELU: below 6e-7 (5.89e-7 on the sweep of
// TestGELUF32Accuracy; the Horner order: 3.63e-7).
func geluF32(x float32) float32 {
	fma := func(a, b, c float32) float32 { return float32(math.FMA(float64(a), float64(b), float64(c))) }
	ax := min(float32(math.Abs(float64(x))), 20)
	t := float32(1) / fma(ax, float32(0.5/math.Sqrt2), 1)
	// P(t) = E(t^2) + t*O(t^2), as vnniEpilogueS and vnniEpilogue3S.
	t2 := t * t
	po, pe := float32(0.17087277), float32(-0.82215223)
	for _, c := range [...][2]float32{{1.48851587, -1.13520398}, {0.27886807, -0.18628806},
		{0.09678418, 0.37409196}, {1.00002368, -1.26551223}} {
		po, pe = fma(t2, po, c[0]), fma(t2, pe, c[1])
	}
	p := fma(t, po, pe)
	hi := ax * ax
	lo := fma(ax, ax, -hi)
	a := hi * -0.5
	b := fma(lo, -0.5, p)
	nf := float32(math.RoundToEven(float64((a + b) * float32(math.Log2E))))
	f := fma(nf, -0.693145751953125, a)
	f = fma(nf, -1.428606765330187045e-06, f)
	f += b
	f2 := f * f
	eo, ee := float32(0.5/5040), float32(0.5/720)
	for _, c := range [...][2]float32{{0.5 / 120, 0.5 / 24}, {0.5 / 6, 0.25}, {0.5, 0.5}} {
		eo, ee = fma(f2, eo, c[0]), fma(f2, ee, c[1])
	}
	e := fma(f, eo, ee)
	h := t * scale2n(e, nf)
	xh := x * h
	if math.Signbit(float64(x)) {
		return xh
	}
	return x - xh
}

// geluQ8Clamp bounds x in geluQ8F32: beyond it erf(x/sqrt2) is 1 within
// 7e-8. It is the float32 near 5.4 where the float32 steps of geluQ8F32 give
// xc*P/Q = 0.5 + 3.4e-8 exactly: phi(geluQ8Clamp) rounds to exactly 1 and
// phi(-geluQ8Clamp) is negative, floored to exactly 0, so GELU(x) is x
// above the clamp (MaxFloat32 included) and -0 below its negative.
const geluQ8Clamp = float32(5.39902306)

// geluQ8P and geluQ8Q are the numerator (degree 6 in s = x^2, lowest
// first) and the denominator (degree 3, constant 1) of x*P(s)/Q(s) =
// erf(x/sqrt2)/2 on [0, 5.4]: a Lawson-weighted (near-minimax) rational fit
// of absolute error 1.5e-7, rounded to float32 (mirrored in _gen/gemm_u8s8_vnni).
var (
	geluQ8P = [7]float32{0.398943156, 0.0188730471, 0.00337341172, -1.12970756e-05, 1.0707414e-06, -1.8711102e-08, 1.324474e-10}
	geluQ8Q = [4]float32{1, 0.213986263, 0.019102091, 0.000794661115}
)

// geluQ8F32 is the float32 GELU of the VNNI epilogues (flag vnniGELU8: all
// but f32 outputs with Epilogue.PreciseGELU), step for step as the assembly
// (gelu8 in _gen/gemm_u8s8_vnni): x*phi(x) with phi(x) = 1/2 + erf(x/sqrt2)/2
// evaluated as
//
//	xc = min(max(x, -geluQ8Clamp), geluQ8Clamp), s = xc*xc
//	phi = max(fma(xc, P(s)/Q(s), 1/2), 0)
//
// P and Q by Horner in FMAs and one correctly rounded division: about a
// third of the instructions of geluF32, whose accuracy (relative, in the
// far negative tail too) neither an 8-bit output nor a float32 erf GELU
// shows. Absolute error against the float64 erf GELU: below
// 3e-7*max(1, |x|) (TestGELUQ8Accuracy; one quantization step is ~1e-2).
// GELU(x) is exactly x for x >= 5.4 and -0 for x <= -5.4; NaN stays NaN
// (and requantizes to the zero point).
func geluQ8F32(x float32) float32 {
	xc := min(max(x, -geluQ8Clamp), geluQ8Clamp)
	s := float32(xc * xc)
	p := geluQ8P[6]
	for k := 5; k >= 0; k-- {
		p = fma32(s, p, geluQ8P[k])
	}
	q := geluQ8Q[3]
	for k := 2; k >= 0; k-- {
		q = fma32(s, q, geluQ8Q[k])
	}
	phi := max(fma32(xc, p/q, 0.5), 0)
	return x * phi
}

// fma32 is the float32 fused multiply-add a*b+c, rounded once as VFMADD*PS
// rounds it. The float64 FMA rounds a*b+c once to float64; rounding that to
// float32 gives the float32 FMA unless the float64 result is a float32 tie
// (its 29 low fraction bits exactly a half: the first rounding may have
// made it one) or below float32's normal range (where float32's rounding
// position moves): those take fma32Exact. The Go twins of the element-wise
// kernels call this for every operation.
func fma32(a, b, c float32) float32 {
	s := math.FMA(float64(a), float64(b), float64(c))
	bits := math.Float64bits(s)
	if bits&(1<<29-1) != 1<<28 && (bits&^(1<<63) >= 0x3810000000000000 || bits&^(1<<63) == 0) {
		return float32(s)
	}
	return fma32Exact(a, b, c)
}

// fma32Exact is fma32 without the float64 FMA: a*b is exact in float64, the
// sum is rounded to odd there, and rounding that to float32 is then correct
// (Boldo and Melquiond; rounding float64(a*b+c) to nearest twice could land
// on a tie).
func fma32Exact(a, b, c float32) float32 {
	p := float64(a) * float64(b)
	s := p + float64(c)
	bb := s - p
	if e := (p - (s - bb)) + (float64(c) - bb); e != 0 && !math.IsInf(s, 0) && math.Float64bits(s)&1 == 0 {
		if (e > 0) == (s > 0) {
			s = math.Float64frombits(math.Float64bits(s) + 1)
		} else {
			s = math.Float64frombits(math.Float64bits(s) - 1)
		}
	}
	return float32(s)
}
