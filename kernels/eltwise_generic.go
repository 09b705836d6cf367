package kernels

import "math"

// The plain Go twins of the AVX-512 element-wise kernels. Each performs the
// same float32 operations in the same order as its assembly kernel (explicit
// float32 conversions keep the compiler from fusing a multiply and an add),
// so the two agree bit for bit; tests rely on it. Each takes its length from
// its first slice argument.

const eltLanes = 16

// Constants of the vector exp (Cephes expf: Cody-Waite reduction by ln 2 in
// two parts, degree-7 polynomial, relative error ~2e-7) and of erfc
// (Numerical Recipes' erfcc: fractional error < 1.2e-7 for all z >= 0).
const (
	eltLog2e  = float32(1.44269504088896341)
	eltLn2Hi  = float32(0.693359375)
	eltLn2Lo  = float32(-2.12194440e-4)
	eltExpMin = float32(-104) // exp(-104) rounds to 0 in float32
	eltExpMax = float32(88)

	eltInvSqrt2   = float32(0.70710678118654752440)
	eltGELUAbsMax = float32(14.5) // |x| is clamped here: erfc(14.5/sqrt 2) ~ 1e-47
	eltGELUZeroLT = float32(-14)  // GELU(x) for x < -14 is 0 in float32
	eltErfcK      = float32(-1.26551223)
)

var eltExpP = [...]float32{1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1}

var eltErfcP = [...]float32{0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418, 0.37409196, 1.00002368}

func eltReduceSum(a *[eltLanes]float32) float32 {
	for w := eltLanes / 2; w >= 1; w /= 2 {
		for i := 0; i < w; i++ {
			a[i] += a[i+w]
		}
	}
	return a[0]
}

// eltMax32 is VMAXPS(src1=a, src2=b): a if a > b, else b (so b on NaN).
func eltMax32(a, b float32) float32 {
	if a > b {
		return a
	}
	return b
}

func eltReduceMax(a *[eltLanes]float32) float32 {
	for w := eltLanes / 2; w >= 1; w /= 2 {
		for i := 0; i < w; i++ {
			a[i] = eltMax32(a[i], a[i+w])
		}
	}
	return a[0]
}

func eltAddSumGeneric(dst, x, r []float32) float32 {
	var acc [eltLanes]float32
	eltAddSumFrom(&acc, 0, dst, x, r)
	return eltReduceSum(&acc)
}

// eltAddSumFrom is the loop of eltAddSumGeneric from element j0 on, into
// the lane accumulators acc (lane j%16).
func eltAddSumFrom(acc *[eltLanes]float32, j0 int, dst, x, r []float32) {
	x, r = x[:len(dst)], r[:len(dst)]
	for j := j0; j < len(dst); j++ {
		v := x[j] + r[j]
		dst[j] = v
		acc[j%eltLanes] += v
	}
}

func eltSumGeneric(x []float32) float32 {
	var acc [eltLanes]float32
	eltSumFrom(&acc, 0, x)
	return eltReduceSum(&acc)
}

// eltSumFrom is the loop of eltSumGeneric from element j0 on.
func eltSumFrom(acc *[eltLanes]float32, j0 int, x []float32) {
	for j := j0; j < len(x); j++ {
		acc[j%eltLanes] += x[j]
	}
}

func eltSumSqDevGeneric(x []float32, mean float32) float32 {
	var acc [eltLanes]float32
	eltSumSqDevFrom(&acc, 0, x, mean)
	return eltReduceSum(&acc)
}

// eltSumSqDevFrom is the loop of eltSumSqDevGeneric from element j0 on.
func eltSumSqDevFrom(acc *[eltLanes]float32, j0 int, x []float32, mean float32) {
	for j := j0; j < len(x); j++ {
		d := x[j] - mean
		acc[j%eltLanes] += float32(d * d)
	}
}

func eltNormGeneric(dst, x, gamma, beta []float32, mean, rstd float32) {
	x, gamma, beta = x[:len(dst)], gamma[:len(dst)], beta[:len(dst)]
	for j := range dst {
		t := x[j] - mean
		t = float32(t * rstd)
		t = float32(t * gamma[j])
		dst[j] = t + beta[j]
	}
}

