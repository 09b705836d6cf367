package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/mat"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/kernels"
)

// This file checks the GEMM references and kernels against gonum/mat, an
// oracle that shares no code with package kernels: its products are
// computed by gonum's own BLAS in float64, in its own order and blocking.
//
// The tolerances are the standard forward error bounds of a dot product
// (Higham, Accuracy and Stability of Numerical Algorithms, section 3.1): a
// length-k dot product accumulated in a format of unit roundoff u, in any
// order and with or without fused multiply-adds, is within
//
//	gamma(k) * sum_p |a_p||w_p|,   gamma(k) = k*u / (1 - k*u)
//
// of the exact value. S = |A| |W|^T, the matrix of those sums, is computed
// with gonum too; every bound below is a multiple of S plus one rounding
// of the result per operation that follows the product, never a fixed
// number.

const (
	u32 = 0x1p-24 // unit roundoff of float32
	u64 = 0x1p-53 // unit roundoff of float64
)

func gamma(k int, u float64) float64 { return float64(k) * u / (1 - float64(k)*u) }

// geluLipschitz bounds |GELU'(x)| = |Phi(x) + x phi(x)| (largest, 1.1289,
// at x = sqrt 2): an error e in GELU's argument moves its value by at most
// geluLipschitz*e.
const geluLipschitz = 1.129

// geluApprox is the documented absolute error of the fast rational erf the
// native kernels use for ActGELU without PreciseGELU: 3e-7*max(1, |x|)
// (kernels.Epilogue.PreciseGELU).
const geluApprox = 3e-7

// oracleShapes are (m, n, k) triples: BERT-base's four linears (QKV fused
// 2304, FFN 3072 both ways, O 768), single elements and tails that are no
// multiple of any tile or of 4, and random sizes from a fixed seed.
func oracleShapes(t *testing.T) [][3]int {
	bertM := 33 // odd: a row tail for every MR
	if testing.Short() {
		bertM = 9
	}
	s := [][3]int{
		{bertM, 768, 768}, {bertM, 2304, 768}, {bertM, 3072, 768}, {bertM, 768, 3072},
		{1, 1, 1}, {1, 1, 7}, {2, 1, 1}, {1, 17, 3}, {3, 31, 5}, {15, 33, 65}, {13, 47, 129},
		{5, 1, 1000}, {2, 65, 1}, {17, 16, 16}, {29, 97, 255},
	}
	r := rand.New(rand.NewPCG(11, 12))
	for range 6 {
		s = append(s, [3]int{1 + r.IntN(40), 1 + r.IntN(300), 1 + r.IntN(600)})
	}
	t.Logf("shapes (m, n, k): %v", s)
	return s
}

// denseOf copies rows x cols of x (row stride ld) into a float64 gonum matrix.
func denseOf[T float32 | uint8 | int8](rows, cols int, x []T, ld int) *mat.Dense {
	d := mat.NewDense(rows, cols, nil)
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			d.Set(i, j, float64(x[i*ld+j]))
		}
	}
	return d
}

func absOf(d *mat.Dense) *mat.Dense {
	var a mat.Dense
	a.Apply(func(_, _ int, v float64) float64 { return math.Abs(v) }, d)
	return &a
}

// productAndBound returns A W^T and S = |A| |W|^T, both from gonum.
func productAndBound(a, w *mat.Dense) (prod, s *mat.Dense) {
	prod, s = new(mat.Dense), new(mat.Dense)
	prod.Mul(a, w.T())
	s.Mul(absOf(a), absOf(w).T())
	return prod, s
}

// f32Operands are random FP32 GEMM operands with strides wider than k and
// n: A ~ N(0,1) with every seventh row scaled by 100 (bounds must follow
// magnitudes), W ~ N(0, 0.09) with some exact zeros.
type f32Operands struct {
	m, n, k, lda, ldw, ldc int
	a, w                   []float32
	bias, residual         []float32
}

