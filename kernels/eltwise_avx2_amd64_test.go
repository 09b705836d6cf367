//go:build amd64 && gc && !purego && !noasm

package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/int8bert/int8bert/cpu"
)

func sameBits(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) && !(a[i] != a[i] && b[i] != b[i]) {
			return i
		}
	}
	return -1
}

// TestEltAVX2SoftmaxPasses checks the AVX2 passes of the scaled softmax
// against their Go twins bit for bit: lengths with and without a tail,
// with and without a mask (-Inf entries included), scores from tiny to
// overflowing, NaN and infinities, and the guard bands around dst.
func TestEltAVX2SoftmaxPasses(t *testing.T) {
	if !eltAVX2Available(cpu.X86) {
		t.Skipf("CPU lacks AVX2/FMA3: %s", cpu.X86)
	}
	r := rand.New(rand.NewPCG(51, 52))
	for _, n := range []int{1, 7, 8, 15, 16, 17, 31, 32, 33, 64, 100, 128, 255, 384} {
		for trial := range 40 {
			x := make([]float32, n)
			for i := range x {
				switch r.IntN(20) {
				case 0:
					x[i] = float32(r.NormFloat64() * 1e4)
				case 1:
					x[i] = float32(math.Inf(-1))
				default:
					x[i] = float32(r.NormFloat64() * 8)
				}
			}
			if trial%10 == 9 {
				x[r.IntN(n)] = float32(math.NaN())
			}
			if trial%10 == 8 {
				x[r.IntN(n)] = float32(math.Inf(1))
			}
			var mask []float32
			if trial%2 == 0 {
				mask = make([]float32, n)
				for i := range mask {
					if r.IntN(5) == 0 {
						mask[i] = float32(math.Inf(-1))
					}
				}
			}
			s := float32(0.125)
			want, checkW := guarded(n, float32(-7))
			got, checkG := guarded(n, float32(-7))
			mw := eltMaxMaskScaleGeneric(want, x, mask, s)
			mg := eltMaxMaskScaleAVX2(got, x, mask, s)
			if math.Float32bits(mw) != math.Float32bits(mg) && !(mw != mw && mg != mg) {
				t.Fatalf("n=%d trial %d: max %v, twin %v", n, trial, mg, mw)
			}
			if i := sameBits(got, want); i >= 0 {
				t.Fatalf("n=%d trial %d: pass 1 [%d] = %v, twin %v", n, trial, i, got[i], want[i])
			}
			if !math.IsInf(float64(mw), 0) && mw == mw {
				sw := eltExpSumGeneric(want, want, mw)
				sg := eltExpSumAVX2(got, got, mg)
				if math.Float32bits(sw) != math.Float32bits(sg) && !(sw != sw && sg != sg) {
					t.Fatalf("n=%d trial %d: sum %v, twin %v", n, trial, sg, sw)
				}
				if i := sameBits(got, want); i >= 0 {
					t.Fatalf("n=%d trial %d: exp [%d] = %v, twin %v (x = %v, max %v)", n, trial, i, got[i], want[i], x[i], mw)
				}
				eltScaleGeneric(want, 1/sw)
				eltScaleAVX2(got, 1/sg)
				if i := sameBits(got, want); i >= 0 {
					t.Fatalf("n=%d trial %d: scale [%d] = %v, twin %v", n, trial, i, got[i], want[i])
				}
			}
			checkW(t)
			checkG(t)
		}
	}
	// exp over the whole range of its arguments (<= 88), every float32 step
	// near the subnormal boundary included.
	var xs []float32
	for v := float32(-110); v <= 88.5; v += 0.0625 {
		xs = append(xs, v, math.Nextafter32(v, 0), math.Nextafter32(v, -200))
	}
	for v := float32(-103.5); v > -104.5; v = math.Nextafter32(v, -200) {
		xs = append(xs, v)
		if len(xs) > 1<<20 {
			break
		}
	}
	xs = append(xs, 0, float32(math.Copysign(0, -1)), float32(math.Inf(-1)), float32(math.NaN()))
	for len(xs)%16 != 0 {
		xs = append(xs, -1)
	}
	want, got := make([]float32, len(xs)), make([]float32, len(xs))
	eltExpSumGeneric(want, xs, 0)
	var acc [eltLanes]float32
	eltExpSumA(&got[0], &xs[0], len(xs)/16, 0, &acc[0])
	if i := sameBits(got, want); i >= 0 {
		t.Fatalf("exp(%v) = %v (%#x), twin %v (%#x)", xs[i], got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
	}
}

// TestSoftmaxScaledAVX2Path runs SoftmaxScaled as a CPU without AVX-512
// would (AVX2 passes) and with the Go twins, on attention-like rows: the
// same bits, the same errors.
func TestSoftmaxScaledAVX2Path(t *testing.T) {
	if !eltAVX2Available(cpu.X86) {
		t.Skipf("CPU lacks AVX2/FMA3: %s", cpu.X86)
	}
	saved := cpu.X86
	defer func() { cpu.X86 = saved }()
	off, err := saved.Apply("avx512f")
	if err != nil {
		t.Fatal(err)
	}
	cpu.X86 = off
	if p := EltwisePath(); p != "generic+avx2-softmax" {
		t.Fatalf("path %q with AVX-512 off", p)
	}
	r := rand.New(rand.NewPCG(53, 54))
	for _, c := range []struct{ rows, n int }{{1, 5}, {3, 16}, {5, 77}, {128, 128}, {17, 256}} {
		x := make([]float32, c.rows*c.n)
		for i := range x {
			x[i] = float32(r.NormFloat64() * 20)
		}
		mask := make([]float32, c.n)
		for i := c.n - c.n/4; i < c.n; i++ {
			mask[i] = -10000
		}
		for _, bad := range []float32{0, float32(math.NaN())} {
			xx := slices.Clone(x)
			if bad != 0 {
				xx[len(xx)/2] = bad
			}
			got, want := make([]float32, len(x)), make([]float32, len(x))
			errA := SoftmaxScaled(got, xx, c.rows, c.n, 0.125, mask)
			var errG error
			withPath(true, func() { errG = SoftmaxScaled(want, xx, c.rows, c.n, 0.125, mask) })
			if (errA == nil) != (errG == nil) || errA != nil && errA.Error() != errG.Error() {
				t.Fatalf("%+v: error %v, twin %v", c, errA, errG)
			}
			if i := sameBits(got, want); i >= 0 {
				t.Fatalf("%+v: [%d] = %v, twin %v", c, i, got[i], want[i])
			}
		}
	}
}

// TestEltAVX2NormQuantPasses checks the AVX2 passes of LayerNorm (sums,
// normalization, the fused u8 output) and of the per-token quantization
// against their Go twins bit for bit: lengths with and without a tail,
// values from tiny to overflowing, NaN, infinities and signed zeros, with
// and without SmoothQuant's per-channel factors, and guard bands.
func TestEltAVX2NormQuantPasses(t *testing.T) {
	if !eltAVX2Available(cpu.X86) {
		t.Skipf("CPU lacks AVX2/FMA3: %s", cpu.X86)
	}
	r := rand.New(rand.NewPCG(61, 62))
	vals := func(n int, scale float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			switch r.IntN(40) {
			case 0:
				x[i] = float32(math.NaN())
			case 1:
				x[i] = float32(math.Inf(1 - 2*r.IntN(2)))
			case 2:
				x[i] = float32(math.Copysign(0, -1))
			case 3:
				x[i] = float32(r.NormFloat64() * 1e30)
			default:
				x[i] = float32(r.NormFloat64() * scale)
			}
		}
		return x
	}
	sameF := func(what string, n, trial int, got, want float32) {
		t.Helper()
		if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
			t.Fatalf("%s n=%d trial %d: %v, twin %v", what, n, trial, got, want)
		}
	}
	for _, n := range []int{1, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 100, 768, 1027} {
		for trial := range 30 {
			x, res := vals(n, 3), vals(n, 3)
			gamma, beta, pre := vals(n, 1), vals(n, 1), vals(n, 2)
			if trial%3 == 0 { // finite, as LayerNorm sees them
				for i := range x {
					x[i], res[i] = float32(r.NormFloat64()*3), float32(r.NormFloat64())
					gamma[i], beta[i], pre[i] = float32(r.NormFloat64()), float32(r.NormFloat64()), float32(0.5+r.Float64())
				}
			}
			want, checkW := guarded(n, float32(-7))
			got, checkG := guarded(n, float32(-7))
			sameF("addSum", n, trial, eltAddSumAVX2(got, x, res), eltAddSumGeneric(want, x, res))
			if i := sameBits(got, want); i >= 0 {
				t.Fatalf("addSum n=%d trial %d: [%d] = %v, twin %v", n, trial, i, got[i], want[i])
			}
			sameF("sum", n, trial, eltSumAVX2(x), eltSumGeneric(x))
			mean := float32(r.NormFloat64())
			sameF("sumSqDev", n, trial, eltSumSqDevAVX2(x, mean), eltSumSqDevGeneric(x, mean))
			rstd := float32(0.3 + r.Float64())
			eltNormGeneric(want, x, gamma, beta, mean, rstd)
			eltNormAVX2(got, x, gamma, beta, mean, rstd)
			if i := sameBits(got, want); i >= 0 {
				t.Fatalf("norm n=%d trial %d: [%d] = %v, twin %v", n, trial, i, got[i], want[i])
			}
			inv, zp := float32(1/(0.01+r.Float64())), float32(r.IntN(256))
			for _, p := range [][]float32{nil, pre} {
				qw, qg := make([]uint8, n+8), make([]uint8, n+8)
				for i := range qw {
					qw[i], qg[i] = 0x5a, 0x5a
				}
				eltNormQGeneric(want, qw[:n], x, gamma, beta, p, mean, rstd, inv, zp)
				eltNormQAVX2(got, qg[:n], x, gamma, beta, p, mean, rstd, inv, zp)
				if i := sameBits(got, want); i >= 0 {
					t.Fatalf("normQ n=%d trial %d pre=%v: [%d] = %v, twin %v", n, trial, p != nil, i, got[i], want[i])
				}
				if !slices.Equal(qg, qw) {
					t.Fatalf("normQ n=%d trial %d pre=%v: q = %v, twin %v", n, trial, p != nil, qg, qw)
				}
				eltQuantRowGeneric(qw[:n], x, inv)
				if p != nil {
					eltQuantRowPreGeneric(qw[:n], x, p, inv)
					eltQuantRowPreAVX2(qg[:n], x, p, inv)
					if a, b := eltAbsMaxPreAVX2(x, p), eltAbsMaxPreGeneric(x, p); a != b {
						t.Fatalf("absMaxPre n=%d trial %d: %#x, twin %#x", n, trial, a, b)
					}
				} else {
					eltQuantRowAVX2(qg[:n], x, inv)
					if a, b := eltAbsMaxAVX2(x), eltAbsMaxGeneric(x); a != b {
						t.Fatalf("absMax n=%d trial %d: %#x, twin %#x", n, trial, a, b)
					}
				}
				if !slices.Equal(qg, qw) {
					t.Fatalf("quantRow n=%d trial %d pre=%v: %v, twin %v", n, trial, p != nil, qg, qw)
				}
				if a, b := eltQuantU8AVX2(qg[:n], x, inv, zp), eltQuantU8Generic(qw[:n], x, inv, zp); a != b || !slices.Equal(qg, qw) {
					t.Fatalf("quantU8 n=%d trial %d: absmax %#x, twin %#x; %v, twin %v", n, trial, a, b, qg, qw)
				}
			}
			checkW(t)
			checkG(t)
		}
	}
}