// eltClamp is VMINPS(VMAXPS(p, lo), hi) with p as src1: NaN becomes lo.
func eltClamp(p, lo, hi float32) float32 {
	if !(p > lo) {
		p = lo
	}
	if !(p < hi) {
		p = hi
	}
	return p
}

// eltRound is VCVTPS2DQ under the default rounding mode (half to even) for
// values already clamped into int32 range.
func eltRound(p float32) int32 { return int32(math.RoundToEven(float64(p))) }

func eltNormQGeneric(dst []float32, q []uint8, x, gamma, beta, pre []float32, mean, rstd, inv, zp float32) {
	n := len(dst)
	q, x, gamma, beta = q[:n], x[:n], gamma[:n], beta[:n]
	if len(pre) > 0 {
		pre = pre[:n]
	}
	for j := range dst {
		t := x[j] - mean
		t = float32(t * rstd)
		t = float32(t * gamma[j])
		y := t + beta[j]
		dst[j] = y
		p := y
		if len(pre) > 0 {
			p = float32(p * pre[j])
		}
		p = float32(p*inv) + zp
		q[j] = uint8(eltRound(eltClamp(p, 0, 255)))
	}
}

func eltMaxMaskGeneric(dst, x, mask []float32) float32 {
	acc := eltMaxInit()
	x, mask = x[:len(dst)], mask[:len(dst)]
	for j := range dst {
		v := x[j] + mask[j]
		dst[j] = v
		acc[j%eltLanes] = eltMax32(acc[j%eltLanes], v)
	}
	return eltReduceMax(&acc)
}

func eltMaxMaskScaleGeneric(dst, x, mask []float32, s float32) float32 {
	acc := eltMaxInit()
	eltMaxMaskScaleFrom(&acc, 0, dst, x, mask, s)
	return eltReduceMax(&acc)
}

// eltMaxLanes4Generic is eltSoftmaxU8Rows's maximum of x (with mask non-nil,
// x[j] += mask[j] first, in place): the vectors of 16 lanes of each step of
// 4 (the first len(x)&^63 elements) go to 4 lane accumulators in turn, the
// rest to the first; then the first takes the other three in order, and
// its lanes reduce as eltReduceMax's tree.
func eltMaxLanes4Generic(x, mask []float32) float32 {
	acc := eltMaxLanes4Init()
	eltMaxLanes4From(&acc, 0, x, mask)
	return eltMaxLanes4Reduce(&acc)
}

// eltMaxLanes4Init returns the four lane accumulators of
// eltMaxLanes4Generic: -Inf.
func eltMaxLanes4Init() (acc [4][eltLanes]float32) {
	for a := range acc {
		acc[a] = eltMaxInit()
	}
	return acc
}

// eltMaxLanes4From is eltMaxLanes4Generic's loop from element j0 on.
func eltMaxLanes4From(acc *[4][eltLanes]float32, j0 int, x, mask []float32) {
	big := len(x) &^ (4*eltLanes - 1)
	for j := j0; j < len(x); j++ {
		if mask != nil {
			x[j] += mask[j]
		}
		a := 0
		if j < big {
			a = j / eltLanes % 4
		}
		acc[a][j%eltLanes] = eltMax32(acc[a][j%eltLanes], x[j])
	}
}

// eltMaxLanes4Reduce is eltMaxLanes4Generic's end: the first accumulator
// takes the other three in order, then its lanes reduce as a tree.
func eltMaxLanes4Reduce(acc *[4][eltLanes]float32) float32 {
	for a := 1; a < 4; a++ {
		for l := range acc[0] {
			acc[0][l] = eltMax32(acc[0][l], acc[a][l])
		}
	}
	return eltReduceMax(&acc[0])
}

// eltMaxInit returns lane accumulators of a maximum: -Inf.
func eltMaxInit() (acc [eltLanes]float32) {
	for i := range acc {
		acc[i] = float32(math.Inf(-1))
	}
	return acc
}