func newF32Operands(m, n, k int, seed uint64) *f32Operands {
	r := rand.New(rand.NewPCG(seed, uint64(m*131+n*7+k)))
	o := &f32Operands{m: m, n: n, k: k, lda: k + 3, ldw: k + 1, ldc: n + 2}
	o.a = make([]float32, (m-1)*o.lda+k)
	for i := range o.a {
		o.a[i] = float32(r.NormFloat64())
		if (i/o.lda)%7 == 6 {
			o.a[i] *= 100
		}
	}
	o.w = make([]float32, (n-1)*o.ldw+k)
	for i := range o.w {
		if r.IntN(10) != 0 {
			o.w[i] = float32(r.NormFloat64() * 0.3)
		}
	}
	o.bias = make([]float32, n)
	for i := range o.bias {
		o.bias[i] = float32(r.NormFloat64())
	}
	o.residual = make([]float32, m*n)
	for i := range o.residual {
		o.residual[i] = float32(r.NormFloat64())
	}
	return o
}

// epilogueWant is what the epilogue makes of the gonum product z at (i, j)
// in float64: erf's form of GELU (not kernels.GELU's erfc form) so that
// the oracle shares no formula with the references. pre is the activation's
// argument, for the bound.
func (o *f32Operands) epilogueWant(full bool, i, j int, z float64) (y, pre float64) {
	if !full {
		return z, z
	}
	pre = z + float64(o.bias[j])
	y = 0.5 * pre * (1 + math.Erf(pre/math.Sqrt2))
	return y + float64(o.residual[i*o.n+j]), pre
}

func (o *f32Operands) epilogue(full bool) *kernels.Epilogue {
	if !full {
		return nil
	}
	return &kernels.Epilogue{Bias: o.bias, Act: kernels.ActGELU, Residual: o.residual}
}

// worst tracks the element of a result farthest from the oracle relative to
// its bound, so that a test makes one assertion per result with the place
// and the numbers of its worst element.
type worst struct {
	seen             bool
	ratio            float64
	i, j             int
	got, want, bound float64
}

func (w *worst) add(i, j int, got, want, bound float64) {
	var r float64 // |got - want| / bound; exact agreement is 0 even for a 0 bound
	switch d := math.Abs(got - want); {
	case math.IsNaN(d):
		r = math.Inf(1)
	case d > 0:
		r = d / bound
	}
	if !w.seen || r > w.ratio {
		*w = worst{seen: true, ratio: r, i: i, j: j, got: got, want: want, bound: bound}
	}
}

func (w *worst) check(t *testing.T, what string) {
	t.Helper()
	require.LessOrEqualf(t, w.ratio, 1.0, "%s: [%d][%d] = %v, want %v within %g (%.3g of the bound)",
		what, w.i, w.j, w.got, w.want, w.bound, w.ratio)
}

// f32Oracle is one shape's operands with gonum's product and bound matrix.
type f32Oracle struct {
	*f32Operands
	prod, s *mat.Dense
}

func f32Oracles(t *testing.T, seed uint64) []f32Oracle {
	var os []f32Oracle
	for _, sh := range oracleShapes(t) {
		o := newF32Operands(sh[0], sh[1], sh[2], seed)
		prod, s := productAndBound(denseOf(o.m, o.k, o.a, o.lda), denseOf(o.n, o.k, o.w, o.ldw))
		os = append(os, f32Oracle{o, prod, s})
	}
	return os
}

