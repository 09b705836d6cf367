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

// attnScores returns n scores for the u8 softmax tests: mostly normal
// (scale sc), some -Inf, some far below the rest, and with trial%10 == 9
// a NaN, == 8 a +Inf.
func attnScores(r *rand.Rand, n, trial int, sc float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		switch r.IntN(20) {
		case 0:
			x[i] = float32(r.NormFloat64() * 1e4)
		case 1:
			x[i] = float32(math.Inf(-1))
		case 2:
			x[i] = -20 + float32(r.NormFloat64()) // around the -16 clamp
		default:
			x[i] = float32(r.NormFloat64() * sc)
		}
	}
	if trial%10 == 9 {
		x[r.IntN(n)] = float32(math.NaN())
	}
	if trial%10 == 8 {
		x[r.IntN(n)] = float32(math.Inf(1))
	}
	return x
}

// TestEltAVX2AttnPasses checks INT8 attention's AVX2 passes against their
// Go twins bit for bit (docs/DESIGN.md section 3.10): the row maximum in
// four accumulators (the mask added in place), the one pass of 255·exp to
// bytes with their sum and the non-finite flag, the whole row loop, and
// the s8 quantization, on lengths with and without a tail, with NaN and
// infinities, and the guard bands around dst.
func TestEltAVX2AttnPasses(t *testing.T) {
	if !eltAVX2Available(cpu.X86) {
		t.Skipf("CPU lacks AVX2/FMA3: %s", cpu.X86)
	}
	r := rand.New(rand.NewPCG(61, 62))
	for _, n := range []int{1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 128, 191, 255, 256, 384, 512} {
		for trial := range 40 {
			x := attnScores(r, n, trial, 4)
			var mask []float32
			if trial%2 == 0 {
				mask = make([]float32, n)
				for i := range mask {
					if r.IntN(5) == 0 {
						mask[i] = float32(math.Inf(-1))
					} else if r.IntN(3) == 0 {
						mask[i] = -float32(r.IntN(30))
					}
				}
			}
			xw, xg := slices.Clone(x), slices.Clone(x)
			mw, mg := eltMaxLanes4Generic(xw, mask), eltMaxLanes4AVX2(xg, mask)
			if math.Float32bits(mw) != math.Float32bits(mg) && !(mw != mw && mg != mg) {
				t.Fatalf("n=%d trial %d: max %v, twin %v", n, trial, mg, mw)
			}
			if i := sameBits(xg, xw); i >= 0 {
				t.Fatalf("n=%d trial %d: x+mask [%d] = %v, twin %v", n, trial, i, xg[i], xw[i])
			}
			for _, m := range []float32{mw, mw + 3.5, mw + 40} { // at or above every x - mask: x - m <= 0
				if math.IsInf(float64(m), 0) || m != m {
					continue
				}
				want, checkW := guarded(n, uint8(0xa5))
				got, checkG := guarded(n, uint8(0xa5))
				a, c, _ := eltExpU8Args(m, 0.61)
				sw, bw := eltExpQuantU8Generic(want, xw, a, c)
				sg, bg := eltExpQuantU8AVX2(got, xg, a, c)
				checkW(t)
				checkG(t)
				if sw != sg || bw != bg {
					t.Fatalf("n=%d trial %d m=%v: sum %d bits %#x, twin %d %#x", n, trial, m, sg, bg, sw, bw)
				}
				if i := slices.Compare(got, want); i != 0 {
					for j := range got {
						if got[j] != want[j] {
							t.Fatalf("n=%d trial %d m=%v: byte [%d] = %d, twin %d (x = %v)", n, trial, m, j, got[j], want[j], xw[j])
						}
					}
				}
			}
			inv := float32(127 / (1 + 3*r.Float64()))
			zp := float32(r.IntN(5) - 2)
			qw, checkW := guarded(n, int8(-91))
			qg, checkG := guarded(n, int8(-91))
			bw, bg := eltQuantS8Generic(qw, x, inv, zp), eltQuantS8AVX2(qg, x, inv, zp)
			checkW(t)
			checkG(t)
			if bw != bg || !slices.Equal(qw, qg) {
				t.Fatalf("n=%d trial %d: s8 bits %#x, twin %#x, or bytes differ", n, trial, bg, bw)
			}
		}
	}
	// The row loop: rows of finite scores, then a row of -Inf and one
	// holding a NaN, where both stop.
	for _, n := range []int{7, 64, 100, 512} {
		for _, withMask := range []bool{false, true} {
			rows := 9
			x := make([]float32, rows*n)
			for i := range x {
				x[i] = float32(r.NormFloat64() * 6)
			}
			var mask []float32
			if withMask {
				mask = make([]float32, n)
				for j := n - n/4; j < n; j++ {
					mask[j] = -math.MaxFloat32
				}
			}
			for stop := range 3 {
				xs := slices.Clone(x)
				switch stop {
				case 1:
					for j := range n {
						xs[5*n+j] = float32(math.Inf(-1))
					}
				case 2:
					xs[6*n+n/2] = float32(math.NaN())
				}
				xw, xg := slices.Clone(xs), slices.Clone(xs)
				ldd := n + 3
				dw, dg := make([]uint8, rows*ldd), make([]uint8, rows*ldd)
				sw, sg := make([]float32, rows), make([]float32, rows)
				var xscale []float32 // row scales folded into the exponent
				if stop != 1 {
					xscale = make([]float32, rows)
					for i := range xscale {
						xscale[i] = float32(0.05 + 2*r.Float64())
					}
				}
				rw, bw := eltSoftmaxU8RowsGeneric(dw, ldd, sw, xw, n, mask, xscale)
				rg, bg := eltSoftmaxU8RowsWith(eltMaxLanes4AVX2, eltExpQuantU8AVX2, dg, ldd, sg, xg, n, mask, xscale)
				if rw != rg || bw != bg || !slices.Equal(dw, dg) || sameBits(sg, sw) >= 0 || sameBits(xg, xw) >= 0 {
					t.Fatalf("n=%d mask %v stop %d: rows %d bits %#x, twin %d %#x, or the bytes, scales or scores differ", n, withMask, stop, rg, bg, rw, bw)
				}
				if want := []int{rows, 5, 6}[stop]; rw != want {
					t.Fatalf("n=%d stop %d: stopped at row %d, want %d", n, stop, rw, want)
				}
			}
		}
	}
}