// eltMaxMaskScaleFrom is the loop of eltMaxMaskScaleGeneric from element
// j0 on, into the lane accumulators acc (lane j%16).
func eltMaxMaskScaleFrom(acc *[eltLanes]float32, j0 int, dst, x, mask []float32, s float32) {
	x = x[:len(dst)]
	if len(mask) > 0 {
		mask = mask[:len(dst)]
	}
	for j := j0; j < len(dst); j++ {
		v := float32(x[j] * s)
		if len(mask) > 0 {
			v += mask[j]
		}
		dst[j] = v
		acc[j%eltLanes] = eltMax32(acc[j%eltLanes], v)
	}
}

func eltMaxGeneric(x []float32) float32 {
	acc := eltMaxInit()
	for j, v := range x {
		acc[j%eltLanes] = eltMax32(acc[j%eltLanes], v)
	}
	return eltReduceMax(&acc)
}

// scale2n returns y*2^n rounded once to float32, as VSCALEFPS does, for an
// integral n: in float64 the product is exact (no overflow, no
// subnormal) for n in [-1000, 1000], so the conversion is the one
// rounding; outside that, math.Ldexp. (Ldexp itself is a slow call, and
// Softmax's Go twin does this once per element.)
func scale2n(y, n float32) float32 {
	if n >= -1000 && n <= 1000 {
		return float32(float64(y) * math.Float64frombits(uint64(int64(n)+1023)<<52))
	}
	return float32(math.Ldexp(float64(y), int(n)))
}

// eltExpTail returns exp(r) * 2^n for the reduced argument r.
func eltExpTail(r, n float32) float32 {
	p := eltExpP[0]
	for _, c := range eltExpP[1:] {
		p = float32(p*r) + c
	}
	z := float32(r * r)
	y := float32(p*z) + r
	y = y + 1
	return scale2n(y, n) // VSCALEFPS: one rounding
}

// eltExp is the vector exp of Softmax: x = max(x, -104) (exp(-104) is 0 in
// float32; -Inf gives 0, NaN stays NaN), n = roundHalfEven(x*log2e),
// r = x - n*ln2hi - n*ln2lo and the polynomial by fused multiply-adds
// (fma32: one rounding each, as VFMADD/VFNMADD), y*2^n rounded once
// (VSCALEFPS). Relative error below 2e-7 where the result is normal;
// there is no upper clamp (Softmax's arguments are <= 0): past 88.72 the
// result overflows to +Inf, and exp(+Inf) is NaN.
func eltExp(x float32) float32 {
	if x != x {
		return x
	}
	x = max(x, eltExpMin)
	n := float32(math.RoundToEven(float64(x * eltLog2e)))
	r := fma32(-n, eltLn2Hi, x) // exact: n*ln2hi has 17 bits
	r = fma32(-n, eltLn2Lo, r)
	p := eltExpP[0]
	for _, c := range eltExpP[1:] {
		p = fma32(p, r, c)
	}
	y := fma32(p, float32(r*r), r) + 1
	return scale2n(y, n) // VSCALEFPS: one rounding
}

// eltExp2 is exp(a+b) for a in [-100, 0] and a small b, keeping the low part
// b out of the rounding of a's reduction (a - n*ln2Hi is exact).
func eltExp2(a, b float32) float32 {
	s := a + b
	n := float32(math.RoundToEven(float64(s * eltLog2e)))
	r := a - float32(n*eltLn2Hi)
	r = r + b
	r = r - float32(n*eltLn2Lo)
	return eltExpTail(r, n)
}

func eltExpSumGeneric(dst, x []float32, m float32) float32 {
	var acc [eltLanes]float32
	eltExpSumFrom(&acc, 0, dst, x, m)
	return eltReduceSum(&acc)
}

// eltExpSumFrom is the loop of eltExpSumGeneric from element j0 on, into
// the lane accumulators acc (lane j%16).
func eltExpSumFrom(acc *[eltLanes]float32, j0 int, dst, x []float32, m float32) {
	x = x[:len(dst)]
	for j := j0; j < len(dst); j++ {
		e := eltExp(x[j] - m)
		dst[j] = e
		acc[j%eltLanes] += e
	}
}