// TestGemmF32RefAgainstGonum: GemmF32Ref accumulates in float64 and rounds
// once to float32, so it is within u32*|c| + gamma64(k)*S of the exact
// product, and gonum within gamma64(k)*S: the bound is their sum (plus, with
// the bias + GELU + residual epilogue, the float64 roundings of those steps
// and the erf/erfc forms' difference, a few u64 of their magnitudes).
func TestGemmF32RefAgainstGonum(t *testing.T) {
	for _, o := range f32Oracles(t, 1) {
		m, n, k := o.m, o.n, o.k
		for _, full := range []bool{false, true} {
			c := make([]float32, (m-1)*o.ldc+n)
			require.NoError(t, kernels.GemmF32Ref(m, n, k, o.a, o.lda, o.w, o.ldw, c, o.ldc, o.epilogue(full)))
			var w worst
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					want, pre := o.epilogueWant(full, i, j, o.prod.At(i, j))
					tol := u32*math.Abs(want) + 2*gamma(k, u64)*o.s.At(i, j)*geluLipschitz +
						8*u64*(1+math.Abs(pre)+math.Abs(want))
					w.add(i, j, float64(c[i*o.ldc+j]), want, tol)
				}
			}
			w.check(t, fmt.Sprintf("GemmF32Ref m=%d n=%d k=%d epilogue=%v", m, n, k, full))
		}
	}
}

// TestF32KernelsAgainstGonum runs every FP32 kernel this CPU has (the
// generic Go one and the assembly ones) against gonum. They accumulate in
// float32: within gamma32(k)*S of the exact product. The epilogue then
// adds the bias (one float32 rounding of the argument, u32*|pre|), applies
// GELU (Lipschitz 1.129; the native kernels' fast erf adds
// 3e-7*max(1,|pre|)) and adds the residual and rounds (u32*|y|, twice for
// a float32 residual add then the store).
func TestF32KernelsAgainstGonum(t *testing.T) {
	oracles := f32Oracles(t, 2)
	for _, kern := range kernels.F32Kernels() {
		t.Run(kern.Name, func(t *testing.T) {
			if !kern.Available(cpu.X86) {
				t.Skipf("%s is not available on this CPU (%s)", kern.Name, cpu.X86)
			}
			for _, o := range oracles {
				m, n, k := o.m, o.n, o.k
				if !kern.Accepts(m, n, k) {
					continue
				}
				pk, err := kernels.PackF32(n, k, o.w, o.ldw, kern.NR)
				require.NoError(t, err)
				for _, full := range []bool{false, true} {
					c := make([]float32, (m-1)*o.ldc+n)
					g := &kernels.GEMMF32{M: m, N: n, K: k, A: o.a, Lda: o.lda, B: pk, Ep: o.epilogue(full), C: c, Ldc: o.ldc, Threads: 2}
					require.NoError(t, kern.Run(g))
					var w worst
					for i := 0; i < m; i++ {
						for j := 0; j < n; j++ {
							want, pre := o.epilogueWant(full, i, j, o.prod.At(i, j))
							tol := (gamma(k, u32) + gamma(k, u64)) * o.s.At(i, j)
							if full {
								tol = geluLipschitz*(tol+u32*math.Abs(pre)) + geluApprox*max(1, math.Abs(pre)) +
									2*u32*math.Abs(want)
							}
							tol += u32 * math.Abs(want)
							w.add(i, j, float64(c[i*o.ldc+j]), want, tol)
						}
					}
					w.check(t, fmt.Sprintf("%s m=%d n=%d k=%d epilogue=%v", kern.Name, m, n, k, full))
				}
			}
		})
	}
}

// u8s8Operands are random full-range u8 activations and s8 weights, with
// the parameters of a static (per-tensor, zero point) and a dynamic
// (per-row, zero point 128) dequantizing epilogue.
type u8s8Operands struct {
	m, n, k, lda, ldb int
	a                 []uint8
	b                 []int8
	static, dynamic   *kernels.Epilogue
}