// TestPackT16AVX2 checks packT16AVX2 against packT16Generic bit for bit
// (arbitrary bit patterns, NaN payloads included) over block counts and
// strides, with guard bands around dst, and PackF32Into on the AVX2 path
// against PackF32's Go loop.
func TestPackT16AVX2(t *testing.T) {
	if !eltAVX2Available(cpu.X86) {
		t.Skipf("CPU lacks AVX2/FMA3: %s", cpu.X86)
	}
	r := rand.New(rand.NewPCG(55, 56))
	for _, c := range []struct{ nblk, ldw, ldd int }{{1, 16, 16}, {1, 17, 19}, {2, 32, 64}, {3, 53, 24}, {4, 64, 16}, {5, 100, 33}} {
		w := make([]float32, 15*c.ldw+16*c.nblk)
		for i := range w {
			w[i] = math.Float32frombits(r.Uint32())
		}
		n := (16*c.nblk-1)*c.ldd + 16
		want, checkW := guarded(n, float32(-7))
		got, checkG := guarded(n, float32(-7))
		packT16Generic(want, w, c.nblk, c.ldw, c.ldd)
		packT16AVX2(got, w, c.nblk, c.ldw, c.ldd)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%+v: dst[%d] bits %#x, twin %#x", c, i, math.Float32bits(got[i]), math.Float32bits(want[i]))
			}
		}
		checkW(t)
		checkG(t)
	}
	saved := cpu.X86
	defer func() { cpu.X86 = saved }()
	off, err := saved.Apply("avx512f")
	if err != nil {
		t.Fatal(err)
	}
	cpu.X86 = off
	for _, c := range []struct{ n, k, ldw, nr int }{{512, 64, 2304, 16}, {77, 64, 64, 32}, {33, 40, 45, 16}, {16, 16, 16, 64}} {
		w := make([]float32, (c.n-1)*c.ldw+c.k)
		for i := range w {
			w[i] = float32(r.NormFloat64())
		}
		want, err := PackF32(c.n, c.k, w, c.ldw, c.nr)
		if err != nil {
			t.Fatal(err)
		}
		var into PackedF32
		if err := PackF32Into(&into, c.n, c.k, w, c.ldw, c.nr); err != nil {
			t.Fatal(err)
		}
		if i := sameBits(into.Data, want.Data); i >= 0 || len(into.Data) != len(want.Data) {
			t.Fatalf("%+v: PackF32Into differs from PackF32 at %d", c, i)
		}
	}
}