// eltSoftmaxRowsGeneric is the scaled softmax of rows rows of n floats in
// groups of two rows (and a last single row), each group as
//
//	pass 1 of each row: m = eltMaxMaskScale(d, x, mask, s)
//	no m is -Inf: pass 2 of each row (sum = eltExpSum(d, d, m)), then row
//	by row: sum NaN or infinite: stop; else eltScale(d, 1/sum)
//	else, row by row: m -Inf: stop if d holds a NaN, else d = 0;
//	otherwise passes 2 and 3 as above
//
// It returns rows, 0, 0, or where it stopped: the row, its maximum and (m
// finite) its sum; that row of dst then holds x*s+mask (m = -Inf) or its
// exponentials, the rows before it are done and the other row of its group
// may hold x*s+mask.
func eltSoftmaxRowsGeneric(dst, x, mask []float32, rows, n int, s float32) (int, float32, float32) {
	return softmaxRowsWith(eltMaxMaskScaleGeneric, eltExpSumGeneric, eltScaleGeneric, dst, x, mask, rows, n, s)
}

// softmaxRowsWith is eltSoftmaxRowsGeneric over the given row passes (the
// Go twins, or the AVX2 ones that equal them).
func softmaxRowsWith(maxMaskScale func(dst, x, mask []float32, s float32) float32, expSum func(dst, x []float32, m float32) float32,
	scale func(x []float32, s float32), dst, x, mask []float32, rows, n int, s float32) (int, float32, float32) {
	bad := func(v float32) bool { return math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) }
	for i := 0; i < rows; {
		g := min(2, rows-i)
		var ms, sums [2]float32
		slow := false
		for r := 0; r < g; r++ {
			ms[r] = maxMaskScale(dst[(i+r)*n:(i+r+1)*n], x[(i+r)*n:(i+r+1)*n], mask, s)
			slow = slow || math.IsInf(float64(ms[r]), -1)
		}
		if !slow {
			for r := 0; r < g; r++ {
				d := dst[(i+r)*n : (i+r+1)*n]
				sums[r] = expSum(d, d, ms[r])
			}
		}
		for r := 0; r < g; r++ {
			d := dst[(i+r)*n : (i+r+1)*n]
			if slow {
				if math.IsInf(float64(ms[r]), -1) {
					if findNaN(d) >= 0 {
						return i + r, ms[r], 0
					}
					clear(d)
					continue
				}
				sums[r] = expSum(d, d, ms[r])
			}
			if bad(sums[r]) {
				return i + r, ms[r], sums[r]
			}
			scale(d, 1/sums[r])
		}
		i += g
	}
	return rows, 0, 0
}

// packT16Generic stores dst[q*ldd+r] = w[r*ldw+q] for r < 16 and
// q < 16*nblk: the transpose of a 16-row block, as packT16.
func packT16Generic(dst, w []float32, nblk, ldw, ldd int) {
	for r := 0; r < 16; r++ {
		row := w[r*ldw : r*ldw+16*nblk]
		for q, v := range row {
			dst[q*ldd+r] = v
		}
	}
}

func eltScaleGeneric(x []float32, s float32) {
	for j := range x {
		x[j] *= s
	}
}

// eltGELU1 is the GELU of the vector kernel: with a = min(|x|, 14.5) and
// z = a/sqrt 2, erfc(z) = t*exp(-z*z - 1.26551223 + t*P(t)), t = 1/(1+z/2),
// where z*z = a*a/2 is split exactly into hi + lo (an FMA in the kernel) so
// the large exponent loses nothing; Phi = 0.5*erfc for x < 0 and
// 1 - 0.5*erfc otherwise; 0 for x < -14.
func eltGELU1(x float32) float32 {
	if x != x {
		return x
	}
	ax := min(float32(math.Abs(float64(x))), eltGELUAbsMax)
	z := float32(ax * eltInvSqrt2)
	t := 1 / (float32(0.5*z) + 1)
	q := eltErfcP[0]
	for _, c := range eltErfcP[1:] {
		q = float32(q*t) + c
	}
	q = float32(q*t) + eltErfcK
	// z*z = ax*ax/2 exactly as hi + lo (rounding z first would cost
	// 2*z*z*2^-24 of relative accuracy: 1e-5 at z = 9).
	x2 := float32(ax * ax)
	lo := float32(float64(ax)*float64(ax)-float64(x2)) * 0.5 // exact: fma(ax, ax, -x2)/2
	hi := x2 * 0.5
	b := q - lo
	e := eltExp2(-hi, b)
	h := float32(0.5 * float32(t*e))
	phi := 1 - h
	if x < 0 {
		phi = h
	}
	y := float32(x * phi)
	if x < eltGELUZeroLT {
		y = 0
	}
	return y
}