func newU8S8Operands(m, n, k int, seed uint64) *u8s8Operands {
	r := rand.New(rand.NewPCG(seed, uint64(m*131+n*7+k)))
	o := &u8s8Operands{m: m, n: n, k: k, lda: k + 5, ldb: k + 2}
	o.a = make([]uint8, (m-1)*o.lda+k)
	for i := range o.a {
		o.a[i] = uint8(r.IntN(256))
	}
	o.b = make([]int8, (n-1)*o.ldb+k)
	for i := range o.b {
		o.b[i] = int8(r.IntN(256) - 128)
	}
	// The extremes in a full row and column: the largest |accumulator|.
	for p := 0; p < k; p++ {
		o.a[p] = 255
		o.b[p] = -128
	}
	colSum := make([]int32, n)
	colScale := make([]float32, n)
	bias := make([]float32, n)
	for j := range colSum {
		for p := 0; p < k; p++ {
			colSum[j] += int32(o.b[j*o.ldb+p])
		}
		colScale[j] = 1e-3 + r.Float32()*1e-2
		bias[j] = float32(r.NormFloat64())
	}
	rowScale := make([]float32, m)
	for i := range rowScale {
		rowScale[i] = 1e-2 + r.Float32()*1e-2
	}
	o.static = &kernels.Epilogue{ColSum: colSum, ColScale: colScale, Bias: bias,
		ZeroPoint: int32(r.IntN(256)), ActScale: 0.02 + r.Float32()*0.01}
	o.dynamic = &kernels.Epilogue{ColSum: colSum, ColScale: colScale, Bias: bias,
		ZeroPoint: 128, RowScale: rowScale}
	return o
}

// exactInt32 reports that gonum's float64 product of these operands is
// exact: every product a*b (or (a-zp)*b) is an integer of magnitude <=
// 255*128 < 2^15 and every partial sum one of magnitude <= k*2^15, so while
// that is below 2^31 (the int32 accumulator's range, far below float64's
// 2^53 of exact integers) every float64 addition is exact, in any order or
// blocking, and the result equals the int32 accumulator.
func exactInt32(k int) bool { return float64(k)*255*128 < 1<<31 }

// u8s8Oracle is one shape's operands with gonum's exact product and its
// dequantized products (value before the bias, per epilogue).
type u8s8Oracle struct {
	*u8s8Operands
	prod                    *mat.Dense
	wantStatic, wantDynamic *mat.Dense
}

// dequantized is gonum's diag(r) (A - zp) W^T diag(c) for epilogue ep.
func (o *u8s8Operands) dequantized(ad, wd *mat.Dense, ep *kernels.Epilogue) *mat.Dense {
	zp := float64(ep.ZeroPoint)
	var shifted, y mat.Dense
	shifted.Apply(func(_, _ int, v float64) float64 { return v - zp }, ad)
	y.Mul(&shifted, wd.T()) // exact, as A W^T (exactInt32)
	rs := make([]float64, o.m)
	for i := range rs {
		rs[i] = float64(ep.ActScale)
		if ep.RowScale != nil {
			rs[i] = float64(ep.RowScale[i])
		}
	}
	cs := make([]float64, o.n)
	for j := range cs {
		cs[j] = float64(ep.ColScale[j])
	}
	y.Mul(mat.NewDiagDense(o.m, rs), &y)
	y.Mul(&y, mat.NewDiagDense(o.n, cs))
	return &y
}

func u8s8Oracles(t *testing.T) []u8s8Oracle {
	var os []u8s8Oracle
	for _, sh := range oracleShapes(t) {
		require.True(t, exactInt32(sh[2]), "k=%d: the int32 accumulators could overflow", sh[2])
		o := newU8S8Operands(sh[0], sh[1], sh[2], 3)
		ad, wd := denseOf(o.m, o.k, o.a, o.lda), denseOf(o.n, o.k, o.b, o.ldb)
		var prod mat.Dense
		prod.Mul(ad, wd.T())
		os = append(os, u8s8Oracle{o, &prod, o.dequantized(ad, wd, o.static), o.dequantized(ad, wd, o.dynamic)})
	}
	return os
}