func eltGELUGeneric(dst, x []float32) {
	dst = dst[:len(x)]
	for j, v := range x {
		dst[j] = eltGELU1(v)
	}
}

func eltAbsMaxGeneric(x []float32) uint32 {
	var m uint32
	for _, v := range x {
		m = max(m, math.Float32bits(v)&0x7fffffff)
	}
	return m
}

func eltQuantRowGeneric(dst []uint8, x []float32, inv float32) {
	x = x[:len(dst)]
	for j := range dst {
		p := eltClamp(float32(x[j]*inv), -128, 127)
		dst[j] = uint8(eltRound(p) + 128)
	}
}

func eltAbsMaxPreGeneric(x, pre []float32) uint32 {
	pre = pre[:len(x)]
	var m uint32
	for j, v := range x {
		m = max(m, math.Float32bits(float32(v*pre[j]))&0x7fffffff)
	}
	return m
}

func eltQuantRowPreGeneric(dst []uint8, x, pre []float32, inv float32) {
	x, pre = x[:len(dst)], pre[:len(dst)]
	for j := range dst {
		p := float32(x[j] * pre[j])
		p = eltClamp(float32(p*inv), -128, 127)
		dst[j] = uint8(eltRound(p) + 128)
	}
}

func eltQuantU8Generic(dst []uint8, x []float32, inv, zp float32) uint32 {
	x = x[:len(dst)]
	var m uint32
	for j := range dst {
		m = max(m, math.Float32bits(x[j])&0x7fffffff)
		p := float32(x[j]*inv) + zp
		dst[j] = uint8(eltRound(eltClamp(p, 0, 255)))
	}
	return m
}

// eltExpQuantU8Generic is eltExpQuantU8's twin: the three passes it fuses,
// on a scratch row of exponentials.
func eltExpQuantU8Generic(dst []uint8, x []float32, a, c float32) (sum, bits uint32) {
	x = x[:len(dst)]
	for j := range dst {
		e := eltExpU8(fma32(x[j], a, c))
		if e-e != 0 { // NaN or infinite
			bits = absMaxBitsLimit
		}
		// VCVTPS2DQ then the saturating packs: e >= 0, and what does not
		// convert (NaN, 2^31 and above) is 0x80000000, negative: 0.
		q := uint32(0)
		if e < 1<<31 {
			q = uint32(min(math.RoundToEven(float64(e)), 255))
		}
		dst[j] = uint8(q)
		sum += q
	}
	return sum, bits
}

// eltExpU8Args returns the arguments a and c of eltExpQuantU8 for a row
// whose maximum (mask added) is m and whose scores are scaled by s: the
// exponent base 2 of a score x is fma(x, a, c) = (x - m)*s*log2e, a =
// s*log2e, c = -(m*a), each rounded once. ok is false when c is not
// finite (m infinite, or m*s*log2e past float32's range): the row's
// scaled scores are then not all finite.
func eltExpU8Args(m, s float32) (a, c float32, ok bool) {
	a = s * eltLog2e
	c = -(m * a)
	return a, c, math.Float32bits(c)&0x7fffffff < 0x7f800000
}

// eltSoftmaxU8RowsGeneric is eltSoftmaxU8Rows's twin: the AVX-512
// functions' twins called row by row.
func eltSoftmaxU8RowsGeneric(dst []uint8, ldd int, scales, x []float32, n int, mask, xscale []float32) (row int, bits uint32) {
	return eltSoftmaxU8RowsWith(eltMaxLanes4Generic, eltExpQuantU8Generic, dst, ldd, scales, x, n, mask, xscale)
}

// eltSoftmaxU8RowsWith is eltSoftmaxU8RowsGeneric with the row maximum
// rowMax and the pass expQU8 given (the twins, or their AVX2 assembly).
func eltSoftmaxU8RowsWith(rowMax func(x, mask []float32) float32, expQU8 func(dst []uint8, x []float32, a, c float32) (uint32, uint32),
	dst []uint8, ldd int, scales, x []float32, n int, mask, xscale []float32) (row int, bits uint32) {
	for i := range scales {
		d := x[i*n : i*n+n]
		var mk []float32
		if len(mask) > 0 {
			mk = mask[:n]
		}
		m := rowMax(d, mk)
		if math.IsInf(float64(m), -1) {
			return i, 0
		}
		s := float32(1)
		if len(xscale) > 0 {
			s = xscale[i]
		}
		a, c, ok := eltExpU8Args(m, s)
		if !ok {
			return i, absMaxBitsLimit
		}
		sum, b := expQU8(dst[i*ldd:i*ldd+n], d, a, c)
		if b >= absMaxBitsLimit {
			return i, b
		}
		scales[i] = 1 / float32(sum)
	}
	return len(scales), 0
}

// eltExpU8P are the coefficients (constant term first) of the degree-4
// polynomial of eltExpU8 in f in [0, 1): 255*2^f by the minimax
// approximation of exp(r) in relative error on [-ln2/2, ln2/2] (error
// 2.6e-6; 2^f = sqrt2*exp(ln2*(f - 1/2)), expanded in float64 and rounded).
// Degree 3 (7.5e-5, 0.02 of a u8 step) flipped enough bytes to take the
// golden XLM-R classifier's logits below the INT8 attention gate
// (docs/DESIGN.md section 3.10).
var eltExpU8P = [...]float32{2.5500065613e+02, 1.7671597290e+02, 6.1567901611e+01, 1.3262922287e+01, 3.4512128830e+00}

// eltExpU8Min is the clamp of eltExpU8's exponent: 255*2^-24 rounds to 0.
const eltExpU8Min = float32(-24)

// eltExpU8 is 255*2^z to the precision INT8 attention's u8 probabilities
// need (docs/DESIGN.md section 3.10), the scalar twin of the AVX-512
// expVecsU8: z = max(z, -24), f = z - floor(z) (exact, in [0, 1)), p(f)
// by FMA (Horner, highest degree first), p*2^floor(z) (VSCALEFPS). Its
// relative error is under 3e-6 (under 0.001 of a u8 step at 255); NaN
// stays NaN.
func eltExpU8(z float32) float32 {
	if z != z {
		return z
	}
	z = max(z, eltExpU8Min)
	fl := float32(math.Floor(float64(z)))
	f := z - fl
	p := eltExpU8P[4]
	for i := 3; i >= 0; i-- {
		p = fma32(p, f, eltExpU8P[i])
	}
	return scale2n(p, fl)
}

func eltQuantS8Generic(dst []int8, x []float32, inv, zp float32) uint32 {
	x = x[:len(dst)]
	var m uint32
	for j := range dst {
		m = max(m, math.Float32bits(x[j])&0x7fffffff)
		p := float32(x[j]*inv) + zp
		dst[j] = int8(eltRound(eltClamp(p, -128, 127)))
	}
	return m
}

func eltDequantU8Generic(dst []float32, q []uint8, scale, zp float32) {
	q = q[:len(dst)]
	for j := range dst {
		dst[j] = float32((float32(q[j]) - zp) * scale)
	}
}

func eltDequantS32Generic(dst []float32, acc []int32, rs float32, cs []float32) {
	acc = acc[:len(dst)]
	if len(cs) == 0 {
		for j := range dst {
			dst[j] = float32(acc[j]) * rs
		}
		return
	}
	cs = cs[:len(dst)]
	for j := range dst {
		dst[j] = float32(float32(acc[j])*rs) * cs[j]
	}
}