func (o *u8s8Oracle) checkS32(t *testing.T, what string, acc []int32, ldc int) {
	t.Helper()
	for i := 0; i < o.m; i++ {
		for j := 0; j < o.n; j++ {
			if float64(acc[i*ldc+j]) != o.prod.At(i, j) {
				require.Equalf(t, o.prod.At(i, j), float64(acc[i*ldc+j]), "%s m=%d n=%d k=%d: acc[%d][%d]", what, o.m, o.n, o.k, i, j)
			}
		}
	}
}

// TestU8S8AgainstGonum: the int32 accumulators of GemmU8S8S32Ref and of
// every u8 x s8 kernel this CPU runs (GenericU8S8 first) must equal gonum's
// float64 product exactly (exactInt32), and the float32 output of the
// dequantizing epilogues must equal gonum's dequantized product
//
//	Y = diag(r) (A - zp) W^T diag(c) + 1 bias^T
//
// within the roundings of the epilogue: at most four (convert the
// compensated accumulator, multiply by the row or activation scale and by
// the column scale, add the bias) in float32 in the native kernels (float64
// in the generic one, then rounded once to float32), each relative to at
// most |acc*r*c| + |bias|: gamma32(4) times that, plus the final rounding
// u32*|y|. gonum's own two scalings add gamma64(2) of |acc*r*c| and the
// bias addition u64*|y|.
func TestU8S8AgainstGonum(t *testing.T) {
	oracles := u8s8Oracles(t)
	t.Run("GemmU8S8S32Ref", func(t *testing.T) {
		for _, o := range oracles {
			ldc := o.n + 1
			acc := make([]int32, (o.m-1)*ldc+o.n)
			require.NoError(t, kernels.GemmU8S8S32Ref(o.m, o.n, o.k, o.a, o.lda, o.b, o.ldb, acc, ldc))
			o.checkS32(t, "GemmU8S8S32Ref", acc, ldc)
		}
	})
	for _, kern := range kernels.U8S8Kernels() {
		t.Run(kern.Name, func(t *testing.T) {
			if !kern.Available(cpu.X86) {
				t.Skipf("%s is not available on this CPU (%s)", kern.Name, cpu.X86)
			}
			for _, o := range oracles {
				m, n, k := o.m, o.n, o.k
				if !kern.Accepts(m, n, k) {
					continue
				}
				p, err := kernels.PackS8(n, k, o.b, o.ldb, kern.NR)
				require.NoError(t, err)
				ldc := n + 1
				g := &kernels.GEMMU8S8{M: m, N: n, K: k, A: o.a, Lda: o.lda, B: p, Threads: 2}
				acc := make([]int32, (m-1)*ldc+n)
				g.Out = kernels.Out{S32: acc, Ldc: ldc}
				require.NoError(t, kern.RunU8S8(g))
				o.checkS32(t, kern.Name, acc, ldc)
				for _, mode := range []struct {
					name string
					ep   *kernels.Epilogue
					want *mat.Dense
				}{{"static", o.static, o.wantStatic}, {"dynamic", o.dynamic, o.wantDynamic}} {
					out := make([]float32, (m-1)*ldc+n)
					g.Ep, g.Out = mode.ep, kernels.Out{F32: out, Ldc: ldc}
					require.NoError(t, kern.RunU8S8(g))
					var w worst
					for i := 0; i < m; i++ {
						for j := 0; j < n; j++ {
							v, b := mode.want.At(i, j), float64(mode.ep.Bias[j])
							want := v + b
							tol := (u32+u64)*math.Abs(want) + gamma(4, u32)*(math.Abs(v)+math.Abs(b)) + gamma(2, u64)*math.Abs(v)
							w.add(i, j, float64(out[i*ldc+j]), want, tol)
						}
					}
					w.check(t, fmt.Sprintf("%s %s m=%d n=%d k=%d", kern.Name, mode.name, m, n, k))
				}
			}
		})
	}
}
